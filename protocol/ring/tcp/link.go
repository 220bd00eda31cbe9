package tcp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zooai/gym/protocol/ring"
)

// Connect implements ring.Transport: it dials the successor's streams and
// waits for the predecessor's, both bound to s.ConfigID. Whichever side
// fails first ends both.
func (t *Transport) Connect(ctx context.Context, s ring.LinkSpec) (ring.Conn, ring.Conn, error) {
	if t.o.Plain && (!isLoopback(s.Succ.Addr) || !isLoopback(s.Pred.Addr)) {
		return nil, nil, fmt.Errorf("%w: %s, %s", ErrNotLocal, s.Succ.Addr, s.Pred.Addr)
	}
	type dialed struct {
		c   *outConn
		err error
	}
	type awaited struct {
		c   *inConn
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dc, ac := make(chan dialed, 1), make(chan awaited, 1)
	go func() {
		c, err := t.dial(ctx, s)
		dc <- dialed{c, err}
	}()
	go func() {
		c, err := t.await(ctx, s)
		ac <- awaited{c, err}
	}()
	var out *outConn
	var in *inConn
	var err error
	for range 2 {
		select {
		case d := <-dc:
			out = d.c
			if d.err != nil && err == nil {
				err = fmt.Errorf("%w: %s: %w", ring.ErrNoSuccessor, s.Succ.Addr, d.err)
				cancel()
			}
		case a := <-ac:
			in = a.c
			if a.err != nil && err == nil {
				err = fmt.Errorf("%w: %w", ring.ErrNoPredecessor, a.err)
				cancel()
			}
		}
	}
	if err != nil {
		if out != nil {
			out.Close()
		}
		if in != nil {
			in.Close()
		}
		return nil, nil, err
	}
	return out, in, nil
}

// await waits until every stream from the predecessor arrived.
func (t *Transport) await(ctx context.Context, s ring.LinkSpec) (*inConn, error) {
	var k slotKey
	k.id, k.sender, k.receiver = s.ConfigID, uint32(s.PredIdx), uint32(s.Self)
	copy(k.pub[:], s.Pred.PublicKey)
	t.mu.Lock()
	sl := t.slotLocked(k)
	sl.awaited = true
	t.mu.Unlock()
	select {
	case <-sl.ready:
	case <-ctx.Done():
		t.drop(k, sl)
		return nil, ctx.Err()
	case <-t.closed:
		return nil, ErrClosed
	}
	t.mu.Lock()
	delete(t.slots, k)
	t.mu.Unlock()
	return newInConn(sl.conns, s.MaxFrame), nil
}

// drop forgets a slot whose Connect gave up, closing what arrived of it.
func (t *Transport) drop(k slotKey, sl *slot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.slots[k] != sl {
		return
	}
	delete(t.slots, k)
	for _, c := range sl.conns {
		if c != nil {
			c.Close()
		}
	}
}

// dial opens every stream to the successor, retrying refused connections
// until ctx ends (the successor may not be listening yet).
func (t *Transport) dial(ctx context.Context, s ring.LinkSpec) (*outConn, error) {
	n := t.o.Streams // 0: chosen when the first stream connects
	conns := make([]net.Conn, 0, max(n, 1))
	fail := func(err error) (*outConn, error) {
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	d := net.Dialer{Control: SocketBuffers(t.o.ReadBuffer, t.o.WriteBuffer)}
	for i := 0; i == 0 || i < n; i++ {
		var c net.Conn
		var err error
	retry:
		for delay := 5 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
			c, err = t.dialOne(ctx, &d, s, i, &n)
			if err == nil || ctx.Err() != nil || errors.Is(err, ErrPeerKey) {
				break
			}
			select {
			case <-ctx.Done():
				break retry // keep the last attempt's error: it says why
			case <-time.After(delay):
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			return fail(err)
		}
		conns = append(conns, c)
	}
	t.last.Store(int32(n))
	return &outConn{conns: conns, bufs: make([]net.Buffers, len(conns))}, nil
}

// dialOne opens stream of the link to the successor. When *streams is 0
// (chosen per link), the first stream's TCP handshake gives the round trip
// (the kernel's estimate; the dial's duration where there is none) and
// sets it.
func (t *Transport) dialOne(ctx context.Context, d *net.Dialer, s ring.LinkSpec, stream int, streams *int) (net.Conn, error) {
	start := time.Now()
	c, err := d.DialContext(ctx, "tcp", s.Succ.Addr)
	if err != nil {
		return nil, err
	}
	if *streams == 0 {
		*streams = LinkStreams(c, time.Since(start), t.o.LinkRate, t.o.WriteBuffer)
	}
	if !t.o.Plain {
		want := s.Succ.PublicKey
		tc := tls.Client(c, &tls.Config{
			MinVersion:         tls.VersionTLS13,
			Certificates:       []tls.Certificate{t.cert},
			InsecureSkipVerify: true, // replaced by the key check below: no CA, keys are the identity
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				k, err := peerKey(raw)
				if err != nil {
					return err
				}
				if !k.Equal(want) {
					return ErrPeerKey
				}
				return nil
			},
		})
		hctx, cancel := context.WithTimeout(ctx, t.o.HandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			c.Close()
			if errors.Is(err, ErrPeerKey) {
				return nil, err
			}
			return nil, fmt.Errorf("tls: %w", err)
		}
		c = tc
	}
	var h [helloSize]byte
	copy(h[:4], helloMagic)
	copy(h[4:36], s.ConfigID[:])
	binary.LittleEndian.PutUint32(h[36:], uint32(s.Self))
	binary.LittleEndian.PutUint32(h[40:], uint32(s.SuccIdx))
	binary.LittleEndian.PutUint16(h[44:], uint16(stream))
	binary.LittleEndian.PutUint16(h[46:], uint16(*streams))
	copy(h[48:80], s.Me.PublicKey)
	c.SetWriteDeadline(time.Now().Add(t.o.HandshakeTimeout))
	if _, err := c.Write(h[:]); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// outConn spreads frames round-robin over its streams.
type outConn struct {
	conns  []net.Conn
	bufs   []net.Buffers
	next   int
	closed atomic.Bool
	once   sync.Once
}

func (o *outConn) Send(hdr, payload []byte) error {
	i := o.next
	o.next = (o.next + 1) % len(o.conns)
	c := o.conns[i]
	if _, plain := c.(*net.TCPConn); plain {
		b := append(o.bufs[i][:0], hdr, payload)
		o.bufs[i] = b
		_, err := b.WriteTo(c)
		return o.wrap(err)
	}
	if _, err := c.Write(hdr); err != nil {
		return o.wrap(err)
	}
	if len(payload) > 0 {
		if _, err := c.Write(payload); err != nil {
			return o.wrap(err)
		}
	}
	return nil
}

func (o *outConn) wrap(err error) error {
	if err != nil && o.closed.Load() {
		return ErrClosed
	}
	return err
}

func (o *outConn) Recv() ([]byte, error) { return nil, errors.New("tcp: Recv on a send link") }

func (o *outConn) Close() error {
	o.once.Do(func() {
		o.closed.Store(true)
		for _, c := range o.conns {
			c.Close()
		}
	})
	return nil
}

// inConn reads frames from all its streams; each stream has a reader
// goroutine and two buffers, so the next frame is read while the ring
// verifies the current one.
type inConn struct {
	conns    []net.Conn
	frames   chan frame
	free     []chan []byte
	cur      frame
	have     bool
	done     chan struct{}
	once     sync.Once
	errMu    sync.Mutex
	err      error
	maxFrame int
	open     atomic.Int32 // streams not yet at EOF
}

type frame struct {
	b      []byte
	stream int
}

func newInConn(conns []net.Conn, maxFrame int) *inConn {
	in := &inConn{conns: conns, frames: make(chan frame, len(conns)), done: make(chan struct{}), maxFrame: maxFrame}
	in.open.Store(int32(len(conns)))
	for i, c := range conns {
		free := make(chan []byte, 2)
		free <- make([]byte, 0, 64<<10)
		free <- make([]byte, 0, 64<<10)
		in.free = append(in.free, free)
		go in.read(i, c, free)
	}
	return in
}

func (in *inConn) fail(err error) {
	in.errMu.Lock()
	if in.err == nil {
		in.err = err
	}
	in.errMu.Unlock()
	in.Close()
}

func (in *inConn) read(i int, c net.Conn, free chan []byte) {
	var lenb [4]byte
	for {
		var buf []byte
		select {
		case buf = <-free:
		case <-in.done:
			return
		}
		if _, err := io.ReadFull(c, lenb[:]); err != nil {
			if err == io.EOF && in.open.Add(-1) > 0 {
				// A clean end of one stream: frames still in flight on
				// the others must be read before the link counts as closed.
				return
			}
			in.fail(err)
			return
		}
		n := int(binary.LittleEndian.Uint32(lenb[:]))
		if n+4 > in.maxFrame || n < 0 {
			in.fail(fmt.Errorf("%w: %d bytes, cap %d", ErrFrameSize, n+4, in.maxFrame))
			return
		}
		if cap(buf) < n+4 {
			buf = make([]byte, n+4, max(n+4, in.maxFrame)) // grows once to the cap, then reused
		}
		buf = buf[:n+4]
		copy(buf, lenb[:])
		if _, err := io.ReadFull(c, buf[4:]); err != nil {
			in.fail(err)
			return
		}
		select {
		case in.frames <- frame{buf, i}:
		case <-in.done:
			return
		}
	}
}

func (in *inConn) Recv() ([]byte, error) {
	if in.have {
		in.free[in.cur.stream] <- in.cur.b
		in.have = false
	}
	select {
	case f := <-in.frames:
		in.cur, in.have = f, true
		return f.b, nil
	case <-in.done:
	}
	// Frames already read still count, as with a socket buffer.
	select {
	case f := <-in.frames:
		in.cur, in.have = f, true
		return f.b, nil
	default:
	}
	in.errMu.Lock()
	defer in.errMu.Unlock()
	if in.err != nil {
		if errors.Is(in.err, io.EOF) {
			return nil, fmt.Errorf("peer closed the link: %w", in.err)
		}
		return nil, in.err
	}
	return nil, ErrClosed
}

func (in *inConn) Send(hdr, payload []byte) error { return errors.New("tcp: Send on a receive link") }

func (in *inConn) Close() error {
	in.once.Do(func() {
		close(in.done)
		for _, c := range in.conns {
			c.Close()
		}
	})
	return nil
}
