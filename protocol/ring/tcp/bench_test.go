package tcp_test

import (
	"fmt"
	"testing"

	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/tcp"
)

// BenchmarkLoopback: N nodes in one process over loopback TCP.
var bufSize = 0 // SO_RCVBUF and SO_SNDBUF; 0 = OS default
func BenchmarkLoopback(b *testing.B) {
	for _, tc := range []struct {
		n        int
		tls      bool
		insecure bool
	}{{2, false, true}, {2, false, false}, {2, true, false}, {4, false, true}, {4, true, false}} {
		b.Run(fmt.Sprintf("n%d/tls=%v/auth=%v/64MiB", tc.n, tc.tls, !tc.insecure), func(b *testing.B) {
			nodes, _ := cluster(b, tc.n, tcp.Options{Plain: !tc.tls, ReadBuffer: bufSize, WriteBuffer: bufSize}, ring.Options{Insecure: tc.insecure})
			bufs := make([][]float32, tc.n)
			for i := range bufs {
				bufs[i] = make([]float32, 16<<20)
			}
			b.SetBytes(64 << 20)
			for b.Loop() {
				for _, err := range allReduce(b.Context(), nodes, bufs, ring.Call{}) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
