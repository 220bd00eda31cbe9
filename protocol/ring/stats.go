package ring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Stats are a communicator's cumulative counters since New (or the sum of
// several communicators', see Add). Read them with Comm.Stats at any time,
// also while a call runs.
type Stats struct {
	Calls          uint64            // successful calls on rings of two or more
	Failures       map[string]uint64 // failed calls by cause (FailureCauses)
	Evidence       map[Violation]uint64
	FramesSent     uint64 // frames written to the successor
	FramesReceived uint64 // frames from the predecessor that were applied
	BytesSent      uint64 // wire bytes of those frames, headers included
	BytesReceived  uint64
	VectorBytes    uint64  // fp32 bytes of the vectors successful calls reduced
	Seconds        float64 // wall time of successful calls
	LastSeconds    float64 // the last successful call's wall time
	LastBusBW      float64 // its bus bandwidth, bytes/s: 2(N−1)/N · vector bytes / time
}

// FailureCauses are the keys of Stats.Failures, always all present.
var FailureCauses = [...]string{"timeout", "broken", "misbehaved", "connect", "canceled", "closed", "stalled", "other"}

// failureCause classifies a failed call's error (a key of FailureCauses).
func failureCause(err error) string {
	var pe *PeerError
	switch {
	case errors.Is(err, ErrStalled):
		return "stalled"
	case errors.Is(err, ErrNoSuccessor), errors.Is(err, ErrNoPredecessor):
		return "connect"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrBroken):
		return "broken"
	case errors.Is(err, ErrMisbehaved):
		return "misbehaved"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, ErrClosed) && !errors.As(err, &pe):
		return "closed"
	}
	return "other"
}

// stats is the live, lock-free form of Stats (the call's goroutines update
// it while the Comm's mutex is held by the caller).
type stats struct {
	calls          atomic.Uint64
	failures       [len(FailureCauses)]atomic.Uint64
	evidence       [NormExceeded + 1]atomic.Uint64
	framesSent     atomic.Uint64
	framesReceived atomic.Uint64
	bytesSent      atomic.Uint64
	bytesReceived  atomic.Uint64
	vectorBytes    atomic.Uint64
	nanos          atomic.Int64
	lastNanos      atomic.Int64
	lastBusBW      atomic.Uint64 // math.Float64bits of bytes/s
}

func (s *stats) fail(err error) {
	s.failures[slices.Index(FailureCauses[:], failureCause(err))].Add(1)
}

func (s *stats) done(n int, elems int, d time.Duration) {
	b := uint64(4 * elems)
	s.calls.Add(1)
	s.vectorBytes.Add(b)
	s.nanos.Add(int64(d))
	s.lastNanos.Store(int64(d))
	if d > 0 {
		s.lastBusBW.Store(math.Float64bits(float64(b) * 2 * float64(n-1) / float64(n) / d.Seconds()))
	}
}

func (s *stats) snapshot() Stats {
	out := Stats{
		Calls:      s.calls.Load(),
		Failures:   make(map[string]uint64, len(FailureCauses)),
		Evidence:   make(map[Violation]uint64, NormExceeded),
		FramesSent: s.framesSent.Load(), FramesReceived: s.framesReceived.Load(),
		BytesSent: s.bytesSent.Load(), BytesReceived: s.bytesReceived.Load(),
		VectorBytes: s.vectorBytes.Load(),
		Seconds:     time.Duration(s.nanos.Load()).Seconds(),
		LastSeconds: time.Duration(s.lastNanos.Load()).Seconds(),
		LastBusBW:   math.Float64frombits(s.lastBusBW.Load()),
	}
	for i, c := range FailureCauses {
		out.Failures[c] = s.failures[i].Load()
	}
	for v := Malformed; v <= NormExceeded; v++ {
		out.Evidence[v] = s.evidence[v].Load()
	}
	return out
}

// Stats returns the communicator's counters. It does not wait for a call
// in flight: frame and evidence counters include the running call's.
func (c *Comm) Stats() Stats { return c.st.snapshot() }

// Add returns the sum of s and o (the Last* fields are o's when o has made
// a call, else s's): a process that replaces its Comm per job keeps one
// running total.
func (s Stats) Add(o Stats) Stats {
	out := s
	out.Failures = make(map[string]uint64, len(FailureCauses))
	out.Evidence = make(map[Violation]uint64, NormExceeded)
	for _, c := range FailureCauses {
		out.Failures[c] = s.Failures[c] + o.Failures[c]
	}
	for v := Malformed; v <= NormExceeded; v++ {
		out.Evidence[v] = s.Evidence[v] + o.Evidence[v]
	}
	out.Calls += o.Calls
	out.FramesSent += o.FramesSent
	out.FramesReceived += o.FramesReceived
	out.BytesSent += o.BytesSent
	out.BytesReceived += o.BytesReceived
	out.VectorBytes += o.VectorBytes
	out.Seconds += o.Seconds
	if o.Calls > 0 {
		out.LastSeconds, out.LastBusBW = o.LastSeconds, o.LastBusBW
	}
	return out
}

// WritePrometheus writes s in the Prometheus text format (version 0.0.4)
// as the gym_ring_* metrics documented in docs/metrics.md. Every label value
// is always written, so no series disappears.
func (s Stats) WritePrometheus(w io.Writer) error {
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	p("# HELP gym_ring_calls_total Successful ring all-reduce calls.\n# TYPE gym_ring_calls_total counter\ngym_ring_calls_total %d\n", s.Calls)
	p("# HELP gym_ring_call_failures_total Failed ring all-reduce calls by cause.\n# TYPE gym_ring_call_failures_total counter\n")
	for _, c := range FailureCauses {
		p("gym_ring_call_failures_total{cause=%q} %d\n", c, s.Failures[c])
	}
	p("# HELP gym_ring_evidence_total Frames dropped and reported as evidence, by violation.\n# TYPE gym_ring_evidence_total counter\n")
	for v := Malformed; v <= NormExceeded; v++ {
		p("gym_ring_evidence_total{kind=%q} %d\n", v.String(), s.Evidence[v])
	}
	p("# HELP gym_ring_frames_total Signed segment frames sent to the successor and applied from the predecessor.\n# TYPE gym_ring_frames_total counter\n")
	p("gym_ring_frames_total{direction=\"sent\"} %d\ngym_ring_frames_total{direction=\"received\"} %d\n", s.FramesSent, s.FramesReceived)
	p("# HELP gym_ring_bytes_total Wire bytes of those frames, headers included.\n# TYPE gym_ring_bytes_total counter\n")
	p("gym_ring_bytes_total{direction=\"sent\"} %d\ngym_ring_bytes_total{direction=\"received\"} %d\n", s.BytesSent, s.BytesReceived)
	p("# HELP gym_ring_vector_bytes_total Bytes (fp32) of the vectors reduced by successful calls.\n# TYPE gym_ring_vector_bytes_total counter\ngym_ring_vector_bytes_total %d\n", s.VectorBytes)
	p("# HELP gym_ring_call_seconds_total Wall time of successful calls.\n# TYPE gym_ring_call_seconds_total counter\ngym_ring_call_seconds_total %g\n", s.Seconds)
	p("# HELP gym_ring_last_call_seconds Wall time of the last successful call.\n# TYPE gym_ring_last_call_seconds gauge\ngym_ring_last_call_seconds %g\n", s.LastSeconds)
	p("# HELP gym_ring_last_busbw_bytes_per_second Bus bandwidth of the last successful call: 2(N-1)/N times its vector bytes over its time.\n# TYPE gym_ring_last_busbw_bytes_per_second gauge\ngym_ring_last_busbw_bytes_per_second %g\n", s.LastBusBW)
	return err
}
