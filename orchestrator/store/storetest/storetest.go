// Package storetest is the test suite every store.Store implementation
// must pass (kubo's coreiface/tests pattern): one set of behaviours, run
// against the embedded and the Valkey store.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/store"
)

// Env is one fresh, empty store and the hooks the suite needs.
type Env struct {
	Store store.Store
	// Reopen closes Store and opens the same data again (a restart).
	Reopen func(t *testing.T) store.Store
	// Expire makes the live lease expire now, deterministically: advance a
	// fake clock past it, or end it on the server. When Expire returns,
	// Acquire by another holder must succeed; the suite never waits on a
	// wall clock (a backend tests its own real-time expiry separately).
	Expire func(t *testing.T)
	// Other opens a second handle on the same data, as another replica
	// would; nil when the implementation allows one process only.
	Other func(t *testing.T) store.Store
	// TTL is the lease duration to use: long enough that a lease never
	// lapses by itself between two steps of a test on a loaded machine.
	TTL time.Duration
}

// Run runs the suite; newEnv must return a fresh, empty store each call.
func Run(t *testing.T, newEnv func(t *testing.T) *Env) {
	tests := []struct {
		name string
		fn   func(*testing.T, *Env)
	}{
		{"Empty", testEmpty},
		{"AppendRead", testAppendRead},
		{"Lease", testLease},
		{"FencedLeader", testFencedLeader},
		{"Snapshot", testSnapshot},
		{"Reopen", testReopen},
		{"ConcurrentAppends", testConcurrentAppends},
		{"SecondReplica", testSecondReplica},
		{"Compact", testCompact},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newEnv(t)) })
	}
}

func recs(from uint64, n int, tag string) []store.Record {
	out := make([]store.Record, n)
	for i := range out {
		out[i] = store.Record{Index: from + uint64(i), Data: []byte(fmt.Sprintf("%s-%d", tag, from+uint64(i)))}
	}
	return out
}

func mustLog(t *testing.T, s store.Store, want ...string) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Read(ctx, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("log has %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.Index != uint64(i+1) || string(r.Data) != want[i] {
			t.Fatalf("record %d = (%d, %q), want (%d, %q)", i, r.Index, r.Data, i+1, want[i])
		}
	}
	last, err := s.Last(ctx)
	if err != nil || last != uint64(len(want)) {
		t.Fatalf("Last = %d, %v; want %d", last, err, len(want))
	}
}

func acquire(t *testing.T, s store.Store, holder string, ttl time.Duration) uint64 {
	t.Helper()
	tok, err := s.Acquire(context.Background(), holder, ttl)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", holder, err)
	}
	if tok == 0 {
		t.Fatalf("Acquire(%s) returned token 0", holder)
	}
	return tok
}

func testEmpty(t *testing.T, e *Env) {
	ctx := context.Background()
	mustLog(t, e.Store)
	if _, _, err := e.Store.LoadSnapshot(ctx); !errors.Is(err, store.ErrNoSnapshot) {
		t.Fatalf("LoadSnapshot on empty store: %v", err)
	}
	if err := e.Store.Append(ctx, 0, recs(1, 1, "x")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("append with token 0: %v", err)
	}
	tok := acquire(t, e.Store, "a", e.TTL)
	if err := e.Store.Append(ctx, tok, nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("empty append: %v", err)
	}
	if err := e.Store.Append(ctx, tok, []store.Record{{Index: 1}, {Index: 3}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("gap inside a batch: %v", err)
	}
	if err := e.Store.Append(ctx, tok, []store.Record{{Index: 1, Data: make([]byte, store.MaxRecord+1)}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("oversized record: %v", err)
	}
	if _, err := e.Store.Read(ctx, 0, 1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("read from 0: %v", err)
	}
	mustLog(t, e.Store)
}

func testAppendRead(t *testing.T, e *Env) {
	ctx := context.Background()
	tok := acquire(t, e.Store, "a", e.TTL)
	if err := e.Store.Append(ctx, tok, recs(1, 3, "r")); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Append(ctx, tok, recs(4, 1, "r")); err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{1, 4, 6, 7} { // overlaps and gaps
		if err := e.Store.Append(ctx, tok, recs(from, 2, "bad")); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("append at %d after 4: %v", from, err)
		}
	}
	mustLog(t, e.Store, "r-1", "r-2", "r-3", "r-4")
	got, err := e.Store.Read(ctx, 2, 2)
	if err != nil || len(got) != 2 || got[0].Index != 2 || string(got[1].Data) != "r-3" {
		t.Fatalf("Read(2, 2) = %v, %v", got, err)
	}
	if got, err := e.Store.Read(ctx, 9, 5); err != nil || len(got) != 0 {
		t.Fatalf("Read past the end = %v, %v", got, err)
	}
	big := make([]store.Record, 1000)
	for i := range big {
		big[i] = store.Record{Index: 5 + uint64(i), Data: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	if err := e.Store.Append(ctx, tok, big); err != nil {
		t.Fatal(err)
	}
	if last, _ := e.Store.Last(ctx); last != 1004 {
		t.Fatalf("Last after a 1000-record batch = %d", last)
	}
	got, _ = e.Store.Read(ctx, 1004, 10)
	if len(got) != 1 || !bytes.Equal(got[0].Data, big[999].Data) {
		t.Fatalf("last record of the batch: %v", got)
	}
}

func testLease(t *testing.T, e *Env) {
	ctx := context.Background()
	t1 := acquire(t, e.Store, "a", e.TTL)
	if _, err := e.Store.Acquire(ctx, "b", e.TTL); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("b acquired a live lease: %v", err)
	}
	if again := acquire(t, e.Store, "a", e.TTL); again != t1 {
		t.Fatalf("renewal changed the token %d → %d", t1, again)
	}
	e.Expire(t)
	t2 := acquire(t, e.Store, "b", e.TTL)
	if t2 <= t1 {
		t.Fatalf("new leader's token %d not above %d", t2, t1)
	}
	if _, err := e.Store.Acquire(ctx, "a", e.TTL); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("deposed a re-acquired a live lease: %v", err)
	}
	if err := e.Store.Release(ctx, t1); err != nil { // stale release: no effect
		t.Fatal(err)
	}
	if _, err := e.Store.Acquire(ctx, "a", e.TTL); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("a stale release freed the lease: %v", err)
	}
	if err := e.Store.Release(ctx, t2); err != nil {
		t.Fatal(err)
	}
	if t3 := acquire(t, e.Store, "a", e.TTL); t3 <= t2 {
		t.Fatalf("token after release %d not above %d", t3, t2)
	}
	if _, err := e.Store.Acquire(ctx, "", e.TTL); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("empty holder: %v", err)
	}
}

func testFencedLeader(t *testing.T, e *Env) {
	ctx := context.Background()
	old := acquire(t, e.Store, "old", e.TTL)
	if err := e.Store.Append(ctx, old, recs(1, 2, "old")); err != nil {
		t.Fatal(err)
	}
	e.Expire(t)
	// The old leader's lease lapsed but nobody took over: its token is still
	// the newest, so its writes are still safe and accepted.
	if err := e.Store.Append(ctx, old, recs(3, 1, "old")); err != nil {
		t.Fatalf("append after expiry, no successor: %v", err)
	}
	e.Expire(t)
	cur := acquire(t, e.Store, "new", e.TTL)
	if err := e.Store.Append(ctx, old, recs(4, 1, "old")); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed leader appended: %v", err)
	}
	if err := e.Store.SaveSnapshot(ctx, old, 3, []byte("old")); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed leader saved a snapshot: %v", err)
	}
	if err := e.Store.Append(ctx, cur, recs(4, 1, "new")); err != nil {
		t.Fatal(err)
	}
	mustLog(t, e.Store, "old-1", "old-2", "old-3", "new-4")
}

func testSnapshot(t *testing.T, e *Env) {
	ctx := context.Background()
	tok := acquire(t, e.Store, "a", e.TTL)
	if err := e.Store.Append(ctx, tok, recs(1, 5, "r")); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.SaveSnapshot(ctx, tok, 6, []byte("x")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("snapshot beyond the log: %v", err)
	}
	for _, i := range []uint64{2, 5} {
		if err := e.Store.SaveSnapshot(ctx, tok, i, []byte(fmt.Sprintf("state@%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	idx, data, err := e.Store.LoadSnapshot(ctx)
	if err != nil || idx != 5 || string(data) != "state@5" {
		t.Fatalf("LoadSnapshot = %d %q %v", idx, data, err)
	}
}

func testReopen(t *testing.T, e *Env) {
	ctx := context.Background()
	tok := acquire(t, e.Store, "a", e.TTL)
	if err := e.Store.Append(ctx, tok, recs(1, 3, "r")); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.SaveSnapshot(ctx, tok, 2, []byte("snap")); err != nil {
		t.Fatal(err)
	}
	s := e.Reopen(t)
	mustLog(t, s, "r-1", "r-2", "r-3")
	if idx, data, err := s.LoadSnapshot(ctx); err != nil || idx != 2 || string(data) != "snap" {
		t.Fatalf("snapshot after reopen: %d %q %v", idx, data, err)
	}
	e.Expire(t)
	if t2 := acquire(t, s, "b", e.TTL); t2 <= tok {
		t.Fatalf("token after reopen %d not above %d: tokens must survive restarts", t2, tok)
	}
}

// testConcurrentAppends races writers with the same token for the same
// positions: each position is written once, the log has no gaps.
func testConcurrentAppends(t *testing.T, e *Env) {
	ctx := context.Background()
	tok := acquire(t, e.Store, "a", e.TTL)
	const writers, each = 4, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				last, err := e.Store.Last(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				err = e.Store.Append(ctx, tok, recs(last+1, 1, fmt.Sprintf("w%d", w)))
				switch {
				case err == nil:
					mu.Lock()
					won++
					mu.Unlock()
				case !errors.Is(err, store.ErrConflict):
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got, err := e.Store.Read(ctx, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != won {
		t.Fatalf("%d appends acknowledged, %d records stored", won, len(got))
	}
	for i, r := range got {
		if r.Index != uint64(i+1) {
			t.Fatalf("record %d has index %d", i, r.Index)
		}
	}
}

// testSecondReplica: two handles on the same data, as two hanzod replicas
// would have; the lease and fencing work across them.
func testSecondReplica(t *testing.T, e *Env) {
	if e.Other == nil {
		t.Skip("this store allows one process per data set")
	}
	ctx := context.Background()
	other := e.Other(t)
	t1 := acquire(t, e.Store, "r1", e.TTL)
	if _, err := other.Acquire(ctx, "r2", e.TTL); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("second replica acquired a live lease: %v", err)
	}
	if err := e.Store.Append(ctx, t1, recs(1, 2, "r1")); err != nil {
		t.Fatal(err)
	}
	mustLog(t, other, "r1-1", "r1-2")
	e.Expire(t)
	t2 := acquire(t, other, "r2", e.TTL)
	if err := e.Store.Append(ctx, t1, recs(3, 1, "r1")); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed replica appended: %v", err)
	}
	if err := other.Append(ctx, t2, recs(3, 1, "r2")); err != nil {
		t.Fatal(err)
	}
	mustLog(t, e.Store, "r1-1", "r1-2", "r2-3")
}

// Bench measures appends of 200-byte records in batches of batch.
func Bench(b *testing.B, s store.Store, batch int) {
	ctx := context.Background()
	tok, err := s.Acquire(ctx, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	last, err := s.Last(ctx)
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("e"), 200)
	b.SetBytes(int64(200 * batch))
	for b.Loop() {
		rs := make([]store.Record, batch)
		for i := range rs {
			last++
			rs[i] = store.Record{Index: last, Data: data}
		}
		if err := s.Append(ctx, tok, rs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
}

// testCompact: compaction drops the head of the log up to the snapshot,
// keeps the numbering (appends continue, Last is unchanged), refuses reads
// before the new start and compaction beyond the snapshot, is fenced,
// idempotent, survives a restart, and may drop every record.
func testCompact(t *testing.T, e *Env) {
	ctx := context.Background()
	if first, err := e.Store.First(ctx); err != nil || first != 1 {
		t.Fatalf("First on an empty store = %d, %v; want 1", first, err)
	}
	tok := acquire(t, e.Store, "a", e.TTL)
	if err := e.Store.Append(ctx, tok, recs(1, 10, "r")); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Compact(ctx, tok, 3); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("compact without a snapshot: %v", err)
	}
	if err := e.Store.SaveSnapshot(ctx, tok, 6, []byte("state@6")); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Compact(ctx, tok, 7); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("compact beyond the snapshot: %v", err)
	}
	if err := e.Store.Compact(ctx, 0, 4); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("compact with token 0: %v", err)
	}
	if err := e.Store.Compact(ctx, tok, 4); err != nil {
		t.Fatal(err)
	}
	check := func(s store.Store, first, last uint64) {
		t.Helper()
		if got, err := s.First(ctx); err != nil || got != first {
			t.Fatalf("First = %d, %v; want %d", got, err, first)
		}
		if got, err := s.Last(ctx); err != nil || got != last {
			t.Fatalf("Last = %d, %v; want %d", got, err, last)
		}
		for _, from := range []uint64{1, first - 1} {
			if from == 0 {
				continue
			}
			if _, err := s.Read(ctx, from, 10); !errors.Is(err, store.ErrCompacted) {
				t.Fatalf("read from %d with the log starting at %d: %v", from, first, err)
			}
		}
		got, err := s.Read(ctx, first, 100)
		if err != nil || uint64(len(got)) != last-first+1 {
			t.Fatalf("read from %d: %d records, %v; want %d", first, len(got), err, last-first+1)
		}
		for i, r := range got {
			if want := fmt.Sprintf("r-%d", first+uint64(i)); r.Index != first+uint64(i) || string(r.Data) != want {
				t.Fatalf("record %d = (%d, %q), want %q", i, r.Index, r.Data, want)
			}
		}
	}
	check(e.Store, 5, 10)
	// Again, and below: nothing changes.
	for _, through := range []uint64{4, 2} {
		if err := e.Store.Compact(ctx, tok, through); err != nil {
			t.Fatalf("compact through %d again: %v", through, err)
		}
	}
	check(e.Store, 5, 10)
	// Appends continue the numbering; a conflicting one is still refused.
	if err := e.Store.Append(ctx, tok, recs(5, 1, "bad")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append over compacted records: %v", err)
	}
	if err := e.Store.Append(ctx, tok, recs(11, 2, "r")); err != nil {
		t.Fatal(err)
	}
	check(e.Store, 5, 12)
	if err := e.Store.SaveSnapshot(ctx, tok, 3, []byte("old")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("snapshot below the compacted start: %v", err)
	}
	// A deposed leader cannot compact.
	e.Expire(t)
	tok2 := acquire(t, e.Store, "b", e.TTL)
	if err := e.Store.Compact(ctx, tok, 5); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("compact with an old token: %v", err)
	}
	// Everything up to the last record may go; the log goes on after it.
	if err := e.Store.SaveSnapshot(ctx, tok2, 12, []byte("state@12")); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Compact(ctx, tok2, 12); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Store.Read(ctx, 13, 10); err != nil || len(got) != 0 {
		t.Fatalf("read past the end of an emptied log: %v %v", got, err)
	}
	if last, err := e.Store.Last(ctx); err != nil || last != 12 {
		t.Fatalf("Last of an emptied log = %d, %v; want 12", last, err)
	}
	if err := e.Store.Append(ctx, tok2, recs(13, 1, "r")); err != nil {
		t.Fatal(err)
	}
	s := e.Reopen(t)
	check(s, 13, 13)
	if idx, data, err := s.LoadSnapshot(ctx); err != nil || idx != 12 || string(data) != "state@12" {
		t.Fatalf("snapshot after compaction and reopen: %d %q %v", idx, data, err)
	}
}
