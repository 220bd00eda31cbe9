package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/chaintest"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/ledger/evm"
)

// hanzod against a real node process: geth --dev on loopback. The
// contracts are deployed over JSON-RPC, a node stakes and is admitted, a
// slash reaches the chain; geth is stopped, hanzod decides a second slash
// and queues it, geth comes back and the queue drains — each slash once.
func TestChainLedgerOnGeth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs geth")
	}
	ctx := context.Background()
	orch, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, _ := crypto.GenerateKey()
	g := chaintest.StartGeth(t, orch, nodeKey)
	ec, err := ethclient.Dial(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	c, err := chain.NewClient(ctx, ec, 1337)
	if err != nil {
		t.Fatal(err)
	}
	c.Poll = 50 * time.Millisecond
	dep, err := chain.Deploy(ctx, c, orch, chain.DeployConfig{UnbondingDelay: time.Hour, OrchestratorStake: 50_000 * uint64(ledger.GYM)})
	if err != nil {
		t.Fatal(err)
	}
	kr := &evm.Keyring{}
	nodeAcct := chain.Address(nodeKey).Hex()
	kr.Add(nodeAcct, nodeKey)
	l, err := evm.New(ctx, evm.Config{Client: c, Addresses: dep.Addresses, Key: orch, Accounts: kr})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := l.Deposit(ctx, nodeAcct, 10_000*ledger.GYM); err != nil {
		t.Fatal(err)
	}
	t.Logf("a transaction's confirmation on geth --dev (estimate, send, receipt; 1 confirmation): %v", time.Since(t0))
	if err := l.Stake(ctx, nodeAcct, ledger.RoleNode, 10_000*ledger.GYM); err != nil {
		t.Fatal(err)
	}

	node := "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29" // register's zero-seed key
	cfg := testConfig(t.TempDir())
	cfg.Chain = &ChainLink{Book: l, Staked: l.IsStaked, Accounts: map[string]string{node: nodeAcct}}
	d, err := Start(ctx, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn := dial(t, d.Addr(), insecure.NewCredentials())
	waitServing(t, conn)
	register(t, conn)
	oc := pb.NewOrchestratorServiceClient(conn)
	for _, f := range []func() error{
		func() error {
			_, err := oc.Deposit(ctx, &pb.LedgerRequest{Account: node, Amount: 20_000 * uint64(ledger.GYM)})
			return err
		},
		func() error {
			_, err := oc.Bond(ctx, &pb.LedgerRequest{Account: node, Amount: 20_000 * uint64(ledger.GYM)})
			return err
		},
		func() error {
			_, err := oc.Slash(ctx, &pb.SlashRequest{Node: node, Reason: "one", Evidence: []byte("proof-1")})
			return err
		},
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	slashes := func() int {
		p, err := l.Position(ctx, nodeAcct)
		if err != nil {
			return -1
		}
		return len(p.Slashes)
	}
	waitFor(t, "the first slash on chain, confirmed to the mirror", func() bool {
		st, _ := d.ChainStatus()
		return slashes() == 1 && st.Slashed == 1
	})

	g.Stop()
	if _, err := oc.Slash(ctx, &pb.SlashRequest{Node: node, Reason: "two", Evidence: []byte("proof-2")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mirror to queue the slash", func() bool {
		st, _ := d.ChainStatus()
		return st.Failures > 0 && st.Pending > 0
	})
	g.Start(t)
	waitFor(t, "the queue to drain", func() bool {
		st, _ := d.ChainStatus()
		return st.Pending == 0 && slashes() == 2
	})
	time.Sleep(time.Second) // nothing more arrives
	p, err := l.Position(ctx, nodeAcct)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Slashes) != 2 || p.Slashes[1].EvidenceHash != ledger.Keccak256([]byte("proof-2")) || p.Slashes[1].Pct != 25 {
		t.Fatalf("on chain after the outage: %+v", p)
	}
	// The mirror may count the second slash as done by an earlier try
	// (sent, then its receipt lost to the restart): what counts is the
	// chain's record above, two slashes and not three.
	st, _ := d.ChainStatus()
	if st.Slashed < 1 || st.Failures == 0 || st.LastError != "" {
		t.Fatalf("mirror status %+v", st)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
