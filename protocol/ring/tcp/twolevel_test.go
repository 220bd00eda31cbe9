package tcp_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/tcp"
)

// The two-level all-reduce over TLS on loopback: every node ends with
// ring.ReferenceGroups' bits (arbitrary floats, so the order matters),
// over two calls; a node whose process is gone (transport closed) is named
// in its sub-ring by index in the two-level configuration, and the
// configuration without it gives the reference's bits again.
func TestLoopbackTwoLevel(t *testing.T) {
	groups := []int{3, 3, 2}
	nodes, cfg := cluster(t, 8, tcp.Options{}, ring.Options{SegmentBytes: 16 << 10, MinSegmentBytes: 4 << 10})
	cfg.Groups = groups
	for _, nd := range nodes {
		if err := nd.comm.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(5, 5))
	src := make([][]float32, 8)
	for i := range src {
		src[i] = make([]float32, 50001)
		for j := range src[i] {
			src[i][j] = float32(r.NormFloat64())
		}
	}
	run := func(live []int, in [][]float32, g []int, step uint64) {
		t.Helper()
		want, err := ring.ReferenceGroups(in, g, ring.Mean, ring.FP32)
		if err != nil {
			t.Fatal(err)
		}
		dst := make([][]float32, len(live))
		errs := make([]error, len(live))
		var wg sync.WaitGroup
		for k, i := range live {
			dst[k] = make([]float32, len(src[i]))
			wg.Go(func() {
				errs[k] = nodes[i].comm.AllReduceInto(t.Context(), dst[k], src[i], ring.Mean, ring.Call{Step: step})
			})
		}
		wg.Wait()
		for k, i := range live {
			if errs[k] != nil {
				t.Fatalf("node %d: %v", i, errs[k])
			}
			for j := range want {
				if math.Float32bits(dst[k][j]) != math.Float32bits(want[j]) {
					t.Fatalf("node %d element %d: %v, want %v", i, j, dst[k][j], want[j])
				}
			}
		}
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	run(all, src, groups, 0)
	run(all, src, groups, 1)

	// Node 4 (group 1) is gone: its group ring fails at once, naming it.
	nodes[4].comm.Close()
	nodes[4].tr.Close()
	live := []int{0, 1, 2, 3, 5, 6, 7}
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for _, i := range live {
		wg.Go(func() {
			errs[i] = nodes[i].comm.AllReduceInto(t.Context(), make([]float32, len(src[i])), src[i], ring.Mean, ring.Call{Step: 2})
		})
	}
	wg.Wait()
	named := false
	for _, i := range live {
		var pe *ring.PeerError
		if errors.As(errs[i], &pe) && pe.Suspect == 4 && pe.SuspectID == "n4" && pe.Part == "group 1" {
			named = true
		}
	}
	if !named {
		t.Fatalf("nobody named node 4 in group 1: %v", errs)
	}
	next := cfg.Without(4)
	var in [][]float32
	for _, i := range live {
		if err := nodes[i].comm.Reconfigure(next); err != nil {
			t.Fatal(err)
		}
		in = append(in, src[i])
	}
	run(live, in, next.Groups, 3)
}
