package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/chaintest"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/ledger/evm"
)

// hanzod on a chain ledger: a node is admitted only once it has staked on
// chain, and a slash decided by hanzod reaches the chain with its
// evidence, once.
func TestChainLedger(t *testing.T) {
	ctx := context.Background()
	sim := chaintest.New(t, 2, time.Hour)
	kr := &evm.Keyring{}
	nodeAcct := chain.Address(sim.Keys[1]).Hex()
	kr.Add(nodeAcct, sim.Keys[1]) // the test stakes for the node
	l, err := evm.New(ctx, evm.Config{Client: sim.Client, Addresses: sim.Deployment.Addresses, Key: sim.Keys[0], Accounts: kr})
	if err != nil {
		t.Fatal(err)
	}
	node := "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29" // register's key: the zero seed
	cfg := testConfig(t.TempDir())
	cfg.Chain = &ChainLink{Book: l, Staked: l.IsStaked, Accounts: map[string]string{node: nodeAcct}, StakeMaxAge: time.Minute}
	d, err := Start(ctx, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn := dial(t, d.Addr(), insecure.NewCredentials())
	waitServing(t, conn)

	nc := pb.NewNodeServiceClient(conn)
	if _, err := nc.Register(ctx, registerRequest(t, conn)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("register without stake on chain: %v", err)
	}
	if err := l.Deposit(ctx, nodeAcct, 10_000*ledger.GYM); err != nil {
		t.Fatal(err)
	}
	if err := l.Stake(ctx, nodeAcct, ledger.RoleNode, 10_000*ledger.GYM); err != nil {
		t.Fatal(err)
	}
	if id := register(t, conn); id != node {
		t.Fatalf("registered %s, want %s", id, node)
	}

	// hanzod's own ledger decides the slash (its stake there), the mirror
	// sends it to the chain.
	oc := pb.NewOrchestratorServiceClient(conn)
	if _, err := oc.Deposit(ctx, &pb.LedgerRequest{Account: node, Amount: 10_000 * uint64(ledger.GYM)}); err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Bond(ctx, &pb.LedgerRequest{Account: node, Amount: 10_000 * uint64(ledger.GYM)}); err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Slash(ctx, &pb.SlashRequest{Node: node, Reason: "test", Evidence: []byte("proof")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := l.Position(ctx, nodeAcct)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Slashes) == 1 {
			if p.Slashes[0].EvidenceHash != ledger.Keccak256([]byte("proof")) || p.Bonded != 9_500*ledger.GYM {
				t.Fatalf("slash on chain %+v", p)
			}
			break
		}
		if time.Now().After(deadline) {
			st, _ := d.ChainStatus()
			t.Fatalf("the slash did not reach the chain: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + d.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `gym_hanzod_chain_operations_total{kind="slashed"} 1`) {
		t.Fatalf("metrics:\n%s", body)
	}
}
