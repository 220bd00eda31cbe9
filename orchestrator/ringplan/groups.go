package ringplan

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// RTT holds measured round-trip times in microseconds: r[i][j] is member
// i's measurement of its link to j; 0 means not measured.
//
// A member reports its own row, so it can lie about its own links only.
// PlanGroups takes the larger of the two measurements of a link: a lie can
// make a member look farther from others, never nearer, so no member can
// talk its way into a cluster of members near each other that measured it
// far (it can at most leave one, and then it forms a group of its own or
// shares one of several sites).
type RTT [][]uint32

// GroupParams tunes PlanGroups.
type GroupParams struct {
	Bytes        int64   // the vector one all-reduce moves, fp32 bytes
	Bandwidth    float64 // bytes/s of a member's link (the slowest member's measured goodput)
	SegmentBytes int64   // the ring's largest segment; 0: 1 MiB
	// MinGain is how many times faster the best two-level plan must be
	// predicted to be than the flat ring to be chosen; 0: 1.1. Below it the
	// flat ring is kept (one ring, fewer connections, the model's error).
	MinGain float64
}

// GroupPlan is PlanGroups' answer.
type GroupPlan struct {
	Order  []int // members in ring order, group after group
	Groups []int // group sizes in Order; nil: one flat ring over Order
	// Predicted seconds of one all-reduce: the flat ring over FlatOrder,
	// and the best two-level plan found (0 when none was possible).
	FlatSeconds, TwoLevelSeconds float64
	FlatOrder                    []int
}

// PlanGroups chooses between one flat ring and a two-level all-reduce for
// the members of r, from their measured round trips and the payload, and
// returns the ring order and the groups (docs/ring.md, "Choosing the
// groups"). It is a pure, deterministic function of its inputs.
//
// Candidate groups come from single-linkage clustering of the round trips
// (every merge level at which the number of groups changes, from N/2
// groups down to 2), each also with its groups split into balanced pieces
// of at most 2, 4, 8, … members; members are ordered within a group and
// groups among themselves by nearest neighbour, and runs of 2, 4, 8, …
// consecutive groups are also tried as one group. Every candidate's call
// time is predicted with PredictRing for each phase, and the fastest wins
// if it beats the flat ring by MinGain.
func PlanGroups(r RTT, p GroupParams) (GroupPlan, error) {
	n := len(r)
	for i, row := range r {
		if len(row) != n {
			return GroupPlan{}, fmt.Errorf("%w: row %d has %d entries, want %d", ErrInput, i, len(row), n)
		}
	}
	switch {
	case n == 0:
		return GroupPlan{}, fmt.Errorf("%w: no members", ErrInput)
	case p.Bytes < 4 || p.Bandwidth <= 0 || math.IsInf(p.Bandwidth, 0) || p.SegmentBytes < 0 || p.MinGain < 0 || math.IsNaN(p.MinGain):
		return GroupPlan{}, fmt.Errorf("%w: bytes %d, bandwidth %v, segment %d, gain %v", ErrInput, p.Bytes, p.Bandwidth, p.SegmentBytes, p.MinGain)
	}
	if p.SegmentBytes == 0 {
		p.SegmentBytes = 1 << 20
	}
	if p.MinGain == 0 {
		p.MinGain = 1.1
	}
	d := symmetric(r)
	pl := planner{d: d, p: p}
	for i := range d {
		for _, x := range d[i] {
			if x != missing {
				pl.slowest = max(pl.slowest, x)
			}
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	flat := pl.tour(all)
	out := GroupPlan{FlatOrder: flat, Order: flat, FlatSeconds: pl.flatTime(flat)}
	if n < 4 {
		return out, nil
	}
	var best [][]int
	bestT := math.Inf(1)
	for _, part := range pl.levels() {
		for k, g := range part {
			part[k] = pl.tour(g) // split along the tour: pieces of nearby members
		}
		for cap := range pl.caps(part) {
			groups := split(part, cap)
			if len(groups) < 2 || len(groups) > n/2+1 {
				continue
			}
			order := pl.orderGroups(groups)
			// Also every m consecutive groups of the tour as one: sites
			// all equally far apart merge in one level, and a few sites
			// per group can beat one (fewer wide-area steps between
			// groups against a few inside them).
			for m := 1; len(order)/m >= 2; m *= 2 {
				merged := mergeRuns(order, m)
				if t := pl.twoLevelTime(merged); t < bestT {
					best, bestT = merged, t
				}
			}
		}
	}
	if best == nil {
		return out, nil
	}
	out.TwoLevelSeconds = bestT
	if out.FlatSeconds >= p.MinGain*bestT {
		out.Order, out.Groups = nil, nil
		for _, g := range best {
			out.Order = append(out.Order, g...)
			out.Groups = append(out.Groups, len(g))
		}
	}
	return out, nil
}

// missing marks a link neither side measured.
const missing = math.MaxUint32

// symmetric returns the larger of the two measurements of every link (the
// one measurement when only one side measured it; missing when neither).
func symmetric(r RTT) [][]uint32 {
	n := len(r)
	d := make([][]uint32, n)
	for i := range d {
		d[i] = make([]uint32, n)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			v := max(r[i][j], r[j][i])
			if v == 0 {
				v = missing
			}
			d[i][j], d[j][i] = v, v
		}
	}
	return d
}

type planner struct {
	d       [][]uint32
	p       GroupParams
	slowest uint32 // the largest measured round trip
}

// latency is the one-way latency in seconds the model uses for a link: half
// the round trip; a link nobody measured counts as the slowest measured.
func (pl planner) latency(a, b int) float64 {
	if a == b {
		return 0
	}
	v := pl.d[a][b]
	if v == missing {
		v = pl.slowest
	}
	return float64(v) / 2e6
}

// tour orders members by nearest neighbour from the first (ties: the
// lower index).
func (pl planner) tour(members []int) []int {
	left := slices.Clone(members)
	out := make([]int, 0, len(left))
	cur := left[0]
	left = left[1:]
	out = append(out, cur)
	for len(left) > 0 {
		bi := 0
		for i, x := range left {
			if pl.d[cur][x] < pl.d[cur][left[bi]] {
				bi = i
			}
		}
		cur = left[bi]
		out = append(out, cur)
		left = slices.Delete(left, bi, bi+1)
	}
	return out
}

// levels returns the single-linkage partitions of the members at every
// merge level where the number of groups changes, from at most N/2 groups
// down to 2, each group in ascending member order. At most 64 levels are
// kept (spread over the range) to bound the work on large jobs.
func (pl planner) levels() [][][]int {
	n := len(pl.d)
	type edge struct {
		v    uint32
		a, b int
	}
	edges := make([]edge, 0, n*(n-1)/2)
	for i := range n {
		for j := i + 1; j < n; j++ {
			if pl.d[i][j] != missing {
				edges = append(edges, edge{pl.d[i][j], i, j})
			}
		}
	}
	sort.Slice(edges, func(x, y int) bool {
		if edges[x].v != edges[y].v {
			return edges[x].v < edges[y].v
		}
		if edges[x].a != edges[y].a {
			return edges[x].a < edges[y].a
		}
		return edges[x].b < edges[y].b
	})
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	snapshot := func() [][]int {
		byRoot := map[int][]int{}
		var roots []int
		for i := range n {
			r := find(i)
			if _, ok := byRoot[r]; !ok {
				roots = append(roots, r)
			}
			byRoot[r] = append(byRoot[r], i)
		}
		out := make([][]int, 0, len(roots))
		for _, r := range roots {
			out = append(out, byRoot[r])
		}
		return out
	}
	var out [][][]int
	count, last := n, n+1
	for k := 0; k < len(edges); {
		v := edges[k].v
		for ; k < len(edges) && edges[k].v == v; k++ { // merge a whole level at once
			a, b := find(edges[k].a), find(edges[k].b)
			if a != b {
				parent[max(a, b)] = min(a, b)
				count--
			}
		}
		if count >= 2 && count <= n/2 && (count <= 16 || float64(count) <= 0.9*float64(last)) {
			out = append(out, snapshot())
			last = count
		}
	}
	if len(out) > 64 {
		keep := make([][][]int, 0, 64)
		for i := range 64 {
			keep = append(keep, out[i*len(out)/64])
		}
		out = keep
	}
	return out
}

// caps yields the group size caps tried on a partition: none (0), then 2,
// 4, 8, … below its largest group.
func (pl planner) caps(part [][]int) func(func(int) bool) {
	largest := 0
	for _, g := range part {
		largest = max(largest, len(g))
	}
	return func(yield func(int) bool) {
		if !yield(0) {
			return
		}
		for c := 2; c < largest; c *= 2 {
			if !yield(c) {
				return
			}
		}
	}
}

// split cuts every group above cap members (0: no cap) into balanced
// pieces of consecutive members (of its nearest-neighbour tour).
func split(part [][]int, cap int) [][]int {
	var out [][]int
	for _, g := range part {
		if cap == 0 || len(g) <= cap {
			out = append(out, g)
			continue
		}
		k := (len(g) + cap - 1) / cap
		for i := range k {
			out = append(out, g[i*len(g)/k:(i+1)*len(g)/k])
		}
	}
	return out
}

// mergeRuns joins every m consecutive groups into one (the last run may
// be shorter).
func mergeRuns(groups [][]int, m int) [][]int {
	if m == 1 {
		return groups
	}
	var out [][]int
	for i := 0; i < len(groups); i += m {
		var g []int
		for _, x := range groups[i:min(i+m, len(groups))] {
			g = append(g, x...)
		}
		out = append(out, g)
	}
	return out
}

// orderGroups orders each group's members by nearest neighbour and the
// groups by nearest neighbour between their first members.
func (pl planner) orderGroups(groups [][]int) [][]int {
	toured := make([][]int, len(groups))
	for k, g := range groups {
		toured[k] = pl.tour(g)
	}
	left := make([]int, len(toured))
	for i := range left {
		left[i] = i
	}
	out := [][]int{toured[0]}
	cur := 0
	left = left[1:]
	for len(left) > 0 {
		bi := 0
		for i, k := range left {
			if pl.d[toured[cur][0]][toured[k][0]] < pl.d[toured[cur][0]][toured[left[bi]][0]] {
				bi = i
			}
		}
		cur = left[bi]
		out = append(out, toured[cur])
		left = slices.Delete(left, bi, bi+1)
	}
	return out
}

// flatTime predicts a flat all-reduce over order.
func (pl planner) flatTime(order []int) float64 {
	n := len(order)
	if n < 2 {
		return 0
	}
	return PredictRing(pl.links(order), 2*(n-1), float64(pl.p.Bytes)/float64(n), pl.p)
}

func (pl planner) links(order []int) []float64 {
	l := make([]float64, len(order))
	for i := range order {
		l[i] = pl.latency(order[i], order[(i+1)%len(order)])
	}
	return l
}

// twoLevelTime predicts the two-level all-reduce over groups (in order):
// the slowest group's reduce-scatter, the slowest shard ring (a member
// owning m shards carries m shard rings on its link), the slowest group's
// all-gather (the reduce-scatter's time again: same links, same bytes).
func (pl planner) twoLevelTime(groups [][]int) float64 {
	G := len(groups)
	S := 0
	for _, g := range groups {
		S = max(S, len(g))
	}
	V := float64(pl.p.Bytes)
	var p1 float64
	for _, g := range groups {
		if len(g) > 1 {
			p1 = max(p1, PredictRing(pl.links(g), len(g)-1, V/float64(len(g)), pl.p))
		}
	}
	// Shard s's owner in group k, as package ring lays it out: chunk c of
	// a group of g holds shards [c·S/g, (c+1)·S/g) and is owned by member
	// c−1; it owns ⌈S/g⌉ or ⌊S/g⌋ shards.
	owner := func(k, s int) (int, int) {
		g := len(groups[k])
		c := s * g / S
		for c > 0 && c*S/g > s {
			c--
		}
		for c+1 < g && (c+1)*S/g <= s {
			c++
		}
		return groups[k][(c+g-1)%g], (c+1)*S/g - c*S/g
	}
	step := max(1, S/64) // at most 64 shard rings evaluated on large plans
	var p2 float64
	ring := make([]int, G)
	for s := 0; s < S; s += step {
		m := 1
		for k := range G {
			var own int
			ring[k], own = owner(k, s)
			m = max(m, own)
		}
		p2 = max(p2, PredictRing(pl.links(ring), 2*(G-1), float64(m)*V/float64(S)/float64(G), pl.p))
	}
	return 2*p1 + p2
}

// PredictRing predicts the time of ring steps over links (one-way
// latencies in seconds, link i from member i to i+1) when every step moves
// a chunk of chunk bytes over every link at p.Bandwidth, cut into the
// ring's segments (a quarter of a chunk within [64 KiB, p.SegmentBytes]).
//
// It is the ring's critical path: step t of link i starts when link i has
// sent step t−1 and the first segment of step t−1 has crossed link i−1. So
// the call takes steps·chunk/B plus the most that a run of consecutive
// links of the chunk's walk (at most steps long) adds over the bytes:
// Σ (latency + segment/B − chunk/B) over the run, at least one latency.
// Without CPU costs it agrees with ringsim's discrete-event model
// (TestPredictRingAgreesWithRingsim); CPU per byte is left to the caller's
// Bandwidth.
func PredictRing(links []float64, steps int, chunk float64, p GroupParams) float64 {
	n := len(links)
	if n < 2 || steps < 1 {
		return 0
	}
	segMax := p.SegmentBytes
	if segMax == 0 {
		segMax = 1 << 20
	}
	seg := min(max(chunk/4, min(64<<10, float64(segMax))), float64(segMax), chunk)
	B := p.Bandwidth
	// The walk runs over links i, i+1, … (any start) for steps hops: find
	// the largest sum of a window of at most steps consecutive terms over
	// the links repeated n+steps times, with prefix sums and a monotone
	// queue of the smallest prefix in reach.
	L := n + steps
	prefix := make([]float64, L+1)
	minLat := math.Inf(1)
	for i := range L {
		l := links[i%n]
		minLat = min(minLat, l)
		prefix[i+1] = prefix[i] + l + seg/B - chunk/B
	}
	best := math.Inf(-1)
	q := []int{0}
	for e := 1; e <= L; e++ {
		for len(q) > 0 && q[0] < e-steps {
			q = q[1:]
		}
		if len(q) > 0 {
			best = max(best, prefix[e]-prefix[q[0]])
		}
		for len(q) > 0 && prefix[q[len(q)-1]] >= prefix[e] {
			q = q[:len(q)-1]
		}
		q = append(q, e)
	}
	return float64(steps)*chunk/B + max(best, minLat+seg/B)
}

// SplitGroups cuts a ring of n members into g balanced groups of
// consecutive members (sizes differ by at most one, larger first): the
// groups of a two-level all-reduce when the operator fixes their number
// rather than PlanGroups choosing them. nil (a flat ring) when g < 2 or
// the groups would have fewer than two members.
func SplitGroups(n, g int) []int {
	if g < 2 || n < 2*g {
		return nil
	}
	out := make([]int, g)
	for k := range out {
		out[k] = (k+1)*n/g - k*n/g
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// Regroup carries the groups of a ring (old order, sizes) over to next, a
// ring order Repair or Insert made from it: every member keeps its group, a
// new member joins the group of its predecessor in next, or of its
// successor when that group is smaller (a standby in the place of a member
// at a group's edge refills that group), groups left empty go, and fewer
// than two groups left make the ring flat (nil). Groups are read off next as runs of
// consecutive members, so next need not keep them whole.
func Regroup(old []string, groups []int, next []string) []int {
	if len(groups) < 2 || len(next) == 0 {
		return nil
	}
	of := map[string]int{}
	at := 0
	for k, g := range groups {
		for _, id := range old[at:min(at+g, len(old))] {
			of[id] = k
		}
		at += g
	}
	label := make([]int, len(next))
	first := -1
	for i, id := range next {
		if k, ok := of[id]; ok {
			label[i] = k
			if first < 0 {
				first = k
			}
		} else {
			label[i] = -1
		}
	}
	if first < 0 {
		return nil
	}
	size := map[int]int{}
	for _, k := range label {
		if k >= 0 {
			size[k]++
		}
	}
	prev := first
	for i := range label {
		if label[i] < 0 {
			// Between two groups: the smaller one (a standby taking the
			// place of a member at a group's edge refills its group).
			succ := prev
			for _, k := range label[i+1:] {
				if k >= 0 {
					succ = k
					break
				}
			}
			label[i] = prev
			if size[succ] < size[prev] {
				label[i] = succ
			}
			size[label[i]]++
		}
		prev = label[i]
	}
	var out []int
	for i := range label {
		if i == 0 || label[i] != label[i-1] {
			out = append(out, 0)
		}
		out[len(out)-1]++
	}
	if len(out) < 2 {
		return nil
	}
	return out
}
