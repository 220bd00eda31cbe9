package ring_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha3"
	"fmt"
	"sync"
	"testing"

	"github.com/zooai/gym/protocol/ring"
)

// pipeNet is a two-node transport that recycles its frame buffers, so
// allocation counts measure the communicator alone.
type pipeNet struct {
	mu    sync.Mutex
	links map[string]*pipeLink
}

type pipeLink struct {
	ch, free chan []byte
}

func (p *pipeNet) link(from, to string) *pipeLink {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := from + ">" + to
	if p.links[k] == nil {
		l := &pipeLink{ch: make(chan []byte, 64), free: make(chan []byte, 64)}
		for range 64 {
			l.free <- make([]byte, 0, 1<<17)
		}
		p.links[k] = l
	}
	return p.links[k]
}

type pipeTransport struct {
	net  *pipeNet
	addr string
}

func (t pipeTransport) Connect(ctx context.Context, s ring.LinkSpec) (ring.Conn, ring.Conn, error) {
	return pipeOut{t.net.link(t.addr, s.Succ.Addr)}, &pipeIn{l: t.net.link(s.Pred.Addr, t.addr)}, nil
}

type pipeOut struct{ l *pipeLink }

func (o pipeOut) Send(hdr, payload []byte) error {
	b := append(append((<-o.l.free)[:0], hdr...), payload...)
	o.l.ch <- b
	return nil
}
func (o pipeOut) Recv() ([]byte, error) { panic("send side") }
func (o pipeOut) Close() error          { return nil }

type pipeIn struct {
	l   *pipeLink
	cur []byte
}

func (i *pipeIn) Send(hdr, payload []byte) error { panic("receive side") }
func (i *pipeIn) Recv() ([]byte, error) {
	if i.cur != nil {
		i.l.free <- i.cur
	}
	i.cur = <-i.l.ch
	return i.cur, nil
}
func (i *pipeIn) Close() error { return nil }

// The steady state allocates nothing per frame: a call with 64× more
// frames allocates about as much as a small one (per-call bookkeeping only).
func TestNoPerFrameAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	net := &pipeNet{links: map[string]*pipeLink{}}
	cfg := makeConfig(2, 1)
	comms := make([]*ring.Comm, 2)
	for i := range comms {
		c, err := ring.New(ring.Options{Key: keyFor(i), Config: cfg, Transport: pipeTransport{net, cfg.Members[i].Addr},
			SegmentBytes: 4096, MinSegmentBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		comms[i] = c
	}
	allocs := func(length int) float64 {
		a, b := make([]float32, length), make([]float32, length)
		done := make(chan struct{})
		go func() {
			for range 7 { // warm-up, AllocsPerRun's own warm-up, 5 runs
				comms[1].AllReduce(t.Context(), b, ring.Sum)
			}
			close(done)
		}()
		comms[0].AllReduce(t.Context(), a, ring.Sum) // warm up: buffers grow once
		n := testing.AllocsPerRun(5, func() {
			if err := comms[0].AllReduce(t.Context(), a, ring.Sum); err != nil {
				t.Fatal(err)
			}
		})
		<-done
		return n
	}
	small := allocs(2 * 1024)      // 2 frames per node
	large := allocs(64 * 2 * 1024) // 128 frames per node
	t.Logf("allocations per call: %v (2 frames), %v (128 frames)", small, large)
	if large-small > 40 { // both goroutines' allocations counted; per-frame would add ≥ 126
		t.Fatalf("allocations grow with frames: %v → %v", small, large)
	}
}

func benchHash(b *testing.B, f func([]byte)) {
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		f(buf)
	}
}

// The per-byte and per-segment costs docs/ring.md designs with.
// PayloadHash (BLAKE3 on one goroutine) is the ring's; SHA-256 (SHA-NI)
// was until frame version 2, SHA3-256 is the delta format's.
func BenchmarkPayloadHash(b *testing.B) { benchHash(b, func(p []byte) { ring.PayloadHash(p) }) }
func BenchmarkSHA256(b *testing.B)      { benchHash(b, func(p []byte) { sha256.Sum256(p) }) }
func BenchmarkSHA3_256(b *testing.B)    { benchHash(b, func(p []byte) { sha3.Sum256(p) }) }

func BenchmarkEd25519(b *testing.B) {
	key := keyFor(0)
	msg := make([]byte, 160)
	sig := ed25519.Sign(key, msg)
	pub := key.Public().(ed25519.PublicKey)
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			ed25519.Sign(key, msg)
		}
	})
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			ed25519.Verify(pub, msg, sig)
		}
	})
}

func BenchmarkReduceAdd(b *testing.B) {
	x, y := make([]float32, 1<<18), make([]float32, 1<<18)
	b.SetBytes(4 << 18)
	for b.Loop() {
		for i := range x {
			x[i] += y[i]
		}
	}
}

// BenchmarkAllReduceMemnet: the protocol alone (in-memory links), per size.
func BenchmarkAllReduce(b *testing.B) {
	for _, insecure := range []bool{false, true} {
		for _, n := range []int{2, 4} {
			b.Run(fmt.Sprintf("n%d/auth=%v/16MiB", n, !insecure), func(b *testing.B) {
				net := &pipeNet{links: map[string]*pipeLink{}}
				cfg := makeConfig(n, 1)
				comms := make([]*ring.Comm, n)
				for i := range comms {
					comms[i], _ = ring.New(ring.Options{Key: keyFor(i), Config: cfg, Insecure: insecure,
						Transport: pipeTransport{net, cfg.Members[i].Addr}, SegmentBytes: 1 << 17, MinSegmentBytes: 1 << 17})
				}
				bufs := make([][]float32, n)
				for i := range bufs {
					bufs[i] = make([]float32, 4<<20)
				}
				b.SetBytes(16 << 20)
				for b.Loop() {
					var wg sync.WaitGroup
					for i := range n {
						wg.Go(func() { comms[i].AllReduce(context.Background(), bufs[i], ring.Sum) })
					}
					wg.Wait()
				}
			})
		}
	}
}
