package server

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
)

// TestRegisterPerAddress: one address registers few new keys without
// stake (RegisterNewBurst, then RegisterNewRate), while known keys and
// staked ones register again within its general registration bucket; a
// flood of registrations is refused before its signatures are checked.
func TestRegisterPerAddress(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RegisterNewRate, cfg.RegisterNewBurst = 1.0/60, 3
	cfg.RegisterAddrRate, cfg.RegisterAddrBurst = 1, 8
	e := start(t, cfg, true)
	ctx := context.Background()
	fresh := make([]*node, 4)
	for i := range fresh {
		fresh[i] = &node{key: key(fmt.Sprint("fresh", i)), e: e}
	}
	for i := range 3 {
		if _, err := fresh[i].register(ctx); err != nil {
			t.Fatalf("new key %d: %v", i, err)
		}
	}
	_, err := fresh[3].register(ctx)
	wantCode(t, err, codes.ResourceExhausted)
	// A known key registers again (a restarted worker).
	if _, err := fresh[0].register(ctx); err != nil {
		t.Fatalf("re-registration: %v", err)
	}
	// A new key that bonded a node's stake is not a free identity.
	staked := &node{key: key("staked"), e: e}
	for _, c := range []state.Command{state.Deposit{Account: staked.id(), Amount: 10_000 * ledger.GYM}, state.Bond{Account: staked.id(), Amount: 10_000 * ledger.GYM}} {
		if _, err := e.eng.Do(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := staked.register(ctx); err != nil {
		t.Fatalf("staked new key: %v", err)
	}
	// A minute later the address may add one more free key.
	e.clock.Advance(61 * time.Second)
	if ok, err := e.eng.Campaign(ctx); !ok || err != nil {
		t.Fatalf("renew: %v %v", ok, err)
	}
	if _, err := fresh[3].register(ctx); err != nil {
		t.Fatalf("a minute later: %v", err)
	}
	// The address's bucket (burst 8, refilled to full by the minute, one
	// token taken since): a flood with bad signatures is refused as too
	// many, not checked, once it is spent.
	var codesSeen []codes.Code
	for i := range 10 {
		r := state.Register{Auth: state.Auth{Node: fresh[0].id(), Seq: uint64(100 + i), Timestamp: e.clock.Now().UnixMilli(), Sig: make([]byte, 64)},
			Address: "10.1.0.1:9560", GPUModel: "L4", VRAMMiB: 1}
		_, err := e.node.Register(ctx, &pb.RegisterRequest{Auth: pbAuth(r.Auth), Address: r.Address, GpuModel: r.GPUModel, VramMib: r.VRAMMiB})
		codesSeen = append(codesSeen, status.Code(err))
	}
	for i, c := range codesSeen {
		want := codes.Unauthenticated
		if i >= 7 {
			want = codes.ResourceExhausted
		}
		if c != want {
			t.Fatalf("flood: codes %v, want 7 Unauthenticated then ResourceExhausted", codesSeen)
		}
	}
}

// TestRequestBoundToHanzod: a node request names its hanzod (the audience
// in its signed bytes), so a registration signed for one hanzod and
// replayed to another is refused there; the refusal carries the other's
// key, which is how a node learns whom to sign for.
func TestRequestBoundToHanzod(t *testing.T) {
	ka, kb := key("hanzod-a").Public().(ed25519.PublicKey), key("hanzod-b").Public().(ed25519.PublicKey)
	a := startWith(t, DefaultConfig(), true, func(s *Server) { s.Instance = ka })
	b := startWith(t, DefaultConfig(), true, func(s *Server) { s.Instance = kb })
	ctx := context.Background()
	n := &node{key: key("n"), e: a}
	auth := n.auth()
	auth.Audience = ka
	r := state.Register{Auth: auth, Address: "10.1.0.1:9560", GPUModel: "L4", VRAMMiB: 1}
	state.SignRegister(n.key, &r)
	req := &pb.RegisterRequest{Auth: pbAuth(r.Auth), Address: r.Address, GpuModel: r.GPUModel, VramMib: r.VRAMMiB}
	var tr metadata.MD
	if _, err := a.node.Register(ctx, req, grpc.Trailer(&tr)); err != nil {
		t.Fatalf("at its own hanzod: %v", err)
	}
	if got := tr.Get(KeyTrailer); len(got) != 1 || got[0] != hex.EncodeToString(ka) {
		t.Fatalf("trailer %s = %v, want hanzod a's key", KeyTrailer, got)
	}
	tr = nil
	_, err := b.node.Register(ctx, req, grpc.Trailer(&tr))
	wantCode(t, err, codes.Unauthenticated)
	if got := tr.Get(KeyTrailer); len(got) != 1 || got[0] != hex.EncodeToString(kb) {
		t.Fatalf("refusal's trailer %s = %v, want hanzod b's key", KeyTrailer, got)
	}
	// Signed for no hanzod: refused by one that has a key.
	m := &node{key: key("m"), e: a}
	ma := m.auth()
	ma.Audience = nil
	mr := state.Register{Auth: ma, Address: "10.1.0.2:9560", GPUModel: "L4", VRAMMiB: 1}
	state.SignRegister(m.key, &mr)
	if _, err := a.node.Register(ctx, &pb.RegisterRequest{Auth: pbAuth(mr.Auth), Address: mr.Address, GpuModel: mr.GPUModel, VramMib: mr.VRAMMiB}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a request without audience: %v", err)
	}
	// Every kind: a heartbeat for a, sent to b, is refused too.
	h := state.Heartbeat{Auth: n.auth()}
	h.Audience = ka
	state.SignHeartbeat(n.key, &h)
	_, err = b.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)})
	wantCode(t, err, codes.Unauthenticated)
}

// TestSeqFarAheadRefused: a heartbeat numbered 2^64 - 1 is refused, so
// it cannot lock its node out; the node's next heartbeat is accepted.
func TestSeqFarAheadRefused(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	ctx := context.Background()
	n := &node{key: key("n"), e: e}
	if _, err := n.register(ctx); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	h := state.Heartbeat{Auth: state.Auth{Seq: math.MaxUint64, Timestamp: e.clock.Now().UnixMilli()}}
	state.SignHeartbeat(n.key, &h)
	_, err := e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)})
	wantCode(t, err, codes.Unauthenticated)
	if _, err := n.heartbeat(ctx); err != nil {
		t.Fatalf("the node's next heartbeat: %v", err)
	}
}
