package epoch_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestRetrainSGD: under plain SGD the replay trains sync k alone, from the
// ring's result starts[k−1]; its delta, adapter and losses are the bits a
// worker produces training the epoch from its start with the ring's
// results applied between syncs (the whole replay, which AdamW needs). The
// schedule (warm-up, then cosine decay over the job's updates) makes the
// update count matter. Under AdamW the replay still trains from the epoch's
// start: the shortcut would drop the moments, and the test sees it.
func TestRetrainSGD(t *testing.T) {
	base, err := testBase()
	if err != nil {
		t.Fatal(err)
	}
	for _, sgd := range []bool{true, false} {
		g := jobconf.BuiltinGSPO(1)
		g.WarmupSteps = 2
		if sgd {
			g.InnerOptimizer, g.OuterOptimizer, g.OuterLR, g.LearningRate = "sgd", "adam", 1.5e-3, 1e-3
		}
		s := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 2, MinNodes: 3, StepsPerEpoch: 3, PromptsPerStep: 2, Seed: 5, GSPO: g}
		if err := s.Normalise(); err != nil {
			t.Fatal(err)
		}
		plan, err := jobconf.FromSpec("j", s, base)
		if err != nil {
			t.Fatal(err)
		}
		const node = "0123456789abcdef0123456789abcdef"
		widx, _ := jobconf.Worker(node)
		e, k := 2, 3
		// The epoch's ring results: the start, then seeded perturbations.
		r := rand.New(rand.NewPCG(9, 9))
		start, err := plan.InitialAdapter(base.Weights.Cfg)
		if err != nil {
			t.Fatal(err)
		}
		starts := []*llama.Adapter{start}
		for range k - 1 {
			a := starts[len(starts)-1].Clone()
			for _, x := range a.Views() {
				for i := range x.Data {
					x.Data[i] += float32(r.NormFloat64() * 1e-3)
				}
			}
			starts = append(starts, a)
		}
		// What a worker does: one trainer over the epoch, its adapter
		// replaced by the ring's result at every sync.
		tr, err := trainer.Resume(base.Weights, base.Tokenizer, plan.Trainer, widx, 1, trainer.State{Step: plan.FirstStep(e), Adapter: start})
		if err != nil {
			t.Fatal(err)
		}
		var want []float64
		for sy := 1; sy <= k; sy++ {
			want = want[:0]
			st, err := tr.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, st.Loss)
			if sy < k {
				state := tr.State()
				state.Adapter = starts[sy].Clone()
				if tr, err = trainer.Resume(base.Weights, base.Tokenizer, plan.Trainer, widx, 1, state); err != nil {
					t.Fatal(err)
				}
			}
		}
		rp, err := epoch.Retrain(base, plan, e, 1)(context.Background(), node, k, starts)
		if err != nil {
			t.Fatal(err)
		}
		got, losses := rp.Adapter, rp.Losses
		if jobconf.Digest(got) != jobconf.Digest(tr.Adapter()) || len(losses) != 1 || losses[0] != want[0] {
			t.Fatalf("sgd %v: the replay of sync %d is not the worker's (losses %v, want %v)", sgd, k, losses, want)
		}
		// The replay's samples are the worker's last step's.
		ro := tr.Rollouts()
		if len(rp.Samples) != 1 || len(rp.Samples[0]) != len(ro.Rewards) || !slices.Equal(rp.Samples[0][0].CompletionIDs, ro.Completions[0]) || rp.Samples[0][0].Reward != ro.Rewards[0] {
			t.Fatalf("sgd %v: the replay's samples of sync %d are not the worker's", sgd, k)
		}
		if _, err := epoch.Retrain(base, plan, e, 1)(context.Background(), node, k, starts[:k-1]); err == nil {
			t.Fatalf("sgd %v: a replay of sync %d given %d ring results ran", sgd, k, k-1)
		}
	}
}
