package localcluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/envexample"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestEnvRewardJob trains a job whose reward comes from the example
// environment server, run as a separate process, on three go workers with
// every delta checked from its traces (hanzod asks the server again). The
// server is killed (kill -9) when epoch 2 starts: no worker crashes, the
// rewards the server did not give are marked in the traces (the breaker
// keeps the steps fast), hanzod leaves the deltas it cannot verify out of
// the merge without slashing anyone, and the job publishes.
func TestEnvRewardJob(t *testing.T) {
	url, srv := envexample.Start(t)
	dir := t.TempDir()
	cfg := localcluster.TestConfig(dir, 3)
	var once sync.Once
	killed := make(chan struct{})
	cfg.OnEvent = func(ev localcluster.Event) {
		if ev.Kind == localcluster.EventWorker && ev.Work.Kind == worker.EventEpochStarted && ev.Work.Epoch == 2 {
			once.Do(func() {
				srv.Process.Signal(syscall.SIGKILL)
				close(killed)
			})
		}
	}
	spec := tinySpec(2, 4, 3)
	spec.SpotCheckBP = 10_000
	var r jobspec.Rewards
	if err := r.UnmarshalJSON(fmt.Appendf(nil, `[{"verifier":"env","url":%q,"weight":1}]`, url)); err != nil {
		t.Fatal(err)
	}
	spec.Reward = r
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed:
	default:
		t.Fatalf("epoch 2 never started: the server was not killed (job %s: %s; epochs %+v; nodes %+v)", sum.Status, sum.Reason, sum.Epochs, sum.Nodes)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	for i, n := range sum.Nodes {
		if n.Slashed || n.Accepted != 4 {
			t.Errorf("node %d %+v: want 4 accepted deltas, no slash", i, n)
		}
	}
	if len(sum.Epochs) != 2 {
		t.Fatalf("%d epochs", len(sum.Epochs))
	}
	e1, e2 := sum.Epochs[0], sum.Epochs[1]
	if len(e1.TraceChecks) != 6 || len(e1.Excluded) != 0 || e1.SpotChecks != 6 {
		t.Errorf("epoch 1 (server up): %d trace checks, %d spot-checks, excluded %v; want all 6 checked and merged", len(e1.TraceChecks), e1.SpotChecks, e1.Excluded)
	}
	for _, c := range e1.TraceChecks {
		if c.Failed != "" || c.Unverifiable != "" || c.EnvFailed != 0 || c.RelL2 != 0 {
			t.Errorf("epoch 1 check %+v", c)
		}
	}
	unverifiable := 0
	for _, c := range e2.TraceChecks {
		t.Logf("epoch 2 check %s: failed %q, unverifiable %q, env failures node %d checker %d", c.Slot, c.Failed, c.Unverifiable, c.EnvFailed, c.CheckerEnvFailed)
		if c.Failed != "" {
			t.Errorf("epoch 2 (server dead): a check failed: %+v", c)
		}
		if c.Unverifiable != "" {
			unverifiable++
		}
	}
	if unverifiable == 0 {
		t.Error("epoch 2 (server dead): every delta verified")
	}
	for _, x := range e2.Excluded {
		if !strings.Contains(x, "not checkable") {
			t.Errorf("epoch 2 excluded %q", x)
		}
	}
	t.Logf("env job: accuracy %.3f → %.3f; epoch 1 %d deltas merged, epoch 2 %d excluded as unverifiable; %.1f s",
		sum.EvalBefore, sum.EvalAfter, e1.Deltas, len(e2.Excluded), sum.Seconds)
}
