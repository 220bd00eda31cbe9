package tcp_test

import (
	"sync"
	"testing"

	"github.com/zooai/gym/ring"
	"github.com/zooai/gym/ring/tcp"
)

// Several streams do not keep order across a call boundary: frames of the
// next call may overtake the end of this one, and must not be lost. Each
// node runs its calls back to back, without waiting for the other.
func TestStreamsAcrossCallBoundaries(t *testing.T) {
	nodes, _ := cluster(t, 2, tcp.Options{Plain: true, Streams: 2}, ring.Options{})
	const calls = 300
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			// Closing right after the last call ends one stream while the
			// peer may still be reading the last frame from the other.
			defer nodes[i].comm.Close()
			for it := range calls {
				length := 1 + (it%2)*16383
				bufs, sum := ints(2, length, uint64(it))
				if err := nodes[i].comm.AllReduceCall(t.Context(), bufs[i], ring.Sum, ring.Call{Step: uint64(it)}); err != nil {
					t.Errorf("call %d node %d: %v", it, i, err)
					return
				}
				if bufs[i][length-1] != sum[length-1] {
					t.Errorf("call %d node %d: wrong sum", it, i)
					return
				}
			}
		})
	}
	wg.Wait()
}
