package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/internal/valkeyserver"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/node/nodeclient"
)

// TestMain runs hanzod's main when the failover test starts this test
// binary as a hanzod process.
func TestMain(m *testing.M) {
	if os.Getenv("HANZOD_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestFailoverProcesses runs three hanzod processes over one Valkey
// server with one signing key, kills the leader with SIGKILL and measures
// how long until another replica leads; a client dialled to all three
// (nodeclient.Replicas) then gets its ledger operation done by the new
// leader, and the money deposited before the kill is still there.
func TestFailoverProcesses(t *testing.T) {
	if _, err := valkeyserver.Binary(); errors.Is(err, valkeyserver.ErrNotInstalled) && os.Getenv("GYM_REQUIRE_REDIS") != "1" {
		t.Skip(err)
	}
	dir := t.TempDir()
	vs, err := valkeyserver.Start(context.Background(), filepath.Join(dir, "valkey"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vs.Kill)
	key, err := nodekey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "hanzod.key")
	if err := nodekey.Save(keyFile, key, false); err != nil {
		t.Fatal(err)
	}
	const lease = 2 * time.Second // at least twice the 1 s tick
	var addrs []string
	var procs []*exec.Cmd
	for i := range 3 {
		addr := freePort(t)
		cmd := exec.Command(os.Args[0], "--data", filepath.Join(dir, fmt.Sprintf("r%d", i)), "--listen", addr, "--metrics", "",
			"--artifacts", "", "--store", "valkey", "--valkey", vs.URL(), "--lease", lease.String(), "--key", keyFile)
		cmd.Env = append(os.Environ(), "HANZOD_TEST_MAIN=1")
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("r%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
		addrs, procs = append(addrs, addr), append(procs, cmd)
	}
	conns := make([]healthpb.HealthClient, 3)
	for i, a := range addrs {
		c, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = healthpb.NewHealthClient(c)
	}
	// leader polls (every 20 ms, at most 30 s) until exactly one of the
	// live replicas says SERVING.
	leader := func(dead int) int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			serving := -1
			n := 0
			for i, c := range conns {
				if i == dead {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				r, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
				cancel()
				if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
					serving, n = i, n+1
				}
			}
			if n == 1 {
				return serving
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("no single replica leads after 30 s")
		return -1
	}
	first := leader(-1)
	target, opts := nodeclient.Replicas(addrs)
	cc, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	orch := pb.NewOrchestratorServiceClient(cc)
	deposit := func(id string) *pb.Account {
		t.Helper()
		// The client retries while no replica leads (Unavailable).
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			a, err := orch.Deposit(ctx, &pb.LedgerRequest{Account: "0000000000000000000000000000000000000000000000000000000000000001", Amount: 5, RequestId: id})
			cancel()
			if err == nil {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("deposit %s: %v", id, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	deposit("before")
	t0 := time.Now()
	if err := procs[first].Process.Kill(); err != nil { // SIGKILL: the lease is not released
		t.Fatal(err)
	}
	second := leader(first)
	took := time.Since(t0)
	a := deposit("after")
	t.Logf("replica %d killed, replica %d leads after %v (lease %v); account holds %d µGYM", first, second, took.Round(time.Millisecond), lease, a.Free)
	if a.Free != 10 {
		t.Fatalf("account holds %d after a deposit before and one after the kill, want 10", a.Free)
	}
	if took > lease+5*time.Second {
		t.Errorf("takeover took %v with a %v lease", took, lease)
	}
}
