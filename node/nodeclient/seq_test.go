package nodeclient

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/zooai/gym/api/hanzod/v1"
)

// seqHanzod records the sequence numbers of the heartbeats it receives.
type seqHanzod struct {
	mu   sync.Mutex
	seqs []uint64
}

func (f *seqHanzod) Invoke(_ context.Context, method string, req, reply any, _ ...grpc.CallOption) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := req.(*pb.HeartbeatRequest); ok {
		f.seqs = append(f.seqs, h.Auth.Seq)
		return nil
	}
	return errors.New("unexpected " + method)
}

func (f *seqHanzod) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("no streams")
}

// TestSeqSurvivesClockStepBack: sequence numbers keep growing when the
// clock steps back, within a run and across a restart (the high-water
// mark on disk).
func TestSeqSurvivesClockStepBack(t *testing.T) {
	dir := t.TempDir()
	f := &seqHanzod{}
	now := time.Unix(1_767_225_600, 0)
	clock := func() time.Time { return now }
	c, err := New(Config{Key: key(9), Conn: f, Dir: dir, Now: clock})
	must(t, err)
	for range 3 {
		_, err := c.Heartbeat(context.Background())
		must(t, err)
		now = now.Add(10 * time.Second)
	}
	now = now.Add(-time.Hour) // the clock steps back
	_, err = c.Heartbeat(context.Background())
	must(t, err)
	must(t, c.Close())
	// Restarted after the step back, on the same data directory.
	c, err = New(Config{Key: key(9), Conn: f, Dir: dir, Now: clock})
	must(t, err)
	defer c.Close()
	_, err = c.Heartbeat(context.Background())
	must(t, err)
	for i := 1; i < len(f.seqs); i++ {
		if f.seqs[i] <= f.seqs[i-1] {
			t.Fatalf("sequence %d after %d (request %d): %v", f.seqs[i], f.seqs[i-1], i, f.seqs)
		}
	}
}
