package localcluster_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/pin"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/kubotest"
	"github.com/zooai/gym/orchestrator/state"
)

// TestPinsOnKubo runs a two-epoch job with hanzod pinning on a real kubo
// node (built from source: internal/kubotest), which is stopped once the
// job runs: hanzod's tries fail and are retried with backoff, visible in
// the job's status; when kubo comes back (same URL), both checkpoints end
// up pinned there under our CIDs, and kubo's export of each DAG is
// byte-identical to our CAR.
func TestPinsOnKubo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job and a kubo node")
	}
	node := kubotest.Start(t)
	dir := filepath.Join(t.TempDir(), "up")
	cfg := localcluster.TestConfig(dir, 3)
	cfg.IPFS, cfg.PinMinBackoff, cfg.PinMaxBackoff = node.URL(), 100*time.Millisecond, 400*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.StartWorkers(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.StopWorkers()
	if err := c.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	node.Stop() // kubo goes away before anything is published
	job, err := c.Submit(ctx, tinySpec(2, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	q := c.Daemon().Pins()
	conn, err := grpc.NewClient(c.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := pb.NewOrchestratorServiceClient(conn)

	// The first checkpoint fails to pin, at least twice, and the job's
	// status says so.
	var first string
	if err := localcluster.Poll(ctx, 20*time.Millisecond, func() bool {
		jb, _ := c.Job(job)
		if len(jb.CIDs) == 0 {
			return false
		}
		first = jb.CIDs[0]
		e, ok := q.Get(first)
		return ok && e.Failures >= 2
	}); err != nil {
		t.Fatalf("no failed pin tries: %v (%+v)", err, q.List())
	}
	pj, err := api.GetJob(ctx, &pb.GetJobRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	if len(pj.Pins) == 0 || pj.Pins[0].Cid != first || pj.Pins[0].State != pin.Pending || pj.Pins[0].Attempts < 2 ||
		pj.Pins[0].Error == "" || pj.Pins[0].NextMs == 0 {
		t.Fatalf("job status while kubo is down: %+v", pj.Pins)
	}
	t.Logf("while kubo was down: %d attempts, last error %q", pj.Pins[0].Attempts, pj.Pins[0].Error)
	node.Start()

	jb, err := c.Follow(ctx, job)
	if err != nil || jb.State != state.Published || len(jb.CIDs) != 2 {
		t.Fatalf("job %s: %v, %d checkpoints", jb.State, err, len(jb.CIDs))
	}
	if err := localcluster.Poll(ctx, 20*time.Millisecond, func() bool {
		for _, id := range jb.CIDs {
			if e, ok := q.Get(id); !ok || e.State != pin.Pinned {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("not pinned: %v (%+v)", err, q.List())
	}
	pj, err = api.GetJob(ctx, &pb.GetJobRequest{Job: job})
	if err != nil || len(pj.Pins) != 2 {
		t.Fatalf("job status: %v %+v", err, pj.GetPins())
	}
	for _, p := range pj.Pins {
		if p.State != pin.Pinned || p.Error != "" {
			t.Errorf("job status after kubo came back: %+v", p)
		}
	}

	// kubo itself: pinned recursively under our CID, every block of the
	// DAG there (ReadCAR verifies each against the root), and its export
	// is the CAR we write of that DAG, byte for byte.
	for _, id := range jb.CIDs {
		out, err := node.Run("pin", "ls", "--type=recursive", id)
		if err != nil || !strings.HasPrefix(string(out), id+" recursive") {
			t.Errorf("ipfs pin ls %s: %q %v", id, out, err)
		}
		car, err := node.Run("dag", "export", id)
		if err != nil {
			t.Fatal(err)
		}
		root, _ := cid.Decode(id)
		mem := artifact.NewMemBlocks()
		if _, err := artifact.ReadCAR(ctx, bytes.NewReader(car), mem, root, 1<<30); err != nil {
			t.Fatalf("kubo's CAR of %s: %v", id, err)
		}
		var ours bytes.Buffer
		if err := artifact.WriteCAR(ctx, &ours, mem, root); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours.Bytes(), car) {
			t.Errorf("%s: kubo's export (%d bytes) differs from our CAR (%d bytes)", id, len(car), ours.Len())
		}
	}
}
