package worker

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring"
)

func probeKey(name string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte("probe-test:" + name))
	return ed25519.NewKeyFromSeed(s[:])
}

func hexID(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }

// TestProbeAnswersNamedPeersOnly: the probe server measures only for keys
// hanzod named; strangers (no hello, a key not named, a signature for
// another server) get nothing, and holding connections open from one host
// does not starve a named peer.
func TestProbeAnswersNamedPeersOnly(t *testing.T) {
	server, peer, stranger := probeKey("server"), probeKey("peer"), probeKey("stranger")
	admit := func(_ context.Context, id string) bool { return id == hexID(peer) }
	ps, err := listenProbe("127.0.0.1:0", 256<<10, server, admit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	ctx := context.Background()

	// Strangers hold connections open from another loopback address, more
	// than every slot of the server.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for range 3 * probeHandshakes {
		c, err := d.Dial("tcp", ps.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if got := probe(ctx, ps.Addr(), hexID(server), stranger, 2*time.Second, nil); got != 0 {
		t.Errorf("a stranger's key measured %d kbit/s", got)
	}
	if got := probe(ctx, ps.Addr(), hexID(stranger), peer, 2*time.Second, nil); got != 0 {
		t.Errorf("a signature for another server measured %d kbit/s", got)
	}
	if got := probe(ctx, ps.Addr(), hexID(server), peer, 5*time.Second, nil); got == 0 {
		t.Error("the named peer measured nothing")
	}
}

// TestProbeFloodFromStrangers: the flood of issue 44 — connections from 25
// addresses, more than every shared slot, held open without a hello — made
// the named peers of a victim measure 0 kbit/s. A host hanzod named has
// connections of its own outside the pool strangers fill, so the named
// peer's one connection is measured.
func TestProbeFloodFromStrangers(t *testing.T) {
	server, peer := probeKey("server"), probeKey("peer")
	admit := func(_ context.Context, id string) bool { return id == hexID(peer) }
	named := func(host string) bool { return host == "127.0.0.1" }
	ps, err := listenProbe("127.0.0.1:0", 256<<10, server, admit, named)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	// Dial returns once the connection is in the listener's queue, which
	// the server accepts in order: the flood is ahead of the peer.
	flood := 0
	for a := range 25 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(a+1))}}
		for range probeHostShakes + 2 {
			c, err := d.Dial("tcp", ps.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			flood++
		}
	}
	if flood <= probeHandshakes {
		t.Fatalf("a flood of %d does not fill the %d shared slots", flood, probeHandshakes)
	}
	// One connection, no retry: the flood holds every shared slot for
	// probeHello, so only a slot of the peer's own host can serve it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key, _ := edkeyParse(t, hexID(server))
	if kbps, ok := probeOnce(ctx, ps.Addr(), key, peer, time.Now); !ok || kbps == 0 {
		t.Fatalf("the named peer measured %d kbit/s (ok %v) under a flood of %d connections from 25 addresses", kbps, ok, flood)
	}
	// A stranger is still refused, and a stranger on another address
	// finds the shared pool full.
	if got := probe(ctx, ps.Addr(), hexID(server), probeKey("stranger"), 2*time.Second, nil); got != 0 {
		t.Errorf("a stranger measured %d kbit/s", got)
	}
}

func edkeyParse(t *testing.T, h string) (ed25519.PublicKey, error) {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != ed25519.PublicKeySize {
		t.Fatalf("key %q: %v", h, err)
	}
	return ed25519.PublicKey(b), nil
}

// fakeProbe is a probe server that runs serve for each connection after
// the hello (its i counts connections from 0), without checking anything.
func fakeProbe(t *testing.T, serve func(i int, c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				var hello [32 + 96]byte
				if _, err := c.Write(hello[:32]); err != nil {
					return
				}
				if _, err := io.ReadFull(c, hello[32:]); err != nil {
					return
				}
				serve(i, c)
			})
		}
	})
	return ln.Addr().String()
}

// transferClock times probe's transfers: each transfer (two readings)
// takes the next of took.
type transferClock struct {
	mu    sync.Mutex
	t     time.Time
	calls int
	took  []time.Duration
}

func (c *transferClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls%2 == 1 {
		c.t = c.t.Add(c.took[c.calls/2])
	}
	c.calls++
	return c.t
}

// TestProbeRetriesAndTakesTheBest: a connection closed before any byte
// (slots busy, or not named yet) is tried again, and a measurement is
// probeTries transfers of which the fastest counts — so a server that
// refuses once, then serves, is measured, and a transfer slowed by
// another peer's at the same time does not set the figure.
func TestProbeRetriesAndTakesTheBest(t *testing.T) {
	var served atomic.Int32
	var mu sync.Mutex
	var conns []int
	addr := fakeProbe(t, func(i int, c net.Conn) {
		mu.Lock()
		conns = append(conns, i)
		mu.Unlock()
		if i == 0 {
			return // refused
		}
		c.Write(make([]byte, 64<<10))
		served.Add(1)
	})
	// 64 KiB in 1 s, 0.1 s (the transfer that had the link to itself), 1 s.
	clk := &transferClock{t: time.Unix(1e9, 0), took: []time.Duration{time.Second, 100 * time.Millisecond, time.Second}}
	got := probe(context.Background(), addr, hexID(probeKey("server")), probeKey("peer"), time.Minute, clk.now)
	if want := uint64(float64(64<<10) * 8 / 1e3 / (100 * time.Millisecond).Seconds()); got != want {
		t.Fatalf("measured %d kbit/s, want %d (the fastest of the three transfers)", got, want)
	}
	if n := served.Load(); n != probeTries {
		t.Errorf("%d transfers, want %d", n, probeTries)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != probeTries+1 {
		t.Errorf("connections %v, want one refused and %d served", conns, probeTries)
	}
}

// TestProbeCountsAShortTransfer: a transfer the timeout cuts short (a slow
// link, or a server that stalls) counts with the bytes that arrived, not
// as 0 kbit/s — 0 is an unusable link to hanzod's ring planner.
func TestProbeCountsAShortTransfer(t *testing.T) {
	release := make(chan struct{})
	addr := fakeProbe(t, func(_ int, c net.Conn) {
		c.Write(make([]byte, 64<<10))
		<-release // stall until the test ends
	})
	defer close(release)
	got := probe(context.Background(), addr, hexID(probeKey("server")), probeKey("peer"), 300*time.Millisecond, nil)
	if got == 0 {
		t.Fatal("64 KiB then a stall measured 0 kbit/s")
	}
}

// TestProbeNamedHosts: the hosts of the peers an assignment names (probe
// and ring addresses, IPv4-mapped written as IPv4) are named for
// probeNamedFor, as their keys are.
func TestProbeNamedHosts(t *testing.T) {
	clk := &stepClock{now: time.Unix(1e9, 0)}
	w := &Worker{c: Config{Clock: clk}}
	w.nameProbePeers(Assignment{Job: "j",
		ProbePeers: []Peer{{ID: "a", Addr: "10.0.0.1:9601"}, {ID: "b", Addr: "[::ffff:10.0.0.2]:9601"}},
		Ring:       &Ring{Members: []Peer{{ID: "c", Addr: "[2001:db8::1]:9600"}, {ID: "d", Addr: "no-port"}}}})
	for host, want := range map[string]bool{"10.0.0.1": true, "10.0.0.2": true, "2001:db8::1": true, "10.0.0.3": false, "": false} {
		if got := w.probeNamedHost(host); got != want {
			t.Errorf("host %q named %v, want %v", host, got, want)
		}
	}
	if h := probeHost("[::ffff:127.0.0.1]:5"); h != "127.0.0.1" {
		t.Errorf("probeHost of an IPv4-mapped address: %q", h)
	}
	clk.now = clk.now.Add(probeNamedFor + time.Second)
	if w.probeNamedHost("10.0.0.1") {
		t.Error("a host named longer ago than probeNamedFor is still named")
	}
}

type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time                      { return c.now }
func (c *stepClock) NewTimer(d time.Duration) ring.Timer { panic("not used") }
