package localcluster_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/valkeyserver"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestReplicasKillLeader runs a job on three hanzod replicas over Valkey
// with four workers and abandons the leading replica (its lease not
// released, as kill -9 leaves it) while deltas arrive and as the epoch's
// last deltas come in (its merge): a standby takes over and finishes the
// job; every delta acknowledged to a worker has its accepted verdict in
// the log, each epoch is paid once, nobody is slashed. The same checkpoint
// bytes and CID as an undisturbed run are checked with fixed inputs in
// judge.TestTakeover (here the workers train on timing-dependent rings).
func TestReplicasKillLeader(t *testing.T) {
	if _, err := valkeyserver.Binary(); errors.Is(err, valkeyserver.ErrNotInstalled) && os.Getenv("GYM_REQUIRE_REDIS") != "1" {
		t.Skip(err)
	}
	for _, at := range []localcluster.KillLeader{{Epoch: 1, Step: 1}, {Epoch: 1, Step: 4}} {
		t.Run(fmt.Sprintf("at %d:%d", at.Epoch, at.Step), func(t *testing.T) {
			vs, err := valkeyserver.Start(context.Background(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(vs.Kill)
			dir := filepath.Join(t.TempDir(), "up")
			if err := localcluster.PrepareDir(dir); err != nil {
				t.Fatal(err)
			}
			cfg := localcluster.TestConfig(dir, 4)
			cfg.Replicas, cfg.ValkeyURL, cfg.LeaseTTL = 3, vs.URL(), time.Second
			kl := at
			cfg.KillLeader = &kl
			seed := sha256.Sum256([]byte("replicas-test-hanzod"))
			if err := nodekey.Save(filepath.Join(dir, "hanzod.key"), ed25519.NewKeyFromSeed(seed[:]), false); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			acked := map[jobspec.Slot]bool{}
			logged := map[jobspec.Slot]int{}
			paid := map[int]int{}
			slashed := 0
			cfg.OnEvent = func(ev localcluster.Event) {
				mu.Lock()
				defer mu.Unlock()
				switch ev.Kind {
				case localcluster.EventWorker:
					if ev.Work.Kind == worker.EventDeltaSubmitted {
						acked[jobspec.Slot{Epoch: ev.Work.Epoch, Step: uint64(ev.Work.Step), Node: ev.Worker.ID}] = true
					}
				case localcluster.EventHanzod:
					switch b := ev.Hanzod.Body.(type) {
					case state.DeltaJudged:
						if b.Accepted {
							logged[jobspec.Slot{Epoch: b.Epoch, Step: b.Step, Node: b.Node}]++
						}
					case state.RewardsPaid:
						paid[b.Epoch]++
					case state.Slashed:
						slashed++
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			sum, err := localcluster.Run(ctx, cfg, tinySpec(2, 4, 4))
			if err != nil {
				t.Fatal(err)
			}
			if sum.Status != "published" || !sum.Settled || len(sum.Epochs) != 2 || sum.CheckpointCID == "" {
				t.Fatalf("summary %+v", sum)
			}
			if sum.Replicas != 3 || sum.TakeoverSeconds <= 0 {
				t.Fatalf("replicas %d, takeover %v s: the leader was not killed", sum.Replicas, sum.TakeoverSeconds)
			}
			t.Logf("takeover after %.2f s (lease 1 s), run %.1f s", sum.TakeoverSeconds, sum.Seconds)
			mu.Lock()
			defer mu.Unlock()
			if len(acked) != 2*2*4 { // 2 epochs × 2 syncs × 4 workers
				t.Errorf("%d deltas acknowledged, want 16", len(acked))
			}
			for sl := range acked {
				if logged[sl] != 1 {
					t.Errorf("delta of slot %s acknowledged to the worker, %d accepted verdicts in the log", sl, logged[sl])
				}
			}
			if paid[1] != 1 || paid[2] != 1 || slashed != 0 {
				t.Errorf("epochs paid %v, %d slashes: want each epoch once, none", paid, slashed)
			}
		})
	}
}
