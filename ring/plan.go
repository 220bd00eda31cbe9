package ring

// plan is the pure schedule of one call: which chunk each step sends and
// receives and how chunks split into segments. It holds no buffers.
//
// Steps t = 0 .. 2(N−1)−1 number the rounds of both phases: t < N−1 is
// scatter-reduce round t, t ≥ N−1 is all-gather round t−(N−1). At step t
// node i sends chunk (i−t) mod N and receives chunk (i−t−1) mod N; what it
// sends at step t+1 is what it received (and, while scattering, reduced) at
// step t. Every chunk is cut into the same number of segments, so segment k
// of step t+1 depends only on segment k of step t.
type plan struct {
	n, self int
	total   int // elements
	segs    int // segments per chunk
}

// newPlan returns the plan for n nodes, node self, total elements and at
// most segElems elements per segment (≥ 1).
func newPlan(n, self, total, segElems int) plan {
	maxChunk := (total + n - 1) / n
	segs := (maxChunk + segElems - 1) / segElems
	if segs < 1 {
		segs = 1
	}
	return plan{n: n, self: self, total: total, segs: segs}
}

// steps is the number of rounds of both phases, 2(N−1).
func (p plan) steps() int { return 2 * (p.n - 1) }

// frames is how many frames a node sends (and receives) in one call.
func (p plan) frames() int { return p.steps() * p.segs }

func (p plan) mod(x int) int { return ((x % p.n) + p.n) % p.n }

// sendChunk and recvChunk are the chunks node self sends and receives at step t.
func (p plan) sendChunk(t int) int { return p.mod(p.self - t) }
func (p plan) recvChunk(t int) int { return p.mod(p.self - t - 1) }

// chunk returns the element range [lo, hi) of chunk c: a balanced split in
// which chunk sizes differ by at most one element.
func (p plan) chunk(c int) (lo, hi int) {
	return int(int64(c) * int64(p.total) / int64(p.n)), int(int64(c+1) * int64(p.total) / int64(p.n))
}

// segment returns the element range of segment k of chunk c, again a
// balanced split (segments may be empty when the vector is tiny).
func (p plan) segment(c, k int) (lo, hi int) {
	clo, chi := p.chunk(c)
	l := int64(chi - clo)
	return clo + int(int64(k)*l/int64(p.segs)), clo + int(int64(k+1)*l/int64(p.segs))
}

// phaseRound splits a step into its phase and round.
func (p plan) phaseRound(t int) (Phase, int) {
	if t < p.n-1 {
		return ScatterReduce, t
	}
	return AllGather, t - (p.n - 1)
}

// step is the inverse of phaseRound; ok is false outside the schedule.
func (p plan) step(ph Phase, round uint32) (int, bool) {
	if round >= uint32(p.n-1) {
		return 0, false
	}
	switch ph {
	case ScatterReduce:
		return int(round), true
	case AllGather:
		return p.n - 1 + int(round), true
	}
	return 0, false
}

// contributions is how many nodes' inputs the chunk received at step t
// holds: r+1 in scatter-reduce round r (the sender's own plus the r it
// received), N when gathering. It bounds the chunk's norm by
// contributions × C.
func (p plan) contributions(t int) int {
	ph, r := p.phaseRound(t)
	return Contributions(ph, uint32(r), p.n)
}
