package ringsim

import (
	"math"
	"testing"
	"time"
)

// Without CPU costs or latency the model must give the textbook
// bandwidth-optimal time 2(N−1)/N · S / B plus the pipeline fill of one
// segment per step.
func TestBandwidthBound(t *testing.T) {
	for _, n := range []int{2, 4, 8, 32} {
		p := Params{Nodes: n, Bytes: 1 << 30, SegmentBytes: 1 << 20, Bandwidth: 1.25e9}
		r, err := Simulate(p)
		if err != nil {
			t.Fatal(err)
		}
		ideal := 2 * float64(n-1) / float64(n) * float64(p.Bytes) / p.Bandwidth
		fill := float64(2*(n-1)) * float64(p.SegmentBytes) / p.Bandwidth
		if r.Seconds < ideal*0.999 || r.Seconds > ideal+fill {
			t.Fatalf("n=%d: %v s, want between %v and %v", n, r.Seconds, ideal, ideal+fill)
		}
	}
}

// Latency costs a fixed amount per step, not per segment: the ring does
// not wait for round trips.
func TestLatencyIsPaidPerStepNotPerSegment(t *testing.T) {
	p := Params{Nodes: 4, Bytes: 256 << 20, SegmentBytes: 1 << 20, Bandwidth: 0.125e9}
	a, _ := Simulate(p)
	p.Latency = 20 * time.Millisecond
	b, _ := Simulate(p)
	steps := 2 * (p.Nodes - 1)
	if d := b.Seconds - a.Seconds; d > float64(steps)*0.020*1.01 || d < 0.020 {
		t.Fatalf("20 ms latency added %v s for %d steps", d, steps)
	}
}

// When hashing is slower than the link, the receiver's CPU bounds the
// throughput: busbw → 1 / (hash + reduce) per byte.
func TestCPUBound(t *testing.T) {
	p := Params{Nodes: 8, Bytes: 1 << 30, SegmentBytes: 1 << 20, Bandwidth: 10e9, Authenticated: true,
		HashRate: 1e9}
	r, _ := Simulate(p)
	if math.Abs(r.BusBW-1.0) > 0.05 {
		t.Fatalf("busbw %v GB/s, want ≈ 1 (the hash rate)", r.BusBW)
	}
}

func TestRejectsBadParams(t *testing.T) {
	if _, err := Simulate(Params{Nodes: 1, Bytes: 4, SegmentBytes: 4, Bandwidth: 1}); err == nil {
		t.Fatal("accepted one node")
	}
}
