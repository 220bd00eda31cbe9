// Package chaintest runs Zoo Gym's contracts on go-ethereum's simulated
// backend (a real EVM in process) for tests: funded keys, the contracts
// deployed, every transaction mined at once, and a clock to move.
package chaintest

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/params"

	"github.com/zooai/gym/chain"
)

// Sim is a simulated chain with the contracts deployed by Keys[0], the
// authorised orchestrator (50,000 GYM staked).
type Sim struct {
	Backend    *simulated.Backend
	Client     *chain.Client
	Keys       []*ecdsa.PrivateKey
	Deployment chain.Deployment
}

// OrchestratorStake is what New stakes for Keys[0].
const OrchestratorStake = 50_000 * 1_000_000

// autoCommit mines every transaction as soon as it is sent.
type autoCommit struct {
	simulated.Client
	b *simulated.Backend
}

func (a autoCommit) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	if err := a.Client.SendTransaction(ctx, tx); err != nil {
		return err
	}
	a.b.Commit()
	return nil
}

// New starts a simulated chain with n funded keys (n ≥ 1) and deploys the
// contracts with unbonding delay. The chain runs every protocol change
// go-ethereum knows (its dev chain's rules).
func New(t testing.TB, n int, delay time.Duration) *Sim { return NewFork(t, n, delay, "") }

// Forks NewFork accepts: "" (go-ethereum's dev chain: every change, Bogota
// included) and "osaka" (Ethereum mainnet's rules since December 2025).
var Forks = []string{"", "osaka"}

// NewFork is New on the rules of fork.
func NewFork(t testing.TB, n int, delay time.Duration, fork string) *Sim {
	t.Helper()
	cfg := *params.AllDevChainProtocolChanges
	switch fork {
	case "":
	case "osaka":
		cfg.BogotaTime = nil
	default:
		t.Fatalf("chaintest: unknown fork %q", fork)
	}
	alloc := types.GenesisAlloc{}
	keys := make([]*ecdsa.PrivateKey, n)
	for i := range keys {
		k, err := crypto.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
		alloc[crypto.PubkeyToAddress(k.PublicKey)] = types.Account{Balance: new(big.Int).Mul(big.NewInt(1000), big.NewInt(params.Ether))}
	}
	b := simulated.NewBackend(alloc, simulated.WithBlockGasLimit(60_000_000), func(_ *node.Config, e *ethconfig.Config) {
		e.Genesis.Config = &cfg
	})
	t.Cleanup(func() { b.Close() })
	c, err := chain.NewClient(context.Background(), autoCommit{b.Client(), b}, 1337)
	if err != nil {
		t.Fatal(err)
	}
	c.Poll = time.Millisecond
	d, err := chain.Deploy(context.Background(), c, keys[0], chain.DeployConfig{UnbondingDelay: delay, OrchestratorStake: OrchestratorStake})
	if err != nil {
		t.Fatal(err)
	}
	return &Sim{Backend: b, Client: c, Keys: keys, Deployment: d}
}

// Advance moves the chain's clock forward by d (a new empty block).
//
// The transaction pool drops a mined transaction from its pending set on a
// background goroutine after the block that includes it, and AdjustTime
// refuses while anything is pending without waiting for that; so Advance
// polls until the pool has caught up (a loaded machine can take a while),
// then fails if it never does.
func (s *Sim) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := s.Backend.AdjustTime(d)
		if err == nil {
			return
		}
		if err.Error() != "could not adjust time on non-empty block" || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// NewRPC starts a simulated chain serving JSON-RPC over HTTP on loopback,
// with keys funded, mining a block every 20 ms (empty ones too): a stand-in
// for a dev chain, for commands that dial a URL. Chain id 1337.
func NewRPC(t testing.TB, keys ...*ecdsa.PrivateKey) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	alloc := types.GenesisAlloc{}
	for _, k := range keys {
		alloc[crypto.PubkeyToAddress(k.PublicKey)] = types.Account{Balance: new(big.Int).Mul(big.NewInt(1000), big.NewInt(params.Ether))}
	}
	b := simulated.NewBackend(alloc, simulated.WithBlockGasLimit(60_000_000), func(n *node.Config, e *ethconfig.Config) {
		n.HTTPHost, n.HTTPPort, n.HTTPModules = "127.0.0.1", port, []string{"eth", "net", "web3"}
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				b.Commit()
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		b.Close()
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}
