package chaintest_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/chaintest"
	"github.com/zooai/gym/chain/contracts"
)

const gym = 1_000_000

var ctx = context.Background()

type env struct {
	*chaintest.Sim
	tok  *contracts.GYMToken
	pool *contracts.MiningPool
	reg  *contracts.PublicationRegistry
}

const delay = 14 * 24 * time.Hour

func newEnv(t *testing.T, n int) *env { t.Helper(); return newEnvFork(t, n, "") }

func newEnvFork(t *testing.T, n int, fork string) *env {
	t.Helper()
	s := chaintest.NewFork(t, n, delay, fork)
	a := s.Deployment.Addresses
	tok, err := contracts.NewGYMToken(a.GYMToken, s.Client.B)
	must(t, err)
	pool, err := contracts.NewMiningPool(a.MiningPool, s.Client.B)
	must(t, err)
	reg, err := contracts.NewPublicationRegistry(a.PublicationRegistry, s.Client.B)
	must(t, err)
	return &env{s, tok, pool, reg}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) tx(t *testing.T, k *ecdsa.PrivateKey, send func(*bind.TransactOpts) (*types.Transaction, error)) *types.Receipt {
	t.Helper()
	r, err := e.Client.Transact(ctx, k, send)
	must(t, err)
	return r
}

// reverts checks that the transaction is refused with the named error.
func (e *env) reverts(t *testing.T, name string, k *ecdsa.PrivateKey, send func(*bind.TransactOpts) (*types.Transaction, error)) *chain.Revert {
	t.Helper()
	_, err := e.Client.Transact(ctx, k, send)
	var r *chain.Revert
	if !errors.As(err, &r) || r.Name != name {
		t.Fatalf("error %v, want revert %s", err, name)
	}
	return r
}

func (e *env) mint(t *testing.T, to common.Address, amt uint64) {
	t.Helper()
	e.tx(t, e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.Mint(o, to, new(big.Int).SetUint64(amt))
	})
}

func (e *env) stake(role uint8, amt uint64) func(*bind.TransactOpts) (*types.Transaction, error) {
	return func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.Stake(o, role, new(big.Int).SetUint64(amt))
	}
}

func (e *env) unbond(amt uint64) func(*bind.TransactOpts) (*types.Transaction, error) {
	return func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.Unbond(o, new(big.Int).SetUint64(amt))
	}
}

func (e *env) withdraw(o *bind.TransactOpts) (*types.Transaction, error) { return e.tok.Withdraw(o) }

func (e *env) stakes(t *testing.T, a common.Address) uint64 {
	t.Helper()
	s, err := e.tok.Stakes(nil, a)
	must(t, err)
	return s.Uint64()
}

func (e *env) balance(t *testing.T, a common.Address) uint64 {
	t.Helper()
	s, err := e.tok.BalanceOf(nil, a)
	must(t, err)
	return s.Uint64()
}

func TestMinimums(t *testing.T) {
	e := newEnv(t, 2)
	k := e.Keys[1]
	a := chain.Address(k)
	e.mint(t, a, 100_000*gym)
	for _, c := range []struct {
		role uint8
		min  uint64
	}{{chain.RoleNode, 10_000 * gym}, {chain.RoleValidator, 25_000 * gym}, {chain.RoleOrchestrator, 50_000 * gym}} {
		got, err := e.tok.MinimumStake(nil, c.role)
		must(t, err)
		if got.Uint64() != c.min {
			t.Fatalf("minimum of role %d: %d, want %d", c.role, got, c.min)
		}
		r := e.reverts(t, "StakeBelowMinimum", k, e.stake(c.role, c.min-1))
		if r.Args[0].(*big.Int).Uint64() != c.min-1 || r.Args[1].(*big.Int).Uint64() != c.min {
			t.Fatalf("revert arguments %v", r.Args)
		}
	}
	e.reverts(t, "UnknownRole", k, e.stake(4, 50_000*gym))
	e.reverts(t, "ZeroAmount", k, e.stake(chain.RoleNode, 0))
	e.reverts(t, "ERC20InsufficientBalance", e.Keys[1], e.stake(chain.RoleNode, 100_001*gym))
	rc := e.tx(t, k, e.stake(chain.RoleNode, 10_000*gym))
	ev, err := e.tok.ParseStaked(*rc.Logs[len(rc.Logs)-1])
	must(t, err)
	if ev.Account != a || ev.Role != chain.RoleNode || ev.Amount.Uint64() != 10_000*gym || ev.Total.Uint64() != 10_000*gym {
		t.Fatalf("Staked event %+v", ev)
	}
	e.reverts(t, "RoleMismatch", k, e.stake(chain.RoleValidator, 25_000*gym))
	if ok, _ := e.tok.IsStaked(nil, a, chain.RoleNode); !ok || e.stakes(t, a) != 10_000*gym || e.balance(t, a) != 90_000*gym {
		t.Fatalf("staked %v, stakes %d, balance %d", ok, e.stakes(t, a), e.balance(t, a))
	}
	if ok, _ := e.tok.IsStaked(nil, a, chain.RoleValidator); ok {
		t.Fatal("a node counts as a validator")
	}
}

func TestUnbonding(t *testing.T) {
	e := newEnv(t, 2)
	k := e.Keys[1]
	a := chain.Address(k)
	e.mint(t, a, 30_000*gym)
	e.tx(t, k, e.stake(chain.RoleNode, 30_000*gym))
	e.reverts(t, "StakeBelowMinimum", k, e.unbond(25_000*gym))
	e.reverts(t, "InsufficientStake", k, e.unbond(30_000*gym+1))
	rc := e.tx(t, k, e.unbond(20_000*gym))
	ev, err := e.tok.ParseUnbonded(*rc.Logs[0])
	must(t, err)
	head, err := e.Client.B.HeaderByNumber(ctx, rc.BlockNumber)
	must(t, err)
	if ev.Amount.Uint64() != 20_000*gym || ev.ReleaseAt != head.Time+uint64(delay/time.Second) {
		t.Fatalf("Unbonded event %+v, block time %d", ev, head.Time)
	}
	e.reverts(t, "NothingToWithdraw", k, e.withdraw)
	e.Advance(t, delay-time.Minute)
	e.reverts(t, "NothingToWithdraw", k, e.withdraw)
	e.Advance(t, time.Minute)
	rc = e.tx(t, k, e.withdraw)
	if w, err := e.tok.ParseWithdrawn(*rc.Logs[len(rc.Logs)-1]); err != nil || w.Amount.Uint64() != 20_000*gym {
		t.Fatalf("Withdrawn %+v %v", w, err)
	}
	if e.balance(t, a) != 20_000*gym || e.stakes(t, a) != 10_000*gym {
		t.Fatalf("balance %d stake %d", e.balance(t, a), e.stakes(t, a))
	}
	if u, _ := e.tok.UnbondingOf(nil, a); len(u) != 0 {
		t.Fatalf("unbonding left %+v", u)
	}
}

func TestLocks(t *testing.T) {
	e := newEnv(t, 3)
	k := e.Keys[1]
	a := chain.Address(k)
	e.mint(t, a, 20_000*gym)
	e.tx(t, k, e.stake(chain.RoleNode, 20_000*gym))
	job := chain.JobKey("job-1")
	lock := func(o *bind.TransactOpts) (*types.Transaction, error) { return e.tok.Lock(o, job, []common.Address{a}) }
	unlock := func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.Unlock(o, job, []common.Address{a})
	}
	e.reverts(t, "NotOrchestrator", e.Keys[2], lock)
	e.reverts(t, "NotOrchestrator", k, lock) // not even for itself
	rc := e.tx(t, e.Keys[0], lock)
	if ev, err := e.tok.ParseLocked(*rc.Logs[0]); err != nil || ev.Job != job || ev.Account != a {
		t.Fatalf("Locked %+v %v", ev, err)
	}
	if rc := e.tx(t, e.Keys[0], lock); len(rc.Logs) != 0 {
		t.Fatal("a second lock for the same job counted again")
	}
	r := e.reverts(t, "StakeLocked", k, e.unbond(20_000*gym))
	if r.Args[1].(uint32) != 1 {
		t.Fatalf("StakeLocked %v", r.Args)
	}
	e.reverts(t, "NotOrchestrator", k, unlock)
	e.tx(t, e.Keys[0], unlock)
	e.tx(t, k, e.unbond(20_000*gym))
}

func TestProgressiveSlash(t *testing.T) {
	e := newEnv(t, 3)
	k := e.Keys[1]
	a := chain.Address(k)
	reporter := chain.Address(e.Keys[0])
	e.mint(t, a, 20_000*gym)
	e.tx(t, k, e.stake(chain.RoleNode, 16_000*gym))
	e.tx(t, k, e.unbond(4_000*gym))
	slash := func(pct uint8, ev []byte) func(*bind.TransactOpts) (*types.Transaction, error) {
		return func(o *bind.TransactOpts) (*types.Transaction, error) { return e.tok.Slash(o, a, pct, reporter, ev) }
	}
	e.reverts(t, "NotOrchestrator", e.Keys[2], slash(5, []byte("x")))
	e.reverts(t, "SlashPlanMismatch", e.Keys[0], slash(25, []byte("x")))
	pool := e.Deployment.Addresses.MiningPool
	for i, w := range []struct {
		pct    uint8
		amount uint64
		ban    bool
	}{{5, 800 * gym, false}, {25, 3_800 * gym, false}, {100, 11_400 * gym, true}} {
		evidence := bytes.Repeat([]byte{byte(i)}, 100)
		if p, _ := e.tok.NextSlashPct(nil, a); p != w.pct {
			t.Fatalf("offence %d: planned %d%%, want %d%%", i+1, p, w.pct)
		}
		rc := e.tx(t, e.Keys[0], slash(w.pct, evidence))
		ev, err := e.tok.ParseSlashed(*rc.Logs[len(rc.Logs)-1])
		must(t, err)
		if ev.Node != a || int(ev.Offence) != i+1 || ev.Pct != w.pct || ev.Amount.Uint64() != w.amount || ev.Reporter != reporter ||
			ev.EvidenceHash != crypto.Keccak256Hash(evidence) || ev.Banned != w.ban {
			t.Fatalf("offence %d: Slashed %+v", i+1, ev)
		}
	}
	recs, err := e.tok.SlashesOf(nil, a)
	must(t, err)
	if len(recs) != 3 || recs[2].Amount.Uint64() != 11_400*gym || recs[0].EvidenceHash != crypto.Keccak256Hash(bytes.Repeat([]byte{0}, 100)) || recs[1].Reporter != reporter {
		t.Fatalf("records %+v", recs)
	}
	if b, _ := e.tok.Banned(nil, a); !b || e.stakes(t, a) != 0 || e.balance(t, pool) != 16_000*gym || e.balance(t, a) != 4_000*gym {
		t.Fatalf("banned %v stake %d pool %d balance %d", b, e.stakes(t, a), e.balance(t, pool), e.balance(t, a))
	}
	e.reverts(t, "AccountBanned", e.Keys[0], slash(100, nil))
	e.reverts(t, "AccountBanned", k, e.stake(chain.RoleNode, 10_000*gym))
	e.reverts(t, "NothingToSlash", e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.Slash(o, chain.Address(e.Keys[2]), 5, reporter, nil)
	})
}

func TestOnlyOrchestrator(t *testing.T) {
	e := newEnv(t, 3)
	k := e.Keys[1]
	a := chain.Address(k)
	if ok, _ := e.tok.IsOrchestrator(nil, chain.Address(e.Keys[0])); !ok {
		t.Fatal("the deployer is not an authorised orchestrator")
	}
	e.reverts(t, "AccessControlUnauthorizedAccount", k, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.Mint(o, a, big.NewInt(1))
	})
	// Staked as an orchestrator without the role: not authorised.
	e.mint(t, a, 60_000*gym)
	e.tx(t, k, e.stake(chain.RoleOrchestrator, 50_000*gym))
	pay := func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.pool.DistributeEpochRewards(o, chain.JobKey("j"), 1, nil, nil)
	}
	e.reverts(t, "NotOrchestrator", k, pay)
	e.reverts(t, "AccessControlUnauthorizedAccount", k, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.GrantRole(o, chain.JobKey("ORCHESTRATOR_ROLE"), a)
	})
	// The role without enough stake: not authorised either.
	e.tx(t, e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.GrantRole(o, chain.JobKey("ORCHESTRATOR_ROLE"), a)
	})
	e.tx(t, k, pay) // role and stake: authorised
	e.tx(t, k, e.unbond(50_000*gym))
	e.reverts(t, "NotOrchestrator", k, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.pool.DistributeEpochRewards(o, chain.JobKey("j"), 2, nil, nil)
	})
}

func TestRewards(t *testing.T) {
	e := newEnv(t, 4)
	w := []common.Address{chain.Address(e.Keys[1]), chain.Address(e.Keys[2])}
	pay := func(epoch uint64, amounts ...uint64) func(*bind.TransactOpts) (*types.Transaction, error) {
		return func(o *bind.TransactOpts) (*types.Transaction, error) {
			var am []*big.Int
			for _, x := range amounts {
				am = append(am, new(big.Int).SetUint64(x))
			}
			return e.pool.DistributeEpochRewards(o, chain.JobKey("job-1"), epoch, w[:len(amounts)], am)
		}
	}
	pool := e.Deployment.Addresses.MiningPool
	e.mint(t, pool, 1_000*gym)
	r := e.reverts(t, "PoolUnderfunded", e.Keys[0], pay(1, 600*gym, 401*gym))
	if r.Args[0].(*big.Int).Uint64() != 1_001*gym || r.Args[1].(*big.Int).Uint64() != 1_000*gym {
		t.Fatalf("PoolUnderfunded %v", r.Args)
	}
	e.reverts(t, "NotOrchestrator", e.Keys[3], pay(1, 600*gym, 300*gym))
	e.reverts(t, "LengthMismatch", e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.pool.DistributeEpochRewards(o, chain.JobKey("job-1"), 1, w, []*big.Int{big.NewInt(1)})
	})
	rc := e.tx(t, e.Keys[0], pay(1, 600*gym, 300*gym))
	ev, err := e.pool.ParseEpochRewardsDistributed(*rc.Logs[len(rc.Logs)-1])
	must(t, err)
	if ev.Job != chain.JobKey("job-1") || ev.Epoch != 1 || ev.Workers.Uint64() != 2 || ev.Total.Uint64() != 900*gym {
		t.Fatalf("EpochRewardsDistributed %+v", ev)
	}
	if tr, err := e.tok.ParseTransfer(*rc.Logs[0]); err != nil || tr.From != pool || tr.To != w[0] || tr.Value.Uint64() != 600*gym {
		t.Fatalf("Transfer %+v %v", tr, err)
	}
	e.reverts(t, "EpochAlreadyPaid", e.Keys[0], pay(1, 1))
	if paid, _ := e.pool.Paid(nil, chain.JobKey("job-1"), 1); !paid {
		t.Fatal("epoch 1 not marked paid")
	}
	e.tx(t, e.Keys[0], pay(2, 50*gym, 50*gym))
	if e.balance(t, w[0]) != 650*gym || e.balance(t, w[1]) != 350*gym || e.balance(t, pool) != 0 {
		t.Fatalf("balances %d %d pool %d", e.balance(t, w[0]), e.balance(t, w[1]), e.balance(t, pool))
	}
}

func TestPublication(t *testing.T) {
	e := newEnv(t, 2)
	pub, priv, err := ed25519.GenerateKey(nil)
	must(t, err)
	job := chain.JobKey("job-1")
	sig := ed25519.Sign(priv, []byte("record"))
	rec := func(epoch uint64, cid string, sig []byte) func(*bind.TransactOpts) (*types.Transaction, error) {
		return func(o *bind.TransactOpts) (*types.Transaction, error) {
			return e.reg.RecordPublication(o, job, epoch, cid, "bafkreiweights", "zooai/gym-test", [32]byte(pub), sig)
		}
	}
	e.reverts(t, "NotOrchestrator", e.Keys[1], rec(1, "bafyckpt", sig))
	e.reverts(t, "EmptyCID", e.Keys[0], rec(1, "", sig))
	e.reverts(t, "BadSignatureLength", e.Keys[0], rec(1, "bafyckpt", sig[:63]))
	rc := e.tx(t, e.Keys[0], rec(1, "bafyckpt", sig))
	ev, err := e.reg.ParsePublicationRecorded(*rc.Logs[0])
	must(t, err)
	if ev.Job != job || ev.Epoch != 1 || ev.Cid != "bafyckpt" || ev.WeightsCid != "bafkreiweights" || ev.HubRepo != "zooai/gym-test" ||
		ev.Signer != [32]byte(pub) || !bytes.Equal(ev.Signature, sig) {
		t.Fatalf("PublicationRecorded %+v", ev)
	}
	p, err := e.reg.Publication(nil, job, 1)
	must(t, err)
	if p.Cid != "bafyckpt" || p.WeightsCid != "bafkreiweights" || p.HubRepo != "zooai/gym-test" || p.Recorder != chain.Address(e.Keys[0]) ||
		!ed25519.Verify(p.Signer[:], []byte("record"), p.Signature) || p.RecordedAt == 0 {
		t.Fatalf("read back %+v", p)
	}
	e.reverts(t, "AlreadyPublished", e.Keys[0], rec(1, "bafyother", sig))
	if p, _ := e.reg.Publication(nil, job, 2); p.Cid != "" {
		t.Fatalf("record of an unpublished epoch %+v", p)
	}
}
