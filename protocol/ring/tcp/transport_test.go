package tcp_test

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/tcp"
	"github.com/zooai/gym/protocol/ring/transporttest"
)

// TestTransport runs the transport suite over TLS with one and with
// several streams per link (which may reorder frames), and over plain TCP
// on loopback (which does not authenticate the predecessor).
func TestTransport(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    tcp.Options
	}{
		{"tls", tcp.Options{}},
		{"tls 3 streams", tcp.Options{Streams: 3}},
		{"plain", tcp.Options{Plain: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			transporttest.Run(t, func(t *testing.T, n int) *transporttest.Net {
				tn := &transporttest.Net{Reorders: tc.o.Streams > 1, Unauthenticated: tc.o.Plain}
				for i := range n {
					o := tc.o
					o.Key, o.ListenAddr = key(i), "127.0.0.1:0"
					tr, err := tcp.Listen(o)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { tr.Close() })
					tn.Transports = append(tn.Transports, tr)
					tn.Members = append(tn.Members, ring.Member{ID: fmt.Sprint("n", i), PublicKey: key(i).Public().(ed25519.PublicKey), Addr: tr.Addr()})
				}
				return tn
			})
		})
	}
}
