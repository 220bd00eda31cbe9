// Package ringsim is a discrete-event model of the ring all-reduce protocol
// of package ring: N nodes, each with a send pipeline (hash, sign), a link
// (bandwidth, one-way latency) and a receive pipeline (verify, hash,
// reduce), segments flowing round the ring exactly as ring schedules them.
// It predicts the time of one call from measured per-byte and per-segment
// costs, for ring sizes that cannot be run on one machine.
//
// The model is a pure function of its parameters: no goroutines, no clock.
package ringsim

import (
	"container/heap"
	"errors"
	"time"
)

// Params describe the ring and the per-node costs.
type Params struct {
	Nodes        int
	Bytes        int64   // vector size (fp32 bytes)
	SegmentBytes int64   // largest segment, as ring uses (≥ 4)
	Bandwidth    float64 // link bytes per second, each direction
	Latency      time.Duration
	// Costs; zero means free.
	HashRate      float64       // bytes/s of the payload hash (ring.PayloadHash, BLAKE3); the sender and the receiver both pay it
	ReduceRate    float64       // bytes/s of adding a received segment into the work buffer
	Sign, Verify  time.Duration // per segment
	Authenticated bool          // false: no hash, sign or verify
}

// Result is the predicted call.
type Result struct {
	Seconds float64
	AlgBW   float64 // Bytes / Seconds / 1e9
	BusBW   float64 // AlgBW · 2(N−1)/N
	// LinkShare is BusBW over the link bandwidth (in GB/s): 1 is line rate.
	LinkShare float64
	Segments  int // per chunk
}

type item struct {
	ready float64
	node  int
	step  int
	seg   int
}

type queue []item

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].ready != q[j].ready {
		return q[i].ready < q[j].ready
	}
	if q[i].node != q[j].node {
		return q[i].node < q[j].node
	}
	if q[i].step != q[j].step {
		return q[i].step < q[j].step
	}
	return q[i].seg < q[j].seg
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(item)) }
func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// Simulate runs the model. Every server (a node's send pipeline, its
// outgoing link, its receive pipeline) is FIFO and non-preemptive;
// segments are processed in the order they become ready, which is the
// order package ring's sender uses.
func Simulate(p Params) (Result, error) {
	if p.Nodes < 2 || p.Bytes < 4 || p.SegmentBytes < 4 || p.Bandwidth <= 0 {
		return Result{}, errors.New("ringsim: need ≥ 2 nodes, a vector, a segment size and a bandwidth")
	}
	n := p.Nodes
	elems := p.Bytes / 4
	maxChunk := (elems + int64(n) - 1) / int64(n)
	// ring's rule: a quarter of a chunk, clamped to [64 KiB, SegmentBytes].
	chunkBytes := 4 * maxChunk
	segBytes := min(max(chunkBytes/4, min(64<<10, p.SegmentBytes)), p.SegmentBytes)
	segElems := max(segBytes/4, 1)
	segs := int((maxChunk + segElems - 1) / segElems)
	segs = max(segs, 1)
	steps := 2 * (n - 1)
	segLen := func(step, seg int, node int) float64 { // bytes of that segment
		c := ((node-step)%n + n) % n
		lo := int64(c) * elems / int64(n)
		hi := int64(c+1) * elems / int64(n)
		l := hi - lo
		return float64(4 * (int64(seg+1)*l/int64(segs) - int64(seg)*l/int64(segs)))
	}
	sec := func(d time.Duration) float64 { return d.Seconds() }
	per := func(rate float64) float64 { // seconds per byte
		if rate <= 0 {
			return 0
		}
		return 1 / rate
	}
	sendFree := make([]float64, n)
	linkFree := make([]float64, n)
	recvFree := make([]float64, n)
	var end float64
	q := &queue{}
	for i := range n {
		for k := range segs {
			heap.Push(q, item{0, i, 0, k})
		}
	}
	for q.Len() > 0 {
		it := heap.Pop(q).(item)
		b := segLen(it.step, it.seg, it.node)
		cpu := 0.0
		if p.Authenticated {
			cpu = sec(p.Sign)
			if it.step < n { // all-gather forwards reuse the verified hash
				cpu += b * per(p.HashRate)
			}
		}
		s := max(it.ready, sendFree[it.node]) + cpu
		sendFree[it.node] = s
		l := max(s, linkFree[it.node]) + b/p.Bandwidth
		linkFree[it.node] = l
		arrive := l + sec(p.Latency)
		to := (it.node + 1) % n
		work := 0.0
		if p.Authenticated {
			work = sec(p.Verify) + b*per(p.HashRate)
		}
		if it.step < n-1 {
			work += b * per(p.ReduceRate)
		}
		done := max(arrive, recvFree[to]) + work
		recvFree[to] = done
		end = max(end, done)
		if it.step+1 < steps {
			heap.Push(q, item{done, to, it.step + 1, it.seg})
		}
	}
	r := Result{Seconds: end, Segments: segs}
	r.AlgBW = float64(p.Bytes) / end / 1e9
	r.BusBW = r.AlgBW * 2 * float64(n-1) / float64(n)
	r.LinkShare = r.BusBW * 1e9 / p.Bandwidth
	return r, nil
}
