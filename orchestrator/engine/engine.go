// Package engine runs the orchestrator's state machine over a store: it
// rebuilds the state on start (latest snapshot, then the tail of the log),
// persists every command's events before they count, takes snapshots,
// compacts the log behind them, and holds the leader lease whose fencing
// token guards every write.
//
// Compaction: after each snapshot the leader drops the records the
// snapshot covers that no unsettled job needs (state.Machine.RetainFrom:
// the judge reads a job's rings, money and offences back from the log
// until it settles), so the log, start-up and the judge's reads are
// bounded by the running jobs, not by the log's age. A standby that falls
// behind the compaction point rebuilds from the snapshot.
//
// One replica is the leader and executes commands; the others follow the
// log and campaign for the lease, which they win once the leader stops
// renewing it. The daemon drives Campaign and Tick from its clock; nothing
// here sleeps or starts goroutines.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store"
)

// ErrNotLeader is returned by Do on a replica that does not hold a live
// lease; the caller should retry on the leader.
var ErrNotLeader = errors.New("engine: not the leader")

// Config configures an engine.
type Config struct {
	State state.Config
	// Holder identifies this replica in the lease (unique per process).
	Holder string
	// LeaseTTL is how long a lease lives without renewal; a standby takes
	// over at most about LeaseTTL after the leader stopped (the issue's
	// target is 10 s).
	LeaseTTL time.Duration
	// SnapshotEvery takes a snapshot after this many events.
	SnapshotEvery uint64
	// ReadBatch is how many records one store read fetches.
	ReadBatch int
	// NoCompaction keeps the whole log (an audit copy, or a store shared
	// with readers that need old events).
	NoCompaction bool
}

// DefaultConfig returns a config for holder.
func DefaultConfig(holder string) Config {
	return Config{State: state.DefaultConfig(), Holder: holder, LeaseTTL: 6 * time.Second, SnapshotEvery: 10_000, ReadBatch: 4096}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Holder == "" {
		return fmt.Errorf("engine: empty holder id")
	}
	if c.LeaseTTL < 10*time.Millisecond {
		return fmt.Errorf("engine: lease TTL %v below 10ms", c.LeaseTTL)
	}
	if c.SnapshotEvery == 0 || c.ReadBatch <= 0 {
		return fmt.Errorf("engine: SnapshotEvery and ReadBatch must be positive")
	}
	return c.State.Validate()
}

// Engine is one replica. Its methods are safe for concurrent use; commands
// are executed one at a time.
type Engine struct {
	cfg   Config
	st    store.Store
	now   func() time.Time
	mu    sync.Mutex
	m     *state.Machine
	token uint64    // 0 unless leader
	until time.Time // the lease is surely ours until then (local clock)
	// lease mirrors until (unix ns) while token != 0, else 0: Leading
	// reads it without the lock, which a store call in Campaign may hold
	// for as long as the store takes to answer (or time out).
	lease atomic.Int64
	snap  uint64 // index of the last snapshot
	dirty bool   // a rebuild failed: rebuild before the next use
	// Group commit: the batch being filled while another is appended.
	pending  *batch
	flushing bool
	// Replayed counts the events applied from the log by the last rebuild
	// (not counting the snapshot).
	replayed uint64
}

// Open builds a replica and rebuilds the state from st. now is the clock
// (time.Now in production, a fake in tests).
func Open(ctx context.Context, cfg Config, st store.Store, now func() time.Time) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, st: st, now: now}
	if err := e.rebuild(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// rebuild replaces the machine with snapshot + log replay.
func (e *Engine) rebuild(ctx context.Context) error {
	idx, data, err := e.st.LoadSnapshot(ctx)
	var m *state.Machine
	switch {
	case errors.Is(err, store.ErrNoSnapshot):
		if m, err = state.New(e.cfg.State); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if m, err = state.Restore(e.cfg.State, data); err != nil {
			return err
		}
		if m.Applied() != idx {
			return fmt.Errorf("%w: snapshot says index %d, holds %d", state.ErrCorrupt, idx, m.Applied())
		}
	}
	e.m, e.snap, e.replayed = m, idx, 0
	return e.catchUpFrom(ctx)
}

// catchUp applies records the store has and the machine does not. A
// replica behind the log's compaction point (a standby that was away
// while the leader snapshotted and compacted) rebuilds from the snapshot
// instead; a few tries cover a leader compacting again meanwhile.
func (e *Engine) catchUp(ctx context.Context) error {
	err := e.catchUpFrom(ctx)
	for try := 0; errors.Is(err, store.ErrCompacted) && try < 3; try++ {
		err = e.rebuild(ctx)
	}
	return err
}

// catchUpFrom applies the records after the machine's last event.
func (e *Engine) catchUpFrom(ctx context.Context) error {
	for {
		recs, err := e.st.Read(ctx, e.m.Applied()+1, e.cfg.ReadBatch)
		if err != nil {
			return err
		}
		for _, r := range recs {
			ev, err := state.DecodeEvent(r.Data)
			if err != nil {
				return fmt.Errorf("record %d: %w", r.Index, err)
			}
			if ev.Index != r.Index {
				return fmt.Errorf("%w: record %d holds event %d", state.ErrCorrupt, r.Index, ev.Index)
			}
			if err := e.m.Apply(ev); err != nil {
				return err
			}
			e.replayed++
		}
		if len(recs) < e.cfg.ReadBatch {
			return nil
		}
	}
}

// clean rebuilds the state if an earlier rebuild failed.
func (e *Engine) clean(ctx context.Context) error {
	if !e.dirty {
		return nil
	}
	if err := e.rebuild(ctx); err != nil {
		return err
	}
	e.dirty = false
	return nil
}

// Replayed is how many log events the last rebuild or catch-up applied
// on top of the snapshot.
func (e *Engine) Replayed() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.replayed
}

// Follow applies new records written by the leader (standbys call it
// periodically).
func (e *Engine) Follow(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.clean(ctx); err != nil {
		return err
	}
	if e.token != 0 {
		return nil
	}
	return e.catchUp(ctx)
}

// Campaign acquires or renews the lease. A replica that becomes leader
// first catches up with the log, then starts it if it is empty. It reports
// whether this replica leads.
func (e *Engine) Campaign(ctx context.Context) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.publishLease()
	if err := e.clean(ctx); err != nil {
		return false, err
	}
	start := e.now()
	tok, err := e.st.Acquire(ctx, e.cfg.Holder, e.cfg.LeaseTTL)
	if errors.Is(err, store.ErrLeaseHeld) {
		e.token = 0
		return false, e.catchUp(ctx)
	}
	if err != nil {
		return e.leading(), err
	}
	// Count the lease from before the request: the server's TTL started
	// no earlier than that.
	e.until = start.Add(e.cfg.LeaseTTL)
	if tok != e.token {
		e.token = tok
		if err := e.catchUp(ctx); err != nil {
			e.token = 0
			return false, err
		}
		if evs := e.m.Start(e.now().UnixMilli()); len(evs) > 0 {
			if err := e.persist(ctx, evs); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

func (e *Engine) leading() bool { return e.token != 0 && e.now().Before(e.until) }

// publishLease mirrors token and until into lease. Call with e.mu held
// after changing either.
func (e *Engine) publishLease() {
	if e.token == 0 {
		e.lease.Store(0)
	} else {
		e.lease.Store(e.until.UnixNano())
	}
}

// Leading reports whether this replica holds a live lease. It does not
// wait for a campaign in progress: a leader cut off from its store stops
// saying it leads when its lease runs out on its own clock, not when the
// renewal it is waiting for times out.
func (e *Engine) Leading() bool {
	u := e.lease.Load()
	return u != 0 && e.now().UnixNano() < u
}

// Resign releases the lease (graceful shutdown).
func (e *Engine) Resign(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token == 0 {
		return nil
	}
	tok := e.token
	e.token = 0
	e.publishLease()
	return e.st.Release(ctx, tok)
}

// batch is a group of commands' records appended in one store call.
type batch struct {
	recs []store.Record
	done chan struct{} // closed once the append succeeded or failed
	err  error
}

// Do executes cmd on the leader: the events are durably appended before
// Do returns them. A command the state machine refuses returns its error
// and changes nothing; a failed append fails the command and rebuilds the
// state from the store (and, when fenced, gives up leadership).
//
// Group commit: while one caller appends a batch (without holding the
// lock), later callers decide their commands against the state that
// includes it and queue their events into the next batch, appended in one
// call when the first returns. If a batch fails, the batch queued after it
// (decided on top of it) fails too. Queries through View may observe
// events that are still being appended.
func (e *Engine) Do(ctx context.Context, cmd state.Command) ([]state.Event, error) {
	e.mu.Lock()
	if !e.leading() {
		e.mu.Unlock()
		return nil, ErrNotLeader
	}
	if err := e.clean(ctx); err != nil {
		e.mu.Unlock()
		return nil, err
	}
	evs, err := e.m.Step(e.now().UnixMilli(), cmd)
	if err != nil || len(evs) == 0 {
		e.mu.Unlock()
		return nil, err
	}
	recs, err := encode(evs)
	if err != nil {
		e.dirty = true // applied but unpersistable: rebuild before the next use
		e.mu.Unlock()
		return nil, err
	}
	if e.pending == nil {
		e.pending = &batch{done: make(chan struct{})}
	}
	b := e.pending
	b.recs = append(b.recs, recs...)
	if e.flushing {
		e.mu.Unlock()
		<-b.done
		if b.err != nil {
			return nil, b.err
		}
		return evs, nil
	}
	e.flushing = true
	e.flush(context.WithoutCancel(ctx))
	e.flushing = false
	if b.err == nil && e.m.Applied()-e.snap >= e.cfg.SnapshotEvery {
		if err := e.st.SaveSnapshot(ctx, e.token, e.m.Applied(), e.m.Marshal()); err == nil {
			e.snap = e.m.Applied()
			e.compact(ctx)
		}
		// A failed snapshot costs only start-up time; the log is intact.
	}
	e.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	return evs, nil
}

// compact drops the log records the latest snapshot covers and no
// unsettled job needs. A failure leaves a longer log, nothing worse: the
// next snapshot tries again.
func (e *Engine) compact(ctx context.Context) {
	if e.cfg.NoCompaction {
		return
	}
	if through := min(e.snap, e.m.RetainFrom()-1); through > 0 {
		_ = e.st.Compact(ctx, e.token, through)
	}
}

// flush appends pending batches until none is left. It is called with the
// lock held and releases it around each append.
func (e *Engine) flush(ctx context.Context) {
	for e.pending != nil {
		take := e.pending
		e.pending = nil
		tok := e.token
		e.mu.Unlock()
		err := e.st.Append(ctx, tok, take.recs)
		e.mu.Lock()
		if err != nil {
			if next := e.pending; next != nil {
				next.err = fmt.Errorf("engine: an earlier command's append failed: %w", err)
				close(next.done)
				e.pending = nil
			}
			take.err = e.failed(ctx, err)
		}
		close(take.done)
	}
}

func encode(evs []state.Event) ([]store.Record, error) {
	recs := make([]store.Record, len(evs))
	for i, ev := range evs {
		b, err := ev.Encode()
		if err != nil {
			return nil, err
		}
		recs[i] = store.Record{Index: ev.Index, Data: b}
	}
	return recs, nil
}

// failed handles a failed append: the in-memory state is ahead of the log,
// so it is rebuilt from the store.
func (e *Engine) failed(ctx context.Context, err error) error {
	if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrConflict) {
		e.token = 0
		e.publishLease()
	}
	if rerr := e.rebuild(ctx); rerr != nil {
		e.dirty = true
		return errors.Join(err, fmt.Errorf("engine: rebuilding after a failed append: %w", rerr))
	}
	return err
}

// persist appends applied events synchronously (the genesis event).
func (e *Engine) persist(ctx context.Context, evs []state.Event) error {
	recs, err := encode(evs)
	if err != nil {
		return err
	}
	if err := e.st.Append(ctx, e.token, recs); err != nil {
		return e.failed(context.WithoutCancel(ctx), err)
	}
	return nil
}

// View runs f with the state under the engine's lock. f must not keep
// references into the machine.
func (e *Engine) View(f func(m *state.Machine)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e.m)
}

// First is the index of the first record the log keeps (1 until it was
// compacted).
func (e *Engine) First(ctx context.Context) (uint64, error) { return e.st.First(ctx) }

// Read returns up to max stored records from index from on (the event log
// as persisted; followers and clients watch a job through it). It fails
// with store.ErrCompacted before First.
func (e *Engine) Read(ctx context.Context, from uint64, max int) ([]store.Record, uint64, error) {
	recs, err := e.st.Read(ctx, from, max)
	if err != nil {
		return nil, 0, err
	}
	last, err := e.st.Last(ctx)
	return recs, last, err
}
