package ledger

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/sha3"
)

// Twin is the in-memory Book: a Ledger plus the rules the chain contracts
// add to it (roles and their minimums, job locks, once-per-epoch payment,
// the publication registry), with the same errors. It is what hanzod uses
// without a chain and what the chain ledger is checked against.
type Twin struct {
	mu    sync.Mutex
	l     *Ledger
	now   func() int64 // unix ms
	delay time.Duration
	roles map[string]Role
	locks map[string]map[string]bool // job → account
	held  map[string]int             // account → jobs locking it
	paid  map[string]bool            // job ‖ 0 ‖ epoch
	pubs  map[string]Publication
	hash  map[string][][32]byte // account → evidence hashes
}

// NewTwin returns an empty twin whose clock is now (unix ms) and whose
// unbonded stake is withdrawable after delay.
func NewTwin(now func() int64, delay time.Duration) *Twin {
	return &Twin{l: New(), now: now, delay: delay, roles: map[string]Role{},
		locks: map[string]map[string]bool{}, held: map[string]int{}, paid: map[string]bool{},
		pubs: map[string]Publication{}, hash: map[string][][32]byte{}}
}

var _ Book = (*Twin)(nil)

func epochKey(job string, epoch uint64) string { return fmt.Sprintf("%s\x00%d", job, epoch) }

// Keccak256 is the evidence hash the Books keep (the EVM's keccak256).
func Keccak256(b []byte) [32]byte {
	h := sha3.NewLegacyKeccak256()
	h.Write(b)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func (t *Twin) Deposit(_ context.Context, account string, amt Amount) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.l.Mint(account, amt)
}

func (t *Twin) Stake(_ context.Context, account string, role Role, amt Amount) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if amt == 0 {
		return fmt.Errorf("%w: stake of zero", ErrAmount)
	}
	if t.l.Banned(account) {
		return ErrBanned
	}
	minimum, err := MinStake(role)
	if err != nil {
		return err
	}
	bonded := t.l.Bonded(account)
	if cur := t.roles[account]; bonded > 0 && cur != role {
		return fmt.Errorf("%w: staked as %v, not %v", ErrRole, cur, role)
	}
	total, err := add(bonded, amt)
	if err != nil {
		return err
	}
	if total < minimum {
		return fmt.Errorf("%w: %d < %d for %v", ErrBelowMinimum, total, minimum, role)
	}
	if err := t.l.Bond(account, amt); err != nil {
		return err
	}
	t.roles[account] = role
	return nil
}

func (t *Twin) Unbond(_ context.Context, account string, amt Amount) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if amt == 0 {
		return fmt.Errorf("%w: unbond of zero", ErrAmount)
	}
	if n := t.held[account]; n > 0 {
		return fmt.Errorf("%w: %d unsettled jobs", ErrLocked, n)
	}
	bonded := t.l.Bonded(account)
	if amt > bonded {
		return fmt.Errorf("%w: unbond %d, bonded %d", ErrInsufficient, amt, bonded)
	}
	if rest := bonded - amt; rest > 0 && !t.l.Banned(account) {
		minimum, err := MinStake(t.roles[account])
		if err != nil {
			return err
		}
		if rest < minimum {
			return fmt.Errorf("%w: %d would stay bonded, minimum %d", ErrBelowMinimum, rest, minimum)
		}
	}
	return t.l.Unbond(account, amt, t.now()+ms(t.delay))
}

func (t *Twin) Withdraw(_ context.Context, account string) (Amount, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.l.Withdraw(account, t.now())
}

func (t *Twin) Lock(_ context.Context, job string, accounts []string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.locks[job]
	if m == nil {
		m = map[string]bool{}
		t.locks[job] = m
	}
	for _, a := range accounts {
		if err := validID(a); err != nil {
			return err
		}
	}
	for _, a := range accounts {
		if !m[a] {
			m[a] = true
			t.held[a]++
		}
	}
	return nil
}

func (t *Twin) Unlock(_ context.Context, job string, accounts []string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.locks[job]
	for _, a := range accounts {
		if m[a] {
			delete(m, a)
			if t.held[a]--; t.held[a] == 0 {
				delete(t.held, a)
			}
		}
	}
	return nil
}

func (t *Twin) Slash(_ context.Context, account string, evidence []byte) (SlashRecord, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := validID(account); err != nil {
		return SlashRecord{}, err
	}
	if t.l.Banned(account) {
		return SlashRecord{}, ErrBanned
	}
	if a := t.l.Account(account); a.Bonded+a.Unbonded() == 0 {
		return SlashRecord{}, fmt.Errorf("%w: %q has no stake to slash", ErrNothing, account)
	}
	p, err := t.l.PlanSlash(account)
	if err != nil {
		return SlashRecord{}, err
	}
	if err := t.l.ApplySlash(account, p, t.now(), "", evidence); err != nil {
		return SlashRecord{}, err
	}
	h := Keccak256(evidence)
	t.hash[account] = append(t.hash[account], h)
	return SlashRecord{Offence: p.Offence, Pct: slashPct(p.Offence), Amount: p.Amount, Banned: p.Ban, EvidenceHash: h}, nil
}

func (t *Twin) PayEpoch(_ context.Context, job string, epoch uint64, payouts []Payout) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := epochKey(job, epoch)
	if t.paid[k] {
		return fmt.Errorf("%w: %s epoch %d", ErrAlreadyPaid, job, epoch)
	}
	if err := t.l.Pay(payouts); err != nil {
		return err
	}
	t.paid[k] = true
	return nil
}

func (t *Twin) Publish(_ context.Context, p Publication) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := p.Check(); err != nil {
		return err
	}
	k := epochKey(p.Job, p.Epoch)
	if _, ok := t.pubs[k]; ok {
		return fmt.Errorf("%w: %s epoch %d", ErrAlreadyPublished, p.Job, p.Epoch)
	}
	p.Signer = slices.Clone(p.Signer)
	p.Signature = slices.Clone(p.Signature)
	t.pubs[k] = p
	return nil
}

func (t *Twin) Publication(_ context.Context, job string, epoch uint64) (Publication, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pubs[epochKey(job, epoch)]
	return p, ok, nil
}

func (t *Twin) Position(_ context.Context, account string) (Position, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.l.Account(account)
	p := Position{Free: a.Free, Bonded: a.Bonded, Role: t.roles[account], Unbonding: a.Unbonding,
		Locks: t.held[account], Banned: a.Banned}
	for i, s := range a.Slashes {
		p.Slashes = append(p.Slashes, SlashRecord{Offence: s.Offence, Pct: slashPct(s.Offence), Amount: s.Amount,
			Banned: s.Offence >= 3, EvidenceHash: t.hash[account][i]})
	}
	return p, nil
}

func (t *Twin) Treasury(context.Context) (Amount, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.l.TreasuryBalance(), nil
}

// Check verifies the underlying ledger's conservation invariant.
func (t *Twin) Check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.l.Check()
}
