package jobspec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// A CIDv1 over sha2-256 of a directory (dag-pb).
const dataCID = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"

const dataJob = `model: builtin
dataset: ` + dataCID + `
epochs: 2
min_nodes: 3
data:
  template: "^{question}="
  answer: answer
  extract: numeric
  held_out: test
reward:
  - {verifier: numeric, weight: 1}
  - {verifier: format, pattern: "^[0-9]+$", weight: 0.2}
`

// A dataset job's mapping and reward survive the job file, the event
// log's JSON and the API unchanged.
func TestDataJob(t *testing.T) {
	f, err := ParseFile("j.yaml", []byte(dataJob), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := f.Spec()
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	want := Data{Template: "^{question}=", Answer: "answer", Extract: "numeric", HeldOut: "test"}
	if s.Data != want {
		t.Fatalf("data %+v", s.Data)
	}
	const rw = `[{"verifier":"numeric","weight":1},{"verifier":"format","weight":0.2,"pattern":"^[0-9]+$"}]`
	if string(s.Reward) != rw {
		t.Fatalf("reward %s", s.Reward)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"reward":`+rw) || !strings.Contains(string(b), `"data":{"template":"^{question}=","answer":"answer","extract":"numeric","held_out":"test"}`) {
		t.Fatalf("encoding %s", b)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Fatalf("JSON round trip: %v\n%+v\n%+v", err, back, s)
	}
	pb := ToProto(s)
	raw, err := proto.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	pb.Reset()
	if err := proto.Unmarshal(raw, pb); err != nil {
		t.Fatal(err)
	}
	if got := FromProto(pb); got != s {
		t.Fatalf("API round trip:\n%+v\n%+v", got, s)
	}
	set, err := s.RewardSet()
	if err != nil || len(set.Terms()) != 2 {
		t.Fatalf("reward set %v %v", set, err)
	}
}

// A built-in task's spec encodes as it always has: no data, no reward.
func TestBuiltinSpecEncoding(t *testing.T) {
	s := Spec{Model: "builtin", Dataset: "addition", Epochs: 1, MinNodes: 3}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	if strings.Contains(string(b), `"data":`) || strings.Contains(string(b), `"reward":`) {
		t.Fatalf("%s", b)
	}
	if set, _ := s.RewardSet(); set.Terms()[0].Verifier != "partial" {
		t.Fatalf("default reward %v", set.Terms())
	}
}

// Mistakes are refused with what to fix, on their line.
func TestDataJobErrors(t *testing.T) {
	for _, tc := range []struct{ name, edit, want string }{
		{"no mapping", "data:\n  template: \"^{question}=\"\n  answer: answer\n  extract: numeric\n  held_out: test\n", "needs a data section"},
		{"mapping on a task", "dataset: " + dataCID, "dataset: addition"},
		{"no answer", "  answer: answer\n", "data.answer is missing"},
		{"bad template", "^{question}=", "^{question="},
		{"no held-out", "  held_out: test\n", "hold out 1 to 5000"},
		{"unknown verifier", "verifier: numeric", "verifier: bleu"},
		{"no weight", ", weight: 0.2}", "}"},
		{"bad pattern", `"^[0-9]+$"`, `"^[0-9+$"`},
		{"reward not a list", "reward:\n  - {verifier: numeric, weight: 1}\n  - {verifier: format, pattern: \"^[0-9]+$\", weight: 0.2}\n", "reward: numeric\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var job string
			switch tc.name {
			case "no mapping", "no answer", "no held-out", "reward not a list":
				job = strings.Replace(dataJob, tc.edit, tc.want, 1)
				if tc.name == "no mapping" {
					job = strings.Replace(dataJob, tc.edit, "", 1)
				} else if tc.name != "reward not a list" {
					job = strings.Replace(dataJob, tc.edit, "", 1)
				}
			default:
				job = strings.Replace(dataJob, tc.edit, tc.want, 1)
			}
			_, err := ParseFile("j.yaml", []byte(job), time.Now(), nil)
			if err == nil {
				t.Fatalf("accepted:\n%s", job)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), "j.yaml:") {
				t.Errorf("no line in %v", err)
			}
		})
	}
	// hanzod refuses the same through Normalise.
	s := Spec{Model: "builtin", Dataset: dataCID, Epochs: 1, MinNodes: 3}
	if err := s.Normalise(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "needs a data mapping") {
		t.Fatal(err)
	}
	s.Data = Data{Prompt: "q", Answer: "a", HoldOutBP: 100}
	s.Reward = RewardsFromProto(nil)
	s.Reward = Rewards(`[{"verifier":"numeric","weight":-1}]`)
	if err := s.Normalise(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "weight") {
		t.Fatal(err)
	}
	if _, _, err := DatasetCID("bafkqaaa"); err == nil {
		t.Fatal("an identity CID accepted")
	}
}

// A misspelt verifier setting is an error, not dropped.
func TestRewardsStrict(t *testing.T) {
	var r Rewards
	if err := r.UnmarshalJSON([]byte(`[{"verifier":"numeric","weight":1,"tol":0.5}]`)); err == nil {
		t.Fatalf("accepted %s", r)
	}
	if err := r.UnmarshalJSON([]byte(`[{"weight":1,"verifier":"numeric","tolerance":0.5}]`)); err != nil || r != `[{"verifier":"numeric","weight":1,"tolerance":0.5}]` {
		t.Fatalf("%s %v", r, err)
	}
}
