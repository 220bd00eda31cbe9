package torch

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	trainerv1 "github.com/zooai/gym/api/trainer/v1"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/node/backend/backendtest"
)

// testWriter sends the process's stderr to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Logf("backend: %s", p); return len(p), nil }

// newBackend starts a torch backend on the built-in base with this
// checkout's python/ package.
func newBackend(t *testing.T, o Options) *Backend {
	t.Helper()
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	pkg, err := filepath.Abs(filepath.Join("..", "..", "..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	o.Python = py
	o.Env = append(o.Env, "PYTHONPATH="+pkg, "PYTHONDONTWRITEBYTECODE=1")
	if o.Log == nil {
		o.Log = testWriter{t}
	}
	b, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

var (
	sharedOnce sync.Once
	shared     *Backend
	sharedErr  error
)

// sharedBackend is one backend for the tests that do not break its
// process (a process start imports torch: seconds). Its output is
// discarded (the last lines still come with any error); TestMain closes
// it.
func sharedBackend(t *testing.T) *Backend {
	t.Helper()
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	sharedOnce.Do(func() {
		pkg, _ := filepath.Abs(filepath.Join("..", "..", "..", "python"))
		shared, sharedErr = New(context.Background(), Options{Python: py, Env: []string{"PYTHONPATH=" + pkg, "PYTHONDONTWRITEBYTECODE=1"}})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

// smallConfig is the built-in profile on a small batch: 4 prompts × 4,
// two optimiser passes, two micro-batches each.
func smallConfig() trainer.Config {
	c := trainer.DefaultConfig()
	c.PromptsPerStep, c.GroupSize, c.GradientAccumulationSteps, c.EvalSize, c.Steps = 4, 4, 2, 20, 3
	return c
}

func relL2(a, b *llama.Adapter) float64 { return relDiff(a, b) }

func sub(a, b *llama.Adapter) *llama.Adapter {
	d := a.Clone()
	bv := b.Views()
	for i, v := range d.Views() {
		for k := range v.Data {
			v.Data[k] -= bv[i].Data[k]
		}
	}
	return d
}

// TestGSPOMatchesGoEngine runs the same traces through the Go engine and
// the torch backend (fp32, CPU): the loss agrees within 1e-5, the LoRA
// gradient within 1e-4 relative (L2), and the update of one full step
// (two AdamW updates; or one plain SGD update, as the data-parallel mode
// takes) within 1e-4 relative.
func TestGSPOMatchesGoEngine(t *testing.T) {
	t.Run("adamw", func(t *testing.T) { matchGoEngine(t, smallConfig()) })
	t.Run("sgd", func(t *testing.T) {
		c := smallConfig()
		// A rate large enough that the update stands well above float32's
		// rounding of the adapter (SGD's step is lr × the gradient).
		c.SGD, c.NumIterations, c.LearningRate, c.WeightDecay = true, 1, 1, 0.01
		matchGoEngine(t, c)
	})
}

func matchGoEngine(t *testing.T, c trainer.Config) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	matchGoEngineOn(t, c, base, "")
}

// matchGoEngineOn is matchGoEngine on base, whose directory the job names
// when dir is not empty.
func matchGoEngineOn(t *testing.T, c trainer.Config, base *basemodel.Base, dir string) {
	b := sharedBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// One Go AdamW step first, so lora_B is not zero and every tensor has a
	// gradient.
	first := smallConfig()
	first.LoRATargets = c.LoRATargets
	tr, err := trainer.New(base.Weights, base.Tokenizer, first, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Step(ctx); err != nil {
		t.Fatal(err)
	}
	start := tr.Adapter().Clone()
	fresh := func() *trainer.Trainer {
		t.Helper()
		g, err := trainer.Resume(base.Weights, base.Tokenizer, c, 0, 1, trainer.State{Step: 1, Adapter: start})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// The traces: step 2's problems sampled by the Go engine from start.
	md, err := llama.New(base.Weights, start, 1)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := task.Lookup(c.Task)
	probs := task.NewSplit(tk, c.EvalSize).Batch(c.Seed, 0, 2, c.PromptsPerStep)
	ro, err := rollout.Generate(md, base.Tokenizer, probs, c.GroupSize, rollout.Config{Temperature: c.Temperature}, prng.New(c.Seed, task.StreamSample, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	goLoss, goGrad, err := fresh().Gradient(ro)
	if err != nil {
		t.Fatal(err)
	}
	g := fresh()
	t0 := time.Now()
	goStats, err := g.Train(ctx, ro)
	goSecs := time.Since(t0).Seconds()
	if err != nil {
		t.Fatal(err)
	}
	goAfter := g.Adapter().Clone()

	tt, err := b.StartTrainer(ctx, backend.Job{Base: base, BaseDir: dir, Config: c, Threads: 1, FirstStep: 1, Adapter: start})
	if err != nil {
		t.Fatal(err)
	}
	tr2 := &Traces{G: ro.G, Prompts: ro.Prompts, Completions: ro.Completions, OldLogP: ro.OldLogP, Rewards: ro.Rewards}
	var dry, full *trainerv1.StepResponse
	var pyGrad, pyAfter *llama.Adapter
	var stepWall float64
	err = tt.Call(ctx, func(ctx context.Context, cl trainerv1.TrainerServiceClient, x string) error {
		if err := WriteTraces(filepath.Join(x, "t.safetensors"), tr2); err != nil {
			return err
		}
		var err error
		if dry, err = cl.Step(ctx, &trainerv1.StepRequest{Traces: "t.safetensors", GroupSize: uint32(c.GroupSize), Gradient: "g.safetensors", DryRun: true}); err != nil {
			return err
		}
		if pyGrad, err = ReadAdapter(filepath.Join(x, "g.safetensors"), start); err != nil {
			return err
		}
		t0 := time.Now()
		if full, err = cl.Step(ctx, &trainerv1.StepRequest{Traces: "t.safetensors", GroupSize: uint32(c.GroupSize), Out: "a.safetensors"}); err != nil {
			return err
		}
		pyAfter, err = ReadAdapter(filepath.Join(x, "a.safetensors"), start)
		stepWall = time.Since(t0).Seconds()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	gradErr := relL2(pyGrad, goGrad)
	updErr := relL2(sub(pyAfter, start), sub(goAfter, start))
	t.Logf("first pass loss: go %.9g torch %.9g (|Δ| %.3g); gradient relative L2 error %.3g", goLoss, dry.Stats.Loss, math.Abs(goLoss-dry.Stats.Loss), gradErr)
	t.Logf("step loss (2 passes × 2 micro-batches): go %.9g torch %.9g (|Δ| %.3g); update relative L2 error %.3g; kl go %.6g torch %.6g; clip go %.4g torch %.4g",
		goStats.Loss, full.Stats.Loss, math.Abs(goStats.Loss-full.Stats.Loss), updErr, goStats.KL, full.Stats.Kl, goStats.ClipFrac, full.Stats.ClipFrac)
	t.Logf("time of the optimiser part of a step: go %.3f s; torch %.3f s in the process, %.3f s seen by the worker (seam: call, traces read, adapter written and checked: %.3f s)",
		goSecs, full.Seconds, stepWall, stepWall-full.Seconds)
	if d := math.Abs(goLoss - dry.Stats.Loss); !(d <= 1e-5) {
		t.Errorf("first-pass loss differs by %g (go %v, torch %v)", d, goLoss, dry.Stats.Loss)
	}
	if !(gradErr <= 1e-4) {
		t.Errorf("gradient relative L2 error %g > 1e-4", gradErr)
	}
	if d := math.Abs(goStats.Loss - full.Stats.Loss); !(d <= 1e-5) {
		t.Errorf("step loss differs by %g (go %v, torch %v)", d, goStats.Loss, full.Stats.Loss)
	}
	if !(updErr <= 1e-4) {
		t.Errorf("update relative L2 error %g > 1e-4", updErr)
	}
	if full.Stats.Updates != int64(c.NumIterations) {
		t.Errorf("updates %d, want %d (num_iterations)", full.Stats.Updates, c.NumIterations)
	}
}

// TestSuite is the backends' common suite (package backendtest).
func TestSuite(t *testing.T) { backendtest.Run(t, sharedBackend(t)) }

// TestBFloat16BaseFromBytes: a base saved in bfloat16 by transformers,
// given to the backend as the worker gives it — its config and tokenizer
// (basemodel.OpenConfig, no weights in this process) and its directory —
// is loaded in bfloat16 (the base's type, the backend's dtype unset), the
// trainer says so (what its deltas claim), and it trains.
func TestBFloat16BaseFromBytes(t *testing.T) {
	b := sharedBackend(t)
	py := pyenv.Require(t, "torch", "transformers")
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), "bf16")
	if err := basemodel.Export(src); err != nil {
		t.Fatal(err)
	}
	script := `import shutil, sys, torch
from transformers import AutoModelForCausalLM
AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).to(torch.bfloat16).save_pretrained(sys.argv[2])
shutil.copy(sys.argv[1] + "/tokenizer.json", sys.argv[2])`
	if out, err := exec.Command(py, "-c", script, src, dir).CombinedOutput(); err != nil {
		t.Fatalf("saving the base in bfloat16: %v\n%s", err, out)
	}
	base, err := basemodel.OpenConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if base.Weights.Cfg.DType != backend.BFloat16 {
		t.Fatalf("the saved base is %q", base.Weights.Cfg.DType)
	}
	c := smallConfig()
	a, err := trainer.InitialAdapter(base.Weights.Cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tt, err := b.StartTrainer(ctx, backend.Job{Base: base, BaseDir: dir, Config: c, Threads: 1, Adapter: a})
	if err != nil {
		t.Fatal(err)
	}
	if tt.DType() != backend.BFloat16 {
		t.Errorf("trainer dtype %q, want bfloat16", tt.DType())
	}
	h, err := b.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Loaded || h.Dtype != backend.BFloat16 {
		t.Errorf("the process has loaded %v, dtype %q; want bfloat16", h.Loaded, h.Dtype)
	}
	st, err := tt.Step(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if math.IsNaN(st.Loss) || relDiff(tt.Adapter(), a) == 0 {
		t.Errorf("step: loss %v, adapter changed %v", st.Loss, relDiff(tt.Adapter(), a) != 0)
	}
}

// TestDType: the type a job trains in, and the types Options.DType takes.
func TestDType(t *testing.T) {
	for _, tc := range []struct{ set, job, base, want string }{
		{"", "", "bfloat16", "bfloat16"}, {"", "", "float32", "float32"}, {"", "", "float16", "float32"}, {"", "", "", "float32"},
		{"float32", "", "bfloat16", "float32"}, {"bfloat16", "", "float32", "bfloat16"},
		{"", "float32", "bfloat16", "float32"}, {"", "bfloat16", "float32", "bfloat16"}, {"float32", "bfloat16", "bfloat16", "float32"},
	} {
		if got := backend.TrainDType(tc.set, tc.job, llama.Config{DType: tc.base}); got != tc.want {
			t.Errorf("TrainDType(%q, job %q, base %q) = %q, want %q", tc.set, tc.job, tc.base, got, tc.want)
		}
	}
	for _, ok := range []string{"", "float32", "bfloat16"} {
		if err := CheckDType(ok); err != nil {
			t.Errorf("CheckDType(%q): %v", ok, err)
		}
	}
	// Refused before the Python environment is looked at.
	if _, err := New(context.Background(), Options{Python: "/nonexistent/python", DType: "float16"}); err == nil || !strings.Contains(err.Error(), "no measured tolerances") {
		t.Errorf("float16: %v, want a refusal saying why", err)
	}
	if err := CheckDType("int8"); err == nil || !strings.Contains(err.Error(), "want float32 or bfloat16") {
		t.Errorf("int8: %v", err)
	}
}
