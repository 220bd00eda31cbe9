package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/orchestrator/engine"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store/bolt"
)

func percentiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, name+"-p99-ms")
}

// BenchmarkLoad1000 is the load scenario over real gRPC (loopback,
// plaintext) and the embedded store with fsync: 1,000 nodes register and
// heartbeat at their real rate (every 10 s, 100/s in total) while jobs are
// submitted and scheduled; then heartbeats as fast as 32 clients can send
// them. Run with -benchtime=1x: one iteration is the whole scenario.
func BenchmarkLoad1000(b *testing.B) {
	for b.Loop() {
		load(b)
	}
}

func load(b *testing.B) {
	ctx := context.Background()
	st, err := bolt.Open(bolt.DefaultConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ecfg := engine.DefaultConfig("bench")
	ecfg.LeaseTTL = time.Hour
	ecfg.State.MinHeartbeatGap = time.Millisecond
	eng, err := engine.Open(ctx, ecfg, st, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	if ok, err := eng.Campaign(ctx); !ok || err != nil {
		b.Fatal(ok, err)
	}
	cfg := DefaultConfig()
	cfg.RegisterAddrBurst, cfg.RegisterNewBurst = 1000, 1000 // 1,000 nodes from one address
	srv, _ := New(cfg, eng, time.Now)
	g := grpc.NewServer(srv.Options()...)
	srv.Attach(g)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go g.Serve(l)
	defer g.Stop()
	conn, _ := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	e := &env{node: pb.NewNodeServiceClient(conn), orch: pb.NewOrchestratorServiceClient(conn), eng: eng}
	clk := &fakeClock{}
	e.clock = clk
	now := func() { clk.mu.Lock(); clk.now = time.Now(); clk.mu.Unlock() }

	nodes := make([]*node, 1000)
	var reg []time.Duration
	for i := range nodes {
		nodes[i] = &node{key: key(fmt.Sprint("load", i)), e: e}
		now()
		t0 := time.Now()
		if _, err := nodes[i].register(ctx); err != nil {
			b.Fatal(err)
		}
		reg = append(reg, time.Since(t0))
		for _, op := range []func(context.Context, *pb.LedgerRequest, ...grpc.CallOption) (*pb.Account, error){e.orch.Deposit, e.orch.Bond} {
			if _, err := op(ctx, &pb.LedgerRequest{Account: nodes[i].id(), Amount: uint64(10_000 * ledger.GYM)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	percentiles(b, "register", reg)

	// Heartbeats at the real rate for 5 s, with a tick every second and a
	// job submitted every 250 ms.
	var mu sync.Mutex
	var hb, sub []time.Duration
	var wg sync.WaitGroup
	deadline := time.Now().Add(5 * time.Second)
	var nodeMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; time.Now().Before(deadline); i++ {
			t0 := time.Now()
			if _, err := eng.Do(ctx, state.Tick{}); err != nil {
				b.Error(err)
			}
			for k := range 4 {
				t1 := time.Now()
				if _, err := e.orch.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: &pb.JobSpec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3}}); err != nil {
					b.Error(err)
				}
				mu.Lock()
				sub = append(sub, time.Since(t1))
				mu.Unlock()
				time.Sleep(time.Until(t0.Add(time.Duration(k+1) * 250 * time.Millisecond)))
			}
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond) // 100 heartbeats/s
	for i := 0; time.Now().Before(deadline); i++ {
		<-tick.C
		wg.Add(1)
		go func(n *node) {
			defer wg.Done()
			nodeMu.Lock() // a node's requests carry increasing sequence numbers
			now()
			t0 := time.Now()
			h := state.Heartbeat{Auth: n.auth()}
			state.SignHeartbeat(n.key, &h)
			nodeMu.Unlock()
			if _, err := e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)}); err != nil {
				b.Error(err)
			}
			mu.Lock()
			hb = append(hb, time.Since(t0))
			mu.Unlock()
		}(nodes[i%len(nodes)])
	}
	tick.Stop()
	wg.Wait()
	percentiles(b, "heartbeat", hb)
	percentiles(b, "submit", sub)

	// Saturation: 32 clients heartbeating as fast as they can for 2 s.
	var count int
	deadline = time.Now().Add(2 * time.Second)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline); i += 32 {
				n := nodes[i%len(nodes)]
				nodeMu.Lock()
				now()
				h := state.Heartbeat{Auth: n.auth()}
				state.SignHeartbeat(n.key, &h)
				nodeMu.Unlock()
				if _, err := e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)}); err != nil {
					continue // rate-limited or too soon: counted as not done
				}
				mu.Lock()
				count++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(count)/2, "max-heartbeats/s")
}
