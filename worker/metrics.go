package worker

import (
	"fmt"
	"io"
	"sync"
)

// eventKinds are every Event.Kind, so each series is always exported.
var eventKinds = []string{EventRegistered, EventAssigned, EventIdle, EventJobRefused, EventBaseReady, EventDatasetReady, EventBandwidth,
	EventCheckpointLoaded, EventEpochStarted, EventStep, EventDeltaSubmitted, EventDeltaRejected,
	EventRingReduced, EventRingFailed, EventRingRecovered, EventEpochDone, EventEpochAbandoned, EventJobDone}

// counters are the worker's own metrics, kept from the events it emits.
type counters struct {
	mu     sync.Mutex
	events map[string]uint64
	deltas map[string]uint64 // verdict → count
	epoch  int
	step   int
	reward float64
	loss   float64
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
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return w.RingStats().WritePrometheus(out)
}
