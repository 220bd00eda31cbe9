package daemon

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/orchestrator/server"
	"github.com/zooai/gym/orchestrator/state"
)

func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.Metrics, cfg.Artifacts = dir, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.TickInterval = 50 * time.Millisecond
	cfg.LeaseTTL = time.Second
	// TestKill9UnderLoad registers hundreds of keys from loopback.
	cfg.Server.RegisterAddrBurst, cfg.Server.RegisterNewBurst = 1<<20, 1<<20
	return cfg
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// waitServing polls the health service until the replica leads (after a
// restart, once the old lease has lapsed), with a bound generous enough for
// a loaded machine.
func waitServing(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	h := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving: %v %v", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func register(t *testing.T, conn *grpc.ClientConn) string {
	req := registerRequest(t, conn)
	if _, err := pb.NewNodeServiceClient(conn).Register(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	return req.Auth.Node
}

// registerRequest is a registration signed by the zero-seed key for the
// hanzod at conn (a fresh sequence number each call).
func registerRequest(t *testing.T, conn *grpc.ClientConn) *pb.RegisterRequest {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	regSeq++
	r := state.Register{Auth: state.Auth{Seq: regSeq, Timestamp: time.Now().UnixMilli(), Audience: audience(t, conn)}, Address: "10.0.0.1:9560", GPUModel: "L4", VRAMMiB: 24576}
	state.SignRegister(key, &r)
	return &pb.RegisterRequest{
		Auth:    &pb.Auth{Node: r.Node, Seq: r.Seq, TimestampMs: r.Timestamp, Signature: r.Sig},
		Address: r.Address, GpuModel: r.GPUModel, VramMib: r.VRAMMiB,
	}
}

var regSeq uint64

// audience is the key of the hanzod at conn, which node requests are
// signed for: a node learns it from a refusal's trailer (nodeclient).
func audience(t *testing.T, conn *grpc.ClientConn) ed25519.PublicKey {
	t.Helper()
	var tr metadata.MD
	_, err := pb.NewNodeServiceClient(conn).Heartbeat(context.Background(), &pb.HeartbeatRequest{Auth: &pb.Auth{}}, grpc.Trailer(&tr))
	v := tr.Get(server.KeyTrailer)
	if err == nil || len(v) != 1 {
		t.Fatalf("no hanzod key in the trailer of a refusal (%v): %v", err, tr)
	}
	k, err := hex.DecodeString(v[0])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRestart: a node registered through the API is there after a
// restart on the same directory; metrics report it.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	d, err := Start(context.Background(), testConfig(dir), quiet())
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(t, d.Addr(), insecure.NewCredentials())
	waitServing(t, conn)
	id := register(t, conn)
	resp, err := http.Get("http://" + d.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"gym_hanzod_leader 1", `gym_hanzod_nodes{status="active"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d, err = Start(context.Background(), testConfig(dir), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn = dial(t, d.Addr(), insecure.NewCredentials())
	waitServing(t, conn)
	ns, err := pb.NewOrchestratorServiceClient(conn).ListNodes(context.Background(), &pb.ListNodesRequest{})
	if err != nil || len(ns.Nodes) != 1 || ns.Nodes[0].Id != id {
		t.Fatalf("after restart: %v %v", ns, err)
	}
}

// TestTLSOffLoopback: listening beyond loopback turns on TLS 1.3 with a
// self-signed certificate in the data directory.
func TestTLSOffLoopback(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Listen = "0.0.0.0:0"
	d, err := Start(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, port, _ := net.SplitHostPort(d.Addr())
	pemBytes, err := os.ReadFile(filepath.Join(dir, "tls-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	conn := dial(t, "127.0.0.1:"+port, credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost", MaxVersion: tls.VersionTLS12}))
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("a TLS 1.2 client was served")
	}
	conn = dial(t, "127.0.0.1:"+port, credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"}))
	waitServing(t, conn)
	plain := dial(t, "127.0.0.1:"+port, insecure.NewCredentials())
	if _, err := healthpb.NewHealthClient(plain).Check(context.Background(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("a plaintext client was served off loopback")
	}
}

// TestKill9UnderLoad runs hanzod in a child process, loads it with signed
// registrations from 8 clients, kills it with SIGKILL, restarts it on the
// same directory and checks that every acknowledged request is there: the
// node is registered, and the acknowledged sequence number is now refused
// as a replay (so the stored one is at least as high).
func TestKill9UnderLoad(t *testing.T) {
	if os.Getenv("GYM_DAEMON_CHILD") != "" {
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDaemonChild$")
	cmd.Env = append(os.Environ(), "GYM_DAEMON_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var addr string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("child did not report its address")
	}
	go io.Copy(io.Discard, out)
	conn := dial(t, addr, insecure.NewCredentials())
	waitServing(t, conn)
	nc := pb.NewNodeServiceClient(conn)
	aud := audience(t, conn)

	type ack struct {
		key ed25519.PrivateKey
		seq uint64
	}
	var mu sync.Mutex
	acked := map[string]*ack{}
	const enough = 600 // acknowledged registrations before the kill
	var total atomic.Int64
	stop := make(chan struct{})
	reached := make(chan struct{}) // closed by the worker that acknowledges the 600th
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := make([]ed25519.PrivateKey, 50)
			seqs := make([]uint64, 50)
			for i := range keys {
				seed := sha256.Sum256([]byte(fmt.Sprint("kill9-", w, "-", i)))
				keys[i] = ed25519.NewKeyFromSeed(seed[:])
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := i % 50
				seqs[k]++
				r := state.Register{Auth: state.Auth{Seq: seqs[k], Timestamp: time.Now().UnixMilli(), Audience: aud}, Address: "10.0.0.1:9560", GPUModel: "L4", VRAMMiB: 24576}
				state.SignRegister(keys[k], &r)
				_, err := nc.Register(context.Background(), &pb.RegisterRequest{
					Auth:    &pb.Auth{Node: r.Node, Seq: r.Seq, TimestampMs: r.Timestamp, Signature: r.Sig},
					Address: r.Address, GpuModel: r.GPUModel, VramMib: r.VRAMMiB,
				})
				if err != nil {
					if status.Code(err) == codes.ResourceExhausted {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					return // the server died
				}
				mu.Lock()
				acked[r.Node] = &ack{key: keys[k], seq: r.Seq}
				mu.Unlock()
				if total.Add(1) == enough {
					close(reached)
				}
			}
		}()
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	select {
	case <-reached:
	case <-workersDone:
		t.Fatalf("every client stopped after %d registrations (the server died?)", total.Load())
	case <-time.After(time.Minute):
		t.Fatalf("%d registrations acknowledged in a minute, want %d", total.Load(), enough)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	close(stop)
	wg.Wait()
	t.Logf("%d registrations acknowledged before SIGKILL", total.Load())

	d, err := Start(context.Background(), testConfig(dir), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn = dial(t, d.Addr(), insecure.NewCredentials())
	waitServing(t, conn)
	ns, err := pb.NewOrchestratorServiceClient(conn).ListNodes(context.Background(), &pb.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, n := range ns.Nodes {
		present[n.Id] = true
	}
	nc = pb.NewNodeServiceClient(conn)
	for id, a := range acked {
		if !present[id] {
			t.Fatalf("acknowledged node %s missing after restart", id)
		}
		h := state.Heartbeat{Auth: state.Auth{Seq: a.seq, Timestamp: time.Now().UnixMilli(), Audience: aud}}
		state.SignHeartbeat(a.key, &h)
		_, err := nc.Heartbeat(context.Background(), &pb.HeartbeatRequest{Auth: &pb.Auth{Node: h.Node, Seq: h.Seq, TimestampMs: h.Timestamp, Signature: h.Sig}})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "replayed") {
			t.Fatalf("node %s: acknowledged sequence %d not in the log (heartbeat with it: %v)", id, a.seq, err)
		}
	}
}

// TestDaemonChild is the child of TestKill9UnderLoad.
func TestDaemonChild(t *testing.T) {
	dir := os.Getenv("GYM_DAEMON_CHILD")
	if dir == "" {
		t.Skip("child process of TestKill9UnderLoad")
	}
	cfg := testConfig(dir)
	cfg.Metrics = ""
	d, err := Start(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("addr %s\n", d.Addr())
	select {}
}
