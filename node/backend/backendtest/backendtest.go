// Package backendtest is the behaviour every training backend must have,
// as a suite run against each of them (the go backend in package
// backend's tests, the torch backend in node/backend/torch's): a trainer
// starts from the adapter it is given, a step moves it and keeps its
// shape, SetAdapter continues from exactly the adapter given, and an
// adapter that does not fit the job is refused.
package backendtest

import (
	"context"
	"math"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/node/backend"
)

// Config is the suite's job: the built-in profile on 2 prompts × 4.
func Config() trainer.Config {
	c := trainer.DefaultConfig()
	c.PromptsPerStep, c.GroupSize, c.EvalSize, c.Steps = 2, 4, 20, 4
	return c
}

func equal(a, b *llama.Adapter) bool {
	return a.SameShape(b) && llama.Digest(a.Views()) == llama.Digest(b.Views())
}

// Run runs the suite against b.
func Run(t *testing.T, b backend.Backend) {
	t.Helper()
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := Config()
	start, err := trainer.InitialAdapter(base.Weights.Cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := b.Start(ctx, backend.Job{Base: base, Config: c, Threads: 1, FirstStep: 3, Adapter: start})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if !equal(tr.Adapter(), start) {
		t.Fatalf("%s: the trainer does not start from the adapter given", b.Name())
	}
	st, err := tr.Step(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Step != 4 || math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) || st.RewardMean < 0 || st.RewardMean > 1 || st.LR != c.LearningRate {
		t.Errorf("%s: step stats %+v: want step 4, a finite loss, a mean reward in [0, 1], lr %v", b.Name(), st, c.LearningRate)
	}
	after := tr.Adapter().Clone()
	if !after.SameShape(start) || equal(after, start) {
		t.Errorf("%s: a step must change the adapter and keep its shape", b.Name())
	}
	avg := after.Clone() // what a ring average looks like: between the two
	sv := start.Views()
	for k, v := range avg.Views() {
		for i := range v.Data {
			v.Data[i] = (v.Data[i] + sv[k].Data[i]) / 2
		}
	}
	if err := tr.SetAdapter(ctx, avg); err != nil {
		t.Fatal(err)
	}
	if !equal(tr.Adapter(), avg) {
		t.Errorf("%s: after SetAdapter the adapter is not the one given", b.Name())
	}
	if st, err = tr.Step(ctx); err != nil || st.Step != 5 {
		t.Errorf("%s: the step after SetAdapter: %+v, %v", b.Name(), st, err)
	}
	wrong := Config()
	wrong.LoRARank = 4
	other, err := trainer.InitialAdapter(base.Weights.Cfg, wrong)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetAdapter(ctx, other); err == nil {
		t.Errorf("%s: SetAdapter took an adapter of another rank", b.Name())
	}
	if tr2, err := b.Start(ctx, backend.Job{Base: base, Config: c, Threads: 1, Adapter: other}); err == nil {
		tr2.Close()
		t.Errorf("%s: Start took an adapter of another rank", b.Name())
	}
}
