package worker

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/zooai/gym/keys/edkey"
)

// The bandwidth probe protocol. The server answers only nodes hanzod named
// as this node's probe peers or ring members, so a stranger cannot take
// the slots the measurements that rings are built from need. Before a
// connection has identified itself, only its address is known: a host
// hanzod named (the host of a named peer's probe or ring address) has its
// own probeHostShakes connections being checked, outside the
// probeHandshakes that every other host shares, so strangers flooding
// from any number of other addresses cannot crowd a named peer out.
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
	probeHandshakes = 64               // connections being checked at once from hosts not named
	probeHostShakes = 4                // of them from one host (named or not)
	probeHello      = 5 * time.Second  // a client must identify itself within this
	probeNamedFor   = 10 * time.Minute // a named peer stays allowed this long
	probeWaitNamed  = 2 * time.Second  // how long an unknown key waits for a fresh assignment naming it

	probeTries    = 3                     // transfers per measurement; the fastest counts
	probeAttempts = 2 * probeTries        // connections per measurement, refused ones included
	probeRetry    = 50 * time.Millisecond // wait after a refused connection, doubling each time
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
	named func(host string) bool                    // is host (an IP, as probeHost writes it) a named peer's?
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

// listenProbe serves probes on addr: n bytes to each connection whose key
// admit accepts; named says which hosts hold a share of the connections
// being checked of their own (nil: none).
func listenProbe(addr string, n int, key ed25519.PrivateKey, admit func(ctx context.Context, id string) bool, named func(host string) bool) (*probeServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if named == nil {
		named = func(string) bool { return false }
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &probeServer{ln: ln, n: n, key: key, admit: admit, named: named, sem: make(chan struct{}, probeConns),
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
		host := probeHost(c.RemoteAddr().String())
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
		// A named host's connections are bounded by the per-host count
		// alone; the shared pool is for everyone else.
		shared := !p.named(host)
		if shared {
			select {
			case p.hs <- struct{}{}:
			default:
				done()
				c.Close()
				continue
			}
		}
		p.wg.Go(func() {
			defer c.Close()
			id, ok := p.hello(c)
			if shared {
				<-p.hs
			}
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

// probeHost is the host of a "host:port" address, an IP address written
// canonically (IPv4-mapped IPv6 as IPv4) when it is one; "" when addr has
// no port.
func probeHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	return host
}

// probe measures the rate at which addr, the probe server of node peer
// (hex id), sends its probe bytes, in kbit/s (10^3 bits per second),
// identifying itself with key. It makes up to probeTries transfers within
// timeout and returns the fastest, so that a transfer slowed by another
// peer's measurement at the same time does not set the figure; a
// connection closed before any byte (the server's slots busy, or this
// node not named to it yet) is tried again after probeRetry, doubling,
// probeAttempts connections in all. A transfer cut short by the timeout
// counts with the bytes that arrived. 0 when no transfer delivered a
// byte: addr cannot be reached, refuses, or is not peer. now times the
// transfers (nil: time.Now).
func probe(ctx context.Context, addr, peer string, key ed25519.PrivateKey, timeout time.Duration, now func() time.Time) uint64 {
	if now == nil {
		now = time.Now
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	server, err := edkey.ParseHex(peer)
	if err != nil {
		return 0
	}
	var best uint64
	wait := probeRetry
	for tries, attempts := 0, 0; tries < probeTries && attempts < probeAttempts && ctx.Err() == nil; attempts++ {
		if kbps, ok := probeOnce(ctx, addr, server, key, now); ok {
			best = max(best, kbps)
			tries++
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		wait *= 2
	}
	return best
}

// probeOnce makes one transfer from addr, whose key is server, timed by
// now; ok is false when no byte arrived.
func probeOnce(ctx context.Context, addr string, server ed25519.PublicKey, key ed25519.PrivateKey, now func() time.Time) (kbps uint64, ok bool) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, false
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var challenge [32]byte
	if _, err := io.ReadFull(c, challenge[:]); err != nil {
		return 0, false
	}
	hello := append([]byte(key.Public().(ed25519.PublicKey)), ed25519.Sign(key, probeSigned(challenge[:], server))...)
	if _, err := c.Write(hello); err != nil {
		return 0, false
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return 0, false // refused
	}
	// Timed from the first byte; a transfer the deadline (or the server)
	// cuts short counts with what arrived.
	start := now()
	n, _ := io.Copy(io.Discard, c)
	secs := now().Sub(start).Seconds()
	if n == 0 {
		return 0, false
	}
	return uint64(float64(n) * 8 / 1e3 / max(secs, 1e-6)), true
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
	if w.probeHosts == nil {
		w.probeHosts = map[string]time.Time{}
	}
	for _, m := range []map[string]time.Time{w.probeNamed, w.probeHosts} {
		for k, at := range m {
			if now.Sub(at) > probeNamedFor {
				delete(m, k)
			}
		}
	}
	name := func(p Peer) {
		w.probeNamed[p.ID] = now
		if h := probeHost(p.Addr); h != "" {
			w.probeHosts[h] = now
		}
	}
	for _, p := range a.ProbePeers {
		name(p)
	}
	if a.Ring != nil {
		for _, p := range a.Ring.Members {
			name(p)
		}
	}
}

// probeNamedHost reports whether host (probeHost's form) is the host of a
// peer hanzod named within probeNamedFor: its connections to the probe
// server do not share the pool strangers fill.
func (w *Worker) probeNamedHost(host string) bool {
	now := w.c.Clock.Now()
	w.probeMu.Lock()
	defer w.probeMu.Unlock()
	at, ok := w.probeHosts[host]
	return ok && now.Sub(at) <= probeNamedFor
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
