package tracecheck

import (
	"context"
	"math"
	"testing"

	"github.com/zooai/gym/backend"
	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/llama"
	"github.com/zooai/gym/prng"
	"github.com/zooai/gym/rollout"
	"github.com/zooai/gym/trace"
	"github.com/zooai/gym/trainer"
)

// syncConfig is a small job: 4 prompts × 4 completions, 2 local steps a
// sync, 2 syncs.
func syncConfig() trainer.Config {
	c := trainer.DefaultConfig()
	c.PromptsPerStep, c.GroupSize, c.AggregateInterval, c.EvalSize = 4, 4, 2, 50
	return c
}

// trainSyncs trains worker's syncs 1..K of an epoch with backend b as a
// worker does, a "ring" between syncs (the start of sync s+1 is the end
// of sync s moved halfway towards a perturbed copy, standing for the other
// members), and returns the input to check sync K: the starts, the traces
// of every step, and the last sync's clipped update.
func trainSyncs(t *testing.T, b backend.Backend, base *basemodel.Base, c trainer.Config, worker uint64, K int) SyncInput {
	t.Helper()
	ctx := context.Background()
	start, err := trainer.InitialAdapter(base.Weights.Cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := b.Start(ctx, backend.Job{Base: base, Config: c, Worker: worker, Threads: 2, Adapter: start})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	plan := jobconf.Plan{Trainer: c, Interval: c.AggregateInterval}
	clip := plan.ClipNorm(start.NumParams())
	in := SyncInput{Weights: base.Weights, Tokenizer: base.Tokenizer, Config: c, Worker: worker, Interval: c.AggregateInterval,
		ClipNorm: clip, Threads: 2}
	r := prng.New(42, worker)
	for s := 1; s <= K; s++ {
		from := tr.Adapter().Clone()
		in.Starts = append(in.Starts, from)
		var sets []*trace.Set
		var losses []float64
		for range c.AggregateInterval {
			st, err := tr.Step(ctx)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, st.Loss)
			sets = append(sets, tr.Traces())
		}
		in.Traces = append(in.Traces, sets)
		u := jobconf.Sub(tr.Adapter(), from)
		jobconf.Clip(u, clip)
		in.Delta, in.ClaimedLoss = u, jobconf.ClaimedLoss(losses)
		if s == K {
			break
		}
		next := jobconf.Sub(tr.Adapter(), u) // = from, then half of a perturbed update
		for i, v := range next.Views() {
			uv := u.Views()[i].Data
			for j := range v.Data {
				v.Data[j] += uv[j] * float32(0.5+0.5*r.Float64())
			}
		}
		if err := tr.SetAdapter(ctx, next); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

// TestCheckSyncGo: a go worker's sync 2 checks exactly (every difference
// 0); each attack of the verification issue is caught by the check made
// for it.
func TestCheckSyncGo(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	c := syncConfig()
	in := trainSyncs(t, backend.GoBackend{}, base, c, 5, 2)
	ctx := context.Background()
	tol := Tolerances("go")
	r, err := CheckSync(ctx, in, tol)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != "" || r.Steps != 4 || r.LogProbMax != 0 || r.RelL2 != 0 || r.Cosine < 1-1e-12 || r.LossDiff != 0 {
		t.Fatalf("honest go sync: %+v", r)
	}
	t.Logf("honest go sync 2: %d steps, %d tokens, log-prob max %.3g, update rel L2 %.3g cosine %.9f, loss Δ %.3g",
		r.Steps, r.Tokens, r.LogProbMax, r.RelL2, r.Cosine, r.LossDiff)

	clone := func() SyncInput {
		out := in
		out.Traces = make([][]*trace.Set, len(in.Traces))
		for s, sets := range in.Traces {
			for _, set := range sets {
				cp := *set
				cp.Seqs = append([]trace.Sequence(nil), set.Seqs...)
				out.Traces[s] = append(out.Traces[s], &cp)
			}
		}
		return out
	}
	md, err := llama.New(base.Weights, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	attacks := []struct {
		name, check string
		edit        func(*SyncInput)
	}{
		{"rewards inflated in the traces", CheckRewards, func(x *SyncInput) { x.Traces[1][1].Seqs[3].Reward += 0.5 }},
		{"traces copied from another node", CheckPrompts, func(x *SyncInput) { x.Worker = 6 }},
		{"update scaled ×1.5", CheckUpdate, func(x *SyncInput) {
			d := x.Delta.Clone()
			for _, v := range d.Views() {
				for j := range v.Data {
					v.Data[j] *= 1.5
				}
			}
			x.Delta = d
		}},
		{"a delta from other traces than the ones named", CheckUpdate, func(x *SyncInput) {
			other := trainSyncs(t, backend.GoBackend{}, base, func() trainer.Config { c := c; c.Seed = 9; return c }(), 5, 2)
			x.Delta = other.Delta
		}},
		{"completions sampled from the base, not the claimed policy", CheckLogProbs, func(x *SyncInput) {
			set := x.Traces[1][1]
			ro := set.Rollouts()
			// Resampled from the base with the same prompts and settings,
			// and scored honestly: only the policy is wrong.
			ro2, err := rollout.Generate(md, base.Tokenizer, ro.Problems, ro.G, rollout.Config{Temperature: c.Temperature, TopK: c.TopK}, prng.New(77))
			if err != nil {
				t.Fatal(err)
			}
			x.Traces[1][1] = trace.FromRollouts(set.Header, ro2)
		}},
		{"a claimed loss 0.1 off", CheckLoss, func(x *SyncInput) { x.ClaimedLoss += 0.1 }},
		{"a step left out", CheckShape, func(x *SyncInput) { x.Traces[0] = x.Traces[0][:1] }},
	}
	for _, a := range attacks {
		x := clone()
		a.edit(&x)
		r, err := CheckSync(ctx, x, tol)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if r.Failed != a.check {
			t.Errorf("%s: failed %q (%s), want %q", a.name, r.Failed, r.Detail, a.check)
			continue
		}
		t.Logf("%s: caught by %s: %s", a.name, r.Failed, r.Detail)
	}
}

// TestCompare: relative L2 error and cosine on known vectors.
func TestCompare(t *testing.T) {
	rel, cos := compare([]float32{1.5, 0}, []float32{1, 0})
	if math.Abs(rel-0.5) > 1e-12 || math.Abs(cos-1) > 1e-12 {
		t.Errorf("×1.5: %v %v", rel, cos)
	}
	rel, cos = compare([]float32{0, 1}, []float32{1, 0})
	if math.Abs(rel-math.Sqrt2) > 1e-12 || cos != 0 {
		t.Errorf("orthogonal: %v %v", rel, cos)
	}
	if rel, cos = compare([]float32{0}, []float32{0}); rel != 0 || cos != 1 {
		t.Errorf("zeros: %v %v", rel, cos)
	}
	if rel, _ = compare([]float32{1}, []float32{0}); !math.IsInf(rel, 1) {
		t.Errorf("against zero: %v", rel)
	}
}
