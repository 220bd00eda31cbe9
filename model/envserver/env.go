package envserver

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/zooai/gym/model/reward"
)

// Breaker settings of an Env: after BreakAfter consecutive failed calls
// it calls nothing for Cooldown.
const (
	BreakAfter = 3
	Cooldown   = 30 * time.Second
)

// Env is an environment server as a job's reward term (reward.Env): it
// dials the server on first use (so making a job's plan does no I/O),
// scores through a Scorer (memoised), maps the server's reward from its
// declared range onto [0, 1], and keeps a dead or failing server from
// holding a training step: after BreakAfter consecutive failed calls every
// call fails at once (KindSkipped) for Cooldown, then one is tried again.
// Every outcome is counted (Stats).
type Env struct {
	url string
	cfg Config
	ctx context.Context
	now func() time.Time

	mu        sync.Mutex
	sc        *Scorer // nil until dialled
	fails     int     // consecutive failures
	openUntil time.Time
	local     *stats // what happened before a client existed: dial failures, skips
}

var _ reward.Env = (*Env)(nil)

// NewEnv returns the server at url as a reward term; ctx bounds every call,
// now is the clock of the breaker (nil: time.Now).
func NewEnv(ctx context.Context, url string, cfg Config, now func() time.Time) *Env {
	if now == nil {
		now = time.Now
	}
	return &Env{url: url, cfg: cfg, ctx: ctx, now: now, local: newStats()}
}

// URL is the server's.
func (e *Env) URL() string { return e.url }

// Reward implements reward.Env.
func (e *Env) Reward(s reward.Sample) (float64, bool, error) {
	sc, err := e.scorer()
	if err != nil {
		return 0, false, err
	}
	r, err := sc.Result(s)
	e.settle(err)
	if err != nil {
		return 0, false, err
	}
	h := sc.c.health
	return (r.Reward - h.RewardMin) / (h.RewardMax - h.RewardMin), r.Correct, nil
}

// scorer returns the dialled scorer, dialling when there is none and the
// breaker is closed.
func (e *Env) scorer() (*Scorer, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.now().Before(e.openUntil) {
		e.local.done("/score", 0, KindSkipped)
		return nil, &Error{Endpoint: "/score", Kind: KindSkipped, Msg: "the server failed " + strconv.Itoa(BreakAfter) + " calls in a row; calls resume after " + Cooldown.String()}
	}
	if e.sc != nil {
		return e.sc, nil
	}
	c, err := Dial(e.ctx, e.url, e.cfg)
	if err != nil {
		e.local.done("/health", 0, kindOr(err, KindConnection))
		e.failLocked()
		return nil, err
	}
	e.sc = NewScorer(e.ctx, c)
	return e.sc, nil
}

// settle counts a call's outcome towards the breaker.
func (e *Env) settle(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.fails = 0
		return
	}
	if KindOf(err) != KindCanceled {
		e.failLocked()
	}
}

func (e *Env) failLocked() {
	e.fails++
	if e.fails >= BreakAfter {
		e.fails, e.openUntil = 0, e.now().Add(Cooldown)
	}
}

// Stats are the calls' counters: the client's, with the dial failures and
// the calls the breaker skipped.
func (e *Env) Stats() Stats {
	e.mu.Lock()
	sc := e.sc
	e.mu.Unlock()
	out := Stats{}
	if sc != nil {
		out = sc.c.Stats()
	}
	e.local.mu.Lock()
	defer e.local.mu.Unlock()
	for k, l := range e.local.m {
		m := out[k]
		if m.Failures == nil {
			m.Failures = map[Kind]uint64{}
			m.Latency = Histogram{Counts: make([]uint64, len(LatencyBuckets)+1)}
		}
		m.Calls += l.Calls
		m.OK += l.OK
		for kind, n := range l.Failures {
			m.Failures[kind] += n
		}
		out[k] = m
	}
	return out
}

func kindOr(err error, k Kind) Kind {
	if got := KindOf(err); got != "" {
		return got
	}
	return k
}
