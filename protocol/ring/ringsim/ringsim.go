// Package ringsim is a discrete-event model of the ring all-reduce protocol
// of package ring: N nodes, each with a send pipeline (hash, sign, encrypt,
// write), a link (bandwidth, one-way latency), a read pipeline (the TCP
// transport's reader: read, decrypt) and a receive pipeline (verify, hash,
// reduce or store), segments flowing round the ring exactly as ring
// schedules them. It predicts the time of one call from measured per-byte
// and per-segment costs, for ring sizes that cannot be run on one machine.
//
// CPU can be given to every pipeline without limit (nodes on machines with
// cores to spare), per node (Cores) or to all nodes on one host (HostCores,
// as `gym ring bench` runs them): pipelines with work then share the cores
// equally (processor sharing, which is roughly what the kernel's scheduler
// does with runnable threads), no pipeline faster than one core.
//
// The model is a pure function of its parameters: no goroutines, no clock.
package ringsim

import (
	"container/heap"
	"errors"
	"math"
	"time"
)

// Params describe the ring and the per-node costs.
type Params struct {
	Nodes        int
	Bytes        int64   // vector size (fp32 bytes)
	SegmentBytes int64   // largest segment, as ring uses (≥ 4)
	Bandwidth    float64 // link bytes per second, each direction
	Latency      time.Duration
	// Latencies, when set (one per node), is the one-way latency of each
	// node's outgoing link (node i → i+1), overriding Latency: a ring
	// ordered by region has a few slow links and many fast ones.
	Latencies []time.Duration
	// Phases runs both phases (the zero value) or one of them, as the
	// two-level all-reduce runs its group rings (TwoLevel).
	Phases Phases

	// Costs; a zero rate or duration means free.
	HashRate      float64       // bytes/s of the payload hash (ring.PayloadHash, BLAKE3); the sender and the receiver both pay it
	ReduceRate    float64       // bytes/s of adding a received scatter-reduce segment into the work buffer
	Sign, Verify  time.Duration // per segment
	Authenticated bool          // false: no hash, sign or verify

	// Per-byte costs of moving a segment (a zero rate means free). The
	// sender pays TLSRate (AES-GCM seal) and SendRate (TLS's copies and
	// the write syscalls: the kernel's send path); the reader pays
	// ReadRate (read syscalls: the kernel's receive path and copy) and
	// TLSRate (open); the receiver pays CopyRate to store an all-gather
	// payload into the work buffer. Leave TLSRate zero for plain TCP.
	SendRate, ReadRate, TLSRate, CopyRate float64

	// CPU available. Both zero: every pipeline runs on a core of its own.
	// Cores > 0: each node has that many cores for its three pipelines.
	// HostCores > 0 (overrides Cores): all nodes run on one host with that
	// many cores, and Background more threads (other work on the host) are
	// always runnable there and compete for them. Pipelines with work share
	// their cores equally; none runs faster than one core.
	Cores, HostCores, Background float64
}

// Phases selects the steps a call runs.
type Phases uint8

const (
	BothPhases  Phases = iota // scatter-reduce then all-gather: an all-reduce
	ScatterOnly               // the N−1 scatter-reduce steps: a reduce-scatter
	GatherOnly                // the N−1 all-gather steps, each node starting from its reduced chunk
)

// Result is the predicted call.
type Result struct {
	Seconds float64
	AlgBW   float64 // Bytes / Seconds / 1e9
	BusBW   float64 // AlgBW · 2(N−1)/N (· (N−1)/N for one phase)
	// LinkShare is BusBW over the link bandwidth (in GB/s): 1 is line rate.
	LinkShare float64
	Segments  int // per chunk
	// CPUSeconds is the work of all nodes' pipelines in one-core seconds
	// (Background not included).
	CPUSeconds float64
}

// A job is one segment in one pipeline.
type job struct {
	ready     float64 // when it joined the pipeline
	step, seg int
	bytes     float64
}

func (a job) before(b job) bool {
	if a.ready != b.ready {
		return a.ready < b.ready
	}
	if a.step != b.step {
		return a.step < b.step
	}
	return a.seg < b.seg
}

// pq is a binary heap (container/heap) of T in before order.
type pq[T interface{ before(T) bool }] []T

func (q pq[T]) Len() int           { return len(q) }
func (q pq[T]) Less(i, j int) bool { return q[i].before(q[j]) }
func (q pq[T]) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *pq[T]) Push(x any)        { *q = append(*q, x.(T)) }
func (q *pq[T]) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// An arrival is a segment reaching a node's reader.
type arrival struct {
	to int
	j  job // j.ready: the arrival time
}

func (a arrival) before(b arrival) bool {
	if a.j.ready != b.j.ready {
		return a.j.ready < b.j.ready
	}
	if a.to != b.to {
		return a.to < b.to
	}
	return a.j.before(b.j)
}

// A finish is a running job's completion, in its domain's service time.
type finish struct {
	v    float64
	pipe int
}

func (a finish) before(b finish) bool {
	if a.v != b.v {
		return a.v < b.v
	}
	return a.pipe < b.pipe
}

// A domain is a set of cores shared equally by the jobs running on it
// (processor sharing): with k jobs and b background threads each job
// progresses at min(1, cores/(k+b)) core-seconds per second. v is the
// service every running job has received since the domain was created,
// so a job started at v0 with work w finishes when v reaches v0 + w.
type domain struct {
	cores, bg float64
	v         float64
	run       pq[finish]
}

func (d *domain) rate() float64 {
	k := float64(len(d.run))
	if k == 0 {
		return 0
	}
	return min(1, d.cores/(k+d.bg))
}

const (
	sendPipe = iota
	readPipe
	recvPipe
	pipesPerNode
)

type pipe struct {
	queue pq[job]
	busy  bool
	cur   job
}

// Simulate runs the model. Every pipeline (a node's sender, its reader,
// its receiver) and every link is FIFO and non-preemptive; segments are
// processed in the order they become ready, which is the order package
// ring's sender uses.
func Simulate(p Params) (Result, error) {
	if p.Nodes < 2 || p.Bytes < 4 || p.SegmentBytes < 4 || p.Bandwidth <= 0 {
		return Result{}, errors.New("ringsim: need ≥ 2 nodes, a vector, a segment size and a bandwidth")
	}
	if p.Latency < 0 || p.HashRate < 0 || p.ReduceRate < 0 || p.Sign < 0 || p.Verify < 0 || p.SendRate < 0 ||
		p.ReadRate < 0 || p.TLSRate < 0 || p.CopyRate < 0 || p.Cores < 0 || p.HostCores < 0 || p.Background < 0 {
		return Result{}, errors.New("ringsim: negative parameter")
	}
	if p.Background > 0 && p.HostCores == 0 {
		return Result{}, errors.New("ringsim: Background needs HostCores")
	}
	if p.Latencies != nil && len(p.Latencies) != p.Nodes {
		return Result{}, errors.New("ringsim: Latencies needs one latency per node")
	}
	for _, l := range p.Latencies {
		if l < 0 {
			return Result{}, errors.New("ringsim: negative parameter")
		}
	}
	if p.Phases > GatherOnly {
		return Result{}, errors.New("ringsim: unknown Phases")
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
	first, steps := 0, 2*(n-1) // the steps run: [first, steps)
	switch p.Phases {
	case ScatterOnly:
		steps = n - 1
	case GatherOnly:
		first = n - 1
	}
	latency := func(node int) float64 {
		if p.Latencies != nil {
			return p.Latencies[node].Seconds()
		}
		return p.Latency.Seconds()
	}
	segLen := func(step, seg int, node int) float64 { // bytes of the segment node sends at step
		c := ((node-step)%n + n) % n
		lo := int64(c) * elems / int64(n)
		hi := int64(c+1) * elems / int64(n)
		l := hi - lo
		return float64(4 * (int64(seg+1)*l/int64(segs) - int64(seg)*l/int64(segs)))
	}
	per := func(rate float64) float64 { // seconds per byte
		if rate <= 0 {
			return 0
		}
		return 1 / rate
	}
	hash, tls := per(p.HashRate), per(p.TLSRate)
	cost := func(kind int, j job) float64 { // one-core seconds
		b := j.bytes
		var c float64
		switch kind {
		case sendPipe:
			if p.Authenticated {
				c = p.Sign.Seconds()
				if j.step < n { // all-gather forwards reuse the verified hash
					c += b * hash
				}
			}
			c += b * (tls + per(p.SendRate))
		case readPipe:
			c = b * (tls + per(p.ReadRate))
		case recvPipe:
			if p.Authenticated {
				c = p.Verify.Seconds() + b*hash
			}
			if j.step < n-1 {
				c += b * per(p.ReduceRate)
			} else {
				c += b * per(p.CopyRate)
			}
		}
		return c
	}

	var doms []domain
	domOf := func(node int) int { return 0 }
	switch {
	case p.HostCores > 0:
		doms = []domain{{cores: p.HostCores, bg: p.Background}}
	case p.Cores > 0:
		doms = make([]domain, n)
		for i := range doms {
			doms[i].cores = p.Cores
		}
		domOf = func(node int) int { return node }
	default:
		doms = []domain{{cores: math.Inf(1)}}
	}
	pipes := make([]pipe, n*pipesPerNode)
	linkFree := make([]float64, n)
	arr := &pq[arrival]{}
	var now, end, cpu float64

	var enqueue func(pi int, j job)
	var startNext func(pi int)
	done := func(pi int, j job) { // j has left pipeline pi at now
		node, kind := pi/pipesPerNode, pi%pipesPerNode
		switch kind {
		case sendPipe:
			l := max(now, linkFree[node]) + j.bytes/p.Bandwidth
			linkFree[node] = l
			j.ready = l + latency(node)
			heap.Push(arr, arrival{to: (node + 1) % n, j: j})
		case readPipe:
			j.ready = now
			enqueue(node*pipesPerNode+recvPipe, j)
		case recvPipe:
			end = max(end, now)
			if j.step+1 < steps {
				enqueue(node*pipesPerNode+sendPipe, job{ready: now, step: j.step + 1, seg: j.seg,
					bytes: segLen(j.step+1, j.seg, node)})
			}
		}
	}
	startNext = func(pi int) {
		pp := &pipes[pi]
		for pp.queue.Len() > 0 {
			j := heap.Pop(&pp.queue).(job)
			c := cost(pi%pipesPerNode, j)
			cpu += c
			if c <= 0 {
				done(pi, j)
				continue
			}
			pp.busy, pp.cur = true, j
			d := &doms[domOf(pi/pipesPerNode)]
			heap.Push(&d.run, finish{v: d.v + c, pipe: pi})
			return
		}
		pp.busy = false
	}
	enqueue = func(pi int, j job) {
		heap.Push(&pipes[pi].queue, j)
		if !pipes[pi].busy {
			startNext(pi)
		}
	}
	advance := func(t float64) {
		if dt := t - now; dt > 0 {
			for i := range doms {
				if d := &doms[i]; len(d.run) > 0 {
					d.v += d.rate() * dt
				}
			}
		}
		now = max(now, t)
	}

	for i := range n {
		pi := i*pipesPerNode + sendPipe
		for k := range segs {
			heap.Push(&pipes[pi].queue, job{step: first, seg: k, bytes: segLen(first, k, i)})
		}
	}
	for i := range n {
		startNext(i*pipesPerNode + sendPipe)
	}
	for {
		tc, dc := math.Inf(1), -1
		for i := range doms {
			if d := &doms[i]; len(d.run) > 0 {
				if t := now + max(0, d.run[0].v-d.v)/d.rate(); t < tc {
					tc, dc = t, i
				}
			}
		}
		if arr.Len() > 0 && (*arr)[0].j.ready <= tc {
			a := heap.Pop(arr).(arrival)
			advance(a.j.ready)
			enqueue(a.to*pipesPerNode+readPipe, a.j)
			continue
		}
		if dc < 0 {
			break
		}
		advance(tc)
		d := &doms[dc]
		f := heap.Pop(&d.run).(finish)
		d.v = max(d.v, f.v)
		j := pipes[f.pipe].cur
		pipes[f.pipe].busy = false
		done(f.pipe, j)
		if !pipes[f.pipe].busy {
			startNext(f.pipe)
		}
	}
	r := Result{Seconds: end, Segments: segs, CPUSeconds: cpu}
	r.AlgBW = float64(p.Bytes) / end / 1e9
	r.BusBW = r.AlgBW * float64(steps-first) / float64(n)
	r.LinkShare = r.BusBW * 1e9 / p.Bandwidth
	return r, nil
}
