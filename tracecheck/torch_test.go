package tracecheck

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	trainerv1 "github.com/zooai/gym/api/trainer/v1"
	"github.com/zooai/gym/backend"
	"github.com/zooai/gym/backend/torch"
	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/llama"
	"github.com/zooai/gym/prng"
	"github.com/zooai/gym/rollout"
	"github.com/zooai/gym/task"
	"github.com/zooai/gym/trace"
	"github.com/zooai/gym/trainer"
)

// TestTorchTracesCalibration samples traces with the torch backend (fp32,
// CPU) under an adapter and checks them teacher-forced with the Go engine
// under the same policy: what an honest torch worker's traces differ by.
// The figures are the honest spread a tolerance for torch fp32 must admit
// (docs/traces.md); the bound asserted here is loose, far below what another
// policy gives (TestGoTracesRecomputeExactly: mean ≥ 0.09 nats).
func TestTorchTracesCalibration(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	pkg, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := torch.New(ctx, torch.Options{Python: py, Env: []string{"PYTHONPATH=" + pkg, "PYTHONDONTWRITEBYTECODE=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	base, _, adapted := policies(t)
	c := trainer.DefaultConfig()
	tt, err := b.StartTrainer(ctx, backend.Job{Base: base, Config: c, Threads: 2, Adapter: adapted.A})
	if err != nil {
		t.Fatal(err)
	}
	probs := task.NewSplit(task.Sort{Len: 5}, 10).Batch(4, 0, 1, 16)
	prompts := make([][]int, len(probs))
	maxNew := 0
	for i, p := range probs {
		pr, ans, err := task.Tokenize(base.Tokenizer, p)
		if err != nil {
			t.Fatal(err)
		}
		prompts[i], maxNew = pr, max(maxNew, len(ans))
	}
	const G = 8
	var tr *torch.Traces
	err = tt.Call(ctx, func(ctx context.Context, cl trainerv1.TrainerServiceClient, x string) error {
		req := &trainerv1.GenerateRequest{GroupSize: G, MaxNewTokens: uint32(maxNew), Temperature: 1, Seed: prng.New(4, 5).Uint64(), Out: "calib.safetensors"}
		for _, pr := range prompts {
			ids := make([]int32, len(pr))
			for i, v := range pr {
				ids[i] = int32(v)
			}
			req.Prompts = append(req.Prompts, &trainerv1.Prompt{Ids: ids})
		}
		if _, err := cl.Generate(ctx, req); err != nil {
			return err
		}
		tr, err = torch.ReadTraces(filepath.Join(x, "calib.safetensors"), base.Weights.Cfg.Vocab)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &trace.Set{Header: trace.Header{Format: trace.Format, Version: trace.Version, Model: "builtin", Dataset: "sort",
		Temperature: 1, Prompts: len(prompts), GroupSize: G, Vocab: base.Weights.Cfg.Vocab}}
	for i := range tr.Completions {
		s.Seqs = append(s.Seqs, trace.Sequence{Prompt: i / G, Sample: i % G, PromptIDs: tr.Prompts[i/G],
			CompletionIDs: tr.Completions[i], LogProbs: tr.OldLogP[i]})
	}
	r, err := LogProbs(adapted, s, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("torch fp32 CPU traces under the Go engine: %d tokens, max |Δ| %.3g nats, mean %.3g, sequence sum max %.3g",
		r.Tokens, r.MaxAbs, r.MeanAbs, r.SeqMaxAbs)
	if r.Tokens != s.Tokens() || r.Tokens == 0 || !(r.MaxAbs < 1e-3) || !(r.MeanAbs < 1e-4) {
		t.Errorf("torch fp32 traces recompute to %+v", r)
	}
}

// TestTorchSyncCalibration trains two syncs with the torch backend (fp32,
// CPU) and checks the second from its traces with the Go engine: the
// honest spread of every tolerant check, logged for docs/traces.md, must
// pass Tolerances("torch"); an update scaled ×1.5 and an inflated reward
// must not.
func TestTorchSyncCalibration(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	pkg, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := torch.New(ctx, torch.Options{Python: py, Env: []string{"PYTHONPATH=" + pkg, "PYTHONDONTWRITEBYTECODE=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	c := syncConfig()
	tol := Tolerances("torch")
	ins := map[uint64]SyncInput{}
	for _, worker := range []uint64{5, 11} {
		in := trainSyncs(t, b, base, c, worker, 2)
		ins[worker] = in
		r, err := CheckSync(ctx, in, tol)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("torch fp32 worker %d, sync 2 checked by the Go engine: %d steps, %d tokens; log-prob max %.3g mean %.3g nats (tolerance %.3g); update rel L2 %.3g (tolerance %.3g), cosine %.9f (at least %.6f); loss Δ %.3g (tolerance %.3g)",
			worker, r.Steps, r.Tokens, r.LogProbMax, r.LogProbMean, tol.LogProbMax, r.RelL2, tol.UpdateRelL2, r.Cosine, tol.UpdateCosine, r.LossDiff, tol.Loss)
		if r.Failed != "" {
			t.Fatalf("an honest torch sync fails %s: %s", r.Failed, r.Detail)
		}
		x := in
		x.Delta = in.Delta.Clone()
		for _, v := range x.Delta.Views() {
			for j := range v.Data {
				v.Data[j] *= 1.5
			}
		}
		if r, err := CheckSync(ctx, x, tol); err != nil || r.Failed != CheckUpdate {
			t.Errorf("torch update ×1.5: %+v %v", r, err)
		}
		x = in
		x.Traces = [][]*trace.Set{in.Traces[0], append([]*trace.Set(nil), in.Traces[1]...)}
		set := *in.Traces[1][0]
		set.Seqs = append([]trace.Sequence(nil), set.Seqs...)
		set.Seqs[0].Reward += 1
		x.Traces[1][0] = &set
		if r, err := CheckSync(ctx, x, tol); err != nil || r.Failed != CheckRewards {
			t.Errorf("torch rewards inflated: %+v %v", r, err)
		}
	}
	// The attacks that need a second node or the base model.
	md, err := llama.New(base.Weights, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	a, o := ins[5], ins[11]
	x := a
	x.Traces = o.Traces
	if r, err := CheckSync(ctx, x, tol); err != nil || r.Failed != CheckPrompts {
		t.Errorf("torch traces copied from another node: %+v %v", r, err)
	}
	x = a
	x.Delta = o.Delta
	if r, err := CheckSync(ctx, x, tol); err != nil || r.Failed != CheckUpdate {
		t.Errorf("torch delta from other traces: %+v %v", r, err)
	} else {
		t.Logf("torch delta from other traces: %s", r.Detail)
	}
	x = a
	x.Traces = [][]*trace.Set{a.Traces[0], append([]*trace.Set(nil), a.Traces[1]...)}
	set := a.Traces[1][1]
	ro := set.Rollouts()
	ro2, err := rollout.Generate(md, base.Tokenizer, ro.Problems, ro.G, rollout.Config{Temperature: c.Temperature, TopK: c.TopK}, prng.New(77))
	if err != nil {
		t.Fatal(err)
	}
	x.Traces[1][1] = trace.FromRollouts(set.Header, ro2)
	if r, err := CheckSync(ctx, x, tol); err != nil || r.Failed != CheckLogProbs {
		t.Errorf("torch completions sampled from the base: %+v %v", r, err)
	} else {
		t.Logf("torch completions sampled from the base: %s", r.Detail)
	}
}
