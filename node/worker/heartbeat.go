package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/zooai/gym/protocol/ring"
)

// ErrUnknownNode must be wrapped by an Orchestrator's Heartbeat error when
// the orchestrator does not know the node (after a restart): the worker then
// registers again.
var ErrUnknownNode = errors.New("worker: the orchestrator does not know this node")

// heart is the only caller of Orchestrator.Heartbeat: calls are serialised
// and spaced at least minGap apart (more after failures), and the latest
// assignment is kept for everyone to read.
type heart struct {
	o        Orchestrator
	clock    ring.Clock
	minGap   time.Duration
	maxGap   time.Duration
	log      *slog.Logger
	register func(context.Context) error
	publish  func(Assignment) // called with every new assignment, under mu

	mu    sync.Mutex // held for a whole call
	last  time.Time
	fails int

	amu     sync.Mutex
	latest  Assignment
	seq     uint64        // assignments seen
	changed chan struct{} // closed when seq grows
}

func newHeart(o Orchestrator, c *Config, register func(context.Context) error, publish func(Assignment)) *heart {
	return &heart{o: o, clock: c.Clock, minGap: c.MinGap, maxGap: max(c.MaxBackoff, c.MinGap), log: c.Logger,
		register: register, publish: publish, changed: make(chan struct{})}
}

// gap is the spacing before the next call: minGap, doubled per failure.
func (h *heart) gap() time.Duration {
	g := h.minGap
	for i := 0; i < h.fails && g < h.maxGap; i++ {
		g *= 2
	}
	return min(g, h.maxGap)
}

func (h *heart) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := h.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beat calls Heartbeat once, waiting first for the spacing to allow it.
func (h *heart) beat(ctx context.Context) (Assignment, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.last.IsZero() {
		if err := h.sleep(ctx, h.gap()-h.clock.Now().Sub(h.last)); err != nil {
			return Assignment{}, err
		}
	}
	a, err := h.o.Heartbeat(ctx)
	h.last = h.clock.Now()
	if err != nil {
		if ctx.Err() != nil {
			return Assignment{}, ctx.Err()
		}
		h.fails++
		if errors.Is(err, ErrUnknownNode) {
			h.log.Warn("orchestrator does not know this node; registering again", "err", err)
			if rerr := h.register(ctx); rerr != nil {
				h.log.Warn("register failed", "err", rerr)
			} else {
				h.fails = 0
				h.last = h.clock.Now() // the registration counts as a sign of life
			}
		} else {
			h.log.Warn("heartbeat failed", "err", err, "retry_in", h.gap())
		}
		return Assignment{}, err
	}
	h.fails = 0
	h.set(a)
	return a, nil
}

// set records a (from a heartbeat or another call that returns one).
func (h *heart) set(a Assignment) {
	h.amu.Lock()
	defer h.amu.Unlock()
	h.latest = a
	h.seq++
	close(h.changed)
	h.changed = make(chan struct{})
	if h.publish != nil {
		h.publish(a)
	}
}

// current returns the latest assignment, its number and a channel closed
// when a newer one arrives.
func (h *heart) current() (Assignment, uint64, <-chan struct{}) {
	h.amu.Lock()
	defer h.amu.Unlock()
	return h.latest, h.seq, h.changed
}

// loop beats every interval until ctx ends.
func (h *heart) loop(ctx context.Context, interval time.Duration) {
	for ctx.Err() == nil {
		h.beat(ctx)
		h.mu.Lock()
		wait := max(interval, h.gap()) - h.clock.Now().Sub(h.last)
		h.mu.Unlock()
		h.sleep(ctx, wait)
	}
}

// next returns an assignment newer than seq: it asks the orchestrator
// itself when eager (at the limiter's pace), else waits for the loop.
func (h *heart) next(ctx context.Context, seq uint64, eager bool) (Assignment, uint64, error) {
	for {
		a, s, ch := h.current()
		if s > seq {
			return a, s, nil
		}
		if eager {
			h.beat(ctx)
			if ctx.Err() != nil {
				return Assignment{}, 0, ctx.Err()
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return Assignment{}, 0, ctx.Err()
		}
	}
}
