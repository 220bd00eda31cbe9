package localcluster_test

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/backend/torch"
	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/localcluster"
	"github.com/zooai/gym/peft"
	"github.com/zooai/gym/worker"
)

// TestMixedRing runs a job that allows any backend on two go and two
// torch workers: the ring mixes them, every delta is accepted (the torch
// ones without exact replay) and the published adapter loads as PEFT's.
// One torch worker's Python process is killed (kill -9) when the worker
// reports its first step, before its second: the supervisor restarts it,
// the step is trained and the job publishes all the same (a kill inside a
// step: backend/torch TestRecoversFromFaults).
func TestMixedRing(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	pkg, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := localcluster.TestConfig(dir, 4)
	cfg.Backends = []string{"go", "go", "torch", "torch"}
	cfg.Python, cfg.PythonEnv = py, []string{"PYTHONPATH=" + pkg, "PYTHONDONTWRITEBYTECODE=1"}
	// Generous bounds, not synchronisation: a torch worker's steps go
	// through a Python process on a shared machine.
	cfg.RingTimeout, cfg.EpochGrace, cfg.FailAfter = 2*time.Minute, 5*time.Minute, 2*time.Minute
	var once sync.Once
	killed := make(chan int, 1)
	var victim *torch.Backend
	cfg.OnEvent = func(ev localcluster.Event) {
		if ev.Kind != localcluster.EventWorker || ev.Worker.Index != 3 || ev.Work.Kind != worker.EventStep {
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
		want := map[bool]string{true: "torch", false: ""}[i >= 2]
		if n.Backend != want || n.Accepted != 2 || n.Rejected != 0 || n.Slashed {
			t.Errorf("node %d %+v: want backend %q, 2 accepted deltas, no slash", i, n, want)
		}
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
	if n := sum.Nodes[3]; n.Accepted != 2 || starts < 2 {
		t.Errorf("the worker whose process was killed: %+v, process starts %d (want a restart)", n, starts)
	}
	t.Logf("mixed ring: held-out accuracy %.3f → %.3f, %.1f s; epochs %+v", sum.EvalBefore, sum.EvalAfter, sum.Seconds, sum.Epochs)
}
