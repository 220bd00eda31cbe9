package server

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/keys/edkey/edkeytest"
	"github.com/zooai/gym/orchestrator/state"
)

// Every key and signature edkey refuses is refused at the gRPC edge, before
// the engine sees the request.
func TestNodeAuthRefusesBadKeysAndSignatures(t *testing.T) {
	e := start(t, DefaultConfig(), true)
	ctx := context.Background()
	a := &node{key: key("a"), e: e}
	if _, err := a.register(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range edkeytest.BadKeys(a.key.Public().(ed25519.PublicKey)) {
		h := state.Heartbeat{Auth: a.auth()}
		state.SignHeartbeat(a.key, &h)
		h.Node = hex.EncodeToString(k.Key)
		_, err := e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)})
		wantCode(t, err, codes.InvalidArgument)
	}
	// The forgery: the identity key with R = identity, S = 0.
	forged := &pb.Auth{Node: hex.EncodeToString(edkeytest.Identity), Seq: 1, TimestampMs: e.clock.Now().UnixMilli(), Signature: edkeytest.Forgery}
	_, err := e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: forged})
	wantCode(t, err, codes.InvalidArgument)
	h := state.Heartbeat{Auth: a.auth()}
	state.SignHeartbeat(a.key, &h)
	for _, s := range edkeytest.BadSignatures(h.Sig) {
		bad := h.Auth
		bad.Sig = s.Sig
		_, err := e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(bad)})
		wantCode(t, err, codes.Unauthenticated)
	}
	// The valid signature gets past authentication (to the heartbeat rate).
	_, err = e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)})
	if c := status.Code(err); c == codes.Unauthenticated || c == codes.InvalidArgument {
		t.Fatalf("the valid heartbeat: %v", err)
	}
}
