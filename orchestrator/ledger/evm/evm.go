// Package evm is the chain-backed ledger.Book: stake, locks, slashes,
// epoch rewards and publication records kept by the GYMToken, MiningPool
// and PublicationRegistry contracts on an EVM chain (docs/chain.md), so
// anyone can check them. It passes the same conformance suite as the
// in-memory ledger.Twin (orchestrator/ledger/ledgertest).
//
// The orchestrator's key sends what an authorised orchestrator does
// (deposits as mints, locks, slashes, payments, publications); staking,
// unbonding and withdrawing are the staker's own transactions, sent only for
// accounts whose key the Directory holds (a dev chain's workers).
package evm

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"sync"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/contracts"
	"github.com/zooai/gym/orchestrator/ledger"
)

// Directory maps ledger accounts to chain accounts.
type Directory interface {
	// Address is the account's Ethereum address.
	Address(account string) (common.Address, error)
	// Key is the account's key when the ledger may send its transactions.
	Key(account string) (*ecdsa.PrivateKey, bool)
}

// Keyring is a Directory: named accounts with their keys, and any
// 0x-address as an account of its own (without a key).
type Keyring struct {
	mu   sync.Mutex
	keys map[string]*ecdsa.PrivateKey
}

// Add names key's account.
func (k *Keyring) Add(account string, key *ecdsa.PrivateKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[string]*ecdsa.PrivateKey{}
	}
	k.keys[account] = key
}

func (k *Keyring) Key(account string) (*ecdsa.PrivateKey, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.keys[account]
	return key, ok
}

func (k *Keyring) Address(account string) (common.Address, error) {
	if key, ok := k.Key(account); ok {
		return chain.Address(key), nil
	}
	a, err := chain.ParseAddress(account)
	if err != nil {
		return common.Address{}, fmt.Errorf("%w: %q is neither a named account nor an address: %v", ledger.ErrAccount, account, err)
	}
	return a, nil
}

// Config is what New needs.
type Config struct {
	Client    *chain.Client
	Addresses chain.Addresses
	// Key is the authorised orchestrator's (nil: a read-only ledger, whose
	// writes fail with ErrUnauthorized).
	Key      *ecdsa.PrivateKey
	Accounts Directory
	// MaxBatch bounds the members of one lock or unlock transaction
	// (0: 32, which stays under the 2^24 gas cap on every fork measured).
	MaxBatch int
}

// Ledger is the chain-backed Book.
type Ledger struct {
	cfg  Config
	me   common.Address
	tok  *contracts.GYMToken
	pool *contracts.MiningPool
	reg  *contracts.PublicationRegistry
}

var _ ledger.Book = (*Ledger)(nil)

// New binds the contracts at cfg.Addresses after checking that the
// endpoint is their chain and that code is deployed there.
func New(ctx context.Context, cfg Config) (*Ledger, error) {
	if cfg.Client == nil || cfg.Accounts == nil {
		return nil, errors.New("evm: client and accounts are required")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 32
	}
	a := cfg.Addresses
	if cfg.Client.ChainID.Uint64() != a.ChainID {
		return nil, fmt.Errorf("evm: the endpoint is chain %d, the contracts are on %d", cfg.Client.ChainID, a.ChainID)
	}
	for name, addr := range map[string]common.Address{"GYMToken": a.GYMToken, "MiningPool": a.MiningPool, "PublicationRegistry": a.PublicationRegistry} {
		code, err := cfg.Client.B.CodeAt(ctx, addr, nil)
		if err != nil {
			return nil, fmt.Errorf("evm: code of %s: %w", name, err)
		}
		if len(code) == 0 {
			return nil, fmt.Errorf("evm: no %s deployed at %s on chain %d", name, addr, a.ChainID)
		}
	}
	l := &Ledger{cfg: cfg}
	if cfg.Key != nil {
		l.me = chain.Address(cfg.Key)
	}
	var err error
	if l.tok, err = contracts.NewGYMToken(a.GYMToken, cfg.Client.B); err != nil {
		return nil, err
	}
	if l.pool, err = contracts.NewMiningPool(a.MiningPool, cfg.Client.B); err != nil {
		return nil, err
	}
	if l.reg, err = contracts.NewPublicationRegistry(a.PublicationRegistry, cfg.Client.B); err != nil {
		return nil, err
	}
	if tr, err := l.tok.Treasury(l.call(ctx)); err != nil || tr != a.MiningPool {
		return nil, fmt.Errorf("evm: GYMToken's treasury is %s, not the MiningPool %s (%v)", tr, a.MiningPool, err)
	}
	return l, nil
}

// Orchestrator is the address the ledger sends as.
func (l *Ledger) Orchestrator() common.Address { return l.me }

// IsOrchestrator reports whether the ledger's key may slash, lock and pay.
func (l *Ledger) IsOrchestrator(ctx context.Context) (bool, error) {
	return l.tok.IsOrchestrator(l.call(ctx), l.me)
}

// IsStaked reports whether the account may serve in role now (staked at
// least the role's minimum for it, not banned): what hanzod checks before
// admitting a node.
func (l *Ledger) IsStaked(ctx context.Context, account string, role ledger.Role) (bool, error) {
	a, err := l.cfg.Accounts.Address(account)
	if err != nil {
		return false, err
	}
	return l.tok.IsStaked(l.call(ctx), a, uint8(role))
}

func (l *Ledger) call(ctx context.Context) *bind.CallOpts { return &bind.CallOpts{Context: ctx} }

// errorOf maps the contracts' errors to the ledger's sentinels.
var errorOf = map[string]error{
	"ZeroAmount":                       ledger.ErrAmount,
	"UnknownRole":                      ledger.ErrRole,
	"RoleMismatch":                     ledger.ErrRole,
	"StakeBelowMinimum":                ledger.ErrBelowMinimum,
	"InsufficientStake":                ledger.ErrInsufficient,
	"ERC20InsufficientBalance":         ledger.ErrInsufficient,
	"PoolUnderfunded":                  ledger.ErrInsufficient,
	"StakeLocked":                      ledger.ErrLocked,
	"NothingToWithdraw":                ledger.ErrNothing,
	"NothingToSlash":                   ledger.ErrNothing,
	"AccountBanned":                    ledger.ErrBanned,
	"NotOrchestrator":                  ledger.ErrUnauthorized,
	"AccessControlUnauthorizedAccount": ledger.ErrUnauthorized,
	"SlashPlanMismatch":                ledger.ErrInvariant,
	"NoTreasury":                       ledger.ErrInvariant,
	"EpochAlreadyPaid":                 ledger.ErrAlreadyPaid,
	"AlreadyPublished":                 ledger.ErrAlreadyPublished,
	"EmptyCID":                         ledger.ErrPublication,
	"BadSignatureLength":               ledger.ErrPublication,
	"LengthMismatch":                   ledger.ErrAccount,
	"ZeroAddress":                      ledger.ErrAccount,
}

func mapErr(err error) error {
	var r *chain.Revert
	if errors.As(err, &r) {
		if s, ok := errorOf[r.Name]; ok {
			return fmt.Errorf("%w: %w", s, err)
		}
	}
	return err
}

func (l *Ledger) send(ctx context.Context, key *ecdsa.PrivateKey, f func(*bind.TransactOpts) (*types.Transaction, error)) (*types.Receipt, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: a read-only chain ledger (no key)", ledger.ErrUnauthorized)
	}
	r, err := l.cfg.Client.Transact(ctx, key, f)
	return r, mapErr(err)
}

func big64(a ledger.Amount) *big.Int { return new(big.Int).SetUint64(uint64(a)) }

func amount(b *big.Int) (ledger.Amount, error) {
	if b.Sign() < 0 || !b.IsUint64() {
		return 0, fmt.Errorf("%w: %s micro-GYM", ledger.ErrOverflow, b)
	}
	return ledger.Amount(b.Uint64()), nil
}

func (l *Ledger) address(account string) (common.Address, error) {
	if account == ledger.Treasury {
		return l.cfg.Addresses.MiningPool, nil
	}
	return l.cfg.Accounts.Address(account)
}

func (l *Ledger) own(account string) (*ecdsa.PrivateKey, error) {
	k, ok := l.cfg.Accounts.Key(account)
	if !ok {
		return nil, fmt.Errorf("%w: no key for %q: a staker signs its own stake, unbond and withdraw", ledger.ErrUnauthorized, account)
	}
	return k, nil
}

func (l *Ledger) Deposit(ctx context.Context, account string, amt ledger.Amount) error {
	to, err := l.address(account)
	if err != nil {
		return err
	}
	_, err = l.send(ctx, l.cfg.Key, func(o *bind.TransactOpts) (*types.Transaction, error) { return l.tok.Mint(o, to, big64(amt)) })
	return err
}

func (l *Ledger) Stake(ctx context.Context, account string, role ledger.Role, amt ledger.Amount) error {
	k, err := l.own(account)
	if err != nil {
		return err
	}
	_, err = l.send(ctx, k, func(o *bind.TransactOpts) (*types.Transaction, error) { return l.tok.Stake(o, uint8(role), big64(amt)) })
	return err
}

func (l *Ledger) Unbond(ctx context.Context, account string, amt ledger.Amount) error {
	k, err := l.own(account)
	if err != nil {
		return err
	}
	_, err = l.send(ctx, k, func(o *bind.TransactOpts) (*types.Transaction, error) { return l.tok.Unbond(o, big64(amt)) })
	return err
}

func (l *Ledger) Withdraw(ctx context.Context, account string) (ledger.Amount, error) {
	k, err := l.own(account)
	if err != nil {
		return 0, err
	}
	r, err := l.send(ctx, k, l.tok.Withdraw)
	if err != nil {
		return 0, err
	}
	for _, lg := range r.Logs {
		if ev, err := l.tok.ParseWithdrawn(*lg); err == nil {
			return amount(ev.Amount)
		}
	}
	return 0, fmt.Errorf("evm: withdraw %s: no Withdrawn event", r.TxHash)
}

func (l *Ledger) members(accounts []string) ([]common.Address, error) {
	out := make([]common.Address, len(accounts))
	for i, a := range accounts {
		var err error
		if out[i], err = l.cfg.Accounts.Address(a); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (l *Ledger) batches(ctx context.Context, job string, accounts []string,
	f func(*bind.TransactOpts, [32]byte, []common.Address) (*types.Transaction, error)) error {
	m, err := l.members(accounts)
	if err != nil {
		return err
	}
	key := chain.JobKey(job)
	for len(m) > 0 {
		n := min(len(m), l.cfg.MaxBatch)
		batch := m[:n]
		if _, err := l.send(ctx, l.cfg.Key, func(o *bind.TransactOpts) (*types.Transaction, error) { return f(o, key, batch) }); err != nil {
			return err
		}
		m = m[n:]
	}
	return nil
}

func (l *Ledger) Lock(ctx context.Context, job string, accounts []string) error {
	return l.batches(ctx, job, accounts, l.tok.Lock)
}

func (l *Ledger) Unlock(ctx context.Context, job string, accounts []string) error {
	return l.batches(ctx, job, accounts, l.tok.Unlock)
}

func (l *Ledger) Slash(ctx context.Context, account string, evidence []byte) (ledger.SlashRecord, error) {
	a, err := l.cfg.Accounts.Address(account)
	if err != nil {
		return ledger.SlashRecord{}, err
	}
	if banned, err := l.tok.Banned(l.call(ctx), a); err != nil {
		return ledger.SlashRecord{}, err
	} else if banned {
		return ledger.SlashRecord{}, ledger.ErrBanned
	}
	pct, err := l.tok.NextSlashPct(l.call(ctx), a)
	if err != nil {
		return ledger.SlashRecord{}, err
	}
	r, err := l.send(ctx, l.cfg.Key, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return l.tok.Slash(o, a, pct, l.me, evidence)
	})
	if err != nil {
		return ledger.SlashRecord{}, err
	}
	for _, lg := range r.Logs {
		if ev, err := l.tok.ParseSlashed(*lg); err == nil {
			amt, err := amount(ev.Amount)
			if err != nil {
				return ledger.SlashRecord{}, err
			}
			return ledger.SlashRecord{Offence: int(ev.Offence), Pct: int(ev.Pct), Amount: amt, Banned: ev.Banned, EvidenceHash: ev.EvidenceHash}, nil
		}
	}
	return ledger.SlashRecord{}, fmt.Errorf("evm: slash %s: no Slashed event", r.TxHash)
}

func (l *Ledger) PayEpoch(ctx context.Context, job string, epoch uint64, payouts []ledger.Payout) error {
	key := chain.JobKey(job)
	if paid, err := l.pool.Paid(l.call(ctx), key, epoch); err != nil {
		return err
	} else if paid {
		return fmt.Errorf("%w: %s epoch %d", ledger.ErrAlreadyPaid, job, epoch)
	}
	workers := make([]common.Address, len(payouts))
	amounts := make([]*big.Int, len(payouts))
	for i, p := range payouts {
		var err error
		if workers[i], err = l.cfg.Accounts.Address(p.ID); err != nil {
			return err
		}
		amounts[i] = big64(p.Amount)
	}
	_, err := l.send(ctx, l.cfg.Key, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return l.pool.DistributeEpochRewards(o, key, epoch, workers, amounts)
	})
	return err
}

func (l *Ledger) Publish(ctx context.Context, p ledger.Publication) error {
	if err := p.Check(); err != nil {
		return err
	}
	_, err := l.send(ctx, l.cfg.Key, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return l.reg.RecordPublication(o, chain.JobKey(p.Job), p.Epoch, p.CID, p.WeightsCID, p.HubRepo, [32]byte(p.Signer), p.Signature)
	})
	return err
}

func (l *Ledger) Publication(ctx context.Context, job string, epoch uint64) (ledger.Publication, bool, error) {
	r, err := l.reg.Publication(l.call(ctx), chain.JobKey(job), epoch)
	if err != nil {
		return ledger.Publication{}, false, err
	}
	if r.Cid == "" {
		return ledger.Publication{}, false, nil
	}
	return ledger.Publication{Job: job, Epoch: epoch, CID: r.Cid, WeightsCID: r.WeightsCid, HubRepo: r.HubRepo,
		Signer: r.Signer[:], Signature: r.Signature}, true, nil
}

func (l *Ledger) Position(ctx context.Context, account string) (ledger.Position, error) {
	a, err := l.cfg.Accounts.Address(account)
	if err != nil {
		return ledger.Position{}, err
	}
	c := l.call(ctx)
	var p ledger.Position
	bal, err := l.tok.BalanceOf(c, a)
	if err != nil {
		return p, err
	}
	st, err := l.tok.Stakes(c, a)
	if err != nil {
		return p, err
	}
	if p.Free, err = amount(bal); err != nil {
		return p, err
	}
	if p.Bonded, err = amount(st); err != nil {
		return p, err
	}
	role, err := l.tok.RoleOf(c, a)
	if err != nil {
		return p, err
	}
	p.Role = ledger.Role(role)
	locks, err := l.tok.Locks(c, a)
	if err != nil {
		return p, err
	}
	p.Locks = int(locks)
	if p.Banned, err = l.tok.Banned(c, a); err != nil {
		return p, err
	}
	ub, err := l.tok.UnbondingOf(c, a)
	if err != nil {
		return p, err
	}
	for _, u := range ub {
		amt, err := amount(u.Amount)
		if err != nil {
			return p, err
		}
		p.Unbonding = append(p.Unbonding, ledger.Unbonding{Amount: amt, ReleaseAt: int64(u.ReleaseAt) * 1000})
	}
	sl, err := l.tok.SlashesOf(c, a)
	if err != nil {
		return p, err
	}
	for _, s := range sl {
		amt, err := amount(s.Amount)
		if err != nil {
			return p, err
		}
		p.Slashes = append(p.Slashes, ledger.SlashRecord{Offence: int(s.Offence), Pct: int(s.Pct), Amount: amt,
			Banned: s.Pct == 100, EvidenceHash: s.EvidenceHash})
	}
	return p, nil
}

func (l *Ledger) Treasury(ctx context.Context) (ledger.Amount, error) {
	b, err := l.tok.BalanceOf(l.call(ctx), l.cfg.Addresses.MiningPool)
	if err != nil {
		return 0, err
	}
	return amount(b)
}

// NodeAccount is the account a node (hanzod's node id: its Ed25519 public
// key in hex) bound to itself on chain (chain.NodeAccount: the latest
// GYMToken.bindNode whose Ed25519 signature verifies off chain), as a
// 0x-address; ok is false when the node has bound none.
func (l *Ledger) NodeAccount(ctx context.Context, node string) (string, bool, error) {
	pub, err := hex.DecodeString(node)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return "", false, nil // not a node id: no binding
	}
	a, ok, err := chain.NodeAccount(ctx, l.cfg.Client.B, l.cfg.Addresses, pub)
	if err != nil || !ok {
		return "", false, err
	}
	return a.Hex(), true, nil
}
