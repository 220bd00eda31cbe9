package basemodel

import (
	"testing"

	"github.com/zooai/gym/model"
	"github.com/zooai/gym/rollout"
	"github.com/zooai/gym/sft"
	"github.com/zooai/gym/task"
)

func TestEmbeddedMatchesRecipe(t *testing.T) {
	w, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if w.Cfg != Recipe().Model {
		t.Fatalf("embedded model %+v, recipe %+v", w.Cfg, Recipe().Model)
	}
	if n := len(Bytes()); n > 2<<20 {
		t.Fatalf("base model file is %d bytes; keep it small", n)
	}
}

// TestBaseHoldsBothBehaviours: what the recipe is for. On held-out addition
// the greedy answer is right at most 40% of the time, and most greedy
// answers are the forgot-the-carry answer, so GSPO has a behaviour to select.
func TestBaseHoldsBothBehaviours(t *testing.T) {
	w, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	md := &model.Model{W: w, Threads: 2}
	for _, name := range Recipe().Tasks {
		tk, _ := task.Lookup(name)
		split := task.NewSplit(tk, sft.EvalSize)
		comps, err := rollout.Greedy(md, split.Eval, 500)
		if err != nil {
			t.Fatal(err)
		}
		var exact, buggy, differ float64
		for i, p := range split.Eval {
			bug := tk.Buggy(p)
			if task.Exact(p, comps[i]) {
				exact++
			}
			if !task.Exact(p, bug) {
				differ++
				if task.Exact(task.Problem{Answer: bug}, comps[i]) {
					buggy++
				}
			}
		}
		n := float64(len(split.Eval))
		t.Logf("%s: greedy exact %.3f; on problems where the bug matters, greedy gives the buggy answer %.3f", name, exact/n, buggy/differ)
		if exact/n > 0.40 || exact/n < 0.05 {
			t.Errorf("%s: base greedy accuracy %.3f outside [0.05, 0.40]", name, exact/n)
		}
		if buggy/differ < 0.5 {
			t.Errorf("%s: buggy answers %.3f of the time where they differ; the base does not hold the typical mistake", name, buggy/differ)
		}
	}
}
