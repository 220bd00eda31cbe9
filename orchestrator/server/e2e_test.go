package server

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
)

// fakeJudge records the files it is given and answers with resp or err.
type fakeJudge struct {
	mu      sync.Mutex
	heads   [][]byte // the head of every preflight
	got     [][]byte // the file of every submission
	traces  [][]byte
	pre     DeltaVerdict // the preflight's answer when refuse is set
	refuse  bool
	resp    DeltaVerdict
	err     error
	entered chan struct{} // signalled as Submit starts, when set
	gate    chan struct{} // Submit waits for it, when set
}

func (f *fakeJudge) Preflight(ctx context.Context, u Upload) (DeltaVerdict, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heads = append(f.heads, append([]byte(nil), u.Head...))
	return f.pre, !f.refuse, nil
}

func (f *fakeJudge) Submit(ctx context.Context, u Upload, file, traces []byte) (DeltaVerdict, error) {
	f.mu.Lock()
	entered, gate := f.entered, f.gate
	f.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, append([]byte(nil), file...))
	f.traces = append(f.traces, append([]byte(nil), traces...))
	return f.resp, f.err
}

// ringJudge is a fakeJudge that also takes the evidence of suspect reports.
type ringJudge struct {
	fakeJudge
	reports []string // job/suspect/evidence of every call
}

func (f *ringJudge) RingEvidence(ctx context.Context, job, suspect string, evidence []byte) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, job+"/"+suspect+"/"+string(evidence))
	return false, nil
}

// member is a node with its own ring and probe addresses.
type member struct {
	*node
	addr, probe string
}

func (m *member) register(ctx context.Context) error {
	r := state.Register{Auth: m.auth(), Address: m.addr, Region: "eu", GPUModel: "L4", VRAMMiB: 24576, ProbeAddress: m.probe}
	state.SignRegister(m.key, &r)
	_, err := m.e.node.Register(ctx, &pb.RegisterRequest{Auth: pbAuth(r.Auth), Address: r.Address, Region: r.Region, GpuModel: r.GPUModel, VramMib: r.VRAMMiB, ProbeAddress: r.ProbeAddress})
	return err
}

// advance moves the clock past the heartbeat rate bound and renews the
// lease, as the daemon's loop would.
func (e *env) advance(t *testing.T, d time.Duration) {
	t.Helper()
	e.clock.Advance(d)
	if ok, err := e.eng.Campaign(context.Background()); !ok || err != nil {
		t.Fatalf("renew: %v %v", ok, err)
	}
}

// staked registers staked members from..to-1 (member i at
// 10.1.0.i+1:9560, probing at 10.1.1.i+1:9561).
func staked(t *testing.T, e *env, from, to int) []*member {
	t.Helper()
	ctx := context.Background()
	var out []*member
	for i := from; i < to; i++ {
		m := &member{node: &node{key: key(fmt.Sprint("m", i)), e: e}, addr: fmt.Sprintf("10.1.0.%d:9560", i+1), probe: fmt.Sprintf("10.1.1.%d:9561", i+1)}
		if err := m.register(ctx); err != nil {
			t.Fatal(err)
		}
		for _, op := range []func(context.Context, *pb.LedgerRequest) (*pb.Account, error){e.srv.Deposit, e.srv.Bond} {
			if _, err := op(loopback(ctx), &pb.LedgerRequest{Account: m.id(), Amount: uint64(10_000 * ledger.GYM)}); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, m)
	}
	return out
}

// loopback is ctx as seen by the server for a caller on 127.0.0.1.
func loopback(ctx context.Context) context.Context {
	return peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}})
}

// provision heartbeats every member (checking what it is told to probe)
// and reports bandwidth; it returns the last member's assignment, when
// the ring is built.
func provision(t *testing.T, e *env, job string, ms []*member) *pb.Assignment {
	t.Helper()
	ctx := context.Background()
	probes := map[string]string{}
	for _, m := range ms {
		probes[m.id()] = m.probe
	}
	e.advance(t, 2*time.Second)
	var last *pb.Assignment
	for _, m := range ms {
		hb, err := m.heartbeat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		a := hb.Assignment
		if a.Job != job || a.JobState != "provisioning" || len(a.ProbePeers) != len(ms)-1 || len(a.ProbeAddresses) != len(a.ProbePeers) {
			t.Fatalf("provisioning assignment %v", a)
		}
		b := state.ReportBandwidth{Auth: m.auth(), Job: job}
		req := &pb.ReportBandwidthRequest{Job: job}
		for k, p := range a.ProbePeers {
			if p == m.id() || a.ProbeAddresses[k] != probes[p] {
				t.Fatalf("probe peer %s at %q, want another member at %q", p, a.ProbeAddresses[k], probes[p])
			}
			b.Links = append(b.Links, state.Link{Peer: p, Kbps: 1000})
			req.Links = append(req.Links, &pb.Link{Peer: p, Kbps: 1000})
		}
		state.SignBandwidth(m.key, &b)
		req.Auth = pbAuth(b.Auth)
		resp, err := e.node.ReportBandwidth(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Assignment
	}
	return last
}

// TestAssignment: what a node is told over a job's life: the spec, the
// artifact server and whom to probe while provisioning; the ring with
// addresses and the checkpoint to start from while running; the job's
// terminal state and last checkpoint once it ended and the node is idle.
func TestAssignment(t *testing.T) {
	const artifacts = "00ff@127.0.0.1:9552"
	e := startWith(t, DefaultConfig(), true, func(s *Server) { s.Artifacts = artifacts })
	ctx := context.Background()
	ms := staked(t, e, 0, 3)
	sub, err := e.orch.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: &pb.JobSpec{
		Model: "m", Dataset: "d", Epochs: 2, MinNodes: 3, StepsPerEpoch: 100, PromptsPerStep: 4, Seed: 7, Aggregation: "median",
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := provision(t, e, sub.Job, ms)
	if a.JobState != "running" || a.Epoch != 1 || a.Checkpoint != "" || a.Artifacts != artifacts {
		t.Fatalf("running assignment %v", a)
	}
	if s := a.Spec; s == nil || s.Model != "m" || s.Epochs != 2 || s.StepsPerEpoch != 100 || s.PromptsPerStep != 4 || s.Seed != 7 || s.Aggregation != "median" || s.Gspo == nil {
		t.Fatalf("spec %v", a.Spec)
	}
	addrs := map[string]string{}
	for _, m := range ms {
		addrs[m.id()] = m.addr
	}
	r := a.Ring
	if r == nil || len(r.Members) != 3 || len(r.Addresses) != 3 || r.Generation != 1 || r.ConfigId == "" {
		t.Fatalf("ring %v", r)
	}
	for k, id := range r.Members {
		if r.Addresses[k] != addrs[id] {
			t.Fatalf("member %s at %q, want %q", id, r.Addresses[k], addrs[id])
		}
	}

	// Epoch 2 starts from epoch 1's checkpoint.
	if _, err := e.orch.EndEpoch(ctx, &pb.EndEpochRequest{Job: sub.Job, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.orch.PublishCheckpoint(ctx, &pb.PublishCheckpointRequest{Job: sub.Job, Epoch: 1, Cid: "cid-1"}); err != nil {
		t.Fatal(err)
	}
	e.advance(t, 2*time.Second)
	hb, err := ms[0].heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a := hb.Assignment; a.JobState != "running" || a.Epoch != 2 || a.Checkpoint != "cid-1" || a.Ring.ConfigId != r.ConfigId {
		t.Fatalf("epoch 2 assignment %v", a)
	}

	// A node that never took part in a job is idle and told nothing.
	late := staked(t, e, 3, 4)[0]
	e.advance(t, 2*time.Second)
	hb, err = late.heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a := hb.Assignment; a.Job != "" || a.JobState != "" || a.Ring != nil || a.Spec != nil {
		t.Fatalf("a stranger's assignment %v", a)
	}

	// After the last epoch the members are idle; they learn the job ended
	// and its final checkpoint.
	if _, err := e.orch.EndEpoch(ctx, &pb.EndEpochRequest{Job: sub.Job, Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.orch.PublishCheckpoint(ctx, &pb.PublishCheckpointRequest{Job: sub.Job, Epoch: 2, Cid: "cid-2"}); err != nil {
		t.Fatal(err)
	}
	e.advance(t, 2*time.Second)
	for _, m := range ms {
		hb, err := m.heartbeat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a := hb.Assignment; a.Job != sub.Job || a.JobState != "published" || a.Epoch != 2 || a.Checkpoint != "cid-2" || a.Ring != nil || a.Spec != nil {
			t.Fatalf("idle assignment after the job ended %v", a)
		}
	}
	hb, err = late.heartbeat(ctx)
	if err != nil || hb.Assignment.Job != "" {
		t.Fatalf("stranger after the job ended: %v %v", hb, err)
	}
}

// TestProbeAddressSigned: a probe address is part of what the node signs.
func TestProbeAddressSigned(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	ctx := context.Background()
	m := &member{node: &node{key: key("p"), e: e}, addr: "10.1.0.1:9560"}
	r := state.Register{Auth: m.auth(), Address: m.addr, GPUModel: "L4", VRAMMiB: 24576}
	state.SignRegister(m.key, &r)
	_, err := e.node.Register(ctx, &pb.RegisterRequest{Auth: pbAuth(r.Auth), Address: r.Address, GpuModel: r.GPUModel, VramMib: r.VRAMMiB, ProbeAddress: "10.9.9.9:1"})
	wantCode(t, err, codes.Unauthenticated)
	m.probe = "10.1.1.1:9561"
	if err := m.register(ctx); err != nil {
		t.Fatal(err)
	}
	ns, err := e.orch.ListNodes(ctx, &pb.ListNodesRequest{})
	if err != nil || len(ns.Nodes) != 1 || ns.Nodes[0].ProbeAddress != m.probe {
		t.Fatalf("nodes %v %v", ns, err)
	}
}

func (m *member) suspect(ctx context.Context, job, config, suspect, kind string, tamper func(*pb.ReportSuspectRequest)) (*pb.ReportSuspectResponse, error) {
	r := state.ReportSuspect{Auth: m.auth(), Job: job, ConfigID: config, Suspect: suspect, Kind: kind, Evidence: []byte(`{"kind":"` + kind + `"}`)}
	state.SignSuspect(m.key, &r)
	req := &pb.ReportSuspectRequest{Auth: pbAuth(r.Auth), Job: job, ConfigId: config, Suspect: suspect, Kind: kind, Evidence: r.Evidence}
	if tamper != nil {
		tamper(req)
	}
	return m.e.node.ReportSuspect(ctx, req)
}

// TestReportSuspect: reports are signed; the state's refusals keep their
// codes; both neighbours of a node remove it from the ring, and the
// reporter's answer carries the new configuration.
func TestReportSuspect(t *testing.T) {
	rj := &ringJudge{}
	e := startWith(t, DefaultConfig(), true, func(s *Server) { s.Judge = rj })
	ctx := context.Background()
	ms := staked(t, e, 0, 4)
	sub, err := e.orch.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: &pb.JobSpec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3, MaxNodes: 4}})
	if err != nil {
		t.Fatal(err)
	}
	ring := provision(t, e, sub.Job, ms).Ring
	if ring == nil || len(ring.Members) != 4 {
		t.Fatalf("ring %v", ring)
	}
	byID := map[string]*member{}
	for _, m := range ms {
		byID[m.id()] = m
	}
	at := func(k int) *member { return byID[ring.Members[(k+4)%4]] }
	suspect, pred, succ, other := at(0), at(-1), at(1), at(2)

	// Signature checks before anything reaches the state.
	_, err = e.node.ReportSuspect(ctx, &pb.ReportSuspectRequest{Job: sub.Job})
	wantCode(t, err, codes.InvalidArgument)
	for name, tamper := range map[string]func(*pb.ReportSuspectRequest){
		"kind":      func(r *pb.ReportSuspectRequest) { r.Kind = "broken" },
		"suspect":   func(r *pb.ReportSuspectRequest) { r.Suspect = other.id() },
		"config":    func(r *pb.ReportSuspectRequest) { r.ConfigId = "00" },
		"evidence":  func(r *pb.ReportSuspectRequest) { r.Evidence = []byte("{}") },
		"signature": func(r *pb.ReportSuspectRequest) { r.Auth.Signature[5] ^= 1 },
		"signer":    func(r *pb.ReportSuspectRequest) { r.Auth.Node = other.id() },
	} {
		_, err := pred.suspect(ctx, sub.Job, ring.ConfigId, suspect.id(), "timeout", tamper)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("tampered %s: %v, want Unauthenticated", name, err)
		}
	}
	// Refusals of the state: an unknown configuration, a suspect that is
	// not in the ring, an unknown job.
	_, err = pred.suspect(ctx, sub.Job, "0123", suspect.id(), "timeout", nil)
	wantCode(t, err, codes.FailedPrecondition)
	_, err = pred.suspect(ctx, sub.Job, ring.ConfigId, pred.id(), "timeout", nil)
	wantCode(t, err, codes.InvalidArgument)
	_, err = pred.suspect(ctx, "job-99", ring.ConfigId, suspect.id(), "timeout", nil)
	wantCode(t, err, codes.NotFound)

	if len(rj.reports) != 0 {
		t.Fatalf("refused reports reached the judge: %q", rj.reports)
	}
	// One neighbour: recorded, the ring stays; the judge checks its evidence.
	resp, err := pred.suspect(ctx, sub.Job, ring.ConfigId, suspect.id(), "timeout", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := sub.Job + "/" + suspect.id() + `/{"kind":"timeout"}`; len(rj.reports) != 1 || rj.reports[0] != want {
		t.Fatalf("judge saw %q, want [%s]", rj.reports, want)
	}
	if r := resp.Assignment.Ring; r == nil || r.ConfigId != ring.ConfigId {
		t.Fatalf("after one report: %v", resp.Assignment)
	}
	// The other neighbour: the suspect is removed; the answer carries the
	// next generation, and the suspect is no longer assigned the job.
	resp, err = succ.suspect(ctx, sub.Job, ring.ConfigId, suspect.id(), "broken", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Assignment.Ring
	if r == nil || r.Generation != ring.Generation+1 || len(r.Members) != 3 || len(r.Addresses) != 3 || contains(r.Members, suspect.id()) {
		t.Fatalf("after both neighbours reported: %v", resp.Assignment)
	}
	e.advance(t, 2*time.Second)
	hb, err := suspect.heartbeat(ctx)
	if err != nil || hb.Assignment.Job != "" {
		t.Fatalf("removed suspect's assignment: %v %v", hb, err)
	}
	// A late report against the old configuration is refused.
	_, err = other.suspect(ctx, sub.Job, ring.ConfigId, suspect.id(), "timeout", nil)
	wantCode(t, err, codes.FailedPrecondition)
}

// TestEvents: the log is for operators only, and pages by index.
func TestEvents(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	ctx := context.Background()
	for i := range 5 {
		if _, err := e.orch.Deposit(ctx, &pb.LedgerRequest{Account: fmt.Sprint("acct", i), Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.orch.Events(ctx, &pb.EventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := all.Last
	if n < 6 || uint64(len(all.Events)) != n {
		t.Fatalf("%d events, last %d", len(all.Events), n)
	}
	index := func(s string) uint64 {
		ev, err := state.DecodeEvent([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return ev.Index
	}
	for k, s := range all.Events {
		if index(s) != uint64(k+1) {
			t.Fatalf("event %d has index %d", k, index(s))
		}
	}
	if ev, _ := state.DecodeEvent([]byte(all.Events[n-1])); ev.Body.(state.Minted).Account != "acct4" {
		t.Fatalf("last event %s", all.Events[n-1])
	}
	for _, c := range []struct {
		after    uint64
		limit    uint32
		from, to uint64 // indices returned; from > to: none
	}{
		{0, 2, 1, 2},
		{2, 2, 3, 4},
		{n - 1, 10, n, n},
		{n, 10, 1, 0},
		{n + 100, 0, 1, 0},
		{3, 0, 4, n},
		{math.MaxUint64, 1, 1, 0},
		{1 << 63, 1, 1, 0},
	} {
		page, err := e.orch.Events(ctx, &pb.EventsRequest{After: c.after, Limit: c.limit})
		if err != nil {
			t.Errorf("after %d limit %d: %v", c.after, c.limit, err)
			continue
		}
		var got []uint64
		for _, s := range page.Events {
			got = append(got, index(s))
		}
		var want []uint64
		for i := c.from; i <= c.to; i++ {
			want = append(want, i)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || page.Last != n {
			t.Errorf("after %d limit %d: indices %v last %d, want %v last %d", c.after, c.limit, got, page.Last, want, n)
		}
	}

	// Not from elsewhere without the admin token.
	remote := peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 40000}})
	_, err = e.srv.Events(remote, &pb.EventsRequest{})
	wantCode(t, err, codes.PermissionDenied)
	if _, err := e.srv.Events(loopback(ctx), &pb.EventsRequest{}); err != nil {
		t.Fatalf("loopback: %v", err)
	}

	// With an admin token, the token is needed, from anywhere.
	cfg := DefaultConfig()
	cfg.AdminToken = "s3cret"
	te := start(t, cfg, true)
	_, err = te.orch.Events(ctx, &pb.EventsRequest{})
	wantCode(t, err, codes.Unauthenticated)
	_, err = te.orch.Events(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong"), &pb.EventsRequest{})
	wantCode(t, err, codes.Unauthenticated)
	got, err := te.srv.Events(metadata.NewIncomingContext(remote, metadata.Pairs("authorization", "Bearer s3cret")), &pb.EventsRequest{})
	if err != nil || got.Last != 1 || len(got.Events) != 1 || !bytes.Contains([]byte(got.Events[0]), []byte(`"genesis"`)) {
		t.Fatalf("with the token: %v %v", got, err)
	}
}
