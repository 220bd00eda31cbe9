package localcluster_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/jobspec"
)

// dataParallelSpec is tinySpec in the data-parallel profile (a sync every
// step, SGD inside, Adam outside) with one declared Byzantine worker and
// every delta checked.
func dataParallelSpec(epochs, steps, nodes int) jobspec.Spec {
	spec := tinySpec(epochs, steps, nodes)
	g := &spec.GSPO
	g.AggregateInterval, g.InnerOptimizer, g.OuterOptimizer = 1, "sgd", "adam"
	g.LearningRate, g.OuterLR, g.MaxGradNorm, g.NumIterations = 1e-3, 1.5e-3, 30, 1
	spec.Byzantine, spec.Aggregation, spec.SpotCheckBP = 1, "median", 10_000
	return spec
}

// TestInEpochEjection: a worker adds noise within the norm bound to every
// contribution from the first sync, under the data-parallel profile. The
// judge screens each sync as its deltas come in, proves the noise by the
// check of its first delta (a replay for a go worker, its traces for a
// torch one), slashes and ejects the attacker while the epoch runs, and
// tells the others to continue from a state rebuilt from the honest
// deltas. Every honest member applies it, every later honest delta is
// checked and agrees with the ring the judge reconstructs through the
// rebase, nobody honest is slashed, and the attacker is paid nothing.
func TestInEpochEjection(t *testing.T) {
	if testing.Short() {
		t.Skip("a job of eight syncs")
	}
	for _, backend := range []string{"go", "torch"} {
		t.Run(backend, func(t *testing.T) {
			var cfg localcluster.Config
			spec := dataParallelSpec(1, 8, 4)
			if backend == "torch" {
				cfg = torchConfig(t, []string{"go", "go", "torch", "torch"})
				spec.Backend, spec.GSPO.Use4Bit = "any", false
				// Generous bounds, not synchronisation: torch steps on a
				// shared machine.
				cfg.RingTimeout, cfg.EpochGrace, cfg.FailAfter = 2*time.Minute, 5*time.Minute, 2*time.Minute
			} else {
				cfg = localcluster.TestConfig(t.TempDir(), 4)
			}
			cfg.Attacks = []string{"", "", "", worker.AttackNoise}
			var mu sync.Mutex
			rebased := map[string]int{}
			cfg.OnEvent = func(ev localcluster.Event) {
				if ev.Kind == localcluster.EventWorker && ev.Work.Kind == worker.EventRebased {
					mu.Lock()
					rebased[ev.Worker.ID]++
					mu.Unlock()
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			sum, err := localcluster.Run(ctx, cfg, spec)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Status != "published" || len(sum.Epochs) != 1 {
				t.Fatalf("job %s (%s), %d epochs", sum.Status, sum.Reason, len(sum.Epochs))
			}
			bad := sum.Nodes[3]
			if !bad.Slashed || bad.Reward != 0 {
				t.Errorf("attacker: slashed %v, paid %v GYM", bad.Slashed, bad.Reward)
			}
			for _, n := range sum.Nodes[:3] {
				if n.Slashed {
					t.Errorf("honest %s slashed: %v", n.Name, n.Slashes)
				}
			}
			e := sum.Epochs[0]
			if len(e.Ejections) != 1 || e.Ejections[0].Node != bad.ID || e.Ejections[0].FirstSync != 1 || e.Ejections[0].Reached >= 8 {
				t.Fatalf("ejections %+v: want the attacker's, from sync 1, before the epoch's last sync", e.Ejections)
			}
			if len(e.Rebases) != 1 || e.Rebases[0] <= e.Ejections[0].Reached || e.Rebases[0] >= 8 {
				t.Fatalf("rebases at %v after an ejection at sync %d: want one between it and the last sync", e.Rebases, e.Ejections[0].Reached)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, n := range sum.Nodes[:3] {
				if rebased[n.ID] != 1 {
					t.Errorf("honest %s rebased %d times", n.Name, rebased[n.ID])
				}
			}
			if len(e.RingDisagreements) > 0 {
				t.Errorf("ring disagreements after the rebase: %q", e.RingDisagreements)
			}
			// Every honest delta was checked and kept: 3 × 8, and the
			// attacker's sync-1 delta and whatever it sent before its
			// ejection excluded.
			if e.Deltas != 3*8 {
				t.Errorf("%d deltas merged, want the honest 24 (excluded %q)", e.Deltas, e.Excluded)
			}
			t.Logf("ejected at sync %d (%.1f s after its first delta), rebase at sync %d; %d checks; accuracy %.3f",
				e.Ejections[0].Reached, e.Ejections[0].Seconds, e.Rebases[0], e.SpotChecks, e.Accuracy)
		})
	}
}

// TestTracedRewardsReplayed: a go worker whose delta is honest but whose
// trace bundle claims higher rewards than it sampled (--attack rewards).
// The replay of a go delta reproduces its samples, so the check compares
// them with the traces: the lie is proven at its first checked sync, and
// the node is slashed and ejected like any other cheater.
func TestTracedRewardsReplayed(t *testing.T) {
	if testing.Short() {
		t.Skip("a job of six syncs")
	}
	cfg := localcluster.TestConfig(t.TempDir(), 4)
	cfg.Attacks = []string{"", "", "", worker.AttackRewards}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, dataParallelSpec(1, 6, 4))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	bad := sum.Nodes[3]
	if !bad.Slashed || bad.Reward != 0 || len(bad.Slashes) == 0 || !strings.Contains(bad.Slashes[0], "traces: ") || !strings.Contains(bad.Slashes[0], "reward") {
		t.Fatalf("the rewards liar: slashed %v %q, paid %v", bad.Slashed, bad.Slashes, bad.Reward)
	}
	for _, n := range sum.Nodes[:3] {
		if n.Slashed {
			t.Errorf("honest %s slashed: %v", n.Name, n.Slashes)
		}
	}
	t.Logf("caught: %s", bad.Slashes[0])
}
