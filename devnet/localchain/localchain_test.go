package localchain_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/zooai/gym/devnet/localchain"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/daemon"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobspec"
)

// requireGeth finds geth, skipping without it (failing under
// GYM_REQUIRE_GETH=1, which scripts/test.sh sets).
func requireGeth(t *testing.T) string {
	t.Helper()
	bin, err := localchain.FindGeth(os.Getenv("GYM_GETH"))
	if errors.Is(err, localchain.ErrNoGeth) && os.Getenv("GYM_REQUIRE_GETH") != "1" {
		t.Skip(err.Error() + "; set GYM_REQUIRE_GETH=1 to make this a failure")
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func tinySpec(epochs, stepsPerEpoch, nodes int) jobspec.Spec {
	g := jobspec.DefaultGSPO()
	g.AggregateInterval, g.GroupSize, g.LoRARank, g.LoRAAlpha = 2, 4, 4, 8
	g.MaxSeqLen, g.GradientAccumulationSteps, g.LearningRate, g.WarmupSteps = 12, 1, 2e-3, 0
	return jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: epochs, MinNodes: nodes, MaxNodes: nodes,
		StepsPerEpoch: stepsPerEpoch, PromptsPerStep: 2, Seed: 7, GSPO: g}
}

// TestUpOnGeth is gym up --ledger evm --byzantine 1 --attack signflip in
// process, on geth --dev: the workers are staked on chain (and admitted
// only so), every epoch is paid on chain, the attacker is slashed there
// with the evidence of hanzod's log, each checkpoint is recorded; geth is
// stopped after the first payment and started again after hanzod has
// decided the next epoch's, which the mirror queues and then sends; the
// chain's record agrees with hanzod's event log, each epoch paid once.
func TestUpOnGeth(t *testing.T) {
	bin := requireGeth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := t.TempDir()
	g, err := localchain.StartGeth(ctx, bin, filepath.Join(root, "geth"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()

	dir := filepath.Join(root, "up")
	cfg := localcluster.TestConfig(dir, 4)
	cfg.Attacks = []string{"", "", "", worker.AttackSignFlip}
	cfg.Treasury = 300 * ledger.GYM
	var ch *localchain.Chain
	cfg.Chain = func(ctx context.Context, nodes []ed25519.PrivateKey) (*daemon.ChainLink, error) {
		var err error
		ch, err = localchain.Setup(ctx, localchain.Config{RPC: g.URL, Dir: filepath.Join(root, "chain"), Stake: 10_000 * ledger.GYM,
			PoolFunds: cfg.Treasury}, nodes)
		if err != nil {
			return nil, err
		}
		return ch.Link(), nil
	}
	cfg.ChainReport = func(ctx context.Context, job string) (*localcluster.ChainSummary, error) { return ch.Report(ctx, job) }

	var (
		mu       sync.Mutex
		paid     []state.RewardsPaid
		slashed  []state.Slashed
		pubs     []state.CheckpointPublished
		stopped  = make(chan struct{}, 1) // the first payment: stop geth
		decided  = make(chan struct{}, 1) // a payment decided while it is down
		down     bool
		queuedAt int
		hanzod   = make(chan *daemon.Daemon, 1)
	)
	cfg.OnEvent = func(ev localcluster.Event) {
		if ev.Kind == localcluster.EventListening {
			hanzod <- ev.Daemon
		}
		if ev.Kind != localcluster.EventHanzod {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch b := ev.Hanzod.Body.(type) {
		case state.RewardsPaid:
			paid = append(paid, b)
			if len(paid) == 1 {
				select {
				case stopped <- struct{}{}:
				default:
				}
			} else if down {
				queuedAt = b.Epoch
				select {
				case decided <- struct{}{}:
				default:
				}
			}
		case state.Slashed:
			slashed = append(slashed, b)
		case state.CheckpointPublished:
			pubs = append(pubs, b)
		}
	}
	restarted := make(chan error, 1)
	go func() {
		select {
		case <-stopped:
		case <-ctx.Done():
			restarted <- ctx.Err()
			return
		}
		g.Stop()
		mu.Lock()
		down = true
		mu.Unlock()
		d := <-hanzod
		select {
		case <-decided:
		case <-ctx.Done():
		}
		// The mirror has tried to send it and failed: it is queued.
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		localcluster.Poll(wctx, 20*time.Millisecond, func() bool {
			st, _ := d.ChainStatus()
			return st.Failures > 0
		})
		cancel()
		mu.Lock()
		down = false
		mu.Unlock()
		restarted <- g.Start(ctx)
	}()

	spec := tinySpec(3, 4, 4)
	spec.Byzantine, spec.Aggregation = 1, "median"
	start := time.Now()
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-restarted; err != nil {
		t.Fatalf("geth restart: %v", err)
	}
	defer ch.Close()
	if sum.Status != "published" || len(sum.Nodes) != 4 || sum.Chain == nil {
		t.Fatalf("job %s (%s), chain %v", sum.Status, sum.Reason, sum.Chain)
	}
	cs := sum.Chain
	mu.Lock()
	defer mu.Unlock()
	if queuedAt == 0 || cs.MirrorFailures == 0 {
		t.Errorf("no payment was decided while geth was down (queued at epoch %d, %d mirror failures)", queuedAt, cs.MirrorFailures)
	}
	// Every payment of hanzod's log is on chain, once, with the same
	// amounts per node.
	if len(paid) != spec.Epochs || len(cs.Epochs) != len(paid) {
		t.Fatalf("%d payments in hanzod's log, %d on chain, want %d", len(paid), len(cs.Epochs), spec.Epochs)
	}
	seen := map[uint64]bool{}
	var gas uint64
	for _, e := range cs.Epochs {
		if seen[e.Epoch] {
			t.Errorf("epoch %d paid twice on chain", e.Epoch)
		}
		seen[e.Epoch] = true
		gas += e.Gas
	}
	for _, p := range paid {
		var e *localcluster.ChainEpoch
		for i := range cs.Epochs {
			if cs.Epochs[i].Epoch == uint64(p.Epoch) {
				e = &cs.Epochs[i]
			}
		}
		if e == nil {
			t.Errorf("epoch %d paid by hanzod, not on chain", p.Epoch)
			continue
		}
		var total ledger.Amount
		workers := 0
		for _, po := range p.Payouts {
			if po.Amount > 0 {
				total += po.Amount
				workers++
			}
			if math.Abs(e.Paid[po.ID]-float64(po.Amount)/float64(ledger.GYM)) > 1e-9 {
				t.Errorf("epoch %d: %s paid %v on chain, %v in the log", p.Epoch, po.ID[:12], e.Paid[po.ID], po.Amount)
			}
		}
		if math.Abs(e.Total-float64(total)/float64(ledger.GYM)) > 1e-9 || e.Workers != workers {
			t.Errorf("epoch %d: %v to %d workers on chain, %v to %d in the log", p.Epoch, e.Total, e.Workers, total, workers)
		}
	}
	// The attacker is slashed on chain with the log's evidence; nobody else is.
	if len(slashed) == 0 {
		t.Fatal("hanzod slashed nobody")
	}
	bad := sum.Nodes[3].ID
	onChain := map[string][]localcluster.ChainSlash{}
	for _, n := range cs.Nodes {
		onChain[n.ID] = n.Slashes
	}
	for _, s := range slashed {
		if s.Account != bad {
			t.Errorf("honest %s slashed", s.Account[:12])
		}
	}
	if len(onChain[bad]) != len(slashed) {
		t.Fatalf("%d slashes on chain, %d in the log", len(onChain[bad]), len(slashed))
	}
	for i, s := range slashed {
		h := ledger.Keccak256(s.Evidence)
		if onChain[bad][i].EvidenceHash != hexutil.Encode(h[:]) {
			t.Errorf("slash %d: evidence hash %s on chain, keccak256 of the log's evidence %x", i, onChain[bad][i].EvidenceHash, h)
		}
	}
	// Every checkpoint is recorded.
	if len(cs.Publications) != len(pubs) || len(pubs) != spec.Epochs {
		t.Fatalf("%d publications on chain, %d in the log", len(cs.Publications), len(pubs))
	}
	for i, p := range pubs {
		if cs.Publications[i].CID != p.CID || cs.Publications[i].Epoch != uint64(p.Epoch) {
			t.Errorf("publication %d: %+v on chain, %s at epoch %d in the log", i, cs.Publications[i], p.CID, p.Epoch)
		}
	}
	// Honest stakes are whole; the attacker's is what its slashes left:
	// one for its delta above the bound, and a second when a neighbour's
	// report of its ring frame (the same garbage, signed in the ring)
	// reaches hanzod after the first (a distinct signed offence; which
	// comes first is a race of the ring and the upload).
	for _, n := range cs.Nodes {
		switch {
		case n.ID != bad && n.Stake < 9_000:
			t.Errorf("honest node %s: stake %v on chain", n.ID[:12], n.Stake)
		case n.ID == bad && (n.Stake >= 10_000 || (len(slashed) == 1 && n.Stake < 9_000)):
			t.Errorf("attacker %s: stake %v on chain after %d slashes", n.ID[:12], n.Stake, len(slashed))
		}
	}
	t.Logf("run %.1f s; gas of the epoch payments (4 workers): %v total over %d epochs; %d mirror failures while geth was down",
		time.Since(start).Seconds(), gas, len(cs.Epochs), cs.MirrorFailures)
	for _, st := range ch.SetupGas {
		t.Logf("setup: %s: %d gas", st.What, st.Gas)
	}
	lat := append([]time.Duration(nil), ch.Latency...)
	slices.Sort(lat)
	t.Logf("confirmation latency of %d setup transactions (estimate to receipt, 1 confirmation): min %v, median %v, max %v",
		len(lat), lat[0], lat[len(lat)/2], lat[len(lat)-1])
	for _, e := range cs.Epochs {
		t.Logf("epoch %d: %d workers, %.3f GYM, gas %d", e.Epoch, e.Workers, e.Total, e.Gas)
	}
}
