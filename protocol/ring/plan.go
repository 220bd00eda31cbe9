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
//
// A sub-call of a two-level call (twolevel.go) runs a part of this
// schedule: the steps [first, end) (a reduce-scatter or an all-gather
// alone), over chunks with given boundaries (a group ring's chunks are
// runs of shards), with the shard rings' phase numbers (cross), and with
// each member's input counting as weight[i] clipped contributions.
type plan struct {
	n, self    int
	total      int // elements
	segs       int // segments per chunk
	first, end int // the steps this call runs
	bounds     []int
	cross      bool
	weight     []int // nil: one contribution per member
	whole      int   // contributions of a finished chunk
}

// newPlan returns the plan for n nodes, node self, total elements and at
// most segElems elements per segment (≥ 1).
func newPlan(n, self, total, segElems int) plan {
	return newPlanBounds(n, self, total, segElems, nil)
}

// newPlanBounds is newPlan with chunk c = [bounds[c], bounds[c+1]) (nil:
// the balanced split).
func newPlanBounds(n, self, total, segElems int, bounds []int) plan {
	maxChunk := (total + n - 1) / n
	for c := range len(bounds) - 1 {
		maxChunk = max(maxChunk, bounds[c+1]-bounds[c])
	}
	segs := (maxChunk + segElems - 1) / segElems
	if segs < 1 {
		segs = 1
	}
	return plan{n: n, self: self, total: total, segs: segs, first: 0, end: 2 * (n - 1), bounds: bounds, whole: n}
}

// runFrames is how many frames a node sends (and receives) in this call.
func (p plan) runFrames() int { return (p.end - p.first) * p.segs }

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
	if p.bounds != nil {
		return p.bounds[c], p.bounds[c+1]
	}
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
	var base Phase
	if p.cross {
		base = CrossScatter
	}
	if t < p.n-1 {
		return base + ScatterReduce, t
	}
	return base + AllGather, t - (p.n - 1)
}

// step is the inverse of phaseRound; ok is false outside the schedule
// (another ring's phases, or a step this call does not run).
func (p plan) step(ph Phase, round uint32) (int, bool) {
	if round >= uint32(p.n-1) || (ph >= CrossScatter) != p.cross {
		return 0, false
	}
	t := int(round)
	if ph.gather() {
		t += p.n - 1
	}
	return t, t >= p.first && t < p.end
}

// contributions is how many nodes' inputs the chunk received at step t
// holds: r+1 in scatter-reduce round r (the sender's own plus the r it
// received), N when gathering. It bounds the chunk's norm by
// contributions × C.
//
// In a shard ring each member's input is a group's partial sum: the chunk
// received in round r started at member c = its index and passed members
// c … c+r, whose weights it sums; a finished chunk holds p.whole.
func (p plan) contributions(t int) int {
	ph, r := p.phaseRound(t)
	if ph.gather() {
		return p.whole
	}
	if p.weight == nil {
		return r + 1
	}
	c, w := p.recvChunk(t), 0
	for i := range r + 1 {
		w += p.weight[p.mod(c+i)]
	}
	return w
}
