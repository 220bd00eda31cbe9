package judge

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/zooai/gym/orchestrator/state"
	ostore "github.com/zooai/gym/orchestrator/store"
)

// fakeLog is an append-only log that records where each Read started.
type fakeLog struct {
	recs  []ostore.Record
	froms []uint64
	first uint64 // records before it were compacted (0: none)
}

func (l *fakeLog) First(context.Context) (uint64, error) { return max(l.first, 1), nil }

func (l *fakeLog) add(t *testing.T, b state.Body) {
	data, err := state.Event{Index: uint64(len(l.recs) + 1), Body: b}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	l.recs = append(l.recs, ostore.Record{Index: uint64(len(l.recs) + 1), Data: data})
}

func (l *fakeLog) Read(_ context.Context, from uint64, max int) ([]ostore.Record, uint64, error) {
	l.froms = append(l.froms, from)
	last := uint64(len(l.recs))
	if from < l.first {
		return nil, last, fmt.Errorf("%w: from %d", ostore.ErrCompacted, from)
	}
	if from < 1 || from > last {
		return nil, last, nil
	}
	return l.recs[from-1 : min(uint64(len(l.recs)), from-1+uint64(max))], last, nil
}

// The judge's history reads each record of the log once: a later read
// starts where the last one ended, and returns every event of its kinds so
// far, in log order.
func TestEventHistoryIsIncremental(t *testing.T) {
	log := &fakeLog{}
	for i := range 2500 { // spans several Read pages
		log.add(t, state.Ticked{})
		if i%1000 == 7 {
			log.add(t, state.RingConfigured{Job: "j", Ring: []string{"a", "b"}, Generation: uint64(i)})
		}
	}
	var h eventHistory
	evs, err := h.read(t.Context(), log)
	if err != nil || len(evs) != 3 {
		t.Fatalf("%d events, %v; want 3", len(evs), err)
	}
	if n := uint64(len(log.recs)); h.next != n+1 {
		t.Fatalf("next %d after reading %d records", h.next, n)
	}
	log.froms = nil
	log.add(t, state.Ticked{})
	log.add(t, state.Slashed{Account: "x"})
	evs, err = h.read(t.Context(), log)
	if err != nil || len(evs) != 4 {
		t.Fatalf("%d events, %v; want 4", len(evs), err)
	}
	if _, ok := evs[3].Body.(state.Slashed); !ok {
		t.Fatalf("last event %T, want the new slash", evs[3].Body)
	}
	if want := []uint64{uint64(len(log.recs) - 1)}; !slices.Equal(log.froms, want) {
		t.Fatalf("second read started at %v, want %v (only the new records)", log.froms, want)
	}
	// Nothing new: one empty read.
	log.froms = nil
	if evs, err = h.read(t.Context(), log); err != nil || len(evs) != 4 || len(log.froms) != 1 {
		t.Fatalf("%d events, %v, reads %v", len(evs), err, log.froms)
	}
}

// TestEventHistoryFollowsCompaction: events the log compacted away are
// dropped from the history too (what a fresh judge would read), a judge
// that was behind the compaction point resumes at the log's new start,
// and the slices handed out before stay intact.
func TestEventHistoryFollowsCompaction(t *testing.T) {
	log := &fakeLog{}
	log.add(t, state.RingConfigured{Job: "old", Generation: 1}) // 1
	log.add(t, state.Ticked{})                                  // 2
	log.add(t, state.RingConfigured{Job: "new", Generation: 1}) // 3
	var h eventHistory
	before, err := h.read(t.Context(), log)
	if err != nil || len(before) != 2 {
		t.Fatalf("%d events, %v", len(before), err)
	}
	log.first = 3
	log.add(t, state.RingConfigured{Job: "new", Generation: 2}) // 4
	evs, err := h.read(t.Context(), log)
	if err != nil || len(evs) != 2 || evs[0].Index != 3 || evs[1].Index != 4 {
		t.Fatalf("after compaction through 2: %v, %v; want events 3 and 4", evs, err)
	}
	if before[0].Index != 1 || before[1].Index != 3 {
		t.Fatalf("an earlier result changed: %v", before)
	}
	// A judge that had read nothing, and a log compacted past its position.
	var fresh eventHistory
	fresh.next = 2
	log.first = 4
	evs, err = fresh.read(t.Context(), log)
	if err != nil || len(evs) != 1 || evs[0].Index != 4 {
		t.Fatalf("fresh judge behind the compaction point: %v, %v", evs, err)
	}
	if slices.Contains(log.froms, 2) {
		t.Fatalf("read before the log's start: %v", log.froms)
	}
}
