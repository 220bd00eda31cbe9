package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store/bolt"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestDayOfTicks compresses a day of an idle orchestrator (one tick a
// second: 86,400 ticked events) into an injected clock, with one job that
// stays unsettled for the first quarter of the day. While it is
// unsettled the log keeps everything from its submission on (the judge
// reads the job back from there); once it settles, the log is compacted
// behind each snapshot, so the records kept and the events a restart
// replays stay under two snapshot intervals whatever the log's age, and a
// standby that was away past the compaction point catches up from the
// snapshot.
func TestDayOfTicks(t *testing.T) {
	if testing.Short() {
		t.Skip("a day of ticks (≈ 10 s)")
	}
	ctx := context.Background()
	dir, clk := t.TempDir(), newClock()
	open := func() *bolt.Store {
		cfg := bolt.DefaultConfig(dir)
		cfg.Now, cfg.NoSync = clk.Now, true
		s, err := bolt.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	st := open()
	cfg := DefaultConfig("a") // SnapshotEvery 10,000, as in production
	e, err := Open(ctx, cfg, st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, e)
	evs, err := e.Do(ctx, state.SubmitJob{Spec: jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3}})
	if err != nil {
		t.Fatal(err)
	}
	submitted := evs[0].Index
	// A standby that reads the log now and then sleeps through the day.
	standby, err := Open(ctx, DefaultConfig("b"), st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	tick := func(n int) {
		t.Helper()
		for i := range n {
			clk.Advance(time.Second)
			if i%2 == 0 {
				leader(t, e) // renew the lease, as the daemon does every second
			}
			if _, err := e.Do(ctx, state.Tick{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const day = 86_400
	tick(day / 4)
	if first, _ := st.First(ctx); first > submitted {
		t.Fatalf("the log was compacted to %d past the unsettled job's submission at %d", first, submitted)
	}
	for _, c := range []state.Command{
		state.FailJob{Job: evs[0].Body.(state.JobSubmitted).Job, Reason: "test"},
		state.Settle{Job: evs[0].Body.(state.JobSubmitted).Job, Record: "{}", Signature: strings.Repeat("ab", 64)},
	} {
		if _, err := e.Do(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	tick(day - day/4)
	last, _ := st.Last(ctx)
	first, _ := st.First(ctx)
	kept := last - first + 1
	if last < day || kept > 2*cfg.SnapshotEvery {
		t.Fatalf("after a day: records %d–%d (%d kept); want ≥ %d appended, ≤ %d kept", first, last, kept, day, 2*cfg.SnapshotEvery)
	}
	if err := standby.Follow(ctx); err != nil {
		t.Fatalf("standby behind the compaction point: %v", err)
	}
	if got, want := marshal(standby), marshal(e); string(got) != string(want) {
		t.Fatal("the standby's state differs from the leader's after catching up from the snapshot")
	}
	fi, err := os.Stat(filepath.Join(dir, "hanzod.db"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = open()
	defer st.Close()
	start := time.Now()
	e2, err := Open(ctx, cfg, st, clk.Now)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if r := e2.Replayed(); r > cfg.SnapshotEvery {
		t.Fatalf("a restart replayed %d events; want at most one snapshot interval (%d)", r, cfg.SnapshotEvery)
	}
	if got, want := marshal(e2), marshal(e); string(got) != string(want) {
		t.Fatal("state after restart differs")
	}
	t.Logf("a day of ticks: %d events appended, %d kept (from %d), store file %.1f MiB, snapshot %d bytes; restart replayed %d events in %v",
		last, kept, first, float64(fi.Size())/(1<<20), len(marshal(e)), e2.Replayed(), took.Round(time.Millisecond))
}
