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
	if _, err := Simulate(Params{Nodes: 2, Bytes: 4, SegmentBytes: 4, Bandwidth: 1, Background: 1}); err == nil {
		t.Fatal("accepted Background without HostCores")
	}
}

// cpuBound is a ring whose links are far faster than its CPU.
func cpuBound(n int) Params {
	return Params{Nodes: n, Bytes: 64 << 20, SegmentBytes: 1 << 20, Bandwidth: 100e9, Authenticated: true,
		HashRate: 1e9, ReduceRate: 4e9, CopyRate: 8e9, SendRate: 2e9, ReadRate: 2e9, TLSRate: 4e9,
		Sign: 20 * time.Microsecond, Verify: 40 * time.Microsecond}
}

// Halving the CPU share doubles the time of a CPU-bound call, per node
// (Cores) and per host (HostCores); more cores than pipelines change
// nothing.
func TestCPUShare(t *testing.T) {
	sim := func(p Params) Result {
		t.Helper()
		r, err := Simulate(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	free := sim(cpuBound(4))
	for _, c := range []struct {
		name       string
		full, half func(*Params)
	}{
		{"Cores", func(p *Params) { p.Cores = 1 }, func(p *Params) { p.Cores = 0.5 }},
		{"HostCores", func(p *Params) { p.HostCores = 2 }, func(p *Params) { p.HostCores = 1 }},
	} {
		p, q := cpuBound(4), cpuBound(4)
		c.full(&p)
		c.half(&q)
		a, b := sim(p), sim(q)
		if a.Seconds <= free.Seconds*1.2 {
			t.Fatalf("%s: %v s, not slower than with a core per pipeline (%v s): not CPU-bound", c.name, a.Seconds, free.Seconds)
		}
		if ratio := b.Seconds / a.Seconds; math.Abs(ratio-2) > 0.05 {
			t.Fatalf("%s: halving the CPU made the call %.3f× as long, want 2×", c.name, ratio)
		}
		if a.CPUSeconds != free.CPUSeconds || b.CPUSeconds != free.CPUSeconds {
			t.Fatalf("%s: CPU work %v, %v, want %v whatever the share", c.name, a.CPUSeconds, b.CPUSeconds, free.CPUSeconds)
		}
	}
	// Three pipelines per node: three cores per node, or 3N per host, are
	// as good as a core per pipeline.
	p := cpuBound(4)
	p.Cores = 3
	if r := sim(p); math.Abs(r.Seconds-free.Seconds) > 1e-9*free.Seconds {
		t.Fatalf("3 cores per node: %v s, want %v", r.Seconds, free.Seconds)
	}
	p = cpuBound(4)
	p.HostCores = 12
	if r := sim(p); math.Abs(r.Seconds-free.Seconds) > 1e-9*free.Seconds {
		t.Fatalf("12 host cores: %v s, want %v", r.Seconds, free.Seconds)
	}
}

// On a shared host that is CPU-bound the cores never idle: the call takes
// the total work over the cores, and other runnable threads (Background)
// take their equal share.
func TestSharedHost(t *testing.T) {
	for _, n := range []int{4, 8} {
		p := cpuBound(n)
		p.HostCores = 2
		r, err := Simulate(p)
		if err != nil {
			t.Fatal(err)
		}
		if lo := r.CPUSeconds / 2; r.Seconds < lo*(1-1e-9) || r.Seconds > lo*1.1 {
			t.Fatalf("n=%d: %v s for %v core-seconds on 2 cores, want ≈ %v", n, r.Seconds, r.CPUSeconds, lo)
		}
		// 3N pipelines and 3N background threads: about half the cores.
		p.Background = float64(3 * n)
		b, _ := Simulate(p)
		if ratio := b.Seconds / r.Seconds; ratio < 1.8 || ratio > 2.6 {
			t.Fatalf("n=%d: %v background threads made the call %.2f× as long, want ≈ 2×", n, p.Background, ratio)
		}
	}
}

// Every per-byte cost is paid on the bytes that pay it in package ring:
// the sender hashes what it sends while scattering and its own final
// chunk, the receiver everything; TLS seals and opens everything sent;
// reduce and copy split what is received.
func TestCostAccounting(t *testing.T) {
	const n, S, rate = 4, 64 << 20, 0.5e9
	base := Params{Nodes: n, Bytes: S, SegmentBytes: 1 << 20, Bandwidth: 1e9}
	free, err := Simulate(base)
	if err != nil {
		t.Fatal(err)
	}
	wire := float64(2 * (n - 1) * S)                   // bytes sent (and received) by all nodes
	frames := float64(n * 2 * (n - 1) * free.Segments) // segments sent by all nodes
	for _, c := range []struct {
		name string
		set  func(*Params)
		want float64 // core-seconds
	}{
		{"SendRate", func(p *Params) { p.SendRate = rate }, wire / rate},
		{"ReadRate", func(p *Params) { p.ReadRate = rate }, wire / rate},
		{"TLSRate", func(p *Params) { p.TLSRate = rate }, 2 * wire / rate},
		{"ReduceRate", func(p *Params) { p.ReduceRate = rate }, wire / 2 / rate},
		{"CopyRate", func(p *Params) { p.CopyRate = rate }, wire / 2 / rate},
		{"HashRate", func(p *Params) { p.Authenticated, p.HashRate = true, rate }, float64((3*n-2)*S) / rate},
		{"Sign+Verify", func(p *Params) { p.Authenticated, p.Sign, p.Verify = true, time.Millisecond, time.Millisecond },
			2 * frames * 1e-3},
		{"unauthenticated", func(p *Params) { p.HashRate, p.Sign, p.Verify = rate, time.Millisecond, time.Millisecond }, 0},
	} {
		p := base
		c.set(&p)
		r, err := Simulate(p)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.CPUSeconds-c.want) > 1e-9*max(1, c.want) {
			t.Errorf("%s: %v core-seconds, want %v", c.name, r.CPUSeconds, c.want)
		}
		if slower := r.Seconds > free.Seconds*1.01; slower != (c.want > 0) {
			t.Errorf("%s: %v s against %v s free", c.name, r.Seconds, free.Seconds)
		}
	}
}
