package tracecheck

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/trace"
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
	all := trainEverySync(t, b, base, c, worker, K)
	return all[K-1]
}

// trainEverySync is trainSyncs, with the input to check each sync 1..K.
func trainEverySync(t *testing.T, b backend.Backend, base *basemodel.Base, c trainer.Config, worker uint64, K int) []SyncInput {
	t.Helper()
	var all []SyncInput
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
		k := in
		k.Starts, k.Traces = append([]*llama.Adapter(nil), in.Starts...), append([][]*trace.Set(nil), in.Traces...)
		all = append(all, k)
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
	return all
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
	tol, _ := Tolerances("go", "")
	r, err := CheckSync(ctx, in, tol)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != "" || r.Steps != 4 || r.LogProbMax != 0 || r.RelL2 != 0 || r.Cosine < 1-1e-12 || r.LossDiff != 0 {
		t.Fatalf("honest go sync: %+v", r)
	}
	t.Logf("honest go sync 2: %d steps, %d tokens, log-prob max %.3g, update rel L2 %.3g cosine %.9f, loss Δ %.3g",
		r.Steps, r.Tokens, r.LogProbMax, r.RelL2, r.Cosine, r.LossDiff)

	clone := func() SyncInput { return cloneInput(in) }
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

// TestCheckSyncSGD: under plain SGD (the data-parallel profile) the check
// replays sync k alone, from its start and the update count the earlier
// traces imply (a warm-up makes a wrong count show), with the bits of the
// worker's run; a scaled update is still caught.
func TestCheckSyncSGD(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	c := syncConfig()
	c.SGD, c.NumIterations, c.WarmupSteps = true, 1, 20
	in := trainSyncs(t, backend.GoBackend{}, base, c, 5, 3)
	tol, _ := Tolerances("go", "")
	r, err := CheckSync(context.Background(), in, tol)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != "" || r.Steps != c.AggregateInterval || r.LogProbMax != 0 || r.RelL2 != 0 || r.LossDiff != 0 {
		t.Fatalf("honest SGD sync 3: %+v (want sync 3's %d steps alone, every difference 0)", r, c.AggregateInterval)
	}
	x := cloneInput(in)
	d := x.Delta.Clone()
	for _, v := range d.Views() {
		for j := range v.Data {
			v.Data[j] *= 1.5
		}
	}
	x.Delta = d
	if r, err := CheckSync(context.Background(), x, tol); err != nil || r.Failed != CheckUpdate {
		t.Fatalf("scaled SGD update: %+v, %v", r, err)
	}
}

// TestCheckSyncOwnOldLogProbs: the replay takes π_old's log-probabilities
// as its own recomputation, not the recorded ones. A go worker's traces
// with every recorded log-probability moved by up to 0.02 nats (another
// engine's rounding, within a tolerance that admits it) replay to the
// worker's update bit for bit; taken from the traces, they would move the
// GSPO ratios off 1 by far more than its clip range (3e-4) and the
// replayed update away from the worker's.
func TestCheckSyncOwnOldLogProbs(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	in := trainSyncs(t, backend.GoBackend{}, base, syncConfig(), 5, 2)
	x := cloneInput(in)
	r := prng.New(3)
	moved := 0
	for _, sets := range x.Traces {
		for _, set := range sets {
			for i := range set.Seqs {
				q := &set.Seqs[i]
				lp := append([]float32(nil), q.LogProbs...)
				for k := range lp {
					lp[k] -= float32(0.02 * r.Float64())
					moved++
				}
				q.LogProbs = lp
			}
		}
	}
	tol, _ := Tolerances("go", "")
	tol.LogProbMax = 0.05
	got, err := CheckSync(context.Background(), x, tol)
	if err != nil {
		t.Fatal(err)
	}
	if got.Failed != "" || got.RelL2 != 0 || !(got.LogProbMax > 0 && got.LogProbMax <= 0.02) {
		t.Fatalf("traces with %d log-probabilities moved: %+v, want the update bit for bit", moved, got)
	}
	// The test means something: trained on the recorded log-probabilities,
	// the first step's update is another one.
	c := syncConfig()
	step := func(sets [][]*trace.Set) []float32 {
		tr, err := trainer.Resume(base.Weights, base.Tokenizer, c, 5, 2, trainer.State{Adapter: in.Starts[0]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Train(context.Background(), sets[0][0].Rollouts()); err != nil {
			t.Fatal(err)
		}
		return jobconf.Flatten(jobconf.Sub(tr.Adapter(), in.Starts[0]))
	}
	if rel, cos := compare(step(x.Traces), step(in.Traces)); !(rel > 0.01) {
		t.Fatalf("the moved log-probabilities, taken as π_old's, change the first update by only %.3g (cosine %.6f): the test shows nothing", rel, cos)
	} else {
		t.Logf("the moved log-probabilities as π_old's would change the first update by relative L2 %.3g (cosine %.4f); the replay's own give it bit for bit", rel, cos)
	}
}

// TestCompare: relative L2 error, cosine and scale on known vectors.
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
	for _, c := range []struct {
		have, want []float32
		scale      float64
	}{
		{[]float32{1.5, 3}, []float32{1, 2}, 1.5},
		{[]float32{1, 5}, []float32{1, 0}, 1}, // across it: no length along it
		{[]float32{-2, 0}, []float32{1, 0}, -2},
		{[]float32{0, 0}, []float32{0, 0}, 1},
		{[]float32{1, 0}, []float32{0, 0}, math.Inf(1)},
	} {
		if got := scale(c.have, c.want); got != c.scale {
			t.Errorf("scale(%v, %v) = %v, want %v", c.have, c.want, got, c.scale)
		}
	}
}

// fakeEnv is a deterministic environment server: a reward from the
// completion's length, failing the samples fail picks.
type fakeEnv struct{ fail func(reward.Sample) bool }

func (f fakeEnv) Reward(s reward.Sample) (float64, bool, error) {
	if f.fail != nil && f.fail(s) {
		return 0, false, errors.New("fake env: no answer")
	}
	return float64(len(s.Completion)%3) / 2, s.Completion == s.Answer, nil
}

// envConfig is syncConfig scored by an env term (bound to env) and exact
// match.
func envConfig(t *testing.T, env reward.Env) trainer.Config {
	t.Helper()
	set, err := reward.New([]reward.Term{{Verifier: reward.EnvName, URL: "http://env.test:8090", Weight: 1}, {Verifier: reward.Exact, Weight: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	c := syncConfig()
	c.Reward = set.Bind(func(string) reward.Env { return env })
	return c
}

// TestCheckSyncEnv: a job scored by an environment server. The rewards
// the server failed to give the node are marked in its traces and checked
// as the rest of the reward alone; the others are asked again. A node that
// inflates one is caught; a server that fails the checker, or the node,
// for more than MaxEnvFailures of the rewards leaves the sync unverifiable
// (nobody's proven fault), not failed.
func TestCheckSyncEnv(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The node's server fails the completions that hold a 3.
	nodeFails := func(s reward.Sample) bool { return strings.Contains(s.Completion, "3") }
	in := trainSyncs(t, backend.GoBackend{}, base, envConfig(t, fakeEnv{nodeFails}), 5, 2)
	failed := 0
	for _, sets := range in.Traces {
		for _, set := range sets {
			for _, q := range set.Seqs {
				if q.RewardFailed {
					failed++
				}
			}
		}
	}
	if failed == 0 {
		t.Fatal("no failed reward in the traces: the test exercises nothing")
	}
	check := func(name string, x SyncInput, env reward.Env) SyncReport {
		x.Config = envConfig(t, env)
		tol, _ := Tolerances("go", "")
		r, err := CheckSync(ctx, x, tol)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: failed %q %s; unverifiable %q; env failures: node %d, checker %d", name, r.Failed, r.Detail, r.Unverifiable, r.EnvFailed, r.CheckerEnvFailed)
		return r
	}
	if r := check("honest", in, fakeEnv{}); r.Failed != "" || r.Unverifiable != "" || r.EnvFailed != failed || r.RelL2 != 0 {
		t.Errorf("honest env sync: %+v (want %d node failures)", r, failed)
	}
	// The checker's server fails a few samples: taken as claimed.
	seen := map[reward.Sample]bool{}
	few := func(s reward.Sample) bool { // the first 2 samples it is asked
		if len(seen) < 2 {
			seen[s] = true
		}
		return seen[s]
	}
	if r := check("the checker's server failing a few", in, fakeEnv{few}); r.Failed != "" || r.Unverifiable != "" || r.CheckerEnvFailed == 0 {
		t.Errorf("a checker's few failures: %+v", r)
	}
	if r := check("the checker's server down", in, fakeEnv{func(reward.Sample) bool { return true }}); r.Failed != "" || r.Unverifiable == "" {
		t.Errorf("a checker whose server is down: %+v, want unverifiable", r)
	}
	clone := func() SyncInput { return cloneInput(in) }
	x := clone()
	for i := range x.Traces[1][0].Seqs {
		if q := &x.Traces[1][0].Seqs[i]; !q.RewardFailed {
			q.Reward += 0.5
			break
		}
	}
	if r := check("an env reward inflated", x, fakeEnv{}); r.Failed != CheckRewards {
		t.Errorf("an inflated env reward: %+v", r)
	}
	x = clone()
	edited := false
	for _, sets := range x.Traces {
		for _, set := range sets {
			for i := range set.Seqs {
				if q := &set.Seqs[i]; q.RewardFailed && !edited {
					q.Reward += 0.5 // a failure claimed, with more than the rest of the reward
					edited = true
				}
			}
		}
	}
	if r := check("a failed reward with more than the rest", x, fakeEnv{}); r.Failed != CheckRewards {
		t.Errorf("a claimed failure's reward inflated: %+v", r)
	}
	x = clone()
	for _, sets := range x.Traces {
		for _, set := range sets {
			for i := range set.Seqs {
				q := &set.Seqs[i]
				q.RewardFailed = true
				q.Reward = envConfig(t, fakeEnv{}).Reward.(*reward.Set).ScoreFailed(reward.Sample{Prompt: q.PromptText, Answer: q.Answer, Completion: q.Completion})
			}
		}
	}
	if r := check("every reward claimed failed", x, fakeEnv{}); r.Unverifiable == "" {
		t.Errorf("a node claiming every call failed: %+v, want unverifiable", r)
	}
}

// cloneInput copies in with traces an attack can edit without touching
// in's.
func cloneInput(in SyncInput) SyncInput {
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

// TestTolerances: go deltas are exact and float32 only; a torch delta's
// dtype picks its tolerances ("" is float32); an unmeasured dtype has none.
func TestTolerances(t *testing.T) {
	g, err := Tolerances("go", "")
	if err != nil || g.LogProbMax != 0 || g.UpdateRelL2 != 0 {
		t.Errorf("go: %+v %v", g, err)
	}
	f, err := Tolerances("torch", "")
	if f32, err2 := Tolerances("torch", jobconf.Float32); err != nil || err2 != nil || f != f32 {
		t.Errorf("torch, no dtype: %+v %v; float32 %+v %v", f, err, f32, err2)
	}
	if b, err := Tolerances("torch", jobconf.BFloat16); err != nil || !(b.LogProbMax > f.LogProbMax) || !(b.UpdateCosine < f.UpdateCosine) {
		t.Errorf("torch bfloat16: %+v %v", b, err)
	}
	// bfloat16's tolerances widen below 16 sequences a step; float32's
	// and go's do not.
	if b, _ := Tolerances("torch", jobconf.BFloat16); b.For(16).UpdateScale != b.UpdateScale || !(b.For(15).UpdateScale > b.UpdateScale) || !(b.For(8).UpdateCosine < b.UpdateCosine) {
		t.Errorf("torch bfloat16 for 16 and 15 sequences a step: %+v, %+v", b.For(16), b.For(15))
	}
	if f.For(1) != f || g.For(1) != g {
		t.Errorf("float32 or go tolerances change with the batch: %+v %+v", f.For(1), g.For(1))
	}
	for _, c := range [][2]string{{"go", jobconf.BFloat16}, {"", jobconf.BFloat16}, {"torch", "float16"}} {
		if tol, err := Tolerances(c[0], c[1]); err == nil {
			t.Errorf("%s %s: %+v, want an error", c[0], c[1], tol)
		}
	}
}
