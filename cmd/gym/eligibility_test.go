package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/zooai/gym/api/hanzod/v1"
	hserver "github.com/zooai/gym/orchestrator/server"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/hardware"
)

// registerHW registers n with hardware report hw, signed, and stakes it.
func (n *testNode) registerHW(t *testing.T, nc pb.NodeServiceClient, oc pb.OrchestratorServiceClient, hw hardware.Report) {
	t.Helper()
	var audience ed25519.PublicKey // hanzod's key, learnt from its trailer as nodeclient learns it
	for attempt := 0; ; attempt++ {
		n.seq++
		gpu, vram := hw.Summary()
		r := state.Register{Auth: state.Auth{Seq: n.seq, Timestamp: time.Now().UnixMilli(), Audience: audience}, Address: "10.0.0.1:9560", Region: "eu-west",
			GPUModel: gpu, VRAMMiB: vram, Hardware: hw}
		state.SignRegister(n.key, &r)
		req := &pb.RegisterRequest{Auth: n.auth(r.Auth), Address: r.Address, Region: r.Region, GpuModel: r.GPUModel, VramMib: r.VRAMMiB,
			Backends: hw.Backends, Dtypes: hw.DTypes}
		for _, a := range hw.Accelerators {
			req.Accelerators = append(req.Accelerators, &pb.Accelerator{Name: a.Name, TotalMib: a.TotalMiB, FreeMib: a.FreeMiB, Compute: a.Compute})
		}
		var md metadata.MD
		_, err := nc.Register(context.Background(), req, grpc.Trailer(&md))
		if err == nil {
			break
		}
		k := md.Get(hserver.KeyTrailer)
		if attempt > 0 || len(k) != 1 {
			t.Fatal(err)
		}
		b, herr := hex.DecodeString(k[0])
		if herr != nil {
			t.Fatal(herr)
		}
		audience = b
	}
	if _, err := oc.Deposit(context.Background(), &pb.LedgerRequest{Account: n.id, Amount: 10_000_000_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Bond(context.Background(), &pb.LedgerRequest{Account: n.id, Amount: 10_000_000_000}); err != nil {
		t.Fatal(err)
	}
}

func hostOnly(mib uint64) hardware.Report {
	return hardware.Report{Accelerators: []hardware.Accelerator{{Name: "cpu", TotalMiB: mib, FreeMiB: mib - 1000}}, Backends: []string{"go"}, DTypes: []string{"float32"}}
}

// examples/job.yaml waits while too few nodes meet it, and 'gym job
// status' and 'gym node list --job' say why with the numbers (needed,
// available, which node); once a third node reporting 24 GiB registers, it
// starts.
func TestJobPendingExplained(t *testing.T) {
	d := startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", "")
	conn := dialPlain(t, d.addr)
	nc, oc := pb.NewNodeServiceClient(conn), pb.NewOrchestratorServiceClient(conn)
	small, big1, big2, big3 := newTestNode(0), newTestNode(1), newTestNode(2), newTestNode(3)
	small.registerHW(t, nc, oc, hostOnly(8192))
	big1.registerHW(t, nc, oc, hostOnly(24576))
	big2.registerHW(t, nc, oc, hostOnly(24576))

	id := strings.TrimSpace(mustGym(t, "--orchestrator", d.addr, "job", "submit", exampleJob))
	t.Setenv("ORCHESTRATOR_URL", d.addr)
	j := decodeJSON[jobJSON](t, mustGym(t, "job", "status", id, "--json"))
	if j.State != "pending" || j.MemoryEstimated || j.Spec.Backend != "go" || j.Spec.DType != "any" {
		t.Fatalf("job: %+v", j)
	}
	for _, want := range []string{"needs 3 eligible idle nodes: 2 of 3 registered are eligible", "1 ineligible: min_vram_mib 16384: cpu has 8192 MiB (node " + small.id[:12]} {
		if !strings.Contains(j.PendingReason, want) {
			t.Errorf("pending reason lacks %q: %s", want, j.PendingReason)
		}
	}
	if len(j.Eligibility) != 3 {
		t.Fatalf("eligibility: %+v", j.Eligibility)
	}
	for _, e := range j.Eligibility {
		switch {
		case e.Node == small.id && (e.Eligible || e.Device != "cpu" || e.AvailableMiB != 7192 || !strings.Contains(e.Reason, "8192 MiB")):
			t.Errorf("the 8 GiB node: %+v", e)
		case e.Node != small.id && (!e.Eligible || !strings.Contains(e.Reason, "go float32 on cpu")):
			t.Errorf("a 24 GiB node: %+v", e)
		}
	}
	text := mustGym(t, "job", "status", id)
	for _, want := range []string{"waiting      needs 3 eligible idle nodes", "no  " + small.id + "  min_vram_mib 16384: cpu has 8192 MiB",
		"yes " + big1.id + "  go float32 on cpu", "backend      go, dtype any; memory not estimated"} {
		if !strings.Contains(text, want) {
			t.Errorf("job status lacks %q:\n%s", want, text)
		}
	}
	nodes := decodeJSON[struct {
		Nodes []nodeJSON `json:"nodes"`
	}](t, mustGym(t, "node", "list", "--job", id, "--json"))
	for _, n := range nodes.Nodes {
		if n.Fit == nil || (n.ID == small.id) == n.Fit.Eligible || len(n.Accelerators) != 1 || n.Accelerators[0].Name != "cpu" || n.Backends[0] != "go" {
			t.Errorf("node list --job: %+v %+v", n, n.Fit)
		}
	}
	if text := mustGym(t, "node", "list", "--job", id); !strings.Contains(text, "no: min_vram_mib 16384: cpu has 8192 MiB") || !strings.Contains(text, "cpu 24576/23576 MiB; go float32") {
		t.Errorf("node list --job:\n%s", text)
	}
	if r := gym(t, "node", "list", "--job", "job-99999999"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("node list for an unknown job: %d %s", r.code, r.stderr)
	}

	big3.registerHW(t, nc, oc, hostOnly(24576))
	deadline := time.Now().Add(60 * time.Second)
	for {
		j = decodeJSON[jobJSON](t, mustGym(t, "job", "status", id, "--json"))
		if j.State == "provisioning" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("examples/job.yaml did not start with three 24 GiB nodes: %+v", j)
		}
		time.Sleep(100 * time.Millisecond) // polling hanzod's once-a-second scheduling tick
	}
	for _, m := range j.Members {
		if m == small.id {
			t.Fatalf("the 8 GiB node was given the job: %v", j.Members)
		}
	}
	if j.PendingReason != "" || len(j.Eligibility) != 0 {
		t.Errorf("a started job still explains waiting: %+v", j)
	}
}
