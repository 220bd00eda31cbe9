package evalpkg

import (
	"math"
	"strings"
	"testing"
)

func goodInfo() Info {
	return Info{Format: Format, Job: "job-1", Epoch: 1, ShardSize: 8, EvalSize: 8, Start: "s", Final: "f",
		Syncs: []Sync{{Sync: 2, Before: "b", Nodes: []string{"n1", "n2"}, Deltas: []string{"d1", "d2"}}}}
}

func TestResultsFit(t *testing.T) {
	in := goodInfo()
	ok := Results{LossStart: 1, LossFinal: 0.9, Accuracy: 0.5, Syncs: []SyncResult{{Sync: 2, Before: 1, After: []float64{0.9, 0.95}}}}
	if err := ok.Fits(in); err != nil {
		t.Fatal(err)
	}
	d1, err := ok.Digest()
	if err != nil {
		t.Fatal(err)
	}
	other := ok
	other.Accuracy = 0.5000000000000001
	if d2, _ := other.Digest(); d1 == d2 {
		t.Fatal("figures one ulp apart have the same digest")
	}
	for name, r := range map[string]Results{
		"missing sync":  {LossStart: 1, LossFinal: 1, Accuracy: 0.5},
		"wrong sync":    {LossStart: 1, LossFinal: 1, Syncs: []SyncResult{{Sync: 3, Before: 1, After: []float64{1, 1}}}},
		"short after":   {LossStart: 1, LossFinal: 1, Syncs: []SyncResult{{Sync: 2, Before: 1, After: []float64{1}}}},
		"accuracy > 1":  {LossStart: 1, LossFinal: 1, Accuracy: 1.5, Syncs: []SyncResult{{Sync: 2, Before: 1, After: []float64{1, 1}}}},
		"infinite loss": {LossStart: 1, LossFinal: 1, Syncs: []SyncResult{{Sync: 2, Before: 1, After: []float64{1, math.Inf(1)}}}},
	} {
		if err := r.Fits(in); err == nil {
			t.Errorf("%s: fits", name)
		}
	}
	if _, err := ParseResults(`{"loss_start":1,"extra":2}`, in); err == nil {
		t.Error("unknown field accepted")
	}
}

func TestParseInfo(t *testing.T) {
	in := goodInfo()
	r := &Request{Info: in}
	b := []byte(`{"format":"zoo-gym-eval","job":"job-1","epoch":1,"shard_size":8,"eval_size":8,"start":"s","final":"f","syncs":[{"sync":2,"before":"b","nodes":["n1","n2"],"deltas":["d1","d2"]}]}`)
	got, err := ParseInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	if InfoDigest(*got) != r.Digest() {
		t.Fatal("parsed info digests differently")
	}
	for _, bad := range []string{
		`{"format":"other"}`,
		strings.Replace(string(b), `"shard_size":8`, `"shard_size":0`, 1),
		strings.Replace(string(b), `"deltas":["d1","d2"]`, `"deltas":["d1"]`, 1),
		strings.Replace(string(b), `"job"`, `"jobs"`, 1),
	} {
		if _, err := ParseInfo([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// FuzzParseInfo: eval.json comes from the network; ParseInfo never
// panics, and what it accepts is bounded.
func FuzzParseInfo(f *testing.F) {
	f.Add([]byte(`{"format":"zoo-gym-eval","job":"j","epoch":1,"shard_size":8,"eval_size":8,"start":"s","final":"f","syncs":[{"sync":2,"before":"b","nodes":["n1"],"deltas":["d1"]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInfo(b)
		if err != nil {
			return
		}
		if Values(in.Syncs) > MaxValues {
			t.Fatalf("accepted %d values", Values(in.Syncs))
		}
		r := Results{}
		_ = r.Fits(*in)
	})
}

// FuzzParseResults: a verdict's figures come from a validator.
func FuzzParseResults(f *testing.F) {
	f.Add(`{"loss_start":1,"syncs":[{"sync":2,"before":1,"after":[0.9,0.95]}],"loss_final":0.9,"accuracy":0.5}`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseResults(s, goodInfo())
		if err != nil {
			return
		}
		if _, err := r.Digest(); err != nil {
			t.Fatalf("accepted figures that do not digest: %v", err)
		}
	})
}
