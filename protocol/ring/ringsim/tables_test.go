package ringsim

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The tables of docs/ring.md, section "Scaling on paper (`protocol/ring/ringsim`)",
// are printed by
//
//	RINGSIM_TABLES=1 go test ./protocol/ring/ringsim -run TestPrintTables -v
//
// from the inputs below: costs measured on the development machine (how,
// in that section). Only the inputs are written here; every prediction is
// computed.

// Per-core rates and per-segment costs of frame version 2, measured in the
// CPU profiles of the nodes of `gym ring bench --netns --rate 1gbit` at
// N = 4 and 8 (fp32, signatures and TLS on; docs/ring.md says how).
var measured = struct {
	Hash, Reduce, Copy float64 // bytes/s
	TLS                float64 // bytes/s, each direction (AES-GCM seal resp. open)
	Sign, Verify       time.Duration
	// Write resp. read path, bytes/s: TLS's copies and the syscalls (the
	// nodes' kernel work), plus on the bed half each of the softirq work
	// of its veth, bridge and HTB (from /proc/stat). The plain figures
	// leave that out; the 10 Gbit/s predictions use them.
	BedSend, BedRead, PlainSend, PlainRead float64
}{
	Hash: 2.5e9, Reduce: 1.8e9, Copy: 6e9, TLS: 5e9,
	Sign: 55 * time.Microsecond, Verify: 80 * time.Microsecond,
	BedSend: 1 / 0.60e-9, BedRead: 1 / 0.71e-9, PlainSend: 1 / 0.40e-9, PlainRead: 1 / 0.51e-9,
}

// bedGoodput is TCP's goodput on the bed's 1 Gbit/s HTB links (MTU 1500):
// the mean busbw of the raw TCP ring over the runs of docs/ring.md (N = 2
// to 8, 0.1175 to 0.1192). 10 Gbit/s links are taken as ten times that.
const bedGoodput = 0.1185e9

// costs returns p with the measured costs of our ring (auth: signatures
// and TLS) or of a plain one (no hash, signature or TLS; the same kernel
// path, reduce and copies), with the bed's or the plain kernel path.
func costs(p Params, auth, bed bool) Params {
	p.SegmentBytes = 1 << 20
	p.ReduceRate, p.CopyRate = measured.Reduce, measured.Copy
	p.SendRate, p.ReadRate = measured.PlainSend, measured.PlainRead
	if bed {
		p.SendRate, p.ReadRate = measured.BedSend, measured.BedRead
	}
	if auth {
		p.Authenticated = true
		p.HashRate, p.TLSRate = measured.Hash, measured.TLS
		p.Sign, p.Verify = measured.Sign, measured.Verify
	}
	return p
}

func mustSim(t *testing.T, p Params) Result {
	t.Helper()
	r, err := Simulate(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPrintTables(t *testing.T) {
	if os.Getenv("RINGSIM_TABLES") == "" {
		t.Skip("set RINGSIM_TABLES=1 to print the tables of docs/ring.md")
	}
	var b strings.Builder
	row := func(cells ...any) {
		for _, c := range cells {
			switch v := c.(type) {
			case float64:
				fmt.Fprintf(&b, "| %.3f ", v)
			default:
				fmt.Fprintf(&b, "| %v ", v)
			}
		}
		b.WriteString("|\n")
	}

	// 1. The namespace bed of this machine: 1 Gbit/s HTB, no delay,
	// 64 MiB, all nodes on one host with 2 cores.
	b.WriteString("Bed: 1 Gbit/s, no added delay, 64 MiB, busbw GB/s (ours: signatures + TLS; raw: plain TCP ring, kernel path only)\n\n")
	row("N", "ours, own cores", "ours, 2 host cores", "ours, 2 cores + 1 busy thread", "ours, CPU s per call", "raw, 2 host cores")
	row("---", "---", "---", "---", "---", "---")
	for _, n := range []int{2, 3, 4, 6, 8} {
		bed := Params{Nodes: n, Bytes: 64 << 20, Bandwidth: bedGoodput, Latency: 50 * time.Microsecond}
		ours, raw := costs(bed, true, true), costs(bed, false, true)
		raw.ReduceRate, raw.CopyRate = 0, 0 // the raw ring neither reduces nor stores
		own := mustSim(t, ours)
		ours.HostCores, raw.HostCores = 2, 2
		shared, rawShared := mustSim(t, ours), mustSim(t, raw)
		ours.Background = 1
		loaded := mustSim(t, ours)
		row(n, own.BusBW, shared.BusBW, loaded.BusBW, shared.CPUSeconds, rawShared.BusBW)
	}

	// 2. The seed's setting: 10 Gbit/s, N = 8 … 128, ours against the
	// same ring without signatures or TLS ("Horovod").
	for _, size := range []int64{256 << 20} {
		fmt.Fprintf(&b, "\n10 Gbit/s links, %d MiB, busbw GB/s; eff = ours / unauthenticated\n\n", size>>20)
		row("N", "0.1 ms: plain", "ours", "eff", "2 cores/node: plain", "ours", "eff", "20 ms: plain", "ours", "eff", "ours 20 ms / plain 0.1 ms")
		row("---", "---", "---", "---", "---", "---", "---", "---", "---", "---", "---")
		for _, n := range []int{8, 16, 32, 64, 128} {
			sim := func(lat time.Duration, auth bool, cores float64) Result {
				p := costs(Params{Nodes: n, Bytes: size, Bandwidth: 10 * bedGoodput, Latency: lat, Cores: cores}, auth, false)
				return mustSim(t, p)
			}
			pl, ou, ou2 := sim(100*time.Microsecond, false, 0), sim(100*time.Microsecond, true, 0), sim(100*time.Microsecond, true, 2)
			pl2 := sim(100*time.Microsecond, false, 2)
			wl, wo := sim(20*time.Millisecond, false, 0), sim(20*time.Millisecond, true, 0)
			pct := func(a, b Result) string { return fmt.Sprintf("%.1f %%", 100*a.BusBW/b.BusBW) }
			row(n, pl.BusBW, ou.BusBW, pct(ou, pl), pl2.BusBW, ou2.BusBW, pct(ou2, pl2), wl.BusBW, wo.BusBW, pct(wo, wl), pct(wo, pl))
		}
	}
	t.Log("\n" + b.String())
}

// site is a wide-area topology: nodes in sites of size nodes, one-way
// latency lan inside a site and wan between sites.
type site struct {
	nodes    int
	lan, wan time.Duration
}

// twoLevelFor returns the two-level call over topology s with groups of g
// (g divides the site or is a multiple of it): groups inside a site have
// LAN links only and their shard rings cross sites in site order; groups
// of several sites are ordered site by site and their shard rings cross
// sites on every link.
func twoLevelFor(p Params, s site, g int) TwoLevel {
	n := p.Nodes
	tl := TwoLevel{Params: p, Groups: n / g, GroupLatency: s.lan}
	tl.Latency = s.wan
	if g <= s.nodes {
		tl.CrossLatencies = RegionRing(n/g, n/s.nodes, s.wan, s.wan)
		if per := s.nodes / g; per > 1 {
			tl.CrossLatencies = RegionRing(n/g, n/s.nodes, s.lan, s.wan)
		}
	} else {
		tl.GroupLatencies = RegionRing(g, g/s.nodes, s.lan, s.wan)
	}
	return tl
}

// bestTwoLevel is the planner's choice on the model: the group size (a
// power of two from 2 to N/2) with the shortest predicted call.
func bestTwoLevel(t *testing.T, p Params, s site) (int, TwoLevelResult) {
	t.Helper()
	bestG, best := 0, TwoLevelResult{}
	for g := 2; g <= p.Nodes/2; g *= 2 {
		if p.Nodes%g != 0 || (g < s.nodes && s.nodes%g != 0) || (g > s.nodes && g%s.nodes != 0) {
			continue
		}
		r, err := SimulateTwoLevel(twoLevelFor(p, s, g))
		if err != nil {
			t.Fatal(err)
		}
		if bestG == 0 || r.Seconds < best.Seconds {
			bestG, best = g, r
		}
	}
	return bestG, best
}

// TestPrintTwoLevel prints the tables of docs/ring.md, section "Two-level
// all-reduce: the model" (RINGSIM_TABLES=1; ≈ 10 minutes of one core:
// flat rings of 4,096 nodes are 33 million segment hops each).
func TestPrintTwoLevel(t *testing.T) {
	if os.Getenv("RINGSIM_TABLES") == "" {
		t.Skip("set RINGSIM_TABLES=1 to print the tables of docs/ring.md")
	}
	var b strings.Builder
	row := func(cells ...any) {
		for _, c := range cells {
			switch v := c.(type) {
			case float64:
				fmt.Fprintf(&b, "| %.3f ", v)
			default:
				fmt.Fprintf(&b, "| %v ", v)
			}
		}
		b.WriteString("|\n")
	}
	pct := func(a, b float64) string { return fmt.Sprintf("%.1f %%", 100*a/b) }
	const cluster = 100 * time.Microsecond
	type key struct {
		n     int
		bytes int64
		bw    float64
		auth  bool
	}
	clusters := map[key]Result{} // the cluster ring does not depend on the sites
	clusterRing := func(p Params) Result {
		p.Latency, p.Latencies = cluster, nil
		k := key{p.Nodes, p.Bytes, p.Bandwidth, p.Authenticated}
		if r, ok := clusters[k]; ok {
			return r
		}
		r := mustSim(t, p)
		clusters[k] = r
		return r
	}
	sizes := []int64{16 << 20, 256 << 20}
	if s := os.Getenv("RINGSIM_SIZES"); s == "256" {
		sizes = sizes[1:]
	}
	maxN := 4096
	if os.Getenv("RINGSIM_QUICK") != "" {
		maxN = 1024
	}

	// 1. Sites of 16 nodes (8 and 16 nodes: two sites), 2 ms inside a
	// site, 20 ms between, 10 Gbit/s, signatures and TLS, a core per
	// pipeline.
	for _, size := range sizes {
		fmt.Fprintf(&b, "\n10 Gbit/s, %d MiB, sites of 16 nodes, 2 ms inside, 20 ms between; busbw GB/s (flat factor 2(N−1)/N for all); speed = cluster ring's time / this one's\n\n", size>>20)
		row("N", "cluster ring (0.1 ms)", "flat, every link 20 ms", "two-level, every link 20 ms (g)", "flat, ordered by site", "two-level: g", "busbw", "phases s (1 / 2 / 3)", "speed vs cluster", "× flat by site")
		row("---", "---", "---", "---", "---", "---", "---", "---", "---", "---")
		for _, n := range []int{8, 16, 32, 64, 128, 256, 1024, 4096} {
			if n > maxN {
				continue
			}
			s := site{nodes: min(16, n/2), lan: 2 * time.Millisecond, wan: 20 * time.Millisecond}
			p := costs(Params{Nodes: n, Bytes: size, Bandwidth: 10 * bedGoodput}, true, false)
			cl := clusterRing(p)
			gw, tw := bestTwoLevel(t, p, site{nodes: 1, lan: s.wan, wan: s.wan})
			allWAN := "—"
			if n <= 1024 {
				wp := p
				wp.Latency = s.wan
				allWAN = fmt.Sprintf("%.3f", mustSim(t, wp).BusBW)
			}
			rp := p
			rp.Latencies = RegionRing(n, n/s.nodes, s.lan, s.wan)
			reg := mustSim(t, rp)
			g, tl := bestTwoLevel(t, p, s)
			ph := fmt.Sprintf("%.3f / %.3f / %.3f", tl.Phase[0].Seconds, tl.Phase[1].Seconds, tl.Phase[2].Seconds)
			row(n, cl.BusBW, allWAN, fmt.Sprintf("%.3f (%d)", tw.BusBW, gw), reg.BusBW, g, tl.BusBW, ph, pct(cl.Seconds, tl.Seconds), fmt.Sprintf("%.2f", reg.Seconds/tl.Seconds))
		}
	}

	// 2. The ranges of the issue at 128 and 1,024 nodes (sites of 16):
	// link rate, latency inside and between sites, authentication.
	fmt.Fprintf(&b, "\nSites of 16 nodes, 256 MiB; two-level busbw GB/s (planner's g) and its speed against the cluster ring of the same rate and authentication; flat = ordered by site\n\n")
	row("N", "rate", "in / between", "auth", "cluster ring", "flat by site", "two-level (g)", "speed vs cluster", "× flat by site")
	row("---", "---", "---", "---", "---", "---", "---", "---", "---")
	for _, n := range []int{128, 1024} {
		if n > maxN {
			continue
		}
		for _, rate := range []float64{bedGoodput, 10 * bedGoodput} {
			for _, lat := range [][2]time.Duration{{time.Millisecond, 20 * time.Millisecond}, {5 * time.Millisecond, 20 * time.Millisecond}, {time.Millisecond, 150 * time.Millisecond}, {5 * time.Millisecond, 150 * time.Millisecond}} {
				for _, auth := range []bool{false, true} {
					s := site{nodes: 16, lan: lat[0], wan: lat[1]}
					p := costs(Params{Nodes: n, Bytes: 256 << 20, Bandwidth: rate}, auth, false)
					cl := clusterRing(p)
					rp := p
					rp.Latencies = RegionRing(n, n/s.nodes, s.lan, s.wan)
					reg := mustSim(t, rp)
					g, tl := bestTwoLevel(t, p, s)
					gb := fmt.Sprintf("%.0f Gbit/s", rate/bedGoodput)
					row(n, gb, fmt.Sprintf("%v / %v", lat[0], lat[1]), auth, cl.BusBW, reg.BusBW, fmt.Sprintf("%.3f (%d)", tl.BusBW, g), pct(cl.Seconds, tl.Seconds), fmt.Sprintf("%.2f", reg.Seconds/tl.Seconds))
				}
			}
		}
	}
	t.Log("\n" + b.String())
}

// TestPrintBed prints the model's prediction for the namespace bed
// (16 nodes in 4 groups, 1 Gbit/s, 2 ms inside a group, 40 ms between;
// 16 and 256 MiB), on this machine's 2 host cores and with a core per
// pipeline, for the flat ring ordered by group (the bench's rank order),
// the flat ring with every link wide-area, and the two-level plan.
func TestPrintBed(t *testing.T) {
	if os.Getenv("RINGSIM_TABLES") == "" {
		t.Skip("set RINGSIM_TABLES=1 to print the tables of docs/ring.md")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe bed: 16 nodes, 4 groups of 4, 1 Gbit/s, 2 ms / 40 ms one way; seconds per call (busbw GB/s)\n\n")
	fmt.Fprintf(&b, "| size | CPU | flat, ordered by group | flat, every link 40 ms | two-level (phases 1 / 2 / 3) | two-level × flat by group | × flat every link 40 ms |\n|---|---|---|---|---|---|---|\n")
	const n, G = 16, 4
	in, out := 2*time.Millisecond, 40*time.Millisecond
	for _, size := range []int64{16 << 20, 64 << 20, 256 << 20} {
		for _, host := range []float64{0, 2} {
			p := costs(Params{Nodes: n, Bytes: size, Bandwidth: bedGoodput, HostCores: host}, true, true)
			fp := p
			fp.Latencies = RegionRing(n, G, in, out)
			flat := mustSim(t, fp)
			wp := p
			wp.Latency = out
			wan := mustSim(t, wp)
			tp := p
			tp.Latency = out // between groups
			tl, err := SimulateTwoLevel(TwoLevel{Params: tp, Groups: G, GroupLatency: in})
			if err != nil {
				t.Fatal(err)
			}
			cpu := "a core per pipeline"
			if host > 0 {
				cpu = "2 host cores"
			}
			fmt.Fprintf(&b, "| %d MiB | %s | %.3f s (%.3f) | %.3f s (%.3f) | %.3f s (%.3f; %.3f / %.3f / %.3f) | %.2f | %.2f |\n", size>>20, cpu,
				flat.Seconds, flat.BusBW, wan.Seconds, wan.BusBW, tl.Seconds, tl.BusBW, tl.Phase[0].Seconds, tl.Phase[1].Seconds, tl.Phase[2].Seconds,
				flat.Seconds/tl.Seconds, wan.Seconds/tl.Seconds)
		}
	}
	t.Log(b.String())
}
