package ringsim

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The tables of docs/ring.md, section "Scaling on paper (`ring/ringsim`)",
// are printed by
//
//	RINGSIM_TABLES=1 go test ./ring/ringsim -run TestPrintTables -v
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
