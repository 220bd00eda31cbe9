package pin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/internal/atomicfile"
)

// Node is what the queue needs of an IPFS node; *Client is one.
type Node interface {
	Import(ctx context.Context, g artifact.Getter, root cid.Cid) (int64, error)
	Pinned(ctx context.Context, root cid.Cid) (bool, error)
}

// States of an entry.
const (
	Pending = "pending" // not yet confirmed pinned; retried at Next
	Pinned  = "pinned"  // the node confirmed a recursive pin (pin/ls)
)

// Entry is one artifact to pin and what happened to it so far.
type Entry struct {
	Root      string    `json:"root"`
	Kind      string    `json:"kind,omitempty"` // checkpoint, base-model, dataset, …
	Name      string    `json:"name,omitempty"`
	Version   uint64    `json:"version,omitempty"`
	State     string    `json:"state"`
	Added     time.Time `json:"added"`
	Attempts  int       `json:"attempts"`             // failed and successful tries
	Failures  int       `json:"failures"`             // consecutive failed tries
	LastError string    `json:"last_error,omitempty"` // of the last failed try
	Next      time.Time `json:"next,omitzero"`        // when a pending entry is tried again
	Pinned    time.Time `json:"pinned,omitzero"`
	Bytes     int64     `json:"bytes,omitempty"` // CAR bytes sent by the successful import
}

// Config configures a Queue.
type Config struct {
	// Path is the queue's file (JSON, rewritten atomically on every
	// change); it is created when absent.
	Path string
	// MinBackoff is the wait after the first failure; it doubles with
	// every further failure up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// TryTimeout bounds one try (an import of a large checkpoint takes
	// its size over the link to the node); 0 is no bound.
	TryTimeout time.Duration
	// Now is the clock.
	Now func() time.Time
}

// DefaultConfig is 2 s doubling to 5 min, 30 min per try, with the wall
// clock.
func DefaultConfig(path string) Config {
	return Config{Path: path, MinBackoff: 2 * time.Second, MaxBackoff: 5 * time.Minute, TryTimeout: 30 * time.Minute, Now: time.Now}
}

// Validate says what is wrong with c.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("pin: Config.Path is empty")
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("pin: backoff %v..%v: want 0 < min ≤ max", c.MinBackoff, c.MaxBackoff)
	case c.Now == nil:
		return errors.New("pin: Config.Now is nil")
	}
	return nil
}

// Backoff is the wait after the n-th consecutive failure (n ≥ 1): min,
// 2·min, 4·min, … capped at max.
func Backoff(n int, min, max time.Duration) time.Duration {
	d := min
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return mind(d, max)
}

func mind(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// Queue is the durable list of artifacts to pin. It is safe for
// concurrent use; Step is meant to be called from one loop.
type Queue struct {
	cfg     Config
	mu      sync.Mutex
	entries map[string]*Entry
	ok, bad uint64 // tries that succeeded / failed since Open
	sent    int64  // CAR bytes of successful imports since Open
}

// Open loads the queue file (an absent file is an empty queue).
func Open(cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	q := &Queue{cfg: cfg, entries: map[string]*Entry{}}
	b, err := os.ReadFile(cfg.Path)
	if errors.Is(err, os.ErrNotExist) {
		return q, nil
	}
	if err != nil {
		return nil, err
	}
	var list []*Entry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("pin: %s: %w", cfg.Path, err)
	}
	for _, e := range list {
		if _, err := cid.Decode(e.Root); err != nil || (e.State != Pending && e.State != Pinned) {
			return nil, fmt.Errorf("pin: %s: bad entry %q (state %q)", cfg.Path, e.Root, e.State)
		}
		q.entries[e.Root] = e
	}
	return q, nil
}

// save writes the queue file; q.mu is held.
func (q *Queue) save() error {
	list := make([]*Entry, 0, len(q.entries))
	for _, e := range q.entries {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Root < list[j].Root })
	b, err := json.MarshalIndent(list, "", " ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(q.cfg.Path, 0o600, true, append(b, '\n'))
}

// Add puts root on the queue, due now, unless it is there already; it
// returns whether it was new. The entry is on disk when Add returns.
func (q *Queue) Add(root cid.Cid, kind, name string, version uint64) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.entries[root.String()]; ok {
		return false, nil
	}
	now := q.cfg.Now()
	e := &Entry{Root: root.String(), Kind: kind, Name: name, Version: version, State: Pending, Added: now, Next: now}
	q.entries[e.Root] = e
	if err := q.save(); err != nil {
		delete(q.entries, e.Root)
		return false, fmt.Errorf("pin: queue %s: %w", q.cfg.Path, err)
	}
	return true, nil
}

// Get returns a copy of root's entry.
func (q *Queue) Get(root string) (Entry, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.entries[root]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// List returns copies of every entry, by root.
func (q *Queue) List() []Entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Entry, 0, len(q.entries))
	for _, e := range q.entries {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Root < out[j].Root })
	return out
}

// NextDue is the earliest time a pending entry is due, false when none is
// pending.
func (q *Queue) NextDue() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var t time.Time
	found := false
	for _, e := range q.entries {
		if e.State == Pending && (!found || e.Next.Before(t)) {
			t, found = e.Next, true
		}
	}
	return t, found
}

// Step tries every pending entry that is due: it asks node whether the
// root is pinned already (a restart after an import the queue did not
// record, or another replica's), else imports the DAG from g and asks
// again. A failure schedules the next try by Backoff; every outcome is on
// disk before Step returns. It returns how many entries it tried and the
// first error writing the queue file (RPC failures are the entries'
// state, not Step's error).
func (q *Queue) Step(ctx context.Context, node Node, g artifact.Getter) (int, error) {
	q.mu.Lock()
	now := q.cfg.Now()
	var due []string
	for _, e := range q.entries {
		if e.State == Pending && !e.Next.After(now) {
			due = append(due, e.Root)
		}
	}
	q.mu.Unlock()
	sort.Strings(due)
	var saveErr error
	for _, root := range due {
		if ctx.Err() != nil {
			break
		}
		c, _ := cid.Decode(root) // checked by Add and Open
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if q.cfg.TryTimeout > 0 {
			tctx, cancel = context.WithTimeout(ctx, q.cfg.TryTimeout)
		}
		n, err := try(tctx, node, g, c)
		cancel()
		if ctx.Err() != nil {
			break // shutting down: not the entry's failure
		}
		q.mu.Lock()
		e := q.entries[root]
		e.Attempts++
		now := q.cfg.Now()
		if err == nil {
			e.State, e.Pinned, e.Bytes, e.LastError, e.Next, e.Failures = Pinned, now, n, "", time.Time{}, 0
			q.ok++
			q.sent += n
		} else {
			q.bad++
			e.Failures++
			e.LastError = err.Error()
			e.Next = now.Add(Backoff(e.Failures, q.cfg.MinBackoff, q.cfg.MaxBackoff))
		}
		if err := q.save(); err != nil && saveErr == nil {
			saveErr = fmt.Errorf("pin: queue %s: %w", q.cfg.Path, err)
		}
		q.mu.Unlock()
	}
	return len(due), saveErr
}

func try(ctx context.Context, node Node, g artifact.Getter, root cid.Cid) (int64, error) {
	if ok, err := node.Pinned(ctx, root); err != nil {
		return 0, err
	} else if ok {
		return 0, nil
	}
	n, err := node.Import(ctx, g, root)
	if err != nil {
		return 0, err
	}
	ok, err := node.Pinned(ctx, root)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: %s imported but pin/ls does not list it", ErrReply, root)
	}
	return n, nil
}

// WriteMetrics writes the queue's metrics in the Prometheus text format
// (documented in docs/metrics.md). A nil queue (pinning off) writes the
// same series, all zero, so they never disappear.
func (q *Queue) WriteMetrics(w io.Writer) {
	if q == nil {
		q = &Queue{cfg: Config{Now: time.Now}}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.cfg.Now()
	var pending, pinned int
	var oldest time.Duration
	for _, e := range q.entries {
		if e.State == Pinned {
			pinned++
			continue
		}
		pending++
		oldest = max(oldest, now.Sub(e.Added))
	}
	fmt.Fprintf(w, "# HELP gym_hanzod_ipfs_pins Artifacts on the IPFS pin queue by state.\n# TYPE gym_hanzod_ipfs_pins gauge\n")
	fmt.Fprintf(w, "gym_hanzod_ipfs_pins{state=%q} %d\ngym_hanzod_ipfs_pins{state=%q} %d\n", Pending, pending, Pinned, pinned)
	fmt.Fprintf(w, "# HELP gym_hanzod_ipfs_pin_oldest_pending_seconds Age of the oldest artifact not yet pinned (0 when none).\n# TYPE gym_hanzod_ipfs_pin_oldest_pending_seconds gauge\n")
	fmt.Fprintf(w, "gym_hanzod_ipfs_pin_oldest_pending_seconds %g\n", oldest.Seconds())
	fmt.Fprintf(w, "# HELP gym_hanzod_ipfs_pin_attempts_total Pin attempts since this process started, by result.\n# TYPE gym_hanzod_ipfs_pin_attempts_total counter\n")
	fmt.Fprintf(w, "gym_hanzod_ipfs_pin_attempts_total{result=\"ok\"} %d\ngym_hanzod_ipfs_pin_attempts_total{result=\"error\"} %d\n", q.ok, q.bad)
	fmt.Fprintf(w, "# HELP gym_hanzod_ipfs_pin_bytes_total CAR bytes imported into the IPFS node since this process started.\n# TYPE gym_hanzod_ipfs_pin_bytes_total counter\n")
	fmt.Fprintf(w, "gym_hanzod_ipfs_pin_bytes_total %d\n", q.sent)
}
