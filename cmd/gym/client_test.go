package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestExplain: every gRPC status becomes a message that names the address
// or hanzod's reason and what to do; the code is kept for callers.
func TestExplain(t *testing.T) {
	plain := &client{target: target{hostport: "h:9550"}}
	tlsc := &client{target: target{hostport: "h:9550", tls: true}}
	for _, tc := range []struct {
		c    *client
		code codes.Code
		msg  string
		want string
	}{
		{plain, codes.Unavailable, "engine: not the leader", "standby replica"},
		{plain, codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp h:9550: connect: connection refused"`, "nothing listens at h:9550: is hanzod running?"},
		{tlsc, codes.Unavailable, "authentication handshake failed: tls: first record does not look like a TLS handshake", "use --orchestrator grpc://h:9550"},
		{tlsc, codes.Unavailable, "tls: failed to verify certificate: x509: certificate signed by unknown authority", "pass --tls-ca FILE"},
		{plain, codes.Unavailable, `connection error: desc = "error reading server preface: EOF"`, "use --orchestrator grpcs://h:9550 with --tls-ca FILE"},
		{plain, codes.Unavailable, "name resolver error: produced zero addresses", "cannot resolve"},
		{plain, codes.Unavailable, "something else", "cannot reach hanzod at h:9550: something else"},
		{plain, codes.DeadlineExceeded, "", "did not answer within 3s (raise --timeout"},
		{plain, codes.InvalidArgument, "state: invalid request: epochs 0 outside 1..100000", "hanzod refused the request: state: invalid request: epochs 0"},
		{plain, codes.NotFound, `job "x" not found`, `op: job "x" not found`},
		{plain, codes.FailedPrecondition, "job is paused", "not possible in the current state: job is paused"},
		{plain, codes.PermissionDenied, "loopback only", "not allowed: loopback only"},
		{plain, codes.Unauthenticated, "bad token", "did not accept our credentials: bad token"},
		{plain, codes.ResourceExhausted, "20 jobs open", "at a limit: 20 jobs open (retry later"},
		{plain, codes.Unimplemented, "unknown service", "does not implement this call"},
		{plain, codes.Internal, "boom", "hanzod failed (Internal): boom (its log says more)"},
	} {
		err := tc.c.explain("op", 3*time.Second, status.Error(tc.code, tc.msg))
		var ce *callError
		if !errors.As(err, &ce) || ce.code != tc.code || !strings.HasPrefix(err.Error(), "op: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %q: got %v, want %q", tc.code, tc.msg, err, tc.want)
		}
	}
	if err := plain.explain("op", time.Second, errors.New("plain")); err == nil || err.Error() != "op: plain" {
		t.Errorf("non-status error: %v", err)
	}
}
