package worker

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"testing"
	"time"
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
	ps, err := listenProbe("127.0.0.1:0", 256<<10, server, admit)
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
	if got := probe(ctx, ps.Addr(), hexID(server), stranger, 2*time.Second); got != 0 {
		t.Errorf("a stranger's key measured %d kbit/s", got)
	}
	if got := probe(ctx, ps.Addr(), hexID(stranger), peer, 2*time.Second); got != 0 {
		t.Errorf("a signature for another server measured %d kbit/s", got)
	}
	if got := probe(ctx, ps.Addr(), hexID(server), peer, 5*time.Second); got == 0 {
		t.Error("the named peer measured nothing")
	}
}
