package tcp_test

import (
	"crypto/ed25519"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/tcp"
)

// Several streams do not keep order across a call boundary: frames of the
// next call may overtake the end of this one, and must not be lost. Each
// node runs its calls back to back, without waiting for the other.
func TestStreamsAcrossCallBoundaries(t *testing.T) {
	nodes, _ := cluster(t, 2, tcp.Options{Plain: true, Streams: 2}, ring.Options{})
	const calls = 300
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			// Closing right after the last call ends one stream while the
			// peer may still be reading the last frame from the other.
			defer nodes[i].comm.Close()
			for it := range calls {
				length := 1 + (it%2)*16383
				bufs, sum := ints(2, length, uint64(it))
				if err := nodes[i].comm.AllReduceCall(t.Context(), bufs[i], ring.Sum, ring.Call{Step: uint64(it)}); err != nil {
					t.Errorf("call %d node %d: %v", it, i, err)
					return
				}
				if bufs[i][length-1] != sum[length-1] {
					t.Errorf("call %d node %d: wrong sum", it, i)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Each node chooses the streams of the link it dials; the receiving side
// takes what the hello announces. Nodes configured differently (auto,
// one, three streams, and an assumed rate so high that auto opens several
// even on loopback) reduce correctly together, and Streams reports what
// each dialed.
func TestStreamsChosenByTheDialer(t *testing.T) {
	opts := []tcp.Options{{Streams: 0}, {Streams: 1}, {Streams: 3}, {Streams: 0, LinkRate: 1e15}}
	cfg := ring.Config{Job: "tcp-test", Epoch: 1}
	trs := make([]*tcp.Transport, len(opts))
	for i, o := range opts {
		o.Key, o.ListenAddr = key(i), "127.0.0.1:0"
		tr, err := tcp.Listen(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trs[i] = tr
		cfg.Members = append(cfg.Members, ring.Member{ID: fmt.Sprint("n", i), PublicKey: key(i).Public().(ed25519.PublicKey), Addr: tr.Addr()})
	}
	bufs, sum := ints(len(opts), 50_000, 9)
	var wg sync.WaitGroup
	for i := range opts {
		c, err := ring.New(ring.Options{Key: key(i), Config: cfg, Transport: trs[i], Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		wg.Go(func() {
			if err := c.AllReduceCall(t.Context(), bufs[i], ring.Sum, ring.Call{}); err != nil {
				t.Errorf("node %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i := range bufs {
		for j := range sum {
			if bufs[i][j] != sum[j] {
				t.Fatalf("node %d element %d: %v, want %v", i, j, bufs[i][j], sum[j])
			}
		}
	}
	// Loopback's round trip is far below a window's worth at 1 Gbit/s.
	if got := trs[0].Streams(); got != 1 {
		t.Errorf("auto on loopback dialed %d streams, want 1", got)
	}
	if got := trs[2].Streams(); got != 3 {
		t.Errorf("fixed 3 dialed %d", got)
	}
	if got := trs[3].Streams(); got < 2 || got > tcp.MaxAutoStreams {
		t.Errorf("auto at an absurd rate dialed %d streams, want 2..%d", got, tcp.MaxAutoStreams)
	}
}
