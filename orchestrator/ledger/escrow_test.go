package ledger

import (
	"errors"
	"math"
	"testing"
)

func TestEpochPayout(t *testing.T) {
	rate, most := 25_000*Amount(1), 100*GYM // 0.025 GYM a sample, 100 GYM an epoch
	for _, c := range []struct {
		samples uint64
		want    Amount
	}{
		{0, 0},
		{128, 3_200_000},       // a one-step epoch of 4 workers × 32 samples: 3.2 GYM
		{3_840, 96 * GYM},      // gym up's epoch: 4 workers × 30 steps × 4 prompts × 8
		{4_000, 100 * GYM},     // the cap reached exactly
		{1_000_000, 100 * GYM}, // capped
		{math.MaxUint64, 100 * GYM},
	} {
		if got := EpochPayout(rate, most, c.samples); got != c.want {
			t.Errorf("%d samples pay %d, want %d", c.samples, got, c.want)
		}
	}
	if got := EpochPayout(Amount(math.MaxUint64), most, 2); got != most {
		t.Errorf("an overflowing product pays %d, want the cap", got)
	}
}

// TestEscrow: an escrow comes out of the free balance, pays rewards, and
// what is left comes back; the sums balance at every step.
func TestEscrow(t *testing.T) {
	l := New()
	must(t, l.Mint("sub", 500*GYM))
	if err := l.Escrow("sub", 501*GYM); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("escrow above the free balance: %v", err)
	}
	if err := l.Escrow("sub", 0); !errors.Is(err, ErrAmount) {
		t.Fatalf("escrow of zero: %v", err)
	}
	if err := l.Escrow("nobody", GYM); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("escrow from an unknown account: %v", err)
	}
	must(t, l.Escrow("sub", 300*GYM))
	must(t, l.Check())
	if a := l.Account("sub"); a.Free != 200*GYM || a.Escrowed != 300*GYM || a.Total() != 500*GYM {
		t.Fatalf("after escrow: %+v", a)
	}
	ps, err := PlanRewards(96*GYM, []Contribution{{ID: "w1", Compute: 3, Participation: 1}, {ID: "w2", Compute: 1, Participation: 1}})
	must(t, err)
	must(t, l.PayEscrow("sub", ps))
	must(t, l.Check())
	var paid Amount
	for _, p := range ps {
		paid += p.Amount
	}
	if a := l.Account("sub"); a.Escrowed != 300*GYM-paid || a.Free != 200*GYM {
		t.Fatalf("after paying %d: %+v", paid, a)
	}
	if l.Account("w1").Free+l.Account("w2").Free != paid || l.TreasuryBalance() != 0 {
		t.Fatalf("payees hold %d, want %d; treasury %d", l.Account("w1").Free+l.Account("w2").Free, paid, l.TreasuryBalance())
	}
	if err := l.PayEscrow("sub", []Payout{{ID: "w1", Amount: 300 * GYM}}); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("paying more than the escrow: %v", err)
	}
	if err := l.PayEscrow("w1", []Payout{{ID: "w2", Amount: 1}}); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("paying from an account without escrow: %v", err)
	}
	must(t, l.PayEscrow("w1", nil)) // nothing to pay needs no escrow
	rest := l.Account("sub").Escrowed
	if err := l.Release("sub", rest+1); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("releasing more than the escrow: %v", err)
	}
	must(t, l.Release("sub", rest))
	must(t, l.Check())
	if a := l.Account("sub"); a.Escrowed != 0 || a.Free != 500*GYM-paid {
		t.Fatalf("after release: %+v", a)
	}
	// The escrow is in the snapshot and conserved by Restore's check.
	must(t, l.Escrow("sub", GYM))
	s := l.Snapshot()
	l2, err := Restore(s)
	must(t, err)
	if l2.Account("sub").Escrowed != GYM {
		t.Fatalf("restored escrow %d", l2.Account("sub").Escrowed)
	}
	// Slashing takes stake, never the escrow that pays the workers.
	must(t, l.Bond("sub", 100*GYM))
	p, err := l.PlanSlash("sub")
	must(t, err)
	must(t, l.ApplySlash("sub", p, 0, "test", nil))
	if l.Account("sub").Escrowed != GYM || p.Amount != 5*GYM {
		t.Fatalf("slash %d touched the escrow: %+v", p.Amount, l.Account("sub"))
	}
}

func TestParseGYM(t *testing.T) {
	for in, want := range map[string]Amount{"0": 0, "100": 100 * GYM, "0.025": 25_000, "0.5": GYM / 2, "2345.000001": 2345*GYM + 1,
		"18446744073709.551615": math.MaxUint64} {
		if got, err := ParseGYM(in); err != nil || got != want {
			t.Errorf("ParseGYM(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".", "1.", ".5", "0.0000001", "-1", "1e3", "1,5", "18446744073709.551616", "99999999999999999999"} {
		if got, err := ParseGYM(in); !errors.Is(err, ErrAmount) {
			t.Errorf("ParseGYM(%q) = %d, %v; want ErrAmount", in, got, err)
		}
	}
}
