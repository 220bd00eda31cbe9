package ledger

import (
	"fmt"
	"math/bits"
)

// EpochPayout is what an epoch that trained samples verified samples pays
// at rate per sample, capped at most: rate × samples, or most when that is
// less (docs/threat-model.md, "Economics"). A product that overflows is
// above any cap.
func EpochPayout(rate, most Amount, samples uint64) Amount {
	hi, lo := bits.Mul64(uint64(rate), samples)
	if hi != 0 || Amount(lo) > most {
		return most
	}
	return Amount(lo)
}

// CheckEscrow reports whether Escrow would succeed.
func (l *Ledger) CheckEscrow(id string, amt Amount) error {
	if err := validID(id); err != nil {
		return err
	}
	if amt == 0 {
		return fmt.Errorf("%w: escrow of zero", ErrAmount)
	}
	a, ok := l.accounts[id]
	if !ok || a.Free < amt {
		var free Amount
		if ok {
			free = a.Free
		}
		return fmt.Errorf("%w: escrow %d, free balance %d", ErrInsufficient, amt, free)
	}
	return nil
}

// Escrow moves amt of id's free balance into its escrow, where it funds
// the rewards of a job id submitted.
func (l *Ledger) Escrow(id string, amt Amount) error {
	if err := l.CheckEscrow(id, amt); err != nil {
		return err
	}
	a := l.accounts[id]
	a.Free -= amt
	a.Escrowed += amt
	return nil
}

// CheckPayEscrow reports whether PayEscrow would succeed.
func (l *Ledger) CheckPayEscrow(from string, payouts []Payout) error {
	if err := validID(from); err != nil {
		return err
	}
	sum, err := sumPayouts(payouts)
	if err != nil {
		return err
	}
	if a := l.accounts[from]; sum > 0 && (a == nil || a.Escrowed < sum) {
		var held Amount
		if a != nil {
			held = a.Escrowed
		}
		return fmt.Errorf("%w: rewards of %d exceed the %d %s holds in escrow", ErrInsufficient, sum, held, from)
	}
	return nil
}

// PayEscrow moves payouts from from's escrow to the accounts' free
// balances.
func (l *Ledger) PayEscrow(from string, payouts []Payout) error {
	if err := l.CheckPayEscrow(from, payouts); err != nil {
		return err
	}
	for _, p := range payouts {
		l.accounts[from].Escrowed -= p.Amount
		l.acct(p.ID).Free += p.Amount
	}
	return nil
}

// Release returns amt of id's escrow to its free balance.
func (l *Ledger) Release(id string, amt Amount) error {
	if err := validID(id); err != nil {
		return err
	}
	a, ok := l.accounts[id]
	if amt == 0 || !ok || a.Escrowed < amt {
		var held Amount
		if ok {
			held = a.Escrowed
		}
		return fmt.Errorf("%w: release %d of the %d %s holds in escrow", ErrInsufficient, amt, held, id)
	}
	a.Escrowed -= amt
	a.Free += amt
	return nil
}

// sumPayouts checks the payouts' accounts and adds their amounts.
func sumPayouts(payouts []Payout) (Amount, error) {
	var sum Amount
	for _, p := range payouts {
		if err := validID(p.ID); err != nil {
			return 0, err
		}
		var err error
		if sum, err = add(sum, p.Amount); err != nil {
			return 0, err
		}
	}
	return sum, nil
}
