package worker

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/zooai/gym/model/envserver"
)

// eventKinds are every Event.Kind, so each series is always exported.
var eventKinds = []string{EventRegistered, EventAssigned, EventIdle, EventJobRefused, EventBaseReady, EventDatasetReady, EventBandwidth,
	EventCheckpointLoaded, EventEpochStarted, EventStep, EventDeltaSubmitted, EventDeltaRejected,
	EventRingReduced, EventRingFailed, EventRingRecovered, EventRebased, EventEpochDone, EventEpochAbandoned, EventJobDone}

// counters are the worker's own metrics, kept from the events it emits.
type counters struct {
	mu     sync.Mutex
	events map[string]uint64
	deltas map[string]uint64 // verdict → count
	epoch  int
	step   int
	reward float64
	loss   float64
	envs   []*envserver.Env // the current job's environment servers
}

// setEnvs makes the current job's environment servers the ones whose
// calls are exported.
func (c *counters) setEnvs(envs []*envserver.Env) {
	c.mu.Lock()
	c.envs = envs
	c.mu.Unlock()
}

func (c *counters) observe(e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.events == nil {
		c.events, c.deltas = map[string]uint64{}, map[string]uint64{}
	}
	c.events[e.Kind]++
	switch e.Kind {
	case EventStep:
		c.epoch, c.step, c.reward, c.loss = e.Epoch, e.Step, e.Reward, e.Loss
	case EventDeltaSubmitted:
		c.deltas[e.Verdict]++
	case EventDeltaRejected:
		c.deltas["rejected"]++
	}
}

// WriteMetrics writes the worker's metrics (gym_worker_*) and its ring's
// (gym_ring_*, RingStats) in the Prometheus text format; docs/metrics.md
// lists them.
func (w *Worker) WriteMetrics(out io.Writer) error {
	c := &w.counters
	c.mu.Lock()
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(out, format, a...)
		}
	}
	p("# HELP gym_worker_events_total Events the worker emitted, by kind.\n# TYPE gym_worker_events_total counter\n")
	for _, k := range eventKinds {
		p("gym_worker_events_total{kind=%q} %d\n", k, c.events[k])
	}
	p("# HELP gym_worker_deltas_total Deltas hanzod judged, by verdict.\n# TYPE gym_worker_deltas_total counter\n")
	for _, v := range []string{"accepted", "duplicate", "rejected"} {
		p("gym_worker_deltas_total{verdict=%q} %d\n", v, c.deltas[v])
	}
	p("# HELP gym_worker_epoch Epoch of the last training step.\n# TYPE gym_worker_epoch gauge\ngym_worker_epoch %d\n", c.epoch)
	p("# HELP gym_worker_step Last training step.\n# TYPE gym_worker_step gauge\ngym_worker_step %d\n", c.step)
	p("# HELP gym_worker_reward Mean reward of the last step's completions.\n# TYPE gym_worker_reward gauge\ngym_worker_reward %g\n", c.reward)
	p("# HELP gym_worker_loss GSPO loss of the last step.\n# TYPE gym_worker_loss gauge\ngym_worker_loss %g\n", c.loss)
	envs := c.envs
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := writeEnvMetrics(out, envs); err != nil {
		return err
	}
	return w.RingStats().WritePrometheus(out)
}

// writeEnvMetrics writes the calls to the job's environment servers
// (gym_env_*), summed over its env terms; nothing when it has none.
func writeEnvMetrics(out io.Writer, envs []*envserver.Env) error {
	if len(envs) == 0 {
		return nil
	}
	sum := envserver.Stats{}
	for _, e := range envs {
		for ep, s := range e.Stats() {
			m := sum[ep]
			if m.Failures == nil {
				m.Failures = map[envserver.Kind]uint64{}
				m.Latency.Counts = make([]uint64, len(envserver.LatencyBuckets)+1)
			}
			m.Calls, m.OK, m.Retries = m.Calls+s.Calls, m.OK+s.OK, m.Retries+s.Retries
			for k, n := range s.Failures {
				m.Failures[k] += n
			}
			for i, n := range s.Latency.Counts {
				m.Latency.Counts[i] += n
			}
			m.Latency.Count += s.Latency.Count
			m.Latency.Sum += s.Latency.Sum
			sum[ep] = m
		}
	}
	eps := make([]string, 0, len(sum))
	for ep := range sum {
		eps = append(eps, ep)
	}
	sort.Strings(eps)
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(out, format, a...)
		}
	}
	p("# HELP gym_env_calls_total Calls to the job's environment servers, by endpoint and outcome (ok or a failure kind).\n# TYPE gym_env_calls_total counter\n")
	for _, ep := range eps {
		s := sum[ep]
		p("gym_env_calls_total{endpoint=%q,outcome=\"ok\"} %d\n", ep, s.OK)
		for _, k := range envserver.Kinds() {
			p("gym_env_calls_total{endpoint=%q,outcome=%q} %d\n", ep, k, s.Failures[k])
		}
	}
	p("# HELP gym_env_retries_total Retried calls to the job's environment servers, by endpoint.\n# TYPE gym_env_retries_total counter\n")
	for _, ep := range eps {
		p("gym_env_retries_total{endpoint=%q} %d\n", ep, sum[ep].Retries)
	}
	p("# HELP gym_env_call_duration_seconds Duration of calls to the job's environment servers, retries included.\n# TYPE gym_env_call_duration_seconds histogram\n")
	for _, ep := range eps {
		h := sum[ep].Latency
		var cum uint64
		for i, le := range envserver.LatencyBuckets {
			cum += h.Counts[i]
			p("gym_env_call_duration_seconds_bucket{endpoint=%q,le=\"%g\"} %d\n", ep, le, cum)
		}
		p("gym_env_call_duration_seconds_bucket{endpoint=%q,le=\"+Inf\"} %d\n", ep, h.Count)
		p("gym_env_call_duration_seconds_sum{endpoint=%q} %g\ngym_env_call_duration_seconds_count{endpoint=%q} %d\n", ep, h.Sum, ep, h.Count)
	}
	return err
}
