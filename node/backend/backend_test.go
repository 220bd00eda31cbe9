package backend

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/trainer"
)

func TestParse(t *testing.T) {
	if l, err := ParseList("go, torch,go"); err != nil || len(l) != 3 || l[1] != Torch {
		t.Errorf("ParseList: %v, %v", l, err)
	}
	for _, bad := range []string{"", "jax", "go,,torch"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) accepted", bad)
		}
	}
}

// The go backend is package trainer as the worker used it: a Step, then
// SetAdapter with the ring's average, then a Step give bit for bit what
// State and Resume give.
func TestGoBackendIsTheTrainer(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	c := trainer.DefaultConfig()
	c.PromptsPerStep, c.GroupSize, c.EvalSize = 2, 4, 20
	a, err := trainer.InitialAdapter(base.Weights.Cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bt, err := GoBackend{}.Start(ctx, Job{Base: base, Config: c, Threads: 1, Adapter: a})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := trainer.Resume(base.Weights, base.Tokenizer, c, 0, 1, trainer.State{Adapter: a})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []func(context.Context) (trainer.StepStats, error){bt.Step, ref.Step} {
		if _, err := tr(ctx); err != nil {
			t.Fatal(err)
		}
	}
	avg := bt.Adapter().Clone()
	for _, v := range avg.Views() {
		for i := range v.Data {
			v.Data[i] *= 0.5
		}
	}
	if err := bt.SetAdapter(ctx, avg); err != nil {
		t.Fatal(err)
	}
	st := ref.State()
	st.Adapter = avg.Clone()
	if ref, err = trainer.Resume(base.Weights, base.Tokenizer, c, 0, 1, st); err != nil {
		t.Fatal(err)
	}
	s1, err := bt.Step(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := ref.Step(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Loss != s2.Loss || llama.Digest(bt.Adapter().Views()) != llama.Digest(ref.Adapter().Views()) {
		t.Errorf("go backend: loss %v, reference %v; adapters differ", s1.Loss, s2.Loss)
	}
	if Underlying(bt) == nil {
		t.Error("Underlying of a go trainer is nil")
	}
}

// The go engine refuses a base opened without its weights, saying so.
func TestGoBackendRefusesConfigOnlyBase(t *testing.T) {
	dir := t.TempDir()
	if err := basemodel.Export(dir); err != nil {
		t.Fatal(err)
	}
	base, err := basemodel.OpenConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := trainer.DefaultConfig()
	a, err := trainer.InitialAdapter(base.Weights.Cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = GoBackend{}.Start(context.Background(), Job{Base: base, Config: c, Threads: 1, Adapter: a})
	if !errors.Is(err, basemodel.ErrConfigOnly) || !strings.Contains(err.Error(), "basemodel.Open") {
		t.Fatalf("Start on a config-only base: %v, want ErrConfigOnly", err)
	}
	if DecodesWeights(GoBackend{}) != true {
		t.Error("the go backend does not decode the weights")
	}
}
