// Package ledger is the orchestrator's embedded stake ledger: balances,
// bonded stake with an unbonding period, progressive slashing with the
// evidence kept, epoch rewards split 60 / 30 / 10, and the escrow a job's
// submitter funds its rewards from.
//
// The ledger is a pure value: no clock, no I/O. Time arrives as an argument
// (unix milliseconds) and every amount is an integer number of micro-GYM, so
// the same sequence of calls gives the same ledger on every machine.
//
// Conservation: tokens enter only through Mint (a deposit bridged from the
// chain or an emission the operator decided) and never leave; slashed stake
// and reward rounding dust go to the treasury account. Check verifies that
// the balances of all accounts plus the treasury equal the total minted.
package ledger

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"
)

// Amount is a quantity of micro-GYM (1 GYM = 1,000,000).
type Amount uint64

// GYM is one token in Amount units.
const GYM Amount = 1_000_000

// Treasury is the account that receives slashed stake and funds rewards.
const Treasury = "treasury"

// Sentinel errors. Every error returned by this package wraps one of them.
var (
	ErrInsufficient = errors.New("ledger: insufficient funds")
	ErrAmount       = errors.New("ledger: invalid amount")
	ErrBanned       = errors.New("ledger: account is banned")
	ErrAccount      = errors.New("ledger: invalid account")
	ErrNothing      = errors.New("ledger: nothing to withdraw")
	ErrOverflow     = errors.New("ledger: amount overflows")
	ErrInvariant    = errors.New("ledger: conservation invariant broken")
)

// Slash fractions in basis points for the first and second offence; the third
// takes everything and bans the account.
const (
	FirstSlashBP  = 500
	SecondSlashBP = 2500
)

// Unbonding is stake waiting for its release time. It can still be slashed.
type Unbonding struct {
	Amount    Amount `json:"amount"`
	ReleaseAt int64  `json:"release_at"`
}

// Slash is one recorded offence and what it cost.
type Slash struct {
	Offence  int    `json:"offence"` // 1, 2, 3…
	Amount   Amount `json:"amount"`
	At       int64  `json:"at"`
	Reason   string `json:"reason"`
	Evidence []byte `json:"evidence"`
}

// Account is one holder's position.
type Account struct {
	ID        string      `json:"id"`
	Free      Amount      `json:"free"`
	Bonded    Amount      `json:"bonded"`
	Unbonding []Unbonding `json:"unbonding,omitempty"`
	Slashes   []Slash     `json:"slashes,omitempty"`
	Banned    bool        `json:"banned,omitempty"`
	// Escrowed is what the account set aside to fund the rewards of the
	// jobs it submitted (Escrow); it pays their epochs (PayEscrow) and
	// the rest comes back when they end (Release). It is not stake: a
	// slash does not take it.
	Escrowed Amount `json:"escrowed,omitempty"`
}

// Unbonded is the sum of the account's unbonding entries.
func (a Account) Unbonded() Amount {
	var t Amount
	for _, u := range a.Unbonding {
		t += u.Amount
	}
	return t
}

// Total is everything the account holds.
func (a Account) Total() Amount { return a.Free + a.Bonded + a.Unbonded() + a.Escrowed }

// Ledger holds all accounts. The zero value is not usable; call New.
type Ledger struct {
	accounts map[string]*Account
	supply   Amount // total ever minted
	treasury Amount
}

// New returns an empty ledger.
func New() *Ledger { return &Ledger{accounts: map[string]*Account{}} }

// Supply is the total minted.
func (l *Ledger) Supply() Amount { return l.supply }

// TreasuryBalance is what the treasury holds.
func (l *Ledger) TreasuryBalance() Amount { return l.treasury }

// Account returns a copy of the account (the zero account if unknown).
func (l *Ledger) Account(id string) Account {
	a, ok := l.accounts[id]
	if !ok {
		return Account{ID: id}
	}
	c := *a
	c.Unbonding = append([]Unbonding(nil), a.Unbonding...)
	c.Slashes = append([]Slash(nil), a.Slashes...)
	return c
}

// Has reports whether the account exists: something was ever credited
// to it.
func (l *Ledger) Has(id string) bool {
	_, ok := l.accounts[id]
	return ok
}

// Bonded is the account's bonded stake.
func (l *Ledger) Bonded(id string) Amount {
	if a, ok := l.accounts[id]; ok {
		return a.Bonded
	}
	return 0
}

// Banned reports whether the account was banned by a third offence.
func (l *Ledger) Banned(id string) bool {
	a, ok := l.accounts[id]
	return ok && a.Banned
}

// LastSlashAt is the time of the latest slash, or false when none.
func (l *Ledger) LastSlashAt(id string) (int64, bool) {
	a, ok := l.accounts[id]
	if !ok || len(a.Slashes) == 0 {
		return 0, false
	}
	return a.Slashes[len(a.Slashes)-1].At, true
}

// IDs lists the accounts in sorted order.
func (l *Ledger) IDs() []string {
	ids := make([]string, 0, len(l.accounts))
	for id := range l.accounts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (l *Ledger) acct(id string) *Account {
	a, ok := l.accounts[id]
	if !ok {
		a = &Account{ID: id}
		l.accounts[id] = a
	}
	return a
}

func validID(id string) error {
	if id == "" || id == Treasury || len(id) > 128 {
		return fmt.Errorf("%w: %q (non-empty, at most 128 bytes, not %q)", ErrAccount, id, Treasury)
	}
	return nil
}

func add(a, b Amount) (Amount, error) {
	s, c := bits.Add64(uint64(a), uint64(b), 0)
	if c != 0 {
		return 0, ErrOverflow
	}
	return Amount(s), nil
}

// CheckMint reports whether Mint would succeed.
func (l *Ledger) CheckMint(id string, amt Amount) error {
	if id != Treasury {
		if err := validID(id); err != nil {
			return err
		}
	}
	if amt == 0 {
		return fmt.Errorf("%w: mint of zero", ErrAmount)
	}
	if _, err := add(l.supply, amt); err != nil {
		return err
	}
	return nil
}

// Mint creates amt in id's free balance (or the treasury). It is the only
// way tokens come into existence.
func (l *Ledger) Mint(id string, amt Amount) error {
	if err := l.CheckMint(id, amt); err != nil {
		return err
	}
	l.supply += amt
	if id == Treasury {
		l.treasury += amt
	} else {
		l.acct(id).Free += amt
	}
	return nil
}

// CheckBond reports whether Bond would succeed.
func (l *Ledger) CheckBond(id string, amt Amount) error {
	if err := validID(id); err != nil {
		return err
	}
	if amt == 0 {
		return fmt.Errorf("%w: bond of zero", ErrAmount)
	}
	a, ok := l.accounts[id]
	if ok && a.Banned {
		return ErrBanned
	}
	if !ok || a.Free < amt {
		var free Amount
		if ok {
			free = a.Free
		}
		return fmt.Errorf("%w: bond %d, free balance %d", ErrInsufficient, amt, free)
	}
	return nil
}

// Bond moves amt from free to bonded stake.
func (l *Ledger) Bond(id string, amt Amount) error {
	if err := l.CheckBond(id, amt); err != nil {
		return err
	}
	a := l.accounts[id]
	a.Free -= amt
	a.Bonded += amt
	return nil
}

// CheckUnbond reports whether Unbond would succeed.
func (l *Ledger) CheckUnbond(id string, amt Amount) error {
	if err := validID(id); err != nil {
		return err
	}
	if amt == 0 {
		return fmt.Errorf("%w: unbond of zero", ErrAmount)
	}
	a, ok := l.accounts[id]
	if !ok || a.Bonded < amt {
		var b Amount
		if ok {
			b = a.Bonded
		}
		return fmt.Errorf("%w: unbond %d, bonded %d", ErrInsufficient, amt, b)
	}
	return nil
}

// Unbond starts releasing amt of bonded stake; it becomes withdrawable at
// releaseAt and stays slashable until then.
func (l *Ledger) Unbond(id string, amt Amount, releaseAt int64) error {
	if err := l.CheckUnbond(id, amt); err != nil {
		return err
	}
	a := l.accounts[id]
	a.Bonded -= amt
	a.Unbonding = append(a.Unbonding, Unbonding{Amount: amt, ReleaseAt: releaseAt})
	return nil
}

// Withdrawable is what Withdraw at now would release.
func (l *Ledger) Withdrawable(id string, now int64) Amount {
	a, ok := l.accounts[id]
	if !ok {
		return 0
	}
	var t Amount
	for _, u := range a.Unbonding {
		if u.ReleaseAt <= now {
			t += u.Amount
		}
	}
	return t
}

// Withdraw moves every matured unbonding entry to the free balance and
// returns the amount moved.
func (l *Ledger) Withdraw(id string, now int64) (Amount, error) {
	if err := validID(id); err != nil {
		return 0, err
	}
	amt := l.Withdrawable(id, now)
	if amt == 0 {
		return 0, ErrNothing
	}
	a := l.accounts[id]
	keep := a.Unbonding[:0]
	for _, u := range a.Unbonding {
		if u.ReleaseAt > now {
			keep = append(keep, u)
		}
	}
	a.Unbonding = keep
	if len(a.Unbonding) == 0 {
		a.Unbonding = nil
	}
	a.Free += amt
	return amt, nil
}

// SlashPlan is what the next slash of an account will take.
type SlashPlan struct {
	Offence int
	Amount  Amount
	Ban     bool
}

// PlanSlash computes the next offence: 5% of the slashable stake (bonded
// plus unbonding) on the first, 25% on the second, everything and a ban on
// the third and later. Fractions round down.
func (l *Ledger) PlanSlash(id string) (SlashPlan, error) {
	if err := validID(id); err != nil {
		return SlashPlan{}, err
	}
	a, ok := l.accounts[id]
	if !ok {
		return SlashPlan{}, fmt.Errorf("%w: %q has no stake to slash", ErrAccount, id)
	}
	if a.Banned {
		return SlashPlan{}, ErrBanned
	}
	stake := a.Bonded + a.Unbonded()
	p := SlashPlan{Offence: len(a.Slashes) + 1}
	switch p.Offence {
	case 1:
		p.Amount = mulBP(stake, FirstSlashBP)
	case 2:
		p.Amount = mulBP(stake, SecondSlashBP)
	default:
		p.Amount = stake
		p.Ban = true
	}
	return p, nil
}

func mulBP(x Amount, bp uint64) Amount {
	hi, lo := bits.Mul64(uint64(x), bp)
	q, _ := bits.Div64(hi, lo, 10_000)
	return Amount(q)
}

// ApplySlash executes plan (from PlanSlash, on the same ledger state):
// the amount is taken from bonded stake first, then from the unbonding
// entries that release last, and goes to the treasury. The evidence is kept.
func (l *Ledger) ApplySlash(id string, plan SlashPlan, at int64, reason string, evidence []byte) error {
	want, err := l.PlanSlash(id)
	if err != nil {
		return err
	}
	if want != plan {
		return fmt.Errorf("%w: slash plan %+v does not match the ledger (%+v)", ErrInvariant, plan, want)
	}
	a := l.accounts[id]
	rest := plan.Amount
	take := min(rest, a.Bonded)
	a.Bonded -= take
	rest -= take
	for i := len(a.Unbonding) - 1; i >= 0 && rest > 0; i-- {
		t := min(rest, a.Unbonding[i].Amount)
		a.Unbonding[i].Amount -= t
		rest -= t
	}
	keep := a.Unbonding[:0]
	for _, u := range a.Unbonding {
		if u.Amount > 0 {
			keep = append(keep, u)
		}
	}
	a.Unbonding = keep
	if len(a.Unbonding) == 0 {
		a.Unbonding = nil
	}
	l.treasury += plan.Amount
	a.Slashes = append(a.Slashes, Slash{Offence: plan.Offence, Amount: plan.Amount, At: at, Reason: reason, Evidence: append([]byte(nil), evidence...)})
	if plan.Ban {
		a.Banned = true
	}
	return nil
}

// Check verifies conservation: every account's holdings plus the treasury
// equal the supply.
func (l *Ledger) Check() error {
	total := l.treasury
	for _, id := range l.IDs() {
		var err error
		total, err = add(total, l.accounts[id].Total())
		if err != nil {
			return err
		}
	}
	if total != l.supply {
		return fmt.Errorf("%w: accounts and treasury hold %d, supply is %d", ErrInvariant, total, l.supply)
	}
	return nil
}

// Snapshot is the ledger's canonical serialisable form.
type Snapshot struct {
	Supply   Amount    `json:"supply"`
	Treasury Amount    `json:"treasury"`
	Accounts []Account `json:"accounts"`
}

// Snapshot returns the ledger with accounts in sorted order.
func (l *Ledger) Snapshot() Snapshot {
	s := Snapshot{Supply: l.supply, Treasury: l.treasury, Accounts: []Account{}}
	for _, id := range l.IDs() {
		s.Accounts = append(s.Accounts, l.Account(id))
	}
	return s
}

// Restore rebuilds a ledger from a snapshot and checks conservation.
func Restore(s Snapshot) (*Ledger, error) {
	l := &Ledger{accounts: map[string]*Account{}, supply: s.Supply, treasury: s.Treasury}
	for i := range s.Accounts {
		a := s.Accounts[i]
		if _, dup := l.accounts[a.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate account %q in snapshot", ErrInvariant, a.ID)
		}
		l.accounts[a.ID] = &a
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	return l, nil
}
