package chainsync_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/chainsync"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store"
)

var ctx = context.Background()

// flaky is a Book whose writes fail while down (an RPC outage).
type flaky struct {
	*ledger.Twin
	down   bool
	writes int
}

var errDown = errors.New("rpc: connection refused")

func (f *flaky) PayEpoch(ctx context.Context, job string, epoch uint64, p []ledger.Payout) error {
	if f.down {
		return errDown
	}
	f.writes++
	return f.Twin.PayEpoch(ctx, job, epoch, p)
}

func (f *flaky) Slash(ctx context.Context, a string, ev []byte) (ledger.SlashRecord, error) {
	if f.down {
		return ledger.SlashRecord{}, errDown
	}
	f.writes++
	return f.Twin.Slash(ctx, a, ev)
}

type log struct{ recs []store.Record }

func (l *log) add(t *testing.T, b state.Body) {
	t.Helper()
	data, err := state.Event{Index: uint64(len(l.recs) + 1), At: 1, Body: b}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	l.recs = append(l.recs, store.Record{Index: uint64(len(l.recs) + 1), Data: data})
}

func (l *log) read(_ context.Context, from uint64, max int) ([]store.Record, uint64, error) {
	var out []store.Record
	for _, r := range l.recs {
		if r.Index >= from && len(out) < max {
			out = append(out, r)
		}
	}
	return out, uint64(len(l.recs)), nil
}

// Nodes map to chain accounts "acct-<node>"; "n9" has none.
func account(node string) (string, bool) {
	if node == "n9" {
		return "", false
	}
	return "acct-" + node, true
}

func TestMirror(t *testing.T) {
	now := int64(0)
	book := &flaky{Twin: ledger.NewTwin(func() int64 { return now }, time.Hour)}
	must(t, book.Deposit(ctx, ledger.Treasury, 1_000*ledger.GYM))
	for _, n := range []string{"n1", "n2"} {
		must(t, book.Deposit(ctx, "acct-"+n, 10_000*ledger.GYM))
		must(t, book.Stake(ctx, "acct-"+n, ledger.RoleNode, 10_000*ledger.GYM))
	}
	pub, priv, _ := ed25519.GenerateKey(nil)
	rec, _ := json.Marshal(map[string]any{"job": "j1", "epoch": 1, "cid": "bafyckpt", "weights_cid": "bafkw", "hanzod": hex.EncodeToString(pub), "kind": "publication"})
	sig := ed25519.Sign(priv, rec)

	l := &log{}
	l.add(t, state.JobTransitioned{Job: "j1", From: state.Pending, To: state.Provisioning, Members: []string{"n1", "n2", "n9"}})
	l.add(t, state.RewardsPaid{Job: "j1", Epoch: 1, Total: 100 * ledger.GYM, Payouts: []ledger.Payout{{ID: "n1", Amount: 60 * ledger.GYM}, {ID: "n2", Amount: 30 * ledger.GYM}, {ID: "n9", Amount: 10 * ledger.GYM}}})
	l.add(t, state.Slashed{Account: "n2", Offence: 1, Amount: 500 * ledger.GYM, Reason: "bad delta", Evidence: []byte("evidence-1")})
	l.add(t, state.CheckpointPublished{Job: "j1", Epoch: 1, CID: "bafyckpt", Record: string(rec), Signature: hex.EncodeToString(sig)})

	cursor := filepath.Join(t.TempDir(), "cursor.json")
	open := func() *chainsync.Mirror {
		m, err := chainsync.Open(chainsync.Config{Book: book, Read: l.read, Account: account, CursorFile: cursor})
		must(t, err)
		return m
	}
	m := open()
	// An outage: nothing advances past the first write, the queue shows.
	book.down = true
	n, err := m.Step(ctx, 100)
	if !errors.Is(err, errDown) || n != 1 {
		t.Fatalf("step during the outage: %d events, %v", n, err)
	}
	if st := m.Status(); st.Pending != 3 || st.Failures != 1 || st.LastError == "" || st.Locked != 2 {
		t.Fatalf("status during the outage %+v", st)
	}
	if p, _ := book.Position(ctx, "acct-n1"); p.Locks != 1 {
		t.Fatalf("n1 not locked: %+v", p)
	}
	book.down = false
	if n, err := m.Step(ctx, 100); err != nil || n != 3 {
		t.Fatalf("catching up: %d, %v", n, err)
	}
	st := m.Status()
	if st.Pending != 0 || st.Paid != 1 || st.Slashed != 1 || st.Published != 1 || st.LastError != "" || st.Unbound < 2 {
		t.Fatalf("status %+v", st)
	}
	p1, _ := book.Position(ctx, "acct-n1")
	p2, _ := book.Position(ctx, "acct-n2")
	if p1.Free != 60*ledger.GYM || p2.Free != 30*ledger.GYM || len(p2.Slashes) != 1 || p2.Bonded != 9_500*ledger.GYM {
		t.Fatalf("n1 %+v n2 %+v", p1, p2)
	}
	got, ok, _ := book.Publication(ctx, "j1", 1)
	if !ok || got.CID != "bafyckpt" || got.WeightsCID != "bafkw" || !ed25519.Verify(got.Signer, rec, got.Signature) {
		t.Fatalf("publication %+v %v", got, ok)
	}

	// A restart that lost its cursor replays everything: nothing is paid
	// or slashed twice.
	writes := book.writes
	must(t, removeFile(cursor))
	m = open()
	if n, err := m.Step(ctx, 100); err != nil || n != 4 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	if p, _ := book.Position(ctx, "acct-n2"); len(p.Slashes) != 1 || p.Free != 30*ledger.GYM {
		t.Fatalf("replay changed n2: %+v", p)
	}
	if book.writes != writes+1 { // the payment is tried and refused as paid; the slash is not tried
		t.Fatalf("replay wrote %d times", book.writes-writes)
	}

	// Settlement unlocks.
	l.add(t, state.JobSettled{Job: "j1", Record: "{}", Signature: ""})
	if _, err := m.Step(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if p, _ := book.Position(ctx, "acct-n1"); p.Locks != 0 {
		t.Fatalf("n1 still locked after settlement: %+v", p)
	}
	must(t, book.Check())
}

func TestStakeCache(t *testing.T) {
	now := time.Unix(0, 0)
	calls := 0
	staked := map[string]bool{"acct-n1": true}
	c := &chainsync.StakeCache{
		Staked: func(_ context.Context, a string, r ledger.Role) (bool, error) {
			calls++
			return staked[a] && r == ledger.RoleNode, nil
		},
		Account: account, MaxAge: time.Minute, Now: func() time.Time { return now },
	}
	must(t, c.Check(ctx, "n1"))
	must(t, c.Check(ctx, "n1"))
	if calls != 1 {
		t.Fatalf("%d chain reads for a cached answer", calls)
	}
	now = now.Add(2 * time.Minute)
	staked["acct-n1"] = false // unbonded meanwhile
	if err := c.Check(ctx, "n1"); !errors.Is(err, chainsync.ErrNotStaked) {
		t.Fatalf("stale stake admitted: %v", err)
	}
	if err := c.Check(ctx, "n9"); !errors.Is(err, chainsync.ErrNotStaked) {
		t.Fatalf("node without an account: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func removeFile(p string) error { return os.Remove(p) }

func FuzzParseAccounts(f *testing.F) {
	f.Add([]byte(`{"a1b2":"0x00000000000000000000000000000000000000aa"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := chainsync.ParseAccounts(b)
		if err != nil {
			return
		}
		for k, v := range m {
			if k == "" || len(v) != 42 {
				t.Fatalf("accepted %q → %q", k, v)
			}
		}
	})
}
