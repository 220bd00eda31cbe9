package bolt

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/store"
	"github.com/zooai/gym/orchestrator/store/storetest"
)

// fakeClock is a settable clock for lease expiry.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) *storetest.Env {
		dir := t.TempDir()
		clock := &fakeClock{now: time.Unix(1_767_225_600, 0)}
		cfg := DefaultConfig(dir)
		cfg.Now = clock.Now
		open := func(t *testing.T) store.Store {
			s, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		env := &storetest.Env{TTL: 10 * time.Second, Expire: func(*testing.T) { clock.Advance(11 * time.Second) }}
		env.Store = open(t)
		env.Reopen = func(t *testing.T) store.Store {
			env.Store.Close()
			return open(t)
		}
		return env
	})
}

func TestOneProcessPerDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := DefaultConfig(dir)
	cfg.LockTimeout = 50 * time.Millisecond
	if s2, err := Open(cfg); err == nil {
		s2.Close()
		t.Fatal("a second open of the same directory succeeded")
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(map[int]string{1: "batch1", 64: "batch64"}[batch], func(b *testing.B) {
			s, err := Open(DefaultConfig(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.Bench(b, s, batch)
		})
	}
}

// TestCompactInChunks: a compaction larger than one transaction's chunk
// drops every record it should, and a cancelled one stops at a chunk
// boundary with a consistent log.
func TestCompactInChunks(t *testing.T) {
	ctx := context.Background()
	s, err := Open(DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok, err := s.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*compactChunk + 100
	recs := make([]store.Record, n)
	for i := range recs {
		recs[i] = store.Record{Index: uint64(i + 1), Data: []byte("x")}
	}
	if err := s.Append(ctx, tok, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot(ctx, tok, n-10, []byte("snap")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Compact(cctx, tok, n-10); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled compact: %v", err)
	}
	if err := s.Compact(ctx, tok, n-10); err != nil {
		t.Fatal(err)
	}
	first, _ := s.First(ctx)
	got, err := s.Read(ctx, first, n)
	if first != n-9 || err != nil || len(got) != 10 || got[0].Index != n-9 {
		t.Fatalf("after compaction: first %d, %d records from %v, %v", first, len(got), got[0].Index, err)
	}
}
