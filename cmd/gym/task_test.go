package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zooai/gym/model/dataset"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/task"
)

// TestTaskExport: a built-in task written as a dataset reads back, with
// the mapping the help gives, as the task's problems — the held-out split
// is the task's own held-out set — and the partial verifier scores them as
// the task's reward does; an occupied directory is refused.
func TestTaskExport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "addition")
	out := mustGym(t, "task", "export", "addition", dir, "--train", "200", "--test", "50", "--seed", "3")
	if !strings.Contains(out, "200 training and 50 test problems") {
		t.Errorf("output %q", out)
	}
	d, err := dataset.Load(dir, dataset.Config{Prompt: "prompt", Answer: "answer", HeldOut: "test"})
	if err != nil {
		t.Fatal(err)
	}
	add, _ := task.Lookup("addition")
	wantTrain, wantTest := task.Export(add, 200, 50, 3)
	if !reflect.DeepEqual(d.Eval, wantTest) || !reflect.DeepEqual(d.Train, wantTrain) || !reflect.DeepEqual(wantTest, task.NewSplit(add, 50).Eval) {
		t.Fatalf("rows read back differ from the task's")
	}
	held := map[string]bool{}
	for _, p := range d.Eval {
		held[p.Prompt] = true
	}
	partial, err := reward.New([]reward.Term{{Verifier: reward.Partial, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Train {
		if held[p.Prompt] {
			t.Fatalf("training row %q is held out", p.Prompt)
		}
		c := p.Answer[:1] + "x"
		if got, want := partial.Score(reward.Sample{Prompt: p.Prompt, Answer: p.Answer, Completion: c}), task.Reward(p, c); got != want {
			t.Fatalf("partial verifier %v, task reward %v", got, want)
		}
	}
	if r := gym(t, "task", "export", "addition", dir); r.code == 0 || !strings.Contains(r.stderr, "already holds") {
		t.Errorf("an occupied directory: exit %d, %s", r.code, r.stderr)
	}
	if r := gym(t, "task", "export", "nope", t.TempDir()); r.code != 2 {
		t.Errorf("an unknown task: exit %d, %s", r.code, r.stderr)
	}
}
