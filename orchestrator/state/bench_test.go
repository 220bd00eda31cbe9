package state

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/protocol/jobspec"
)

// cluster is a machine with n registered, staked, heartbeating nodes.
type cluster struct {
	m    *Machine
	now  int64
	keys []ed25519.PrivateKey
	ids  []string
	seq  []uint64
}

func newCluster(tb testing.TB, n int) *cluster {
	m, err := New(DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	c := &cluster{m: m, now: epoch0}
	m.Start(c.now)
	for i := range n {
		seed := sha256.Sum256([]byte(fmt.Sprint("bench-", i)))
		k := ed25519.NewKeyFromSeed(seed[:])
		r := Register{Auth: Auth{Seq: 1, Timestamp: c.now}, Address: "10.0.0.1:9560", GPUModel: "L4", VRAMMiB: 24576}
		SignRegister(k, &r)
		c.must(tb, r)
		c.must(tb, Deposit{Account: r.Node, Amount: 10_000 * ledger.GYM})
		c.must(tb, Bond{Account: r.Node, Amount: 10_000 * ledger.GYM})
		c.keys, c.ids, c.seq = append(c.keys, k), append(c.ids, r.Node), append(c.seq, 1)
	}
	return c
}

func (c *cluster) must(tb testing.TB, cmd Command) []Event {
	evs, err := c.m.Step(c.now, cmd)
	if err != nil {
		tb.Fatal(err)
	}
	return evs
}

func (c *cluster) heartbeat(tb testing.TB, i int) {
	c.seq[i]++
	h := Heartbeat{Auth: Auth{Seq: c.seq[i], Timestamp: c.now}}
	SignHeartbeat(c.keys[i], &h)
	c.must(tb, h)
}

// beatAll advances the clock by d in 1 s ticks, all nodes heartbeating
// every 10 s except those in skip.
func (c *cluster) beatAll(tb testing.TB, d int64, skip map[int]bool) {
	for s := int64(1000); s <= d; s += 1000 {
		c.now += 1000
		for i := range c.ids {
			if !skip[i] && (int64(i)*37+s/1000)%10 == 0 {
				c.heartbeat(tb, i)
			}
		}
		c.must(tb, Tick{})
	}
}

// running puts a job of size nodes into Running with measured bandwidth.
func (c *cluster) running(tb testing.TB, size int) Job {
	c.must(tb, SubmitJob{Spec: jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: size}})
	id := c.m.Jobs()[len(c.m.Jobs())-1]
	j, _ := c.m.Job(id)
	idx := map[string]int{}
	for i, n := range c.ids {
		idx[n] = i
	}
	for a, n := range j.Members {
		i := idx[n]
		c.seq[i]++
		r := ReportBandwidth{Auth: Auth{Seq: c.seq[i], Timestamp: c.now}, Job: id}
		for b, p := range j.Members {
			if p != n {
				r.Links = append(r.Links, Link{Peer: p, Kbps: uint64(1000 + (a*7919+b*104729)%9000)})
			}
		}
		SignBandwidth(c.keys[i], &r)
		c.must(tb, r)
	}
	j, _ = c.m.Job(id)
	if j.State != Running {
		tb.Fatalf("job is %s", j.State)
	}
	return j
}

func BenchmarkHeartbeat1000(b *testing.B) {
	c := newCluster(b, 1000)
	c.now += 2000
	c.must(b, Tick{})
	i := 0
	for b.Loop() {
		c.now += 10 // 1000 nodes × 10 ms: each node every 10 s
		c.heartbeat(b, i%1000)
		i++
	}
}

func BenchmarkRegister1000(b *testing.B) {
	c := newCluster(b, 1000)
	i := 0
	for b.Loop() {
		k := i % 1000
		c.seq[k]++
		r := Register{Auth: Auth{Seq: c.seq[k], Timestamp: c.now}, Address: "10.0.0.2:9560", GPUModel: "L4", VRAMMiB: 24576}
		SignRegister(c.keys[k], &r)
		c.must(b, r)
		i++
	}
}

// BenchmarkSubmitSchedule1000: submit a 64-node job and schedule it onto a
// 1000-node registry (eligibility of every node, priority order, pick).
func BenchmarkSubmitSchedule1000(b *testing.B) {
	c := newCluster(b, 1000)
	for b.Loop() {
		evs := c.must(b, SubmitJob{Spec: jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 64}})
		if len(evs) != 2 {
			b.Fatalf("job not scheduled: %d events", len(evs))
		}
		b.StopTimer()
		c.must(b, FailJob{Job: c.m.Jobs()[len(c.m.Jobs())-1], Reason: "bench"})
		b.StartTimer()
	}
}

func BenchmarkTick1000(b *testing.B) {
	c := newCluster(b, 1000)
	for b.Loop() {
		c.now += 1
		c.must(b, Tick{})
	}
}

// BenchmarkReconfigure measures the tick that detects silent ring members
// of a running 64-node job on a 1000-node registry and publishes the
// repaired ring (standbys inserted).
func BenchmarkReconfigure(b *testing.B) {
	for _, failures := range []int{1, 3} {
		b.Run(fmt.Sprintf("failures=%d", failures), func(b *testing.B) {
			c := newCluster(b, 1000)
			j := c.running(b, 64)
			c.beatAll(b, 20_000, nil)
			// Victims are ring members that heartbeat in the same second
			// (same index mod 10), so one tick detects them all.
			idx := map[string]int{}
			for i, id := range c.ids {
				idx[id] = i
			}
			skip := map[int]bool{}
			for _, r := range j.Ring {
				if i := idx[r]; len(skip) < failures && (len(skip) == 0 || i%10 == idx[j.Ring[0]]%10) {
					skip[i] = true
				}
			}
			// Silence the victims for 20 s, then find the tick that fails them.
			c.beatAll(b, 20_000, skip)
			snap, now := c.m.Marshal(), c.now
			restore := func() {
				m, err := Restore(DefaultConfig(), snap)
				if err != nil {
					b.Fatal(err)
				}
				c.m, c.now = m, now
			}
			detect := 0
			restore()
			for rings := 0; rings == 0; detect++ {
				c.now += 1000
				for _, e := range c.must(b, Tick{}) {
					if _, ok := e.Body.(RingConfigured); ok {
						rings++
					}
				}
				if detect > 15 {
					b.Fatal("failures never detected")
				}
			}
			// Setup dominates each iteration, so the tick is timed directly
			// and reported as p50/p99 (b.StopTimer itself costs about a
			// millisecond: it reads memory statistics).
			var ds []time.Duration
			for i := 0; i < b.N; i++ {
				restore()
				for range detect - 1 {
					c.now += 1000
					c.must(b, Tick{})
				}
				c.now += 1000
				t0 := time.Now()
				evs := c.must(b, Tick{}) // detection → new configuration
				ds = append(ds, time.Since(t0))
				rings := 0
				for _, e := range evs {
					if _, ok := e.Body.(RingConfigured); ok {
						rings++
					}
				}
				if rings != failures {
					b.Fatalf("%d ring configurations for %d failures", rings, failures)
				}
			}
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkTickOld1000: a tick over 1,000 staked nodes registered longer
// ago than UnstakedTTL (each one's stake is looked at for expiry).
func BenchmarkTickOld1000(b *testing.B) {
	c := newCluster(b, 1000)
	c.m.observed += c.m.cfg.UnstakedTTL.Milliseconds()
	for b.Loop() {
		c.now += 1
		c.must(b, Tick{})
	}
}

// BenchmarkRegisterUnstaked10000: a new key without stake registers into a
// 10,000-node registry (the unstaked nodes are counted for their quota);
// the node expires again outside the timing.
func BenchmarkRegisterUnstaked10000(b *testing.B) {
	c := newCluster(b, 10_000)
	seed := sha256.Sum256([]byte("bench-unstaked"))
	k := ed25519.NewKeyFromSeed(seed[:])
	for b.Loop() {
		r := Register{Auth: Auth{Seq: 1, Timestamp: c.now}, Address: "10.0.0.2:9560", GPUModel: "L4", VRAMMiB: 24576}
		SignRegister(k, &r)
		c.must(b, r)
		b.StopTimer()
		c.must(b, Tick{}) // let observed time catch up
		c.m.emit(c.now, NodeExpired{Node: r.Node, Reason: "bench"})
		b.StartTimer()
	}
}
