// Package ledgertest is the conformance suite of ledger.Book: every
// implementation (the in-memory ledger.Twin, the chain ledger of
// orchestrator/ledger/evm) runs the same cases and must give the same
// balances, stakes, slashes, payments, records and errors.
package ledgertest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/ledger"
)

// Harness is one fresh Book with its clock.
type Harness struct {
	Book ledger.Book
	// Delay is the Book's unbonding delay.
	Delay time.Duration
	// Advance moves the Book's clock forward by d.
	Advance func(t *testing.T, d time.Duration)
}

// Run runs every case, each on a fresh harness from open. Accounts are
// named "a", "b", … "h"; open must make them usable (the chain ledger needs
// a key for each).
func Run(t *testing.T, open func(t *testing.T) Harness) {
	cases := []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"Minimums", minimums},
		{"UnbondWithdraw", unbondWithdraw},
		{"Locks", locks},
		{"ProgressiveSlash", progressiveSlash},
		{"Rewards", rewards},
		{"Publications", publications},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.f(t, open(t)) })
	}
}

const gym = ledger.GYM

var ctx = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func position(t *testing.T, h Harness, id string) ledger.Position {
	t.Helper()
	p, err := h.Book.Position(ctx, id)
	must(t, err)
	return p
}

func minimums(t *testing.T, h Harness) {
	b := h.Book
	must(t, b.Deposit(ctx, "a", 100_000*gym))
	wantErr(t, b.Deposit(ctx, "a", 0), ledger.ErrAmount, "deposit of zero")
	for _, r := range []ledger.Role{ledger.RoleNode, ledger.RoleValidator, ledger.RoleOrchestrator} {
		m, err := ledger.MinStake(r)
		must(t, err)
		wantErr(t, b.Stake(ctx, "a", r, m-1), ledger.ErrBelowMinimum, "stake below the "+r.String()+" minimum")
	}
	wantErr(t, b.Stake(ctx, "a", ledger.RoleNone, 50_000*gym), ledger.ErrRole, "stake for no role")
	wantErr(t, b.Stake(ctx, "a", ledger.RoleNode, 0), ledger.ErrAmount, "stake of zero")
	wantErr(t, b.Stake(ctx, "b", ledger.RoleNode, 10_000*gym), ledger.ErrInsufficient, "stake without balance")

	must(t, b.Stake(ctx, "a", ledger.RoleValidator, 25_000*gym))
	wantErr(t, b.Stake(ctx, "a", ledger.RoleNode, 10_000*gym), ledger.ErrRole, "stake for a second role")
	must(t, b.Stake(ctx, "a", ledger.RoleValidator, 1)) // topping up needs no minimum
	wantErr(t, b.Stake(ctx, "a", ledger.RoleValidator, 75_000*gym), ledger.ErrInsufficient, "stake above the free balance")
	p := position(t, h, "a")
	if p.Bonded != 25_000*gym+1 || p.Free != 75_000*gym-1 || p.Role != ledger.RoleValidator || p.Banned || p.Locks != 0 {
		t.Fatalf("position %+v", p)
	}
}

func unbondWithdraw(t *testing.T, h Harness) {
	b := h.Book
	must(t, b.Deposit(ctx, "a", 30_000*gym))
	must(t, b.Stake(ctx, "a", ledger.RoleNode, 30_000*gym))
	wantErr(t, b.Unbond(ctx, "a", 25_000*gym), ledger.ErrBelowMinimum, "unbond leaving less than the minimum")
	wantErr(t, b.Unbond(ctx, "a", 30_000*gym+1), ledger.ErrInsufficient, "unbond above the stake")
	wantErr(t, b.Unbond(ctx, "a", 0), ledger.ErrAmount, "unbond of zero")
	must(t, b.Unbond(ctx, "a", 20_000*gym)) // 10,000 stays: the minimum
	_, err := b.Withdraw(ctx, "a")
	wantErr(t, err, ledger.ErrNothing, "withdraw before the delay")
	h.Advance(t, h.Delay/2)
	must(t, b.Unbond(ctx, "a", 10_000*gym)) // all of it
	p := position(t, h, "a")
	if p.Bonded != 0 || p.Free != 0 || len(p.Unbonding) != 2 || p.Unbonded() != 30_000*gym {
		t.Fatalf("unbonding position %+v", p)
	}
	if d := p.Unbonding[1].ReleaseAt - p.Unbonding[0].ReleaseAt; d < (h.Delay / 2).Milliseconds() {
		t.Fatalf("release times %+v, %v apart", p.Unbonding, h.Delay/2)
	}
	h.Advance(t, h.Delay/2+time.Second)
	got, err := b.Withdraw(ctx, "a")
	must(t, err)
	if got != 20_000*gym {
		t.Fatalf("withdrew %d, want the first entry's 20,000 GYM", got)
	}
	_, err = b.Withdraw(ctx, "a")
	wantErr(t, err, ledger.ErrNothing, "withdraw of the unmatured rest")
	h.Advance(t, h.Delay)
	if got, err = b.Withdraw(ctx, "a"); err != nil || got != 10_000*gym {
		t.Fatalf("second withdraw %d, %v", got, err)
	}
	if p := position(t, h, "a"); p.Free != 30_000*gym || p.Bonded != 0 || len(p.Unbonding) != 0 {
		t.Fatalf("after withdrawing %+v", p)
	}
}

func locks(t *testing.T, h Harness) {
	b := h.Book
	for _, id := range []string{"a", "b"} {
		must(t, b.Deposit(ctx, id, 20_000*gym))
		must(t, b.Stake(ctx, id, ledger.RoleNode, 20_000*gym))
	}
	must(t, b.Lock(ctx, "job-1", []string{"a", "b"}))
	must(t, b.Lock(ctx, "job-1", []string{"a"})) // twice for one job: once
	must(t, b.Lock(ctx, "job-2", []string{"a"}))
	if p := position(t, h, "a"); p.Locks != 2 {
		t.Fatalf("a locked by %d jobs, want 2", p.Locks)
	}
	wantErr(t, b.Unbond(ctx, "a", 20_000*gym), ledger.ErrLocked, "unbond while locked")
	wantErr(t, b.Unbond(ctx, "b", 20_000*gym), ledger.ErrLocked, "unbond while locked")
	must(t, b.Unlock(ctx, "job-1", []string{"a", "b"}))
	must(t, b.Unbond(ctx, "b", 20_000*gym))
	wantErr(t, b.Unbond(ctx, "a", 20_000*gym), ledger.ErrLocked, "unbond while still locked by job-2")
	must(t, b.Unlock(ctx, "job-1", []string{"a"})) // already released: nothing
	if p := position(t, h, "a"); p.Locks != 1 {
		t.Fatalf("a locked by %d jobs, want 1", p.Locks)
	}
	must(t, b.Unlock(ctx, "job-2", []string{"a"}))
	must(t, b.Unbond(ctx, "a", 20_000*gym))
}

func progressiveSlash(t *testing.T, h Harness) {
	b := h.Book
	must(t, b.Deposit(ctx, "a", 20_000*gym))
	must(t, b.Stake(ctx, "a", ledger.RoleNode, 16_000*gym))
	must(t, b.Unbond(ctx, "a", 4_000*gym))
	_, err := b.Slash(ctx, "b", []byte("x"))
	wantErr(t, err, ledger.ErrNothing, "slash of an account without stake")
	// Slashable: 12,000 bonded + 4,000 unbonding.
	want := []ledger.SlashRecord{
		{Offence: 1, Pct: 5, Amount: 800 * gym},
		{Offence: 2, Pct: 25, Amount: 3_800 * gym},
		{Offence: 3, Pct: 100, Amount: 11_400 * gym, Banned: true},
	}
	for i, w := range want {
		ev := []byte{'e', byte(i)}
		w.EvidenceHash = ledger.Keccak256(ev)
		got, err := b.Slash(ctx, "a", ev)
		must(t, err)
		if got != w {
			t.Fatalf("offence %d: %+v, want %+v", i+1, got, w)
		}
		want[i] = w
	}
	p := position(t, h, "a")
	if !p.Banned || p.Bonded != 0 || p.Unbonded() != 0 || p.Free != 4_000*gym || len(p.Slashes) != 3 {
		t.Fatalf("after the ban %+v", p)
	}
	for i := range want {
		if p.Slashes[i] != want[i] {
			t.Fatalf("slash %d recorded %+v, want %+v", i, p.Slashes[i], want[i])
		}
	}
	if tr, err := b.Treasury(ctx); err != nil || tr != 16_000*gym {
		t.Fatalf("treasury %d, %v: want the 16,000 GYM slashed", tr, err)
	}
	_, err = b.Slash(ctx, "a", nil)
	wantErr(t, err, ledger.ErrBanned, "slash after the ban")
	wantErr(t, b.Stake(ctx, "a", ledger.RoleNode, 10_000*gym), ledger.ErrBanned, "stake after the ban")

	// Beyond the bonded stake, a slash takes from the unbonding entry that
	// releases last.
	must(t, b.Deposit(ctx, "c", 40_000*gym))
	must(t, b.Stake(ctx, "c", ledger.RoleNode, 40_000*gym))
	for range 3 {
		must(t, b.Unbond(ctx, "c", 10_000*gym))
		h.Advance(t, time.Second)
	}
	for range 2 {
		_, err := b.Slash(ctx, "c", []byte("c"))
		must(t, err)
	}
	// 5% of 40,000 = 2,000, then 25% of 38,000 = 9,500: the 8,000 bonded
	// and 1,500 of the last entry.
	p = position(t, h, "c")
	if p.Bonded != 0 || len(p.Unbonding) != 3 || p.Unbonding[0].Amount != 10_000*gym ||
		p.Unbonding[1].Amount != 10_000*gym || p.Unbonding[2].Amount != 8_500*gym {
		t.Fatalf("after two slashes %+v", p)
	}
	_, err = b.Slash(ctx, "c", []byte("c"))
	must(t, err)
	if p := position(t, h, "c"); p.Bonded != 0 || len(p.Unbonding) != 0 || !p.Banned {
		t.Fatalf("after the third slash %+v", p)
	}
}

func rewards(t *testing.T, h Harness) {
	b := h.Book
	must(t, b.Deposit(ctx, ledger.Treasury, 1_000*gym))
	pay := []ledger.Payout{{ID: "a", Amount: 600 * gym}, {ID: "b", Amount: 300 * gym}}
	must(t, b.PayEpoch(ctx, "job-1", 1, pay))
	wantErr(t, b.PayEpoch(ctx, "job-1", 1, pay[:1]), ledger.ErrAlreadyPaid, "second payment of an epoch")
	wantErr(t, b.PayEpoch(ctx, "job-1", 2, pay), ledger.ErrInsufficient, "payment above the pool")
	if tr, _ := b.Treasury(ctx); tr != 100*gym {
		t.Fatalf("treasury %d after a refused payment, want 100 GYM", tr)
	}
	must(t, b.Deposit(ctx, ledger.Treasury, 1_000*gym))
	must(t, b.PayEpoch(ctx, "job-1", 2, pay)) // refused earlier: nothing was paid then
	must(t, b.PayEpoch(ctx, "job-2", 1, []ledger.Payout{{ID: "c", Amount: 1}}))
	for id, want := range map[string]ledger.Amount{"a": 1_200 * gym, "b": 600 * gym, "c": 1} {
		if p := position(t, h, id); p.Free != want {
			t.Fatalf("%s holds %d, want %d", id, p.Free, want)
		}
	}
	if tr, _ := b.Treasury(ctx); tr != 200*gym-1 {
		t.Fatalf("treasury %d", tr)
	}
}

func publications(t *testing.T, h Harness) {
	b := h.Book
	pub, priv, err := ed25519.GenerateKey(nil)
	must(t, err)
	p := ledger.Publication{Job: "job-1", Epoch: 3, CID: "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
		WeightsCID: "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", HubRepo: "zooai/gym-qwen3-test",
		Signer: pub, Signature: ed25519.Sign(priv, []byte("record"))}
	if _, ok, err := b.Publication(ctx, "job-1", 3); err != nil || ok {
		t.Fatalf("record before publishing: %v %v", ok, err)
	}
	must(t, b.Publish(ctx, p))
	got, ok, err := b.Publication(ctx, "job-1", 3)
	must(t, err)
	if !ok || got.Job != p.Job || got.Epoch != p.Epoch || got.CID != p.CID || got.WeightsCID != p.WeightsCID ||
		got.HubRepo != p.HubRepo || !bytes.Equal(got.Signer, p.Signer) || !bytes.Equal(got.Signature, p.Signature) {
		t.Fatalf("read back %+v, want %+v", got, p)
	}
	if !ed25519.Verify(got.Signer, []byte("record"), got.Signature) {
		t.Fatal("the record's signature does not verify")
	}
	q := p
	q.CID = "bafkreiother"
	wantErr(t, b.Publish(ctx, q), ledger.ErrAlreadyPublished, "second record of an epoch")
	q.Epoch = 4
	q.Signature = q.Signature[:63]
	wantErr(t, b.Publish(ctx, q), ledger.ErrPublication, "record with a short signature")
	q.Signature = p.Signature
	q.CID = ""
	wantErr(t, b.Publish(ctx, q), ledger.ErrPublication, "record without a CID")
	if _, ok, _ := b.Publication(ctx, "job-1", 4); ok {
		t.Fatal("a refused record was stored")
	}
}
