package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/node/backend/torch"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/jobconf"
)

// torchConfig is a test cluster of len(backends) workers training with
// backends (go or torch), the torch ones through this checkout's
// python/ package with env added to their environment. It skips t without
// a Python environment that has torch.
func torchConfig(t *testing.T, backends []string, env ...string) localcluster.Config {
	t.Helper()
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	pkg, err := filepath.Abs(filepath.Join("..", "..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := localcluster.TestConfig(t.TempDir(), len(backends))
	cfg.Backends = backends
	cfg.Python, cfg.PythonEnv = py, append([]string{"PYTHONPATH=" + pkg, "PYTHONDONTWRITEBYTECODE=1"}, env...)
	return cfg
}

// TestMixedRing runs a job that allows any backend on two go and two
// torch workers: the ring mixes them, every delta is accepted (the torch
// ones without exact replay) and the published adapter loads as PEFT's.
// Two kills (kill -9) of a torch worker's Python process: one inside a
// Step call (the first Step any torch process enters reports it through
// the service's test hook, GYM_TRAINER_TEST_HOLD_STEP, and waits there
// until it is killed), and one between steps (worker 3's process when the
// worker reports its first step). Each time the supervisor restarts the
// process, the step is trained again from the last verified adapter, and
// the job publishes all the same.
func TestMixedRing(t *testing.T) {
	hold := filepath.Join(t.TempDir(), "held-in-step")
	cfg := torchConfig(t, []string{"go", "go", "torch", "torch"}, "GYM_TRAINER_TEST_HOLD_STEP="+hold)
	// Generous bounds, not synchronisation: a torch worker's steps go
	// through a Python process on a shared machine.
	cfg.RingTimeout, cfg.EpochGrace, cfg.FailAfter = 2*time.Minute, 5*time.Minute, 2*time.Minute
	var once sync.Once
	killed := make(chan int, 1)
	var victim *torch.Backend
	// The torch workers' backends, known from their first event (they
	// register before they step).
	var mu sync.Mutex
	torchOf := map[int]*torch.Backend{}
	cfg.OnEvent = func(ev localcluster.Event) {
		if ev.Kind != localcluster.EventWorker || ev.Worker.Index < 2 {
			return
		}
		if tb := ev.Worker.Torch(); tb != nil {
			mu.Lock()
			torchOf[ev.Worker.Index] = tb
			mu.Unlock()
		}
		if ev.Worker.Index != 3 || ev.Work.Kind != worker.EventStep {
			return
		}
		once.Do(func() {
			tb := ev.Worker.Torch()
			if tb == nil {
				killed <- 0
				return
			}
			victim = tb
			pid := tb.Pid()
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			killed <- pid
		})
	}
	spec := tinySpec(1, 4, 4)
	spec.Backend, spec.GSPO.Use4Bit = "any", false // 4-bit needs CUDA in the torch backend
	spec.SpotCheckBP = 10_000                      // every delta checked: the go ones replayed, the torch ones from their traces
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The kill inside a step: wait for the hook's file, find the worker
	// whose process wrote it, check that process is still in the call (its
	// pid is the backend's current one), kill it.
	type held struct{ worker, pid, starts int }
	midStep := make(chan held, 1)
	go func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			b, err := os.ReadFile(hold)
			line, complete := strings.CutSuffix(string(b), "\n")
			if err != nil || !complete {
				continue
			}
			pid, err := strconv.Atoi(line)
			if err != nil {
				midStep <- held{-1, 0, 0}
				return
			}
			h := held{-1, pid, 0}
			mu.Lock()
			for i, tb := range torchOf {
				if tb.Pid() == pid {
					h.worker, h.starts = i, tb.Restarts()
				}
			}
			mu.Unlock()
			syscall.Kill(pid, syscall.SIGKILL)
			midStep <- h
			return
		}
	}()
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	for i, n := range sum.Nodes {
		want := map[bool]string{true: "torch", false: ""}[i >= 2]
		if n.Backend != want || n.Accepted != 2 || n.Rejected != 0 || n.Slashed {
			t.Errorf("node %d %+v: want backend %q, 2 accepted deltas, no slash", i, n, want)
		}
	}
	// Every torch delta passed its trace checks, the kills' optimiser
	// resets included; the go ones replayed bit for bit.
	var checks int
	for _, e := range sum.Epochs {
		if len(e.NotReplayed) != 0 || len(e.Excluded) != 0 || e.SpotChecks != 8 {
			t.Errorf("epoch %d: %d checks, not replayed %v, excluded %v (want all 8 checked)", e.Epoch, e.SpotChecks, e.NotReplayed, e.Excluded)
		}
		for _, c := range e.TraceChecks {
			checks++
			t.Logf("trace check %s (%s): %d steps, %d tokens; log-prob max %.3g nats, update rel L2 %.3g cosine %.9f, loss Δ %.3g",
				c.Slot, c.Backend, c.Steps, c.Tokens, c.LogProbMax, c.RelL2, c.Cosine, c.LossDiff)
			if c.Failed != "" {
				t.Errorf("an honest torch delta failed its trace check %s: %s", c.Failed, c.Detail)
			}
		}
	}
	if checks != 4 {
		t.Errorf("%d torch deltas checked from traces, want 4", checks)
	}
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := peft.Read(sum.CheckpointDir, base.Weights.Cfg); err != nil {
		t.Errorf("published checkpoint: %v", err)
	}
	select {
	case pid := <-killed:
		if pid <= 0 {
			t.Errorf("no Python process to kill (pid %d)", pid)
		}
	default:
		t.Error("the torch worker reported no step")
	}
	starts := 0
	if victim != nil {
		starts = victim.Restarts()
	}
	var h held
	select {
	case h = <-midStep:
	default:
		t.Fatal("no torch process entered Step through the test hook")
	}
	if h.worker < 2 {
		t.Fatalf("the process held in Step (pid %d) is no torch worker's current process", h.pid)
	}
	// Worker 3 is killed once between steps; the worker killed inside a
	// step once more.
	want := map[bool]int{true: 3, false: 2}[h.worker == 3]
	if n := sum.Nodes[3]; n.Accepted != 2 || starts < want {
		t.Errorf("worker 3, its process killed between steps: %+v, process starts %d (want >= %d)", n, starts, want)
	}
	mu.Lock()
	mid := torchOf[h.worker].Restarts()
	mu.Unlock()
	if n := sum.Nodes[h.worker]; n.Accepted != 2 || mid <= h.starts {
		t.Errorf("worker %d, its process killed inside Step: %+v, process starts %d → %d (want a restart)", h.worker, n, h.starts, mid)
	}
	t.Logf("killed inside Step: worker %d's process %d (its start %d); process starts now %d", h.worker, h.pid, h.starts, mid)
	t.Logf("mixed ring: held-out accuracy %.3f → %.3f, %.1f s; epochs %+v", sum.EvalBefore, sum.EvalAfter, sum.Seconds, sum.Epochs)
}

// TestTorchOutOfMemoryRefuses: a torch worker whose device runs out of
// memory in a Step (the service's test hook GYM_TRAINER_TEST_OOM raises
// torch.cuda.OutOfMemoryError there, as a full GPU does) refuses the job
// instead of retrying it: hanzod's record of the node says why, with the
// hint, and the three go workers train the job to its checkpoint.
func TestTorchOutOfMemoryRefuses(t *testing.T) {
	cfg := torchConfig(t, []string{"torch", "go", "go", "go"}, "GYM_TRAINER_TEST_OOM=Step")
	// The go workers wait for w0 in their first all-reduce until the ring
	// times out (15 s) and hanzod rebuilds the ring without it.
	cfg.EpochGrace = 5 * time.Minute
	spec := tinySpec(1, 4, 3)
	spec.MaxNodes, spec.Backend, spec.GSPO.Use4Bit = 4, "any", false
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	w0 := sum.Nodes[0]
	t.Logf("w0 refused: %s", w0.Refused)
	for _, want := range []string{"out of device memory", "CUDA out of memory", "GYM_TRAINER_TEST_OOM", "smaller max_seq_len"} {
		if !strings.Contains(w0.Refused, want) {
			t.Errorf("hanzod's record of w0's refusal %q does not say %q", w0.Refused, want)
		}
	}
	if w0.Accepted != 0 {
		t.Errorf("w0 ran out of memory and had %d deltas accepted", w0.Accepted)
	}
	for _, n := range sum.Nodes[1:] {
		if n.Refused != "" || n.Accepted == 0 || n.Slashed {
			t.Errorf("%s: refused %q, %d deltas accepted, slashed %v", n.Name, n.Refused, n.Accepted, n.Slashed)
		}
	}
}

// TestTorchTraceAttacks: two go and two torch workers on a job that allows
// any backend, every delta checked, the torch workers training in float32
// and then in bfloat16. The torch workers lie in ways only the traces show
// — one submits its update ×1.5 with honest traces, the other honest
// updates with every reward in its traces 0.5 higher — and the job's two
// validators (docs/validators.md), checking every delta from its traces
// since a torch delta cannot be replayed bit for bit, catch both at the
// dtype's tolerances (docs/traces.md): each is slashed for trace_check on
// their verdicts by the check made for it, the go workers are not, and the
// job publishes verified.
func TestTorchTraceAttacks(t *testing.T) {
	for _, dtype := range []string{"float32", "bfloat16"} {
		t.Run(dtype, func(t *testing.T) {
			cfg := torchConfig(t, []string{"go", "go", "torch", "torch"})
			cfg.Attacks = []string{"", "", worker.AttackScale, worker.AttackRewards}
			cfg.TorchDType = dtype
			// The checks are the validators' (docs/validators.md): two
			// honest ones, asked two at a time.
			cfg.Validators = []string{"", ""}
			// Generous bounds, not synchronisation: torch steps on a shared machine.
			cfg.RingTimeout, cfg.EpochGrace, cfg.FailAfter = 2*time.Minute, 5*time.Minute, 2*time.Minute
			spec := tinySpec(1, 4, 4)
			spec.Backend, spec.GSPO.Use4Bit, spec.SpotCheckBP, spec.Validators = "any", false, 10_000, 2
			if dtype == "bfloat16" {
				// 4 prompts × 4: bfloat16's tolerances for 16 sequences
				// a step or more, which catch ×1.5; with fewer its
				// honest spread is as wide (docs/traces.md).
				spec.PromptsPerStep = 4
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			sum, err := localcluster.Run(ctx, cfg, spec)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Status != "published" {
				t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
			}
			for i, n := range sum.Nodes {
				if slashed := i >= 2 && n.Role == ""; n.Slashed != slashed {
					t.Errorf("node %d (%s, attack %q): slashed %v %v, want %v", i, n.Backend, n.Attack, n.Slashed, n.Slashes, slashed)
				}
			}
			failed := map[string]string{} // node id → the check that caught it
			for _, e := range sum.Epochs {
				for _, c := range e.TraceChecks {
					t.Logf("trace check %s (%s %s): failed %q %s (log-prob max %.3g, update rel L2 %.3g cosine %.6f scale %.4f, loss Δ %.3g)",
						c.Slot, c.Backend, c.DType, c.Failed, c.Detail, c.LogProbMax, c.RelL2, c.Cosine, c.Scale, c.LossDiff)
					if c.Failed != "" {
						failed[c.Slot[strings.LastIndex(c.Slot, "/")+1:]] = c.Failed
					}
					if len(c.Validators) != 2 || c.Validators[0] == "hanzod" {
						t.Errorf("check %s decided by %v, want the two validators", c.Slot, c.Validators)
					}
					if want := map[bool]string{true: dtype, false: "float32"}[c.Backend == "torch"]; c.DType != want {
						t.Errorf("check %s (%s): dtype %q, want %q", c.Slot, c.Backend, c.DType, want)
					}
				}
			}
			if got := failed[sum.Nodes[2].ID]; got != "update" {
				t.Errorf("the ×1.5 update was caught by %q, want update", got)
			}
			if got := failed[sum.Nodes[3].ID]; got != "rewards" {
				t.Errorf("the inflated rewards were caught by %q, want rewards", got)
			}
		})
	}
}

// TestTorchHonestBFloat16: two go and two honest torch workers training in
// bfloat16, two epochs, every delta checked from its traces by hanzod, at
// 2 and at 4 prompts × 4 a step (bfloat16's two tolerances): no torch
// delta fails its check (docs/traces.md), nobody is slashed, and the job
// publishes. Each check's figures are logged: the honest end-to-end
// spread the calibration quotes.
func TestTorchHonestBFloat16(t *testing.T) {
	for _, prompts := range []int{2, 4} {
		t.Run(fmt.Sprintf("%dx4", prompts), func(t *testing.T) { torchHonestBFloat16(t, prompts) })
	}
}

func torchHonestBFloat16(t *testing.T, prompts int) {
	cfg := torchConfig(t, []string{"go", "go", "torch", "torch"})
	cfg.TorchDType = "bfloat16"
	cfg.RingTimeout, cfg.EpochGrace, cfg.FailAfter = 2*time.Minute, 5*time.Minute, 2*time.Minute
	spec := tinySpec(2, 4, 4)
	spec.Backend, spec.GSPO.Use4Bit, spec.SpotCheckBP, spec.PromptsPerStep = "any", false, 10_000, prompts
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	for i, n := range sum.Nodes {
		if n.Slashed || n.Rejected != 0 {
			t.Errorf("node %d (%s): slashed %v %v, %d deltas rejected", i, n.Backend, n.Slashed, n.Slashes, n.Rejected)
		}
	}
	checks := 0
	for _, e := range sum.Epochs {
		for _, c := range e.TraceChecks {
			t.Logf("trace check %s (%s %s): failed %q %s (log-prob max %.3g, update rel L2 %.3g cosine %.6f scale %.4f, loss Δ %.3g)",
				c.Slot, c.Backend, c.DType, c.Failed, c.Detail, c.LogProbMax, c.RelL2, c.Cosine, c.Scale, c.LossDiff)
			if c.Failed != "" {
				t.Errorf("an honest %s %s delta failed its trace check %s: %s", c.Backend, c.DType, c.Failed, c.Detail)
			}
			if c.Backend == "torch" {
				checks++
				if c.DType != "bfloat16" {
					t.Errorf("check %s: dtype %q, want bfloat16", c.Slot, c.DType)
				}
			}
		}
	}
	if checks == 0 {
		t.Error("no torch delta was checked from its traces")
	}
}

// countOpens counts the calls of the weight loader Bases.Open, and fails
// them: a torch worker must not decode the base in its own process.
type countOpens struct {
	worker.Bases
	n *atomic.Int32
}

func (c countOpens) Open(ctx context.Context, root cid.Cid) (*basemodel.Base, error) {
	c.n.Add(1)
	return nil, fmt.Errorf("test: a torch worker decoded base %s in its Go process", root)
}

// TestTorchBaseByCID: a job on a base model named by CID, saved in
// bfloat16 by transformers, trained by two torch workers and a go one.
// Each torch worker fetches the base from hanzod and verifies it, reads
// only its config and tokenizer (its weight loader, Bases.Open, fails here
// and is never called), and hands the directory to its torch process,
// which loads it in bfloat16, the base's type: every torch delta claims
// bfloat16 and passes its trace check, and the job publishes.
func TestTorchBaseByCID(t *testing.T) {
	cfg := torchConfig(t, []string{"torch", "torch", "go"})
	model := tinyQwen2Dir(t)
	script := `import sys, torch
from transformers import AutoModelForCausalLM
m = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
import os; os.remove(sys.argv[1] + "/model.safetensors")
m.to(torch.bfloat16).save_pretrained(sys.argv[1])`
	if out, err := exec.Command(cfg.Python, "-c", script, model).CombinedOutput(); err != nil {
		t.Fatalf("saving the base in bfloat16: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := basecache.DirCID(ctx, model)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ModelDir = model
	// hanzod does not decode the base either: two validators check.
	cfg.Validators = []string{"", ""}
	cfg.RingTimeout, cfg.EpochGrace, cfg.FailAfter = 2*time.Minute, 5*time.Minute, 2*time.Minute
	var opens atomic.Int32
	cfg.Worker = func(w *localcluster.Worker, c *worker.Config) {
		if w.Index < 2 { // the torch workers; the go one decodes the base
			c.Bases = countOpens{c.Bases, &opens}
		}
	}
	spec := tinySpec(1, 4, 3)
	spec.Model, spec.Backend, spec.PromptsPerStep, spec.SpotCheckBP = root.String(), "any", 4, 10_000
	spec.GSPO = jobconf.BuiltinGSPO(2)
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	if n := opens.Load(); n != 0 {
		t.Errorf("the torch workers called the weight loader %d times", n)
	}
	if sum.HanzodBaseLoads != 0 {
		t.Errorf("hanzod decoded %d bases", sum.HanzodBaseLoads)
	}
	for _, n := range sum.Nodes {
		if n.Role == "validator" {
			continue
		}
		if n.Refused != "" || n.Accepted == 0 {
			t.Errorf("%s: refused %q, %d deltas accepted", n.Name, n.Refused, n.Accepted)
		}
	}
	// On nodes every sampled delta is checked from its traces by the
	// validators: the torch ones in bfloat16, the go one in float32.
	checks := 0
	for _, e := range sum.Epochs {
		for _, c := range e.TraceChecks {
			want := "float32"
			if c.Backend == "torch" {
				checks++
				want = "bfloat16"
			}
			if c.DType != want || c.Failed != "" || len(c.Validators) != 2 {
				t.Errorf("trace check %s (%s): dtype %q, failed %q %s, by %v", c.Slot, c.Backend, c.DType, c.Failed, c.Detail, c.Validators)
			}
		}
	}
	if checks == 0 {
		t.Error("no torch delta was checked from its traces")
	}
}
