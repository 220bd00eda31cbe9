package ledger

import (
	"fmt"
	"math/big"
	"sort"
)

// Reward split in percent: compute contribution, delta quality,
// participation (uptime and ring service).
const (
	ComputePct       = 60
	QualityPct       = 30
	ParticipationPct = 10
)

// Contribution is one node's weights for an epoch. Weights are integers in
// any unit the caller chooses (samples trained, quality score ×10⁶, seconds
// of ring service); only their ratios within one epoch matter.
type Contribution struct {
	ID            string `json:"id"`
	Compute       uint64 `json:"compute"`
	Quality       uint64 `json:"quality"`
	Participation uint64 `json:"participation"`
}

// Payout is what one account receives.
type Payout struct {
	ID     string `json:"id"`
	Amount Amount `json:"amount"`
}

// PlanRewards splits total into 60 / 30 / 10 pools and each pool pro rata to
// the contributions' weights, rounding every share down. A pool whose weights
// are all zero is not paid. Payouts are sorted by ID and omit zeros; what is
// not paid (rounding dust, empty pools) stays in the treasury.
func PlanRewards(total Amount, contribs []Contribution) ([]Payout, error) {
	seen := map[string]bool{}
	for _, c := range contribs {
		if err := validID(c.ID); err != nil {
			return nil, err
		}
		if seen[c.ID] {
			return nil, fmt.Errorf("%w: %q contributes twice", ErrAccount, c.ID)
		}
		seen[c.ID] = true
	}
	pools := []struct {
		pct    uint64
		weight func(Contribution) uint64
	}{
		{ComputePct, func(c Contribution) uint64 { return c.Compute }},
		{QualityPct, func(c Contribution) uint64 { return c.Quality }},
		{ParticipationPct, func(c Contribution) uint64 { return c.Participation }},
	}
	pay := map[string]Amount{}
	for _, p := range pools {
		pool := new(big.Int).Mul(new(big.Int).SetUint64(uint64(total)), new(big.Int).SetUint64(p.pct))
		pool.Quo(pool, big.NewInt(100))
		sum := new(big.Int)
		for _, c := range contribs {
			sum.Add(sum, new(big.Int).SetUint64(p.weight(c)))
		}
		if sum.Sign() == 0 {
			continue
		}
		for _, c := range contribs {
			share := new(big.Int).Mul(pool, new(big.Int).SetUint64(p.weight(c)))
			share.Quo(share, sum)
			pay[c.ID] += Amount(share.Uint64()) // share ≤ pool ≤ total: fits
		}
	}
	out := make([]Payout, 0, len(pay))
	for id, a := range pay {
		if a > 0 {
			out = append(out, Payout{ID: id, Amount: a})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// CheckPay reports whether Pay would succeed.
func (l *Ledger) CheckPay(payouts []Payout) error {
	sum, err := sumPayouts(payouts)
	if err != nil {
		return err
	}
	if sum > l.treasury {
		return fmt.Errorf("%w: rewards of %d exceed the treasury's %d", ErrInsufficient, sum, l.treasury)
	}
	return nil
}

// Pay moves payouts from the treasury to the accounts' free balances.
func (l *Ledger) Pay(payouts []Payout) error {
	if err := l.CheckPay(payouts); err != nil {
		return err
	}
	for _, p := range payouts {
		l.treasury -= p.Amount
		l.acct(p.ID).Free += p.Amount
	}
	return nil
}
