package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestSlashingProgression(t *testing.T) {
	l := New()
	must(t, l.Mint("n1", 20_000*GYM))
	must(t, l.Bond("n1", 16_000*GYM))
	must(t, l.Unbond("n1", 4_000*GYM, 1000))
	// Slashable stake: 12,000 bonded + 4,000 unbonding = 16,000.
	want := []struct {
		amt Amount
		ban bool
	}{
		{800 * GYM, false},   // 5% of 16,000
		{3_800 * GYM, false}, // 25% of 15,200
		{11_400 * GYM, true}, // the rest
	}
	for i, w := range want {
		p, err := l.PlanSlash("n1")
		must(t, err)
		if p.Offence != i+1 || p.Amount != w.amt || p.Ban != w.ban {
			t.Fatalf("offence %d: plan %+v, want amount %d ban %v", i+1, p, w.amt, w.ban)
		}
		must(t, l.ApplySlash("n1", p, int64(i), "bad delta", []byte{byte(i)}))
		must(t, l.Check())
	}
	a := l.Account("n1")
	if !a.Banned || a.Bonded != 0 || a.Unbonded() != 0 || a.Free != 4_000*GYM {
		t.Fatalf("after ban: %+v", a)
	}
	if len(a.Slashes) != 3 || a.Slashes[2].Evidence[0] != 2 || a.Slashes[0].Reason != "bad delta" {
		t.Fatalf("evidence not kept: %+v", a.Slashes)
	}
	if l.TreasuryBalance() != 16_000*GYM {
		t.Fatalf("treasury %d", l.TreasuryBalance())
	}
	if _, err := l.PlanSlash("n1"); !errors.Is(err, ErrBanned) {
		t.Fatalf("slash after ban: %v", err)
	}
	if err := l.Bond("n1", GYM); !errors.Is(err, ErrBanned) {
		t.Fatalf("bond after ban: %v", err)
	}
}

func TestSlashPlanMustMatch(t *testing.T) {
	l := New()
	must(t, l.Mint("n1", 100*GYM))
	must(t, l.Bond("n1", 100*GYM))
	p, _ := l.PlanSlash("n1")
	p.Amount++
	if err := l.ApplySlash("n1", p, 0, "", nil); !errors.Is(err, ErrInvariant) {
		t.Fatalf("stale plan accepted: %v", err)
	}
	if l.Bonded("n1") != 100*GYM {
		t.Fatal("a refused slash changed the ledger")
	}
}

func TestUnbondingPeriod(t *testing.T) {
	l := New()
	must(t, l.Mint("n1", 10*GYM))
	must(t, l.Bond("n1", 10*GYM))
	must(t, l.Unbond("n1", 4*GYM, 100))
	must(t, l.Unbond("n1", 3*GYM, 200))
	if _, err := l.Withdraw("n1", 99); !errors.Is(err, ErrNothing) {
		t.Fatalf("withdraw before release: %v", err)
	}
	got, err := l.Withdraw("n1", 150)
	must(t, err)
	if got != 4*GYM || l.Account("n1").Free != 4*GYM || l.Account("n1").Unbonded() != 3*GYM {
		t.Fatalf("withdraw at 150: got %d, account %+v", got, l.Account("n1"))
	}
	if err := l.Unbond("n1", 4*GYM, 300); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("over-unbond: %v", err)
	}
}

func TestPlanRewards(t *testing.T) {
	got, err := PlanRewards(1000, []Contribution{
		{ID: "a", Compute: 1, Quality: 1, Participation: 1},
		{ID: "b", Compute: 3, Quality: 0, Participation: 1},
		{ID: "c", Compute: 0, Quality: 0, Participation: 0},
	})
	must(t, err)
	// compute pool 600: a 150, b 450; quality pool 300: a 300; participation 100: 50 / 50.
	want := []Payout{{"a", 500}, {"b", 500}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	got, err = PlanRewards(10, []Contribution{{ID: "a", Compute: 1}, {ID: "b", Compute: 1}, {ID: "c", Compute: 1}})
	must(t, err)
	// 6 split three ways = 2 each; quality and participation pools unpaid (dust).
	if !reflect.DeepEqual(got, []Payout{{"a", 2}, {"b", 2}, {"c", 2}}) {
		t.Fatalf("rounding: %v", got)
	}
	if _, err := PlanRewards(10, []Contribution{{ID: "a"}, {ID: "a"}}); !errors.Is(err, ErrAccount) {
		t.Fatalf("duplicate contributor: %v", err)
	}
}

// TestConservation runs random operations, valid or not, and checks after
// every one that nothing was created or destroyed except by Mint.
func TestConservation(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	l := New()
	ids := []string{"a", "b", "c", "d"}
	var minted Amount
	for i := range 20_000 {
		id := ids[r.IntN(len(ids))]
		amt := Amount(r.Uint64N(5_000 * uint64(GYM)))
		now := int64(i)
		var err error
		switch r.IntN(10) {
		case 0:
			if err = l.Mint(id, amt); err == nil {
				minted += amt
			}
		case 1:
			err = l.Bond(id, amt)
		case 2:
			err = l.Unbond(id, amt, now+int64(r.IntN(50)))
		case 3:
			_, err = l.Withdraw(id, now)
		case 4:
			if r.IntN(20) == 0 {
				var p SlashPlan
				if p, err = l.PlanSlash(id); err == nil {
					err = l.ApplySlash(id, p, now, "test", nil)
				}
			}
		case 5:
			var ps []Payout
			cs := []Contribution{{ID: "a", Compute: r.Uint64N(10), Quality: r.Uint64N(10), Participation: 1}, {ID: "b", Compute: r.Uint64N(10)}}
			if ps, err = PlanRewards(Amount(r.Uint64N(uint64(l.TreasuryBalance())+1)), cs); err == nil {
				err = l.Pay(ps)
			}
		case 6:
			if err = l.Mint(Treasury, amt); err == nil {
				minted += amt
			}
		case 7:
			err = l.Escrow(id, amt)
		case 8:
			var ps []Payout
			cs := []Contribution{{ID: "c", Compute: r.Uint64N(10), Participation: 1}, {ID: "d", Compute: r.Uint64N(10)}}
			if ps, err = PlanRewards(Amount(r.Uint64N(uint64(l.Account(id).Escrowed)+1)), cs); err == nil {
				err = l.PayEscrow(id, ps)
			}
		case 9:
			err = l.Release(id, Amount(r.Uint64N(uint64(l.Account(id).Escrowed)+1)))
		}
		_ = err // refused operations are part of the test: they must change nothing
		if cerr := l.Check(); cerr != nil {
			t.Fatalf("step %d: %v", i, cerr)
		}
		if l.Supply() != minted {
			t.Fatalf("step %d: supply %d, minted %d", i, l.Supply(), minted)
		}
	}
	s := l.Snapshot()
	l2, err := Restore(s)
	must(t, err)
	if !reflect.DeepEqual(l2.Snapshot(), s) {
		t.Fatal("snapshot round trip differs")
	}
	s.Treasury++
	if _, err := Restore(s); !errors.Is(err, ErrInvariant) {
		t.Fatalf("tampered snapshot restored: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(fmt.Sprint(err))
	}
}
