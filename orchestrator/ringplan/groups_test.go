package ringplan

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring/ringsim"
)

// sites returns the round trips (µs) of sites of the given sizes: in µs
// inside a site, between µs across sites.
func sites(sizes []int, in, between uint32) RTT {
	var site []int
	for s, k := range sizes {
		for range k {
			site = append(site, s)
		}
	}
	n := len(site)
	r := make(RTT, n)
	for i := range r {
		r[i] = make([]uint32, n)
		for j := range r[i] {
			switch {
			case i == j:
			case site[i] == site[j]:
				r[i][j] = in
			default:
				r[i][j] = between
			}
		}
	}
	return r
}

func checkPermutation(t *testing.T, pl GroupPlan, n int) {
	t.Helper()
	got := slices.Sorted(slices.Values(pl.Order))
	for i := range n {
		if i >= len(got) || got[i] != i {
			t.Fatalf("order %v is not a permutation of %d members", pl.Order, n)
		}
	}
	if len(got) != n {
		t.Fatalf("order has %d members, want %d", len(got), n)
	}
	if pl.Groups != nil {
		sum := 0
		for _, g := range pl.Groups {
			if g < 1 {
				t.Fatalf("group of %d", g)
			}
			sum += g
		}
		if sum != n || len(pl.Groups) < 2 {
			t.Fatalf("groups %v for %d members", pl.Groups, n)
		}
	}
}

// groupsOf returns the member sets of a plan's groups.
func groupsOf(pl GroupPlan) [][]int {
	var out [][]int
	at := 0
	for _, g := range pl.Groups {
		out = append(out, slices.Sorted(slices.Values(pl.Order[at:at+g])))
		at += g
	}
	return out
}

const gbit = 0.1185e9 // the bed's TCP goodput on 1 Gbit/s

// siteOf is the site of member x in sites of 16.
func siteOf(x int) int { return x / 16 }

// Four sites of 16 at 10 Gbit/s, 2 ms one way inside (4 ms round trip),
// 20 ms between (40 ms), 16 MiB: the plan is the sites, predicted ≥ 2 ×
// faster than the flat ring ordered by nearest neighbour (which is the
// sites one after the other).
func TestPlanGroupsFindsTheSites(t *testing.T) {
	r := sites([]int{16, 16, 16, 16}, 4000, 40000)
	pl, err := PlanGroups(r, GroupParams{Bytes: 16 << 20, Bandwidth: 10 * gbit})
	if err != nil {
		t.Fatal(err)
	}
	checkPermutation(t, pl, 64)
	got := groupsOf(pl)
	if len(got) != 4 {
		t.Fatalf("groups %v, want the 4 sites", pl.Groups)
	}
	for _, g := range got {
		if len(g) != 16 || siteOf(g[0]) != siteOf(g[15]) {
			t.Fatalf("group %v is not a site", g)
		}
	}
	if pl.FlatSeconds < 2*pl.TwoLevelSeconds {
		t.Fatalf("predicted flat %.3f s, two-level %.3f s: want ≥ 2×", pl.FlatSeconds, pl.TwoLevelSeconds)
	}
}

// Where the flat ring is predicted faster the plan stays flat: one LAN;
// and on the namespace bed (4 sites of 4, 2 ms / 40 ms one way,
// 1 Gbit/s, 16 MiB) no plan is predicted even 1.2 × faster than the flat
// ring ordered by site — that ring crosses the wide area about
// 2(N−1)/N · G times per chunk against a two-level plan's 2(G−1), with its
// latency partly hidden behind 1 MiB chunks, while the two-level phases do
// not overlap — so with MinGain 1.2 the ring stays flat. (The best found,
// 2 groups of 2 sites each, is predicted 1.13 × faster; ringsim with CPU
// costs says 1.10 ×, and 0.99 × on this machine's 2 cores.)
func TestPlanGroupsKeepsTheFlatRingWhereItIsFaster(t *testing.T) {
	pl, err := PlanGroups(sites([]int{8}, 200, 200), GroupParams{Bytes: 256 << 20, Bandwidth: 10 * gbit})
	if err != nil {
		t.Fatal(err)
	}
	checkPermutation(t, pl, 8)
	if pl.Groups != nil {
		t.Fatalf("one LAN: groups %v (flat %.4f s, two-level %.4f s), want a flat ring", pl.Groups, pl.FlatSeconds, pl.TwoLevelSeconds)
	}
	bed := sites([]int{4, 4, 4, 4}, 4000, 80000)
	pl, err = PlanGroups(bed, GroupParams{Bytes: 16 << 20, Bandwidth: gbit, MinGain: 1.2})
	if err != nil {
		t.Fatal(err)
	}
	checkPermutation(t, pl, 16)
	if pl.Groups != nil || pl.FlatSeconds >= 1.2*pl.TwoLevelSeconds {
		t.Fatalf("bed: groups %v, flat %.4f s, two-level %.4f s: want no plan 1.2 × faster", pl.Groups, pl.FlatSeconds, pl.TwoLevelSeconds)
	}
}

// Many sites all equally far apart merge in one clustering level; runs
// of consecutive sites are tried as groups too, and at 1,024 nodes in
// sites of 16 (10 Gbit/s, 256 MiB) groups of several whole sites win over
// one site per group, each group a run of whole sites.
func TestPlanGroupsMergesSites(t *testing.T) {
	sz := make([]int, 64)
	for i := range sz {
		sz[i] = 16
	}
	pl, err := PlanGroups(sites(sz, 4000, 40000), GroupParams{Bytes: 256 << 20, Bandwidth: 10 * gbit})
	if err != nil {
		t.Fatal(err)
	}
	checkPermutation(t, pl, 1024)
	if len(pl.Groups) < 2 || pl.Groups[0] <= 16 || pl.Groups[0]%16 != 0 {
		t.Fatalf("groups %v, want runs of whole sites", pl.Groups)
	}
	for _, g := range groupsOf(pl) {
		for _, x := range g {
			if !slices.Contains(g, siteOf(x)*16) || !slices.Contains(g, siteOf(x)*16+15) {
				t.Fatalf("group %v splits a site", g)
			}
		}
	}
}

// A member that lies about its round trips — claiming to be next to
// every member of site A and far from its own site B — cannot join A: A's
// members measured it far, and the larger measurement counts. It can only
// leave B, and then it is a group of its own; A stays exactly A.
func TestPlanGroupsLiarCannotJoinAGroup(t *testing.T) {
	r := sites([]int{16, 16, 16, 16}, 4000, 40000)
	const liar = 20 // in site B
	for j := range 64 {
		switch {
		case j == liar:
		case siteOf(j) == 0:
			r[liar][j] = 100 // "100 µs from every member of A"
		default:
			r[liar][j] = 900000
		}
	}
	pl, err := PlanGroups(r, GroupParams{Bytes: 16 << 20, Bandwidth: 10 * gbit})
	if err != nil {
		t.Fatal(err)
	}
	checkPermutation(t, pl, 64)
	if pl.Groups == nil {
		t.Fatal("flat ring: want groups")
	}
	siteA := make([]int, 16)
	for i := range siteA {
		siteA[i] = i
	}
	for _, g := range groupsOf(pl) {
		if slices.Contains(g, liar) && slices.ContainsFunc(g, func(x int) bool { return siteOf(x) == 0 }) {
			t.Fatalf("the liar is in a group with site A: %v", g)
		}
		if slices.Contains(g, 0) && !slices.Equal(g, siteA) {
			t.Fatalf("site A's group is %v", g)
		}
	}
}

// A lone far member (a group of one) and links nobody measured are planned
// around; the plan is always a permutation, deterministic, and never
// takes long.
func TestPlanGroupsBadInputs(t *testing.T) {
	r := sites([]int{4, 4, 4, 1}, 2000, 60000)
	for j := range 12 {
		r[12][j], r[j][12] = 300000, 300000
	}
	pl, err := PlanGroups(r, GroupParams{Bytes: 16 << 20, Bandwidth: gbit})
	if err != nil {
		t.Fatal(err)
	}
	checkPermutation(t, pl, 13)

	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		n := 1 + rng.IntN(40)
		m := make(RTT, n)
		for i := range m {
			m[i] = make([]uint32, n)
			for j := range m[i] {
				if i != j && rng.IntN(5) > 0 { // a fifth unmeasured
					m[i][j] = uint32(rng.IntN(200000))
				}
			}
		}
		p := GroupParams{Bytes: int64(4 + rng.IntN(64<<20)), Bandwidth: gbit * float64(1+rng.IntN(10))}
		a, err := PlanGroups(m, p)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		checkPermutation(t, a, n)
		b, _ := PlanGroups(m, p)
		if !slices.Equal(a.Order, b.Order) || !slices.Equal(a.Groups, b.Groups) {
			t.Fatalf("trial %d: not deterministic", trial)
		}
	}
	for _, c := range []struct {
		r RTT
		p GroupParams
	}{
		{RTT{}, GroupParams{Bytes: 4, Bandwidth: 1}},
		{RTT{{0, 1}, {1}}, GroupParams{Bytes: 4, Bandwidth: 1}},
		{RTT{{0}}, GroupParams{Bytes: 4, Bandwidth: 0}},
		{RTT{{0}}, GroupParams{Bytes: 0, Bandwidth: 1}},
		{RTT{{0}}, GroupParams{Bytes: 4, Bandwidth: 1, MinGain: math.NaN()}},
	} {
		if _, err := PlanGroups(c.r, c.p); err == nil {
			t.Fatalf("accepted %v %+v", c.r, c.p)
		}
	}
}

// PredictRing, the planner's closed form, agrees with ringsim's
// discrete-event model without CPU costs (within 10 %), on uniform rings,
// rings ordered by site, and single phases.
func TestPredictRingAgreesWithRingsim(t *testing.T) {
	p := GroupParams{Bandwidth: gbit, SegmentBytes: 1 << 20}
	for _, c := range []struct {
		n, sites int
		in, out  time.Duration
		bytes    int64
		phases   ringsim.Phases
	}{
		{8, 1, 20 * time.Millisecond, 20 * time.Millisecond, 16 << 20, ringsim.BothPhases},
		{16, 4, 2 * time.Millisecond, 40 * time.Millisecond, 16 << 20, ringsim.BothPhases},
		{16, 4, 2 * time.Millisecond, 40 * time.Millisecond, 256 << 20, ringsim.BothPhases},
		{64, 8, time.Millisecond, 20 * time.Millisecond, 64 << 20, ringsim.BothPhases},
		{4, 1, 2 * time.Millisecond, 2 * time.Millisecond, 16 << 20, ringsim.ScatterOnly},
		{32, 32, 0, 150 * time.Millisecond, 16 << 20, ringsim.BothPhases},
	} {
		lat := ringsim.RegionRing(c.n, c.sites, c.in, c.out)
		sim, err := ringsim.Simulate(ringsim.Params{Nodes: c.n, Bytes: c.bytes, SegmentBytes: p.SegmentBytes,
			Bandwidth: p.Bandwidth, Latencies: lat, Phases: c.phases})
		if err != nil {
			t.Fatal(err)
		}
		links := make([]float64, c.n)
		for i, l := range lat {
			links[i] = l.Seconds()
		}
		steps := 2 * (c.n - 1)
		if c.phases != ringsim.BothPhases {
			steps = c.n - 1
		}
		got := PredictRing(links, steps, float64(c.bytes)/float64(c.n), p)
		if e := math.Abs(got-sim.Seconds) / sim.Seconds; e > 0.10 {
			t.Fatalf("%+v: closed form %.4f s, ringsim %.4f s (%.0f %% off)", c, got, sim.Seconds, 100*e)
		}
	}
}

func TestSplitGroups(t *testing.T) {
	for _, c := range []struct {
		n, g int
		want []int
	}{{8, 2, []int{4, 4}}, {7, 2, []int{4, 3}}, {10, 4, []int{3, 3, 2, 2}}, {3, 2, nil}, {8, 1, nil}, {8, 0, nil}, {4, 2, []int{2, 2}}} {
		if got := SplitGroups(c.n, c.g); !slices.Equal(got, c.want) {
			t.Errorf("SplitGroups(%d, %d) = %v, want %v", c.n, c.g, got, c.want)
		}
	}
}

// Regroup keeps every member's group through Repair and Insert: the failed
// member's group shrinks, a standby or newcomer joins its predecessor's
// group, an emptied group goes, and one group left is a flat ring.
func TestRegroup(t *testing.T) {
	old := []string{"a", "b", "c", "d", "e", "f"}
	groups := []int{3, 3}
	bw := func(a, b string) uint64 { return 1000 }
	next, _ := Repair(old, "b", "", bw)
	if got := Regroup(old, groups, next); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("b removed: %v", got)
	}
	next, _ = Repair(old, "d", "x", bw) // x goes to d's old slot, after c
	if got := Regroup(old, groups, next); !slices.Equal(got, []int{3, 3}) || next[3] != "x" {
		t.Fatalf("d replaced by x at %v: %v, want x to refill d's group", next, got)
	}
	next, _ = Repair(old, "b", "x", bw) // inside group 0: x between a and c
	if got := Regroup(old, groups, next); !slices.Equal(got, []int{3, 3}) {
		t.Fatalf("b replaced by x at %v: %v", next, got)
	}
	next, _ = Insert(old, "y", bw)
	if got := Regroup(old, groups, next); len(got) != 2 || got[0]+got[1] != 7 {
		t.Fatalf("y inserted at %v: %v", next, got)
	}
	two := []string{"a", "b", "c"}
	next, _ = Repair(two, "c", "", bw)
	if got := Regroup(two, []int{2, 1}, next); got != nil {
		t.Fatalf("one group left: %v, want flat", got)
	}
	if got := Regroup(old, nil, old); got != nil {
		t.Fatalf("flat stays flat: %v", got)
	}
}
