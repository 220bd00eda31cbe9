package worker

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"sync"
	"time"

	"github.com/zooai/gym/edkey"
)

// The bandwidth probe protocol. The server answers only nodes hanzod named
// as this node's probe peers or ring members, so a stranger cannot take
// the slots the measurements that rings are built from need:
//
//	server → client  challenge [32]byte (random)
//	client → server  key [32]byte || sig [64]byte
//	                 sig = Ed25519(client key, ProbeDomain || 0x00 || challenge || server key)
//	server → client  n probe bytes (the measurement), then close
//
// A client that fails the check, or is not named, is disconnected.
const ProbeDomain = "zoo-gym/probe/v1"

const (
	probeConns      = 8                // measurements at once
	probeHandshakes = 64               // connections being checked at once
	probeHostShakes = 4                // of them from one host
	probeHello      = 5 * time.Second  // a client must identify itself within this
	probeNamedFor   = 10 * time.Minute // a named peer stays allowed this long
	probeWaitNamed  = 2 * time.Second  // how long an unknown key waits for a fresh assignment naming it
)

// probeSigned is what a prober signs.
func probeSigned(challenge []byte, server ed25519.PublicKey) []byte {
	msg := make([]byte, 0, len(ProbeDomain)+1+len(challenge)+len(server))
	msg = append(append(append(msg, ProbeDomain...), 0), challenge...)
	return append(msg, server...)
}

// probeServer answers bandwidth probes: every admitted connection receives
// n bytes, then is closed. At most probeConns are served at once, one per
// peer key; more are closed.
type probeServer struct {
	ln    net.Listener
	n     int
	key   ed25519.PrivateKey
	admit func(ctx context.Context, id string) bool // a checked key: is it a peer hanzod named?
	sem   chan struct{}
	hs    chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	ctx   context.Context
	stop  context.CancelFunc

	mu     sync.Mutex
	active map[string]bool // peers being measured
	shakes map[string]int  // host → connections being checked
}

func listenProbe(addr string, n int, key ed25519.PrivateKey, admit func(ctx context.Context, id string) bool) (*probeServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &probeServer{ln: ln, n: n, key: key, admit: admit, sem: make(chan struct{}, probeConns),
		hs: make(chan struct{}, probeHandshakes), ctx: ctx, stop: stop, active: map[string]bool{}, shakes: map[string]int{}}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *probeServer) Addr() string { return p.ln.Addr().String() }

func (p *probeServer) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		p.mu.Lock()
		full := p.shakes[host] >= probeHostShakes
		if !full {
			p.shakes[host]++
		}
		p.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		done := func() {
			p.mu.Lock()
			if p.shakes[host]--; p.shakes[host] <= 0 {
				delete(p.shakes, host)
			}
			p.mu.Unlock()
		}
		select {
		case p.hs <- struct{}{}:
		default:
			done()
			c.Close()
			continue
		}
		p.wg.Go(func() {
			defer c.Close()
			id, ok := p.hello(c)
			<-p.hs
			done()
			if !ok {
				return
			}
			p.send(c, id)
		})
	}
}

// hello checks the client's key and signature and whether hanzod named
// it; it returns the client's id.
func (p *probeServer) hello(c net.Conn) (string, bool) {
	c.SetDeadline(time.Now().Add(probeHello))
	var challenge [32]byte
	rand.Read(challenge[:])
	if _, err := c.Write(challenge[:]); err != nil {
		return "", false
	}
	var msg [ed25519.PublicKeySize + ed25519.SignatureSize]byte
	if _, err := io.ReadFull(c, msg[:]); err != nil {
		return "", false
	}
	pub, sig := msg[:ed25519.PublicKeySize], msg[ed25519.PublicKeySize:]
	if edkey.CheckPublicKey(pub) != nil || edkey.Verify(pub, probeSigned(challenge[:], p.key.Public().(ed25519.PublicKey)), sig) != nil {
		return "", false
	}
	id := hex.EncodeToString(pub)
	ctx, cancel := context.WithTimeout(p.ctx, probeWaitNamed)
	defer cancel()
	return id, p.admit(ctx, id)
}

func (p *probeServer) send(c net.Conn, id string) {
	p.mu.Lock()
	busy := p.active[id]
	if !busy {
		p.active[id] = true
	}
	p.mu.Unlock()
	if busy {
		return
	}
	defer func() {
		p.mu.Lock()
		delete(p.active, id)
		p.mu.Unlock()
	}()
	select {
	case p.sem <- struct{}{}:
	default:
		return
	}
	defer func() { <-p.sem }()
	buf := make([]byte, 64<<10)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	for left := p.n; left > 0; {
		k, err := c.Write(buf[:min(left, len(buf))])
		if err != nil {
			return
		}
		left -= k
	}
}

func (p *probeServer) Close() error {
	p.once.Do(func() { p.stop(); p.ln.Close() })
	p.wg.Wait()
	return nil
}

// probe measures the rate at which addr, the probe server of node peer
// (hex id), sends its probe bytes, in kbit/s (10^3 bits per second),
// identifying itself with key; 0 when it cannot be reached, refuses or
// is not peer, within timeout.
func probe(ctx context.Context, addr, peer string, key ed25519.PrivateKey, timeout time.Duration) uint64 {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	server, err := edkey.ParseHex(peer)
	if err != nil {
		return 0
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var challenge [32]byte
	if _, err := io.ReadFull(c, challenge[:]); err != nil {
		return 0
	}
	hello := append([]byte(key.Public().(ed25519.PublicKey)), ed25519.Sign(key, probeSigned(challenge[:], server))...)
	if _, err := c.Write(hello); err != nil {
		return 0
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return 0 // refused
	}
	start := time.Now()
	n, err := io.Copy(io.Discard, c)
	secs := time.Since(start).Seconds()
	if err != nil || n == 0 {
		return 0
	}
	return uint64(float64(n) * 8 / 1e3 / max(secs, 1e-6))
}

// nameProbePeers records the peers assignment a names: its probe peers and
// ring members.
func (w *Worker) nameProbePeers(a Assignment) {
	now := w.c.Clock.Now()
	w.probeMu.Lock()
	defer w.probeMu.Unlock()
	if w.probeNamed == nil {
		w.probeNamed = map[string]time.Time{}
	}
	for id, at := range w.probeNamed {
		if now.Sub(at) > probeNamedFor {
			delete(w.probeNamed, id)
		}
	}
	for _, p := range a.ProbePeers {
		w.probeNamed[p.ID] = now
	}
	if a.Ring != nil {
		for _, p := range a.Ring.Members {
			w.probeNamed[p.ID] = now
		}
	}
}

// probeAdmit reports whether hanzod named id as a peer of this node. A key
// not named yet may belong to a peer that saw the job's provisioning
// before this node did: the node asks hanzod for a fresh assignment (at
// most once a second, whoever asks) and waits for it until ctx ends.
func (w *Worker) probeAdmit(ctx context.Context, id string) bool {
	for {
		now := w.c.Clock.Now()
		w.probeMu.Lock()
		at, ok := w.probeNamed[id]
		poke := now.Sub(w.probePoked) >= time.Second
		if poke {
			w.probePoked = now
		}
		w.probeMu.Unlock()
		if ok && now.Sub(at) <= probeNamedFor {
			return true
		}
		h := w.probeHeart.Load()
		if h == nil {
			return false
		}
		_, _, changed := h.current()
		if poke {
			go h.beat(ctx)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}
