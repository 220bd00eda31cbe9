// Package tcp is the production ring.Transport: one or more TCP streams per
// ring link, TLS 1.3 with mutual authentication by default.
//
// Each node presents a self-signed certificate made from its Ed25519 node
// key. A dialer accepts the listener only if the certificate's key is the
// successor's key in the ring configuration; a listener hands a connection
// to the ring only if its certificate's key is the predecessor's. Plain TCP
// (no TLS) is allowed only when every address involved is a loopback
// address, for measuring what TLS costs.
//
// A link may use several parallel streams (frames are spread round-robin;
// the ring accepts segments in any order), and socket buffer sizes can be
// set, which is what long fat links need. By default the dialing side
// chooses the number of streams of each link when it connects, from the
// round trip its TCP handshake took (see AutoStreams); the listening side
// takes the number each link's hello announces.
package tcp

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zooai/gym/keys/edkey"
	"github.com/zooai/gym/protocol/ring"
)

// Errors.
var (
	ErrClosed    = errors.New("tcp: transport closed")
	ErrPeerKey   = errors.New("tcp: peer certificate is not the ring member's key")
	ErrNotLocal  = errors.New("tcp: plain TCP is only allowed between loopback addresses")
	ErrHello     = errors.New("tcp: bad link hello")
	ErrFrameSize = errors.New("tcp: frame length above the cap")
)

// Options configures a Transport.
type Options struct {
	Key        ed25519.PrivateKey
	ListenAddr string // host:port; port 0 picks one
	// Plain disables TLS. Only loopback addresses may then be used.
	Plain bool
	// Streams is the number of parallel TCP connections this node opens
	// to its successor; 0 (the default) chooses it per link from the
	// measured round trip (AutoStreams). Links from the predecessor use
	// the number it announces.
	Streams int
	// LinkRate is the rate, in bytes per second, a link is assumed to
	// carry when choosing streams (default 125e6: 1 Gbit/s). A link's
	// measured bandwidth, when the caller knows it, is a better value.
	LinkRate float64
	// ReadBuffer and WriteBuffer set SO_RCVBUF and SO_SNDBUF (0: OS default).
	ReadBuffer, WriteBuffer int
	// HandshakeTimeout bounds TLS handshake and hello (default 10 s).
	HandshakeTimeout time.Duration
}

const (
	helloMagic = "ZGRH"
	helloSize  = 4 + 32 + 4 + 4 + 2 + 2 + 32
	maxStreams = 64
	// MaxAutoStreams caps the streams AutoStreams chooses: each adds a TLS
	// connection and a reader goroutine, and past a link's bandwidth-delay
	// product more streams only cost CPU (docs/ring.md).
	MaxAutoStreams = 8
	slotTTL        = 5 * time.Minute
	// maxSlots bounds the links parked for configurations this node has
	// not claimed (yet): anyone with a certificate can open one, so
	// without a bound strangers could hold memory and descriptors for
	// slotTTL. Past it the oldest parked link is closed; links a Connect
	// waits for are never evicted.
	maxSlots = 64
)

type slotKey struct {
	id       ring.ID
	sender   uint32
	receiver uint32
	pub      [32]byte
}

type slot struct {
	awaited bool       // a Connect waits for it
	conns   []net.Conn // sized by the first hello that arrives
	have    int
	ready   chan struct{}
	created time.Time
}

// Transport listens for this node's predecessors and dials successors.
type Transport struct {
	o      Options
	last   atomic.Int32 // streams of the last link dialed
	ln     net.Listener
	cert   tls.Certificate
	mu     sync.Mutex
	slots  map[slotKey]*slot
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// Listen starts a Transport listening on o.ListenAddr.
func Listen(o Options) (*Transport, error) {
	if len(o.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("tcp: no node key")
	}
	if o.Streams < 0 || o.Streams > maxStreams {
		return nil, fmt.Errorf("tcp: %d streams, want 1..%d or 0 (chosen per link)", o.Streams, maxStreams)
	}
	if o.LinkRate == 0 {
		o.LinkRate = 125e6
	}
	if !(o.LinkRate > 0) {
		return nil, fmt.Errorf("tcp: link rate %v bytes/s, want > 0", o.LinkRate)
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.Plain && !isLoopback(o.ListenAddr) {
		return nil, fmt.Errorf("%w: listen address %s", ErrNotLocal, o.ListenAddr)
	}
	cert, err := Certificate(o.Key)
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: SocketBuffers(o.ReadBuffer, o.WriteBuffer)}
	ln, err := lc.Listen(context.Background(), "tcp", o.ListenAddr)
	if err != nil {
		return nil, err
	}
	t := &Transport{o: o, ln: ln, cert: cert, slots: map[slotKey]*slot{}, closed: make(chan struct{})}
	t.wg.Go(t.acceptLoop)
	return t, nil
}

// Addr is the address the transport listens on.
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// Close stops listening and closes parked connections. Links already
// handed out stay open until their Close.
func (t *Transport) Close() error {
	t.once.Do(func() {
		close(t.closed)
		t.ln.Close()
		t.mu.Lock()
		for k, s := range t.slots {
			for _, c := range s.conns {
				if c != nil {
					c.Close()
				}
			}
			delete(t.slots, k)
		}
		t.mu.Unlock()
	})
	t.wg.Wait()
	return nil
}

// Certificate returns a self-signed TLS certificate for an Ed25519 key.
func Certificate(key ed25519.PrivateKey) (tls.Certificate, error) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Unix(0, 0),
		NotAfter:     time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tcp: certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// peerKey extracts the Ed25519 key of the leaf certificate.
func peerKey(raw [][]byte) (ed25519.PublicKey, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: no certificate", ErrPeerKey)
	}
	c, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPeerKey, err)
	}
	k, ok := c.PublicKey.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T key", ErrPeerKey, c.PublicKey)
	}
	if err := edkey.CheckPublicKey(k); err != nil {
		return nil, fmt.Errorf("%w: certificate key %s", ErrPeerKey, edkey.Reason(err))
	}
	return k, nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// SocketBuffers is a net.Dialer / net.ListenConfig Control function that
// sets SO_RCVBUF to read and SO_SNDBUF to write bytes (0 leaves one to the
// OS; setting it switches Linux's autotuning off for that direction).
func SocketBuffers(read, write int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if read > 0 {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, read)
			}
			if write > 0 && serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, write)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

func (t *Transport) acceptLoop() {
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.closed:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.wg.Go(func() {
			if err := t.admit(c); err != nil {
				c.Close()
			}
		})
	}
}

// admit authenticates an incoming connection, reads its hello and parks it
// until Connect claims it.
func (t *Transport) admit(c net.Conn) error {
	deadline := time.Now().Add(t.o.HandshakeTimeout)
	c.SetDeadline(deadline)
	var tlsKey ed25519.PublicKey
	if !t.o.Plain {
		tc := tls.Server(c, &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{t.cert},
			ClientAuth:   tls.RequireAnyClientCert,
		})
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			return err
		}
		certs := tc.ConnectionState().PeerCertificates
		if len(certs) == 0 {
			return fmt.Errorf("%w: no certificate", ErrPeerKey)
		}
		k, err := peerKey([][]byte{certs[0].Raw})
		if err != nil {
			return err
		}
		tlsKey, c = k, tc
	} else if !isLoopback(c.RemoteAddr().String()) {
		return ErrNotLocal
	}
	var h [helloSize]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return err
	}
	if string(h[:4]) != helloMagic {
		return ErrHello
	}
	var k slotKey
	copy(k.id[:], h[4:36])
	k.sender = binary.LittleEndian.Uint32(h[36:])
	k.receiver = binary.LittleEndian.Uint32(h[40:])
	stream := int(binary.LittleEndian.Uint16(h[44:]))
	streams := int(binary.LittleEndian.Uint16(h[46:]))
	copy(k.pub[:], h[48:80])
	if streams < 1 || streams > maxStreams || stream >= streams {
		return fmt.Errorf("%w: stream %d of %d (at most %d)", ErrHello, stream, streams, maxStreams)
	}
	if tlsKey != nil && string(tlsKey) != string(k.pub[:]) {
		return fmt.Errorf("%w: hello key differs from the certificate", ErrPeerKey)
	}
	c.SetDeadline(time.Time{})
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.closed:
		return ErrClosed
	default:
	}
	if _, ok := t.slots[k]; !ok {
		t.pruneLocked()
		t.evictLocked(maxSlots - 1)
	}
	s := t.slotLocked(k)
	if s.conns == nil {
		s.conns = make([]net.Conn, streams)
	}
	if len(s.conns) != streams {
		return fmt.Errorf("%w: stream %d announces %d streams, the link's first %d", ErrHello, stream, streams, len(s.conns))
	}
	if s.conns[stream] != nil {
		return fmt.Errorf("%w: stream %d twice", ErrHello, stream)
	}
	s.conns[stream] = c
	s.have++
	if s.have == len(s.conns) {
		close(s.ready)
	}
	return nil
}

func (t *Transport) slotLocked(k slotKey) *slot {
	s := t.slots[k]
	if s == nil {
		t.pruneLocked()
		s = &slot{ready: make(chan struct{}), created: time.Now()}
		t.slots[k] = s
	}
	return s
}

// evictLocked closes the oldest parked (not awaited) links until at most
// keep remain.
func (t *Transport) evictLocked(keep int) {
	for {
		var oldest *slot
		var ok slotKey
		parked := 0
		for key, s := range t.slots {
			if s.awaited {
				continue
			}
			parked++
			if oldest == nil || s.created.Before(oldest.created) {
				oldest, ok = s, key
			}
		}
		if parked <= keep {
			return
		}
		for _, c := range oldest.conns {
			if c != nil {
				c.Close()
			}
		}
		delete(t.slots, ok)
	}
}

// pruneLocked forgets links nobody claimed within slotTTL.
func (t *Transport) pruneLocked() {
	now := time.Now()
	for key, old := range t.slots {
		if !old.awaited && now.Sub(old.created) > slotTTL {
			for _, c := range old.conns {
				if c != nil {
					c.Close()
				}
			}
			delete(t.slots, key)
		}
	}
}
