package server

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/orchestrator/engine"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store/bolt"
	"github.com/zooai/gym/protocol/jobspec"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type env struct {
	node  pb.NodeServiceClient
	orch  pb.OrchestratorServiceClient
	clock *fakeClock
	eng   *engine.Engine
	srv   *Server
	addr  string // the server's address
}

// start runs a server on 127.0.0.1:0 over a bolt-backed engine that
// leads, with a fake clock shared by the engine and the rate limiter.
func start(t testing.TB, cfg Config, lead bool) *env { return startWith(t, cfg, lead, nil) }

// startWith is start with setup applied to the server before it serves.
func startWith(t testing.TB, cfg Config, lead bool, setup func(*Server)) *env {
	clk := &fakeClock{now: time.Unix(1_767_225_600, 0)}
	bc := bolt.DefaultConfig(t.TempDir())
	bc.Now = clk.Now
	st, err := bolt.Open(bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.Open(context.Background(), engine.DefaultConfig("test"), st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if lead {
		if ok, err := eng.Campaign(context.Background()); !ok || err != nil {
			t.Fatalf("campaign: %v %v", ok, err)
		}
	}
	srv, err := New(cfg, eng, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(srv)
	}
	g := grpc.NewServer(srv.Options()...)
	srv.Attach(g)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(srv.Listener(l))
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &env{node: pb.NewNodeServiceClient(conn), orch: pb.NewOrchestratorServiceClient(conn), clock: clk, eng: eng, srv: srv, addr: l.Addr().String()}
}

func key(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("server-test:" + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

type node struct {
	key ed25519.PrivateKey
	seq uint64
	e   *env
}

func (n *node) auth() state.Auth {
	n.seq++
	return state.Auth{Seq: n.seq, Timestamp: n.e.clock.Now().UnixMilli(), Audience: n.e.srv.Instance}
}

func pbAuth(a state.Auth) *pb.Auth {
	return &pb.Auth{Node: a.Node, Seq: a.Seq, TimestampMs: a.Timestamp, Signature: a.Sig}
}

func (n *node) register(ctx context.Context) (*pb.RegisterResponse, error) {
	r := state.Register{Auth: n.auth(), Address: "10.1.0.1:9560", Region: "eu", GPUModel: "L4", VRAMMiB: 24576}
	state.SignRegister(n.key, &r)
	return n.e.node.Register(ctx, &pb.RegisterRequest{Auth: pbAuth(r.Auth), Address: r.Address, Region: r.Region, GpuModel: r.GPUModel, VramMib: r.VRAMMiB})
}

func (n *node) heartbeat(ctx context.Context) (*pb.HeartbeatResponse, error) {
	h := state.Heartbeat{Auth: n.auth()}
	state.SignHeartbeat(n.key, &h)
	return n.e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)})
}

func (n *node) id() string {
	r := state.Register{}
	state.SignRegister(n.key, &r)
	return r.Node
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

func TestNodeRequests(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	ctx := context.Background()
	a := &node{key: key("a"), e: e}
	resp, err := a.register(ctx)
	if err != nil || resp.Attestation != state.Unverified {
		t.Fatalf("register: %v %v", resp, err)
	}
	// Replay of sequence 1.
	r := state.Register{Auth: state.Auth{Seq: 1, Timestamp: e.clock.Now().UnixMilli()}, Address: "10.1.0.1:9560", GPUModel: "L4", VRAMMiB: 1}
	state.SignRegister(a.key, &r)
	_, err = e.node.Register(ctx, &pb.RegisterRequest{Auth: pbAuth(r.Auth), Address: r.Address, GpuModel: r.GPUModel, VramMib: r.VRAMMiB})
	wantCode(t, err, codes.Unauthenticated)
	// A signature over different fields.
	_, err = e.node.Register(ctx, &pb.RegisterRequest{Auth: pbAuth(r.Auth), Address: r.Address, GpuModel: r.GPUModel, VramMib: 2})
	wantCode(t, err, codes.Unauthenticated)
	// Missing auth, small-order key.
	_, err = e.node.Register(ctx, &pb.RegisterRequest{Address: "x:1"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: &pb.Auth{Node: "0100000000000000000000000000000000000000000000000000000000000000", Seq: 1, Signature: make([]byte, 64)}})
	wantCode(t, err, codes.InvalidArgument)
	// Heartbeat from a node that never registered: NotFound tells it to
	// register (after an orchestrator lost its state, for instance).
	b := &node{key: key("b"), e: e}
	_, err = b.heartbeat(ctx)
	wantCode(t, err, codes.NotFound)
	// A stale timestamp.
	e.clock.Advance(2 * time.Minute)
	if ok, err := e.eng.Campaign(ctx); !ok || err != nil { // the daemon renews every second
		t.Fatalf("renew: %v %v", ok, err)
	}
	h := state.Heartbeat{Auth: state.Auth{Seq: 50, Timestamp: e.clock.Now().Add(-time.Minute - time.Second).UnixMilli()}}
	state.SignHeartbeat(a.key, &h)
	_, err = e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)})
	wantCode(t, err, codes.Unauthenticated)
	// An oversized request.
	big := state.Register{Auth: a.auth(), Address: "10.1.0.1:9560", GPUModel: "L4", VRAMMiB: 1}
	_, err = e.node.Register(ctx, &pb.RegisterRequest{Auth: pbAuth(big.Auth), AttestationReport: make([]byte, 2<<20)})
	wantCode(t, err, codes.ResourceExhausted)
	// A valid heartbeat.
	if _, err := a.heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NodeRate, cfg.NodeBurst = 1, 3
	e := start(t, cfg, true)
	ctx := context.Background()
	a := &node{key: key("a"), e: e}
	for i := range 3 {
		if _, err := a.register(ctx); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, err := a.register(ctx)
	wantCode(t, err, codes.ResourceExhausted)
	// Another node is not affected.
	if _, err := (&node{key: key("b"), e: e}).register(ctx); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	if _, err := a.register(ctx); err != nil {
		t.Fatalf("after a second: %v", err)
	}
}

func TestNotLeader(t *testing.T) {
	e := start(t, DefaultConfig(), false)
	_, err := (&node{key: key("a"), e: e}).register(context.Background())
	wantCode(t, err, codes.Unavailable)
}

func TestLedgerNeedsOperator(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AdminToken = "s3cret"
	e := start(t, cfg, true)
	ctx := context.Background()
	req := &pb.LedgerRequest{Account: "acct", Amount: 5}
	_, err := e.orch.Deposit(ctx, req)
	wantCode(t, err, codes.Unauthenticated)
	_, err = e.orch.Deposit(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong"), req)
	wantCode(t, err, codes.Unauthenticated)
	acct, err := e.orch.Deposit(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret"), req)
	if err != nil || acct.Free != 5 {
		t.Fatalf("deposit: %v %v", acct, err)
	}
	// Without a token, loopback callers (these tests) are operators.
	e2 := start(t, DefaultConfig(), true)
	if _, err := e2.orch.Deposit(ctx, req); err != nil {
		t.Fatal(err)
	}
	_, err = e2.orch.Bond(ctx, &pb.LedgerRequest{Account: "acct", Amount: 6})
	wantCode(t, err, codes.FailedPrecondition)
}

// TestJobThroughTheAPI: nodes register, get staked, a job is submitted,
// heartbeats tell the members whom to probe, their reports build the ring.
func TestJobThroughTheAPI(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	ctx := context.Background()
	var nodes []*node
	for i := range 3 {
		n := &node{key: key(fmt.Sprint("n", i)), e: e}
		if _, err := n.register(ctx); err != nil {
			t.Fatal(err)
		}
		for _, op := range []func(context.Context, *pb.LedgerRequest, ...grpc.CallOption) (*pb.Account, error){e.orch.Deposit, e.orch.Bond} {
			if _, err := op(ctx, &pb.LedgerRequest{Account: n.id(), Amount: uint64(10_000 * ledger.GYM)}); err != nil {
				t.Fatal(err)
			}
		}
		nodes = append(nodes, n)
	}
	_, err := e.orch.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: &pb.JobSpec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 2}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.orch.GetJob(ctx, &pb.GetJobRequest{Job: "job-9"})
	wantCode(t, err, codes.NotFound)
	sub, err := e.orch.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: &pb.JobSpec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3}})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	var last *pb.Assignment
	for _, n := range nodes {
		hb, err := n.heartbeat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if hb.Assignment.Job != sub.Job || hb.Assignment.JobState != "provisioning" || len(hb.Assignment.ProbePeers) != 2 {
			t.Fatalf("assignment %v", hb.Assignment)
		}
		b := state.ReportBandwidth{Auth: n.auth(), Job: sub.Job}
		req := &pb.ReportBandwidthRequest{Job: sub.Job}
		for _, p := range hb.Assignment.ProbePeers {
			b.Links = append(b.Links, state.Link{Peer: p, Kbps: 1000})
			req.Links = append(req.Links, &pb.Link{Peer: p, Kbps: 1000})
		}
		state.SignBandwidth(n.key, &b)
		req.Auth = pbAuth(b.Auth)
		resp, err := e.node.ReportBandwidth(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Assignment
	}
	if last.JobState != "running" || last.Ring == nil || len(last.Ring.Members) != 3 || last.Ring.BottleneckKbps != 1000 {
		t.Fatalf("after all reports: %v", last)
	}
	job, err := e.orch.GetJob(ctx, &pb.GetJobRequest{Job: sub.Job})
	if err != nil || job.State != "running" || job.Ring.ConfigId != last.Ring.ConfigId {
		t.Fatalf("job %v %v", job, err)
	}
	ns, err := e.orch.ListNodes(ctx, &pb.ListNodesRequest{})
	if err != nil || len(ns.Nodes) != 3 || ns.Nodes[0].Job != sub.Job {
		t.Fatalf("nodes %v %v", ns, err)
	}
	bal, err := e.orch.GetBalance(ctx, &pb.GetBalanceRequest{Account: nodes[0].id()})
	if err != nil || bal.Bonded != uint64(10_000*ledger.GYM) {
		t.Fatalf("balance %v %v", bal, err)
	}

	// The rest of the lifecycle, as the validator and merger will drive it.
	_, err = e.orch.PublishCheckpoint(ctx, &pb.PublishCheckpointRequest{Job: sub.Job, Epoch: 1, Cid: "bafy"})
	wantCode(t, err, codes.FailedPrecondition)
	if j, err := e.orch.EndEpoch(ctx, &pb.EndEpochRequest{Job: sub.Job, Epoch: 1}); err != nil || j.State != "aggregating" {
		t.Fatalf("end epoch: %v %v", j, err)
	}
	if j, err := e.orch.PublishCheckpoint(ctx, &pb.PublishCheckpointRequest{Job: sub.Job, Epoch: 1, Cid: "bafy"}); err != nil || j.State != "published" || j.Cids[0] != "bafy" {
		t.Fatalf("publish: %v %v", j, err)
	}
	acct, err := e.orch.Slash(ctx, &pb.SlashRequest{Node: nodes[1].id(), Reason: "bad delta", Evidence: []byte("proof")})
	if err != nil || acct.Bonded != uint64(9_500*ledger.GYM) || string(acct.Slashes[0].Evidence) != "proof" {
		t.Fatalf("slash: %v %v", acct, err)
	}
	pay, err := e.orch.PayRewards(ctx, &pb.PayRewardsRequest{Job: sub.Job, Epoch: 1, Total: 100, Contributions: []*pb.Contribution{
		{Account: nodes[0].id(), Compute: 1, Quality: 1, Participation: 1},
	}})
	if err != nil || len(pay.Payouts) != 1 || pay.Payouts[0].Amount != 100 {
		t.Fatalf("rewards: %v %v", pay, err)
	}
	_, err = e.orch.PayRewards(ctx, &pb.PayRewardsRequest{Job: sub.Job, Epoch: 1, Total: 1})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = e.orch.FailJob(ctx, &pb.FailJobRequest{Job: sub.Job, Reason: "too late"})
	wantCode(t, err, codes.FailedPrecondition)
}

// TestJobGSPO: a job's GSPO settings go in with SubmitJob (unset fields
// take the seed's defaults) and come back, every field set, from GetJob
// and ListJobs; a setting out of range is refused naming it.
func TestJobGSPO(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	ctx := context.Background()
	spec := func(g *pb.GSPOConfig) *pb.SubmitJobRequest {
		return &pb.SubmitJobRequest{Spec: &pb.JobSpec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3, Gspo: g}}
	}
	def := jobspec.DefaultGSPO()
	want := jobspec.GSPOToProto(def)
	plain, err := e.orch.SubmitJob(ctx, spec(nil))
	if err != nil {
		t.Fatal(err)
	}
	partial, err := e.orch.SubmitJob(ctx, spec(&pb.GSPOConfig{
		ImportanceSamplingLevel: proto.String("token"), Beta: proto.Float64(0), Use_4Bit: proto.Bool(false),
		WarmupSteps: proto.Int32(0), LearningRate: proto.Float64(0.30000000000000004), GroupSize: proto.Int32(2),
	}))
	if err != nil {
		t.Fatal(err)
	}
	wantPartial := &pb.GSPOConfig{
		ImportanceSamplingLevel: proto.String("token"), Beta: proto.Float64(0), GroupSize: proto.Int32(2),
		AggregateInterval: proto.Int32(int32(def.AggregateInterval)), Use_4Bit: proto.Bool(false), LoraRank: proto.Int32(int32(def.LoRARank)),
		LoraAlpha: proto.Float64(def.LoRAAlpha), MaxSeqLen: proto.Int32(int32(def.MaxSeqLen)),
		GradientAccumulationSteps: proto.Int32(int32(def.GradientAccumulationSteps)), LearningRate: proto.Float64(0.30000000000000004),
		WarmupSteps: proto.Int32(0), WeightDecay: proto.Float64(def.WeightDecay), LoraTargetModules: def.Targets(),
		OuterLearningRate: proto.Float64(def.OuterLR), OuterMomentum: proto.Float64(def.OuterMomentum),
		InnerOptimizer: proto.String(jobspec.Fields.InnerOptimizer.Default), OuterOptimizer: proto.String(jobspec.Fields.OuterOptimizer.Default),
		MaxGradNorm: proto.Float64(0), NumIterations: proto.Int32(2),
	}
	for id, w := range map[string]*pb.GSPOConfig{plain.Job: want, partial.Job: wantPartial} {
		j, err := e.orch.GetJob(ctx, &pb.GetJobRequest{Job: id})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(j.Spec.Gspo, w) {
			t.Errorf("%s: gspo %v, want %v", id, j.Spec.Gspo, w)
		}
	}
	list, err := e.orch.ListJobs(ctx, &pb.ListJobsRequest{})
	if err != nil || len(list.Jobs) != 2 || !proto.Equal(list.Jobs[1].Spec.Gspo, wantPartial) {
		t.Fatalf("list %v %v", list, err)
	}
	for _, bad := range []struct {
		g    *pb.GSPOConfig
		want string
	}{
		{&pb.GSPOConfig{GroupSize: proto.Int32(1)}, "gspo.group_size 1 outside 2..1024"},
		{&pb.GSPOConfig{GroupSize: proto.Int32(0)}, "gspo.group_size 0"},
		{&pb.GSPOConfig{Beta: proto.Float64(-1)}, "gspo.beta -1"},
		{&pb.GSPOConfig{Beta: proto.Float64(math.NaN())}, "gspo.beta NaN"},
		{&pb.GSPOConfig{LearningRate: proto.Float64(0)}, "gspo.learning_rate 0"},
		{&pb.GSPOConfig{ImportanceSamplingLevel: proto.String("")}, `gspo.importance_sampling_level ""`},
		{&pb.GSPOConfig{LoraRank: proto.Int32(-3)}, "gspo.lora_rank -3"},
	} {
		_, err := e.orch.SubmitJob(ctx, spec(bad.g))
		wantCode(t, err, codes.InvalidArgument)
		if !strings.Contains(status.Convert(err).Message(), bad.want) {
			t.Errorf("%v: %v, want it to say %q", bad.g, err, bad.want)
		}
	}
}
