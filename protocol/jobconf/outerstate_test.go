package jobconf_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/safetensors"
	"github.com/zooai/gym/protocol/jobconf"
)

func adamPlan() jobconf.Plan { return jobconf.Plan{OuterLR: 1.5e-3, OuterAdam: true} }

func randomUpdates(r *rand.Rand, steps, n int) [][]float32 {
	ds := make([][]float32, steps)
	for k := range ds {
		ds[k] = make([]float32, n)
		for i := range ds[k] {
			ds[k][i] = float32(r.NormFloat64() * 1e-3)
		}
	}
	return ds
}

// An outer Adam stopped after k steps, written as an OuterFile and resumed
// from it continues with the bits of one that never stopped: the state
// carried from one checkpoint of record to the next epoch is the whole
// state.
func TestOuterStateResume(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 37
	ds := randomUpdates(r, 12, n)
	p := adamPlan()
	whole := p.NewOuter()
	var want [][]float32
	for _, d := range ds {
		u, err := whole.Step(d)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, u)
	}
	for _, k := range []int{1, 5, 11} {
		o := p.NewOuter()
		for _, d := range ds[:k] {
			if _, err := o.Step(d); err != nil {
				t.Fatal(err)
			}
		}
		b, err := o.MarshalState()
		if err != nil || b == nil {
			t.Fatalf("marshal after %d steps: %v, %d bytes", k, err, len(b))
		}
		res, err := p.ResumeOuter(b, n)
		if err != nil {
			t.Fatal(err)
		}
		if res.Steps() != k {
			t.Fatalf("resumed %d steps, want %d", res.Steps(), k)
		}
		for j, d := range ds[k:] {
			u, err := res.Step(d)
			if err != nil {
				t.Fatal(err)
			}
			for i := range u {
				if math.Float32bits(u[i]) != math.Float32bits(want[k+j][i]) {
					t.Fatalf("resumed after %d steps: step %d value %d is %v, want %v", k, k+j+1, i, u[i], want[k+j][i])
				}
			}
		}
		again, err := res.MarshalState()
		if err != nil {
			t.Fatal(err)
		}
		wb, _ := whole.MarshalState()
		if !bytes.Equal(again, wb) {
			t.Fatalf("resumed after %d steps: final state differs from the uninterrupted one", k)
		}
	}
	// A fresh state has nothing to carry; the first epoch starts fresh.
	if b, err := p.NewOuter().MarshalState(); err != nil || b != nil {
		t.Fatalf("fresh state: %d bytes, %v", len(b), err)
	}
	if o, err := p.ResumeOuter(nil, n); err != nil || o == nil || o.Steps() != 0 || !o.Adam {
		t.Fatalf("resume from nothing: %+v, %v", o, err)
	}
}

// Only the outer Adam carries its state: the Nesterov rule and the plain
// average start every epoch fresh and refuse a state.
func TestCarriesOuter(t *testing.T) {
	if !adamPlan().CarriesOuter() {
		t.Fatal("the outer Adam does not carry its state")
	}
	for _, p := range []jobconf.Plan{{}, {OuterLR: 1.4, OuterMomentum: 0.9}} {
		if p.CarriesOuter() {
			t.Fatalf("%+v carries its outer state", p)
		}
		if _, err := p.ResumeOuter([]byte("x"), 3); !errors.Is(err, jobconf.ErrJob) {
			t.Fatalf("%+v resumed from a state: %v", p, err)
		}
		if _, err := (&jobconf.Outer{LR: 1}).MarshalState(); !errors.Is(err, jobconf.ErrJob) {
			t.Fatalf("Nesterov state marshalled: %v", err)
		}
	}
}

// A hostile or mismatched OuterFile is refused with what is wrong.
func TestResumeOuterRefuses(t *testing.T) {
	const n = 4
	good := func(m, v []float32, meta map[string]string) []byte {
		var b bytes.Buffer
		ts := []safetensors.Tensor{{Name: "m", DType: "F32", Shape: []uint64{uint64(len(m))}, Data: llama.Float32Bytes(m)},
			{Name: "v", DType: "F32", Shape: []uint64{uint64(len(v))}, Data: llama.Float32Bytes(v)}}
		if err := safetensors.Write(&b, ts, meta); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	ok := map[string]string{"format": "zoo-gym/outer-adam/v1", "steps": "3"}
	m, v := []float32{1, -1, 0, 2}, []float32{1, 1, 0, 4}
	if _, err := adamPlan().ResumeOuter(good(m, v, ok), n); err != nil {
		t.Fatalf("a good state refused: %v", err)
	}
	nan := float32(math.NaN())
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{[]byte("not a file"), "outer state"},
		{good(m, v, map[string]string{"format": "pt", "steps": "3"}), "format"},
		{good(m, v, map[string]string{"format": "zoo-gym/outer-adam/v1", "steps": "0"}), "steps"},
		{good(m, v, map[string]string{"format": "zoo-gym/outer-adam/v1", "steps": "-4"}), "steps"},
		{good(m, v, map[string]string{"format": "zoo-gym/outer-adam/v1"}), "steps"},
		{good(m[:3], v[:3], ok), "the adapter's size"},
		{good([]float32{1, nan, 0, 0}, v, ok), `"m" holds NaN`},
		{good(m, []float32{1, -1, 0, 0}, ok), `"v" holds -1`},
		{good(m, []float32{1, float32(math.Inf(1)), 0, 0}, ok), `"v" holds +Inf`},
	} {
		_, err := adamPlan().ResumeOuter(c.b, n)
		if !errors.Is(err, jobconf.ErrJob) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q...: %v, want %q", c.b[:min(len(c.b), 24)], err, c.want)
		}
	}
}

// FuzzResumeOuter: any bytes are refused or read as a state that writes
// back to a file read as the same state.
func FuzzResumeOuter(f *testing.F) {
	o := adamPlan().NewOuter()
	_, _ = o.Step([]float32{1e-3, -2e-3, 0})
	b, _ := o.MarshalState()
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := adamPlan().ResumeOuter(b, 3)
		if err != nil {
			return
		}
		w, err := o.MarshalState()
		if err != nil {
			t.Fatal(err)
		}
		o2, err := adamPlan().ResumeOuter(w, 3)
		if err != nil {
			t.Fatalf("a written state refused: %v", err)
		}
		if w2, _ := o2.MarshalState(); !bytes.Equal(w, w2) {
			t.Fatal("state changed on a round trip")
		}
	})
}
