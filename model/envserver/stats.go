package envserver

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// LatencyBuckets are the upper bounds, in seconds, of Histogram's buckets
// (the last bucket, above 10 s, has none).
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram is the latency of calls, retries and backoff included.
type Histogram struct {
	// Counts[i] counts calls of at most LatencyBuckets[i] seconds and
	// more than the bucket before; Counts[len(LatencyBuckets)] the rest.
	Counts   []uint64
	Count    uint64
	Sum, Max float64 // seconds
}

// Mean is the mean latency in seconds (0 with no calls).
func (h Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// EndpointStats counts one endpoint's calls. Calls = OK + Σ Failures.
type EndpointStats struct {
	Calls, OK, Retries uint64
	Failures           map[Kind]uint64
	Latency            Histogram
}

// Stats is a snapshot of a client's counters, by endpoint ("/score", …).
type Stats map[string]EndpointStats

// Failures is the number of failed calls over all endpoints.
func (s Stats) Failures() uint64 {
	var n uint64
	for _, e := range s {
		n += e.Calls - e.OK
	}
	return n
}

type stats struct {
	mu sync.Mutex
	m  map[string]*EndpointStats
}

func newStats() *stats { return &stats{m: map[string]*EndpointStats{}} }

func (s *stats) get(endpoint string) *EndpointStats {
	e := s.m[endpoint]
	if e == nil {
		e = &EndpointStats{Failures: map[Kind]uint64{}, Latency: Histogram{Counts: make([]uint64, len(LatencyBuckets)+1)}}
		s.m[endpoint] = e
	}
	return e
}

// done records a finished call (kind "": a 200 response).
func (s *stats) done(endpoint string, d time.Duration, kind Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.get(endpoint)
	e.Calls++
	if kind == "" {
		e.OK++
	} else {
		e.Failures[kind]++
	}
	sec := d.Seconds()
	i, _ := slices.BinarySearch(LatencyBuckets, sec)
	e.Latency.Counts[i]++
	e.Latency.Count++
	e.Latency.Sum += sec
	e.Latency.Max = max(e.Latency.Max, sec)
}

// fail turns a call that done counted as ok (a 200 response) into a
// failure of kind: its body was wrong.
func (s *stats) fail(endpoint string, kind Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.get(endpoint)
	if e.OK > 0 {
		e.OK--
	}
	e.Failures[kind]++
}

func (s *stats) retry(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.get(endpoint).Retries++
}

// Stats returns a snapshot of the client's counters.
func (c *Client) Stats() Stats {
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	out := Stats{}
	for k, e := range c.stats.m {
		cp := *e
		cp.Failures = maps.Clone(e.Failures)
		cp.Latency.Counts = slices.Clone(e.Latency.Counts)
		out[k] = cp
	}
	return out
}
