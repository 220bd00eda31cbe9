package tcp_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/tcp"
)

func key(i int) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0], seed[1] = byte(i), 0x7c
	return ed25519.NewKeyFromSeed(seed)
}

type node struct {
	tr   *tcp.Transport
	comm *ring.Comm
}

// cluster starts n transports on loopback port 0 and a Comm on each.
func cluster(t testing.TB, n int, o tcp.Options, ro ring.Options) ([]node, ring.Config) {
	t.Helper()
	cfg := ring.Config{Job: "tcp-test", Epoch: 1}
	trs := make([]*tcp.Transport, n)
	for i := range n {
		oo := o
		oo.Key, oo.ListenAddr = key(i), "127.0.0.1:0"
		tr, err := tcp.Listen(oo)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trs[i] = tr
		cfg.Members = append(cfg.Members, ring.Member{ID: fmt.Sprint("n", i), PublicKey: key(i).Public().(ed25519.PublicKey), Addr: tr.Addr()})
	}
	nodes := make([]node, n)
	for i := range n {
		r := ro
		r.Key, r.Config, r.Transport = key(i), cfg, trs[i]
		if r.Timeout == 0 {
			r.Timeout = 10 * time.Second
		}
		c, err := ring.New(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		nodes[i] = node{trs[i], c}
	}
	return nodes, cfg
}

func ints(n, length int, seed uint64) ([][]float32, []float32) {
	r := rand.New(rand.NewPCG(seed, 1))
	bufs := make([][]float32, n)
	sum := make([]float32, length)
	for i := range bufs {
		bufs[i] = make([]float32, length)
		for j := range bufs[i] {
			bufs[i][j] = float32(r.IntN(2001) - 1000)
			sum[j] += bufs[i][j]
		}
	}
	return bufs, sum
}

func allReduce(ctx context.Context, nodes []node, bufs [][]float32, call ring.Call) []error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { errs[i] = nodes[i].comm.AllReduceCall(ctx, bufs[i], ring.Sum, call) })
	}
	wg.Wait()
	return errs
}

func TestLoopbackAllReduce(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		o    tcp.Options
		ro   ring.Options
		wire ring.Wire
		len  int // elements; 0: about 100 000
	}{
		{"tls n3", 3, tcp.Options{}, ring.Options{}, ring.FP32, 0},
		// 512 KiB segments: one frame is 32 TLS records.
		{"tls n2 2 streams large segments", 2, tcp.Options{Streams: 2}, ring.Options{}, ring.FP32, 1<<20 + 3},
		{"tls n4 2 streams small segments", 4, tcp.Options{Streams: 2, ReadBuffer: 1 << 20, WriteBuffer: 1 << 20}, ring.Options{SegmentBytes: 4096, MinSegmentBytes: 1024}, ring.FP32, 0},
		{"plain n2 bf16", 2, tcp.Options{Plain: true}, ring.Options{}, ring.BF16, 0},
		{"plain n5 insecure 3 streams", 5, tcp.Options{Plain: true, Streams: 3}, ring.Options{Insecure: true, SegmentBytes: 8192}, ring.FP32, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, _ := cluster(t, tc.n, tc.o, tc.ro)
			for call := range 3 {
				length := 100003 + call
				if tc.len > 0 {
					length = tc.len + call
				}
				bufs, sum := ints(tc.n, length, uint64(call))
				if tc.wire == ring.BF16 {
					for i := range bufs {
						for j := range bufs[i] {
							bufs[i][j] = float32(int(bufs[i][j]) % 64)
						}
					}
					sum = make([]float32, len(sum))
					for i := range bufs {
						for j, v := range bufs[i] {
							sum[j] += v
						}
					}
				}
				for i, err := range allReduce(t.Context(), nodes, bufs, ring.Call{Step: uint64(call)}.WithWire(tc.wire)) {
					if err != nil {
						t.Fatalf("call %d node %d: %v", call, i, err)
					}
					if !slices.Equal(bufs[i], sum) {
						t.Fatalf("call %d node %d: wrong sum", call, i)
					}
				}
			}
		})
	}
}

// A listener whose key is not the configured successor's is refused by
// the TLS handshake: the call fails naming the successor, at once. The
// timeout is a minute and the bound half of it, so a loaded machine cannot
// push a prompt refusal past the bound, and a call that waits for the
// timeout still fails the test.
func TestTLSRejectsWrongKey(t *testing.T) {
	const timeout = time.Minute
	nodes, cfg := cluster(t, 2, tcp.Options{}, ring.Options{Timeout: timeout})
	impostor, err := tcp.Listen(tcp.Options{Key: key(9), ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	bad := cfg
	bad.Members = slices.Clone(cfg.Members)
	bad.Members[1].Addr = impostor.Addr() // node 1's key, the impostor's address
	if err := nodes[0].comm.Reconfigure(bad); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = nodes[0].comm.AllReduce(t.Context(), []float32{1, 2}, ring.Sum)
	if d := time.Since(start); d > timeout/2 {
		t.Fatalf("took %v: a refused handshake must end the call at once, not at the %v timeout", d, timeout)
	}
	var pe *ring.PeerError
	if !errors.As(err, &pe) || pe.Suspect != 1 || !errors.Is(err, tcp.ErrPeerKey) {
		t.Fatalf("%v, want a PeerError naming node 1 with ErrPeerKey", err)
	}
}

// A successor that is not listening: the call fails at the timeout naming
// it, and the error says what the dialer saw (refused), not only that the
// time ran out.
func TestUnreachableSuccessorSaysWhy(t *testing.T) {
	nodes, cfg := cluster(t, 3, tcp.Options{}, ring.Options{Timeout: 500 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	bad := cfg
	bad.Members = slices.Clone(cfg.Members)
	bad.Members[1].Addr = dead
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for _, i := range []int{0, 2} { // node 2 connects to node 0, so only node 0's dial fails there
		if err := nodes[i].comm.Reconfigure(bad); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs[i] = nodes[i].comm.AllReduce(t.Context(), []float32{1, 2}, ring.Sum) })
	}
	wg.Wait()
	var pe *ring.PeerError
	if err := errs[0]; !errors.As(err, &pe) || pe.Suspect != 1 || !errors.Is(err, ring.ErrNoSuccessor) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("%v, want a PeerError naming node 1, ErrNoSuccessor, connection refused", err)
	}
}

// Strangers (any certificate) can park links for configurations nobody
// claims; past 64 the oldest are closed, and a link a Connect waits for is
// never among them.
func TestParkedLinksAreBounded(t *testing.T) {
	nodes, cfg := cluster(t, 2, tcp.Options{}, ring.Options{Timeout: time.Minute})
	done := make(chan error, 1)
	go func() { done <- nodes[0].comm.AllReduce(t.Context(), []float32{1, 2}, ring.Sum) }()
	stranger := func(i int) net.Conn {
		k := key(100 + i)
		cert, err := tcp.Certificate(k)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", cfg.Members[0].Addr, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		h := make([]byte, 80)
		copy(h, "ZGRH")
		h[4], h[5] = byte(i), 0xee // a configuration id nobody runs
		binary.LittleEndian.PutUint32(h[36:], 1)
		binary.LittleEndian.PutUint32(h[40:], 0)
		binary.LittleEndian.PutUint16(h[46:], 1)
		copy(h[48:], k.Public().(ed25519.PublicKey))
		if _, err := c.Write(h); err != nil {
			t.Fatal(err)
		}
		return c
	}
	var conns []net.Conn
	for i := range 70 {
		conns = append(conns, stranger(i))
	}
	// Links are admitted concurrently, so which six are the oldest depends
	// on the scheduler: wait until six are closed, then check that the
	// other 64 stay parked.
	closed := make([]bool, len(conns))
	isClosed := func(i int) bool {
		if !closed[i] {
			conns[i].SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := conns[i].Read(make([]byte, 1))
			var ne net.Error
			closed[i] = !(errors.As(err, &ne) && ne.Timeout())
		}
		return closed[i]
	}
	count := func() (n int) {
		for i := range conns {
			if isClosed(i) {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(20 * time.Second); count() < 6 && time.Now().Before(deadline); {
	}
	if n := count(); n != 6 {
		t.Errorf("%d of 70 stranger links closed, want 6 (64 parked)", n)
	}
	for _, c := range conns {
		c.Close()
	}
	// Node 0's Connect still gets its predecessor.
	if err := nodes[1].comm.AllReduce(t.Context(), []float32{3, 4}, ring.Sum); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestPlainRefusesNonLoopback(t *testing.T) {
	if _, err := tcp.Listen(tcp.Options{Key: key(0), ListenAddr: "0.0.0.0:0", Plain: true}); !errors.Is(err, tcp.ErrNotLocal) {
		t.Fatalf("%v", err)
	}
}

// Closing one node's transport and comm mid-run breaks its neighbours'
// connections: they fail fast (not after the timeout) naming it, and the
// survivors then succeed in the configuration without it. As above, the
// bound is half a long timeout, robust under load and still able to fail.
func TestBrokenConnectionAndRetry(t *testing.T) {
	const n, timeout = 4, 2 * time.Minute
	var cancelAfter atomic.Pointer[context.CancelFunc]
	nodes, cfg := cluster(t, n, tcp.Options{}, ring.Options{Timeout: timeout, SegmentBytes: 1 << 14})
	var sent atomic.Int64
	nodes[2].comm.Close()
	c2, err := ring.New(ring.Options{Key: key(2), Config: cfg, Timeout: timeout, SegmentBytes: 1 << 14,
		Transport: sendHook{nodes[2].tr, func() {
			if sent.Add(1) == 3 {
				(*cancelAfter.Load())()
			}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	nodes[2].comm = c2
	bufs, _ := ints(n, 1<<21, 3)
	orig := make([][]float32, n)
	for i := range bufs {
		orig[i] = slices.Clone(bufs[i])
	}
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if i == 2 { // dies mid-call, after its third frame: its links close under its peers
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				cancelAfter.Store(&cancel)
				errs[2] = nodes[2].comm.AllReduce(ctx, bufs[2], ring.Sum)
				nodes[2].comm.Close()
				nodes[2].tr.Close()
				return
			}
			errs[i] = nodes[i].comm.AllReduce(t.Context(), bufs[i], ring.Sum)
		})
	}
	wg.Wait()
	if d := time.Since(start); d > timeout/2 {
		t.Fatalf("took %v: a broken connection must not wait for the timeout", d)
	}
	if !errors.Is(errs[2], context.Canceled) {
		t.Fatalf("node 2 was not stopped mid-call: %v", errs[2])
	}
	for _, i := range []int{0, 1, 3} {
		if errs[i] == nil {
			t.Fatalf("node %d succeeded without node 2", i)
		}
		if !slices.Equal(bufs[i], orig[i]) {
			t.Fatalf("node %d: buffer changed by an aborted call", i)
		}
	}
	// Each survivor names the neighbour whose connection broke first; the
	// aborts cascade round the ring, so only some name node 2 directly.
	named := 0
	for _, i := range []int{0, 1, 3} {
		var pe *ring.PeerError
		if !errors.As(errs[i], &pe) || !errors.Is(pe, ring.ErrBroken) {
			t.Fatalf("node %d: %v, want a PeerError with ErrBroken", i, errs[i])
		}
		if pe.Suspect == 2 {
			named++
		}
	}
	if named == 0 {
		t.Fatal("no survivor named node 2")
	}
	next := cfg.Without(2)
	survivors := []node{nodes[0], nodes[1], nodes[3]}
	sb := [][]float32{orig[0], orig[1], orig[3]}
	want := make([]float32, len(orig[0]))
	for _, b := range sb {
		for j, v := range b {
			want[j] += v
		}
	}
	for _, s := range survivors {
		if err := s.comm.Reconfigure(next); err != nil {
			t.Fatal(err)
		}
	}
	for i, err := range allReduce(t.Context(), survivors, sb, ring.Call{}) {
		if err != nil || !slices.Equal(sb[i], want) {
			t.Fatalf("retry: survivor %d: %v", i, err)
		}
	}
}

// sendHook calls hook before every frame a node sends.
type sendHook struct {
	ring.Transport
	hook func()
}

type hookConn struct {
	ring.Conn
	hook func()
}

func (h sendHook) Connect(ctx context.Context, s ring.LinkSpec) (ring.Conn, ring.Conn, error) {
	out, in, err := h.Transport.Connect(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	return hookConn{out, h.hook}, in, nil
}

func (h hookConn) Send(hdr, payload []byte) error {
	h.hook()
	return h.Conn.Send(hdr, payload)
}
