package evm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zooai/gym/chain/chaintest"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/ledger/evm"
	"github.com/zooai/gym/orchestrator/ledger/ledgertest"
)

const delay = 14 * 24 * time.Hour

func open(t *testing.T) (*chaintest.Sim, *evm.Ledger, *evm.Keyring) {
	t.Helper()
	sim := chaintest.New(t, 9, delay)
	kr := &evm.Keyring{}
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		kr.Add(name, sim.Keys[i+1])
	}
	l, err := evm.New(context.Background(), evm.Config{Client: sim.Client, Addresses: sim.Deployment.Addresses, Key: sim.Keys[0], Accounts: kr})
	if err != nil {
		t.Fatal(err)
	}
	return sim, l, kr
}

// The chain ledger passes the suite the in-memory twin passes.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
		sim, l, _ := open(t)
		return ledgertest.Harness{Book: l, Delay: delay, Advance: func(t *testing.T, d time.Duration) { sim.Advance(t, d) }}
	})
}

func TestStakeCheckAndKeys(t *testing.T) {
	ctx := context.Background()
	sim, l, _ := open(t)
	if ok, err := l.IsOrchestrator(ctx); err != nil || !ok {
		t.Fatalf("orchestrator %v %v", ok, err)
	}
	if ok, _ := l.IsStaked(ctx, "a", ledger.RoleNode); ok {
		t.Fatal("a staked before staking")
	}
	if err := l.Deposit(ctx, "a", 10_000*ledger.GYM); err != nil {
		t.Fatal(err)
	}
	if err := l.Stake(ctx, "a", ledger.RoleNode, 10_000*ledger.GYM); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.IsStaked(ctx, "a", ledger.RoleNode); err != nil || !ok {
		t.Fatalf("a staked %v %v", ok, err)
	}
	// An address without a key: readable, payable, not stakeable by hanzod.
	stranger := "0x00000000000000000000000000000000000000aa"
	if err := l.Stake(ctx, stranger, ledger.RoleNode, 1); !errors.Is(err, ledger.ErrUnauthorized) {
		t.Fatalf("stake for a keyless account: %v", err)
	}
	if err := l.Deposit(ctx, stranger, 5); err != nil {
		t.Fatal(err)
	}
	if p, err := l.Position(ctx, stranger); err != nil || p.Free != 5 {
		t.Fatalf("stranger %+v %v", p, err)
	}
	if _, err := l.Position(ctx, "nobody"); !errors.Is(err, ledger.ErrAccount) {
		t.Fatalf("unknown account: %v", err)
	}
	// Another key is not an authorised orchestrator.
	other, err := evm.New(ctx, evm.Config{Client: sim.Client, Addresses: sim.Deployment.Addresses, Key: sim.Keys[1], Accounts: &evm.Keyring{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Slash(ctx, sim.Deployment.Addresses.Orchestrator.Hex(), []byte("x")); !errors.Is(err, ledger.ErrUnauthorized) {
		t.Fatalf("slash by a stranger: %v", err)
	}
	// Wrong addresses: refused at New.
	bad := sim.Deployment.Addresses
	bad.MiningPool = bad.PublicationRegistry
	if _, err := evm.New(ctx, evm.Config{Client: sim.Client, Addresses: bad, Key: sim.Keys[0], Accounts: &evm.Keyring{}}); err == nil {
		t.Fatal("a registry accepted as the pool")
	}
}
