package ringsim

import (
	"math"
	"testing"
	"time"
)

// One phase without CPU costs: (N−1)/N of the vector over the link and
// N−1 latencies, plus a segment's fill per step, at most; at least the
// larger of the bytes (plus one latency) and the latencies (a segment's
// walk through N−1 links, when a chunk's transmission cannot hide them).
func TestOnePhaseBounds(t *testing.T) {
	for _, ph := range []Phases{ScatterOnly, GatherOnly} {
		for _, c := range []struct {
			n     int
			bytes int64
		}{{2, 256 << 20}, {4, 256 << 20}, {16, 256 << 20}, {16, 1 << 20}, {64, 16 << 20}} {
			n := c.n
			p := Params{Nodes: n, Bytes: c.bytes, SegmentBytes: 1 << 20, Bandwidth: 1.25e9, Latency: 3 * time.Millisecond, Phases: ph}
			r := mustSim(t, p)
			bw := float64(n-1) / float64(n) * float64(p.Bytes) / p.Bandwidth
			lat := float64(n-1) * p.Latency.Seconds()
			fill := float64(n-1) * float64(p.SegmentBytes) / p.Bandwidth
			if lo := max(bw+p.Latency.Seconds(), lat); r.Seconds < lo*0.999 || r.Seconds > bw+lat+fill {
				t.Fatalf("phases %d n=%d: %v s, want between %v and %v", ph, n, r.Seconds, lo, bw+lat+fill)
			}
			if want := r.AlgBW * float64(n-1) / float64(n); math.Abs(r.BusBW-want) > 1e-12 {
				t.Fatalf("busbw %v, want %v", r.BusBW, want)
			}
		}
	}
}

// A flat ring ordered by region pays the wide-area latency about twice per
// group (each chunk's walk crosses every link about twice), not 2(N−1)
// times: Latencies must be used per link.
func TestRegionRingLatency(t *testing.T) {
	const n, G = 16, 4
	in, out := time.Millisecond, 40*time.Millisecond
	p := Params{Nodes: n, Bytes: 1 << 20, SegmentBytes: 1 << 20, Bandwidth: 100e9}
	p.Latencies = RegionRing(n, G, in, out)
	r := mustSim(t, p)
	walk := 2.0 * (n - 1) / n * (float64(n-G)*in.Seconds() + G*out.Seconds()) // the mean walk
	if r.Seconds < walk*0.95 || r.Seconds > walk+2*out.Seconds()+0.002 {
		t.Fatalf("region ring: %v s, want ≈ %v", r.Seconds, walk)
	}
	p.Latencies, p.Latency = nil, out
	if all := mustSim(t, p); all.Seconds < 2*(n-1)*out.Seconds() {
		t.Fatalf("every link wide-area: %v s, want ≥ %v", all.Seconds, 2*(n-1)*out.Seconds())
	}
}

// Without CPU costs the two-level call takes at most the flat ring's bytes
// over the links plus 2(g−1) group latencies and 2(G−1) wide-area ones (and
// the pipeline's fill), at least each phase's latencies or bytes.
func TestTwoLevelBounds(t *testing.T) {
	for _, c := range []struct {
		n, G  int
		bytes int64
	}{{16, 4, 256 << 20}, {64, 8, 256 << 20}, {128, 8, 16 << 20}, {1024, 32, 16 << 20}, {1024, 32, 256 << 20}} {
		g := c.n / c.G
		tl := TwoLevel{Params: Params{Nodes: c.n, Bytes: c.bytes, SegmentBytes: 1 << 20, Bandwidth: 1.25e9,
			Latency: 20 * time.Millisecond}, Groups: c.G, GroupLatency: 2 * time.Millisecond}
		r, err := SimulateTwoLevel(tl)
		if err != nil {
			t.Fatal(err)
		}
		bw := 2 * float64(c.n-1) / float64(c.n) * float64(tl.Bytes) / tl.Bandwidth
		lat := float64(2*(g-1))*tl.GroupLatency.Seconds() + float64(2*(c.G-1))*tl.Latency.Seconds()
		fill := float64(2*(g-1)+2*(c.G-1)) * float64(tl.SegmentBytes) / tl.Bandwidth
		in, out := tl.GroupLatency.Seconds(), tl.Latency.Seconds()
		shard := float64(tl.Bytes) / float64(g) / tl.Bandwidth
		lo := 2*max(float64(g-1)/float64(g)*float64(tl.Bytes)/tl.Bandwidth+in, float64(g-1)*in) +
			max(2*float64(c.G-1)/float64(c.G)*shard+out, float64(2*(c.G-1))*out)
		if r.Seconds < lo*0.999 || r.Seconds > bw+lat+fill {
			t.Fatalf("n=%d G=%d: %v s, want between %v and %v", c.n, c.G, r.Seconds, lo, bw+lat+fill)
		}
		if want := r.AlgBW * 2 * float64(c.n-1) / float64(c.n); math.Abs(r.BusBW-want) > 1e-12 {
			t.Fatalf("busbw %v, want %v", r.BusBW, want)
		}
	}
}

// On one CPU-bound host the cores never idle in any phase: the call takes
// its core-seconds over the cores, as the flat ring does.
func TestTwoLevelSharedHost(t *testing.T) {
	p := cpuBound(16)
	p.HostCores = 2
	r, err := SimulateTwoLevel(TwoLevel{Params: p, Groups: 4, GroupLatency: 0})
	if err != nil {
		t.Fatal(err)
	}
	if want := r.CPUSeconds / 2; math.Abs(r.Seconds-want)/want > 0.02 {
		t.Fatalf("%v s, want core-seconds/cores = %v", r.Seconds, want)
	}
	flat := mustSim(t, p)
	// The two-level call hashes a shard more per node (phase 3's first
	// send), so it does a little more work than the flat ring, never less.
	if r.CPUSeconds < flat.CPUSeconds || r.CPUSeconds > flat.CPUSeconds*1.1 {
		t.Fatalf("two-level %v core-s, flat %v", r.CPUSeconds, flat.CPUSeconds)
	}
}

func TestTwoLevelRejects(t *testing.T) {
	base := Params{Nodes: 12, Bytes: 1 << 20, SegmentBytes: 1 << 20, Bandwidth: 1e9}
	for _, G := range []int{0, 1, 5, 12} {
		if _, err := SimulateTwoLevel(TwoLevel{Params: base, Groups: G}); err == nil {
			t.Fatalf("accepted %d groups of 12 nodes", G)
		}
	}
	bad := base
	bad.Phases = ScatterOnly
	if _, err := SimulateTwoLevel(TwoLevel{Params: bad, Groups: 3}); err == nil {
		t.Fatal("accepted Phases")
	}
	if _, err := Simulate(Params{Nodes: 3, Bytes: 4, SegmentBytes: 4, Bandwidth: 1, Latencies: make([]time.Duration, 2)}); err == nil {
		t.Fatal("accepted 2 latencies for 3 nodes")
	}
}
