package ringsim

import (
	"errors"
	"time"
)

// TwoLevel describes the two-level all-reduce of package ring (docs/ring.md,
// "Two-level all-reduce"): Nodes = Groups × g members in groups of g
// nearby nodes. Phase 1 is a reduce-scatter inside every group (g members,
// the whole vector, GroupLatency); phase 2 an all-reduce of each of the g
// shards across the groups (the G members holding the same shard, Bytes/g,
// Latency); phase 3 an all-gather inside every group. A node starts a phase
// when its previous one ends, as ring does, so the phases are simulated
// one after the other.
//
// Params carries the costs, the vector (Bytes), the link between groups
// (Bandwidth, Latency) and the CPU. With HostCores the rings of a phase
// (Groups group rings, g shard rings) run at once on the host: identical
// rings in step on processor-shared cores are simulated as one ring with
// HostCores and Background divided by their number, which is exact.
type TwoLevel struct {
	Params
	Groups         int           // G ≥ 2, divides Nodes; g = Nodes/G ≥ 2
	GroupLatency   time.Duration // one-way latency of a link inside a group
	GroupBandwidth float64       // bytes/s inside a group; 0: Bandwidth
	// GroupLatencies (g links) and CrossLatencies (G links), when set,
	// give each link of a group ring resp. a shard's ring its own latency
	// (Params.Latencies of that ring), overriding GroupLatency resp.
	// Latency: a group spanning two sites, or a shard ring whose members
	// share a site.
	GroupLatencies, CrossLatencies []time.Duration
}

// TwoLevelResult is the predicted two-level call: Result for the whole call
// (BusBW with the flat ring's factor 2(N−1)/N, so the two compare by time)
// and each phase's own prediction (one ring of the phase).
type TwoLevelResult struct {
	Result
	Phase [3]Result
}

// SimulateTwoLevel predicts one two-level call.
func SimulateTwoLevel(t TwoLevel) (TwoLevelResult, error) {
	n, G := t.Nodes, t.Groups
	if G < 2 || n%G != 0 || n/G < 2 {
		return TwoLevelResult{}, errors.New("ringsim: two-level needs Groups ≥ 2 dividing Nodes into groups of ≥ 2")
	}
	if t.Latencies != nil || t.Phases != BothPhases {
		return TwoLevelResult{}, errors.New("ringsim: two-level sets Latencies and Phases itself")
	}
	if t.GroupLatency < 0 || t.GroupBandwidth < 0 {
		return TwoLevelResult{}, errors.New("ringsim: negative parameter")
	}
	g := n / G
	share := func(p Params, rings int) Params {
		if p.HostCores > 0 {
			p.HostCores /= float64(rings)
			p.Background /= float64(rings)
		}
		return p
	}
	group := share(t.Params, G)
	group.Nodes, group.Latency, group.Latencies = g, t.GroupLatency, t.GroupLatencies
	if t.GroupBandwidth > 0 {
		group.Bandwidth = t.GroupBandwidth
	}
	cross := share(t.Params, g)
	cross.Nodes, cross.Latencies = G, t.CrossLatencies
	// The shards are ring's balanced split of the vector into g chunks;
	// the largest sets the pace.
	elems := t.Bytes / 4
	cross.Bytes = 4 * ((elems + int64(g) - 1) / int64(g))

	var res TwoLevelResult
	var err error
	group.Phases = ScatterOnly
	if res.Phase[0], err = Simulate(group); err != nil {
		return res, err
	}
	if res.Phase[1], err = Simulate(cross); err != nil {
		return res, err
	}
	group.Phases = GatherOnly
	if res.Phase[2], err = Simulate(group); err != nil {
		return res, err
	}
	r := &res.Result
	r.Seconds = res.Phase[0].Seconds + res.Phase[1].Seconds + res.Phase[2].Seconds
	r.CPUSeconds = float64(G)*(res.Phase[0].CPUSeconds+res.Phase[2].CPUSeconds) + float64(g)*res.Phase[1].CPUSeconds
	r.Segments = res.Phase[1].Segments
	r.AlgBW = float64(t.Bytes) / r.Seconds / 1e9
	r.BusBW = r.AlgBW * 2 * float64(n-1) / float64(n)
	r.LinkShare = r.BusBW * 1e9 / t.Bandwidth
	return res, nil
}

// RegionRing returns the per-link latencies of a flat ring whose members
// are ordered group by group (G groups of Nodes/G): the last member of
// each group links to the next group over the wide-area latency, every
// other link stays inside a group. It is the best flat ring over such a
// topology, and the flat baseline the two-level plan is compared with.
func RegionRing(nodes, groups int, in, between time.Duration) []time.Duration {
	l := make([]time.Duration, nodes)
	g := nodes / groups
	for i := range l {
		l[i] = in
		if g == 0 || (i+1)%g == 0 {
			l[i] = between
		}
	}
	return l
}
