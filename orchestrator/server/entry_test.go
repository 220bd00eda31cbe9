package server

import (
	"context"
	"net"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

func entrySpec(submitter string, utility uint64) jobspec.Spec {
	return jobspec.Spec{Model: "zoo/eco-1b", Dataset: "gsm8k", Epochs: 1, MinNodes: 3, Utility: utility, Submitter: submitter}
}

// signedJob is a submission signed by key with sequence seq at the
// env's clock.
func signedJob(t *testing.T, e *env, k []byte, seq uint64, spec jobspec.Spec) *pb.SubmitJobRequest {
	t.Helper()
	b, err := proto.Marshal(jobspec.ToProto(spec))
	if err != nil {
		t.Fatal(err)
	}
	s := nodeauth.SubmitJob{Auth: nodeauth.Auth{Seq: seq, Timestamp: e.clock.Now().UnixMilli()}, Spec: b}
	nodeauth.SignSubmitJob(k, &s)
	return &pb.SubmitJobRequest{SpecBytes: b, Auth: &pb.Auth{Node: s.Node, Seq: s.Seq, TimestampMs: s.Timestamp, Signature: s.Sig}}
}

// from is a call context whose peer is addr (as gRPC sets it for a
// remote caller).
func from(addr string) context.Context {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		panic(err)
	}
	return peer.NewContext(context.Background(), &peer.Peer{Addr: a})
}

// TestSubmitJobFromAnotherHost: a caller that is not on loopback cannot
// submit without a key or the operator's token; a key with an account can,
// within its bounds.
func TestSubmitJobFromAnotherHost(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	remote := from("10.9.8.7:40000")
	spec := jobspec.ToProto(entrySpec("", 0))

	_, err := e.srv.SubmitJob(remote, &pb.SubmitJobRequest{Spec: spec})
	wantCode(t, err, codes.PermissionDenied)
	// Borrowing another account's stake for priority: refused too.
	_, err = e.srv.SubmitJob(remote, &pb.SubmitJobRequest{Spec: jobspec.ToProto(entrySpec("treasury-friend", 1_000_000))})
	wantCode(t, err, codes.PermissionDenied)

	alice, bob := key("alice"), key("bob")
	aliceID := (&node{key: alice}).id()
	// No account yet.
	_, err = e.srv.SubmitJob(remote, signedJob(t, e, alice, 1, entrySpec("", 0)))
	wantCode(t, err, codes.PermissionDenied)
	if _, err := e.eng.Do(context.Background(), state.Deposit{Account: aliceID, Amount: 5000 * ledger.GYM}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.Do(context.Background(), state.Bond{Account: aliceID, Amount: 2000 * ledger.GYM}); err != nil {
		t.Fatal(err)
	}
	// Signed by bob, claiming alice's key: the signature does not verify.
	req := signedJob(t, e, bob, 2, entrySpec("", 0))
	req.Auth.Node = aliceID
	_, err = e.srv.SubmitJob(remote, req)
	wantCode(t, err, codes.Unauthenticated)
	// Spec bytes changed after signing.
	req = signedJob(t, e, alice, 2, entrySpec("", 0))
	req.SpecBytes = append(req.SpecBytes, 0x18, 0x05) // epochs = 5
	_, err = e.srv.SubmitJob(remote, req)
	wantCode(t, err, codes.Unauthenticated)
	// Naming another submitter; a utility beyond 1 + 2000/1000.
	_, err = e.srv.SubmitJob(remote, signedJob(t, e, alice, 3, entrySpec("someone-rich", 0)))
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.srv.SubmitJob(remote, signedJob(t, e, alice, 4, entrySpec("", 4)))
	wantCode(t, err, codes.PermissionDenied)
	// Within bounds: accepted, submitter is the key.
	resp, err := e.srv.SubmitJob(remote, signedJob(t, e, alice, 5, entrySpec("", 3)))
	if err != nil {
		t.Fatal(err)
	}
	j, err := e.orch.GetJob(context.Background(), &pb.GetJobRequest{Job: resp.Job})
	if err != nil || j.Spec.Submitter != aliceID || j.Spec.Utility != 3 {
		t.Fatalf("job %v: %v", j, err)
	}
	// The same signed request again is a replay.
	_, err = e.srv.SubmitJob(remote, signedJob(t, e, alice, 5, entrySpec("", 3)))
	wantCode(t, err, codes.Unauthenticated)
}

// TestSubmitJobOperatorToken: with an admin token, an unsigned submission
// needs it, wherever it comes from.
func TestSubmitJobOperatorToken(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AdminToken = "s3cret"
	e := start(t, cfg, true)
	spec := jobspec.ToProto(entrySpec("", 1000))
	_, err := e.orch.SubmitJob(context.Background(), &pb.SubmitJobRequest{Spec: spec})
	wantCode(t, err, codes.Unauthenticated)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	if _, err := e.orch.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	remote := metadata.NewIncomingContext(from("10.9.8.7:1"), metadata.Pairs("authorization", "Bearer s3cret"))
	if _, err := e.srv.SubmitJob(remote, &pb.SubmitJobRequest{Spec: spec}); err != nil {
		t.Fatal(err)
	}
}

// TestSubmitJobRates: per-address and per-key token buckets, and the cap
// on a key's open jobs.
func TestSubmitJobRates(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AddrBurst, cfg.SubmitBurst = 3, 2
	e := start(t, cfg, true)
	for i := range 4 {
		_, err := e.srv.SubmitJob(from("10.0.0.1:1"), &pb.SubmitJobRequest{Spec: jobspec.ToProto(entrySpec("", 0))})
		if i < 3 {
			wantCode(t, err, codes.PermissionDenied)
		} else {
			wantCode(t, err, codes.ResourceExhausted)
		}
	}
	// Another address has its own bucket.
	_, err := e.srv.SubmitJob(from("10.0.0.2:1"), &pb.SubmitJobRequest{Spec: jobspec.ToProto(entrySpec("", 0))})
	wantCode(t, err, codes.PermissionDenied)

	k := key("carol")
	id := (&node{key: k}).id()
	// Each job escrows the most it can pay (100 GYM): eight need 800.
	if _, err := e.eng.Do(context.Background(), state.Deposit{Account: id, Amount: 800 * ledger.GYM}); err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	submit := func(addr string) error {
		seq++
		_, err := e.srv.SubmitJob(from(addr), signedJob(t, e, k, seq, entrySpec("", 0)))
		return err
	}
	// The key's bucket (burst 2) holds whatever address it comes from.
	for i := range 3 {
		err := submit("10.0.1." + strconv.Itoa(i) + ":1")
		if i < 2 && err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			wantCode(t, err, codes.ResourceExhausted)
		}
	}
	// Refilled over time, up to the open-job cap (8).
	n := 2
	for i := range 20 {
		e.clock.Advance(11_000_000_000)                                         // 11 s: one token each for key and address
		if ok, err := e.eng.Campaign(context.Background()); !ok || err != nil { // renew the engine's lease
			t.Fatal(ok, err)
		}
		if err := submit("10.0.2." + strconv.Itoa(i) + ":1"); err != nil {
			wantCode(t, err, codes.ResourceExhausted)
			break
		}
		n++
	}
	if n != state.DefaultConfig().MaxOpenPerSubmitter {
		t.Fatalf("%d open jobs accepted, want %d", n, state.DefaultConfig().MaxOpenPerSubmitter)
	}
}

// TestLedgerRequestID: a deposit retried with its request id is
// credited once.
func TestLedgerRequestID(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	ctx := context.Background()
	req := &pb.LedgerRequest{Account: "dave", Amount: 7 * uint64(ledger.GYM), RequestId: "deposit-dave-1"}
	for range 3 {
		a, err := e.orch.Deposit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if a.Free != 7*uint64(ledger.GYM) {
			t.Fatalf("free %d after a retried deposit, want %d", a.Free, 7*uint64(ledger.GYM))
		}
	}
	// The same id for another amount is refused.
	_, err := e.orch.Deposit(ctx, &pb.LedgerRequest{Account: "dave", Amount: 8, RequestId: "deposit-dave-1"})
	wantCode(t, err, codes.FailedPrecondition)
}

// TestNodeRepliesCarryTime: hanzod's clock is in the replies and, for a
// refused stale request, in the trailer.
func TestNodeRepliesCarryTime(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	n := &node{key: key("skewed"), e: e}
	r, err := n.register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.ServerTimeMs != e.clock.Now().UnixMilli() {
		t.Fatalf("server time %d, want %d", r.ServerTimeMs, e.clock.Now().UnixMilli())
	}
	h := state.Heartbeat{Auth: n.auth()}
	h.Timestamp -= 5 * 60 * 1000
	state.SignHeartbeat(n.key, &h)
	var tr metadata.MD
	_, err = e.node.Heartbeat(context.Background(), &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)}, grpc.Trailer(&tr))
	wantCode(t, err, codes.Unauthenticated)
	if got := tr.Get(TimeTrailer); len(got) != 1 || got[0] != strconv.FormatInt(e.clock.Now().UnixMilli(), 10) {
		t.Fatalf("trailer %v", tr)
	}
}

// FuzzSubmitJob: a signed submission of arbitrary spec bytes by a key
// with an account never crashes the server and is answered with an
// accepted job or a refusal saying what is wrong.
func FuzzSubmitJob(f *testing.F) {
	for _, s := range []jobspec.Spec{entrySpec("", 0), entrySpec("", 3), {Model: "x", Epochs: -1}} {
		b, _ := proto.Marshal(jobspec.ToProto(s))
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff})
	cfg := DefaultConfig()
	cfg.SubmitRate, cfg.SubmitBurst, cfg.AddrRate, cfg.AddrBurst = 1e9, 1<<30, 1e9, 1<<30
	e := start(f, cfg, true)
	k := key("fuzzer")
	id := (&node{key: k}).id()
	if _, err := e.eng.Do(context.Background(), state.Deposit{Account: id, Amount: 5000 * ledger.GYM}); err != nil {
		f.Fatal(err)
	}
	var seq uint64
	f.Fuzz(func(t *testing.T, spec []byte) {
		seq++
		s := nodeauth.SubmitJob{Auth: nodeauth.Auth{Seq: seq, Timestamp: e.clock.Now().UnixMilli()}, Spec: spec}
		nodeauth.SignSubmitJob(k, &s)
		req := &pb.SubmitJobRequest{SpecBytes: spec, Auth: &pb.Auth{Node: s.Node, Seq: s.Seq, TimestampMs: s.Timestamp, Signature: s.Sig}}
		_, err := e.srv.SubmitJob(from("10.0.0.9:1"), req)
		switch status.Code(err) {
		case codes.OK, codes.InvalidArgument, codes.PermissionDenied, codes.ResourceExhausted:
		default:
			t.Fatalf("spec bytes %x: %v", spec, err)
		}
	})
}
