package tracecheck

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	trainerv1 "github.com/zooai/gym/api/trainer/v1"
	"github.com/zooai/gym/backend"
	"github.com/zooai/gym/backend/torch"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/prng"
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
