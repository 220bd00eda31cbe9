package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/state"
)

// TestClockSkew: one worker's clock is 5 minutes ahead of hanzod's and
// another's 5 minutes behind (hanzod allows 60 s); both sign with the
// offset measured from hanzod's replies, register, stay in the ring and
// finish the two-epoch job with the third (epoch 2 fetches its checkpoint
// from hanzod, the authorization expiring by hanzod's time). Without the
// offset both are refused at registration.
func TestClockSkew(t *testing.T) {
	long(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	skew := []time.Duration{5 * time.Minute, -5 * time.Minute, 0}
	cl, nodes := startNodesWith(t, ctx, tinySpec(2, 4), 3, func(c *localcluster.Config) {
		c.Clock = func(i int) func() time.Time {
			return func() time.Time { return time.Now().Add(skew[i]) }
		}
	}, nil)
	waitDone(t, ctx, nodes...)
	if st := cl.state(t); st.State != state.Published || len(st.Ring) != 3 {
		t.Fatalf("job %s with ring %v, want published by all three", st.State, st.Ring)
	}
	for _, ev := range cl.log(t) {
		switch b := ev.Body.(type) {
		case state.NodeFailed:
			t.Errorf("node %s failed: %s", b.Node[:8], b.Reason)
		case state.MemberChanged:
			if !b.Added {
				t.Errorf("node %s left the ring: %s", b.Node[:8], b.Reason)
			}
		}
	}
	for i, nd := range nodes {
		if n := len(nd.Events(worker.EventRegistered)); n != 1 {
			t.Errorf("worker %d (clock %v off) registered %d times", i, skew[i], n)
		}
	}
}
