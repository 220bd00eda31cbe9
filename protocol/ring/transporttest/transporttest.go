// Package transporttest is the test suite every ring.Transport must pass
// (as store/storetest is for stores): one set of behaviours of Connect and
// Conn, run from the tests of protocol/ring/memnet and protocol/ring/tcp.
//
// The suite checks what ring.Transport and ring.Conn promise: Connect pairs
// a node's out link with its successor's in link for one configuration,
// links carry whole frames (exactly the bytes sent, in order unless the
// transport says it reorders), Send does not keep its arguments, frames
// above LinkSpec.MaxFrame are an error, Close ends pending and later calls
// on either end, a cancelled or expired ctx ends Connect with an error that
// wraps ctx.Err(), and an in link is handed out only for a peer
// authenticated as Spec.Pred.
//
// No check waits on a fixed time: each blocking step has a generous
// overall bound (a hang fails the test instead of stalling it), so the
// suite passes on a loaded machine.
package transporttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring"
)

// Net is a set of transports that can reach each other.
type Net struct {
	// Transports[i] is the node whose identity is Members[i].
	Transports []ring.Transport
	Members    []ring.Member
	// Reorders: frames on one link may arrive in another order than they
	// were sent (tcp with several streams per link).
	Reorders bool
	// Unauthenticated: the transport documents that it does not check that
	// an in link comes from Spec.Pred (plain tcp on loopback).
	Unauthenticated bool
}

// MaxFrame is the frame cap the suite's links use: large enough that a
// frame spans several TLS records and socket-buffer fills.
const MaxFrame = 128 << 10

// bound limits every blocking step: far above what any step needs on a
// loaded machine, so reaching it means a hang.
const bound = 30 * time.Second

// Run runs the suite. newNet returns n fresh transports each call (the
// suite uses up to 4).
func Run(t *testing.T, newNet func(t *testing.T, n int) *Net) {
	tests := []struct {
		name string
		fn   func(*testing.T, func(*testing.T, int) *Net)
	}{
		{"Pairing", testPairing},
		{"Frames", testFrames},
		{"Duplex", testDuplex},
		{"FrameAboveCap", testFrameAboveCap},
		{"CloseSender", testCloseSender},
		{"CloseReceiver", testCloseReceiver},
		{"CloseUnblocksSend", testCloseUnblocksSend},
		{"ConnectCtx", testConnectCtx},
		{"Configurations", testConfigurations},
		{"PeerIdentity", testPeerIdentity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newNet) })
	}
}

// Spec is the LinkSpec of position p in a ring made of members, in order.
func Spec(members []ring.Member, p int, id ring.ID, maxFrame int) ring.LinkSpec {
	n := len(members)
	succ, pred := (p+1)%n, (p+n-1)%n
	return ring.LinkSpec{ConfigID: id, Self: p, Me: members[p],
		Succ: members[succ], SuccIdx: succ, Pred: members[pred], PredIdx: pred, MaxFrame: maxFrame}
}

// Link is one node's two links.
type Link struct{ Out, In ring.Conn }

// Connect connects the ring of the given nodes of net (indices into
// net.Transports, in ring order) for configuration id, all concurrently,
// and closes the links when the test ends.
func Connect(t testing.TB, net *Net, nodes []int, id ring.ID) []Link {
	t.Helper()
	members := make([]ring.Member, len(nodes))
	for p, i := range nodes {
		members[p] = net.Members[i]
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	links := make([]Link, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for p, i := range nodes {
		wg.Go(func() {
			out, in, err := net.Transports[i].Connect(ctx, Spec(members, p, id, MaxFrame))
			links[p], errs[p] = Link{out, in}, err
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, l := range links {
			if l.Out != nil {
				l.Out.Close()
				l.In.Close()
			}
		}
	})
	for p, err := range errs {
		if err != nil {
			t.Fatalf("Connect of ring position %d: %v", p, err)
		}
		if links[p].Out == nil || links[p].In == nil {
			t.Fatalf("Connect of ring position %d returned a nil link without an error", p)
		}
	}
	return links
}

// Frame returns a frame of the ring's shape (a 4-byte little-endian length
// of the bytes after it) split as Send takes it: a 12-byte header naming
// the sender and a sequence number, and payloadLen bytes derived from seq.
func Frame(from, seq, payloadLen int) (hdr, payload []byte) {
	hdr = make([]byte, 12)
	binary.LittleEndian.PutUint32(hdr, uint32(8+payloadLen))
	binary.LittleEndian.PutUint32(hdr[4:], uint32(from))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(seq))
	payload = make([]byte, payloadLen)
	for i := range payload {
		payload[i] = byte(seq*7 + i*13)
	}
	return hdr, payload
}

func joined(hdr, payload []byte) []byte { return append(append([]byte(nil), hdr...), payload...) }

// payloadLen cycles through the edge cases: no payload, one byte, odd
// sizes, and a frame of exactly MaxFrame.
func payloadLen(seq int) int {
	sizes := []int{0, 1, 7, 4096, MaxFrame - 12, 65536 + 3, 300}
	return sizes[seq%len(sizes)]
}

type recvResult struct {
	f   []byte
	err error
}

var errHang = fmt.Errorf("transporttest: Recv did not return within %v", bound)

// recv calls Recv with a bound: a hang closes c and returns errHang. The
// frame is copied (it is valid only until the next Recv).
func recv(c ring.Conn) ([]byte, error) {
	ch := make(chan recvResult, 1)
	go func() {
		f, err := c.Recv()
		ch <- recvResult{bytes.Clone(f), err}
	}()
	select {
	case r := <-ch:
		return r.f, r.err
	case <-time.After(bound):
		c.Close()
		return nil, errHang
	}
}

// recvFrames receives len(want) frames and checks them against want.
func recvFrames(t testing.TB, c ring.Conn, want [][]byte, reorders bool) {
	t.Helper()
	got := make([][]byte, 0, len(want))
	for range want {
		f, err := recv(c)
		if err != nil {
			t.Fatalf("Recv after %d of %d frames: %v", len(got), len(want), err)
		}
		got = append(got, f)
	}
	if err := sameFrames(got, want, reorders); err != nil {
		t.Fatal(err)
	}
}

// sameFrames compares received frames with the ones sent: in order, or as
// a multiset when the transport reorders.
func sameFrames(got, want [][]byte, reorders bool) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d frames received, %d sent", len(got), len(want))
	}
	if reorders {
		left := map[string]int{}
		for _, w := range want {
			left[string(w)]++
		}
		for i, g := range got {
			if left[string(g)] == 0 {
				return fmt.Errorf("frame %d received (%d bytes %x…) was not sent, or arrived twice", i, len(g), head(g))
			}
			left[string(g)]--
		}
		return nil
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			return fmt.Errorf("frame %d: received %d bytes %x…, sent %d bytes %x…", i, len(got[i]), head(got[i]), len(want[i]), head(want[i]))
		}
	}
	return nil
}

func head(b []byte) []byte { return b[:min(len(b), 16)] }

// testPairing: in rings of 2, 3 and 4 each node's out link reaches its
// successor's in link (for two nodes, over two distinct links).
func testPairing(t *testing.T, newNet func(*testing.T, int) *Net) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint("N", n), func(t *testing.T) {
			net := newNet(t, n)
			nodes := make([]int, n)
			for i := range nodes {
				nodes[i] = i
			}
			links := Connect(t, net, nodes, ring.ID{byte(n)})
			for p, l := range links {
				if err := l.Out.Send(Frame(p, 0, 5)); err != nil {
					t.Fatalf("node %d Send: %v", p, err)
				}
			}
			for p, l := range links {
				pred := (p + n - 1) % n
				recvFrames(t, l.In, [][]byte{joined(Frame(pred, 0, 5))}, false)
			}
		})
	}
}

// testFrames: a sequence of frames of every edge size arrives as sent,
// whole, each exactly once; Send reuses its buffers, which it must not
// retain.
func testFrames(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 2)
	links := Connect(t, net, []int{0, 1}, ring.ID{0xf})
	const frames = 60
	want := make([][]byte, frames)
	done := make(chan error, 1)
	go func() {
		hdr, payload := make([]byte, 12), make([]byte, MaxFrame)
		for seq := range frames {
			h, p := Frame(0, seq, payloadLen(seq))
			want[seq] = joined(h, p)
			hdr, payload = append(hdr[:0], h...), append(payload[:0], p...)
			if err := links[0].Out.Send(hdr, payload); err != nil {
				done <- fmt.Errorf("Send %d: %w", seq, err)
				return
			}
			clear(hdr) // the transport must have copied or written them
			clear(payload)
		}
		done <- nil
	}()
	got := make([][]byte, 0, frames)
	for range frames {
		f, err := recv(links[1].In)
		if err != nil {
			t.Fatalf("Recv after %d frames: %v", len(got), err)
		}
		got = append(got, f)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := sameFrames(got, want, net.Reorders); err != nil { // want is complete once the sender is done
		t.Fatal(err)
	}
}

// testDuplex: both nodes of a ring of two send and receive at the same time
// (Send in one goroutine, Recv in another, as the ring does), more than
// any buffer holds.
func testDuplex(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 2)
	links := Connect(t, net, []int{0, 1}, ring.ID{0xd})
	const frames = 200
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for p, l := range links {
		wg.Go(func() {
			for seq := range frames {
				if err := l.Out.Send(Frame(p, seq, payloadLen(seq))); err != nil {
					errs <- fmt.Errorf("node %d Send %d: %w", p, seq, err)
					return
				}
			}
		})
		wg.Go(func() {
			want := make([][]byte, frames)
			for seq := range want {
				want[seq] = joined(Frame(1-p, seq, payloadLen(seq)))
			}
			got := make([][]byte, 0, frames)
			for range frames {
				f, err := recv(l.In)
				if err != nil {
					errs <- fmt.Errorf("node %d Recv after %d frames: %w", p, len(got), err)
					return
				}
				got = append(got, f)
			}
			if err := sameFrames(got, want, net.Reorders); err != nil {
				errs <- fmt.Errorf("node %d: %w", p, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testFrameAboveCap: a frame longer than the receiver's MaxFrame is an
// error at the receiver, not a frame.
func testFrameAboveCap(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 2)
	links := Connect(t, net, []int{0, 1}, ring.ID{0xc})
	go links[0].Out.Send(Frame(0, 0, MaxFrame-12+1)) // may fail once the receiver gives up on the link
	if f, err := recv(links[1].In); err == nil {
		t.Fatalf("Recv returned a frame of %d bytes, above the cap of %d", len(f), MaxFrame)
	}
}

// testCloseSender: frames sent before the sender closed are still
// received, then Recv fails; Send after Close fails.
func testCloseSender(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 2)
	links := Connect(t, net, []int{0, 1}, ring.ID{0x5e})
	var want [][]byte
	for seq := range 3 {
		if err := links[0].Out.Send(Frame(0, seq, 100)); err != nil {
			t.Fatal(err)
		}
		want = append(want, joined(Frame(0, seq, 100)))
	}
	if err := links[0].Out.Close(); err != nil {
		t.Fatal(err)
	}
	links[0].Out.Close() // a second Close is harmless
	if err := links[0].Out.Send(Frame(0, 3, 1)); err == nil {
		t.Fatal("Send after Close succeeded")
	}
	recvFrames(t, links[1].In, want, net.Reorders)
	if f, err := recv(links[1].In); err == nil {
		t.Fatalf("Recv after the sender closed returned a %d-byte frame", len(f))
	}
}

// testCloseReceiver: Close of an in link ends a Recv pending in another
// goroutine and every later one; the peer's Sends then fail (at once or
// once the transport notices; a bound catches a sender never told).
func testCloseReceiver(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 2)
	links := Connect(t, net, []int{0, 1}, ring.ID{0x5f})
	in := links[1].In
	pending := make(chan error, 1)
	go func() {
		_, err := in.Recv()
		pending <- err
	}()
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-pending:
		if err == nil {
			t.Fatal("pending Recv returned a frame nobody sent")
		}
	case <-time.After(bound):
		t.Fatalf("Recv pending during Close did not return within %v", bound)
	}
	if _, err := recv(in); err == nil {
		t.Fatal("Recv after Close succeeded")
	}
	deadline := time.Now().Add(bound)
	for seq := 0; ; seq++ {
		if err := links[0].Out.Send(Frame(0, seq, 4096)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer's Send still succeeds %v after the receiver closed (%d frames)", bound, seq+1)
		}
	}
}

// testCloseUnblocksSend: a sender whose receiver does not read fills the
// link and blocks; Close from another goroutine makes that Send, and every
// later one, fail.
func testCloseUnblocksSend(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 2)
	links := Connect(t, net, []int{0, 1}, ring.ID{0x5a})
	out := links[0].Out
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for seq := 0; ; seq++ {
			err := out.Send(Frame(0, seq, MaxFrame-12))
			if seq == 0 {
				close(first)
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case <-first:
	case <-time.After(bound):
		t.Fatalf("the first Send did not return within %v", bound)
	}
	out.Close()
	select {
	case <-done: // an error: the loop ends only on one
	case <-time.After(bound):
		t.Fatalf("Send did not fail within %v of Close", bound)
	}
}

// testConnectCtx: Connect without a peer ends with the ctx: the error
// wraps ctx.Err() (the ring tells timeouts from breaks by it) and names the
// missing side; no links are returned.
func testConnectCtx(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 2)
	members := net.Members[:2]
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"cancelled while waiting", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			go cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			type res struct {
				out, in ring.Conn
				err     error
			}
			ch := make(chan res, 1)
			id := ring.ID{0xcc, byte(len(tc.name))}
			go func() {
				out, in, err := net.Transports[0].Connect(ctx, Spec(members, 0, id, MaxFrame))
				ch <- res{out, in, err}
			}()
			var r res
			select {
			case r = <-ch:
			case <-time.After(bound):
				t.Fatalf("Connect did not return within %v of its ctx ending", bound)
			}
			if r.err == nil {
				r.out.Close()
				r.in.Close()
				t.Fatal("Connect without a peer succeeded")
			}
			if r.out != nil || r.in != nil {
				t.Error("Connect returned links with an error")
			}
			if !errors.Is(r.err, tc.want) {
				t.Errorf("%v, want an error wrapping %v", r.err, tc.want)
			}
			if !errors.Is(r.err, ring.ErrNoSuccessor) && !errors.Is(r.err, ring.ErrNoPredecessor) {
				t.Errorf("%v, want ErrNoSuccessor or ErrNoPredecessor", r.err)
			}
		})
	}
}

// testConfigurations: links are per configuration. Two configurations
// between the same nodes are open at once and each carries its own frames.
func testConfigurations(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 2)
	a := Connect(t, net, []int{0, 1}, ring.ID{0xa})
	b := Connect(t, net, []int{0, 1}, ring.ID{0xb})
	for seq := range 3 {
		if err := b[0].Out.Send(Frame(0, 100+seq, 10)); err != nil {
			t.Fatal(err)
		}
		if err := a[0].Out.Send(Frame(0, seq, 10)); err != nil {
			t.Fatal(err)
		}
	}
	var wa, wb [][]byte
	for seq := range 3 {
		wa = append(wa, joined(Frame(0, seq, 10)))
		wb = append(wb, joined(Frame(0, 100+seq, 10)))
	}
	recvFrames(t, a[1].In, wa, net.Reorders)
	recvFrames(t, b[1].In, wb, net.Reorders)
	// Closing one configuration's links leaves the other's working.
	a[0].Out.Close()
	a[1].In.Close()
	if err := b[1].Out.Send(Frame(1, 7, 10)); err != nil {
		t.Fatal(err)
	}
	recvFrames(t, b[0].In, [][]byte{joined(Frame(1, 7, 10))}, false)
}

// testPeerIdentity: a node that claims another member's place (its spec
// says Me is member 0) cannot be its successor's predecessor. Members 1
// and 2 of the ring {0, 1, 2} connect, member 0 never does, and a fourth
// node connects as member 0: member 1 must not get an in link.
func testPeerIdentity(t *testing.T, newNet func(*testing.T, int) *Net) {
	net := newNet(t, 4)
	if net.Unauthenticated {
		t.Skip("the transport documents that it does not authenticate its predecessor")
	}
	members := net.Members[:3]
	id := ring.ID{0x1d}
	// Long enough that the impostor's attempt reaches member 1 on an idle
	// machine; on a loaded one the check is weaker, never wrong.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for p := 1; p <= 2; p++ {
		wg.Go(func() {
			out, in, err := net.Transports[p].Connect(ctx, Spec(members, p, id, MaxFrame))
			if err == nil {
				out.Close()
				in.Close()
			}
			errs[p] = err
		})
	}
	wg.Go(func() {
		out, in, err := net.Transports[3].Connect(ctx, Spec(members, 0, id, MaxFrame))
		if err == nil {
			out.Close()
			in.Close()
		}
		errs[0] = err
	})
	wg.Wait()
	if errs[1] == nil {
		t.Fatal("member 1 got an in link from a node posing as member 0")
	}
	if !errors.Is(errs[1], context.DeadlineExceeded) {
		t.Fatalf("member 1: %v, want it to wait for its predecessor until the deadline", errs[1])
	}
	if errs[0] == nil {
		t.Fatal("the impostor's Connect succeeded")
	}
}
