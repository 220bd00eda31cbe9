package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
)

// gateJudge answers with resp, after entered is signalled and gate lets
// it through (nil gate: at once).
type gateJudge struct {
	fakeJudge
	entered chan struct{}
	gate    chan struct{}
}

func (g *gateJudge) Submit(ctx context.Context, file, traces []byte) (DeltaVerdict, error) {
	if g.gate != nil {
		g.entered <- struct{}{}
		<-g.gate
	}
	return g.fakeJudge.Submit(ctx, file, traces)
}

// signedBy is a stand-in file whose last 32 bytes (the trailer's key) are
// node's.
func signedBy(node byte) []byte {
	return append([]byte("file"), bytes.Repeat([]byte{node}, 32)...)
}

func wantExhausted(t *testing.T, err error, msg string) {
	t.Helper()
	wantCode(t, err, codes.ResourceExhausted)
	if !strings.Contains(status.Convert(err).Message(), msg) {
		t.Fatalf("message %q lacks %q", status.Convert(err).Message(), msg)
	}
}

// TestSubmitDeltaLimits: SubmitDelta is bounded per address (rate and
// files in flight), per node — charged only for files whose signature the
// judge verified, so a forger cannot spend a node's allowance — and in
// flight overall, each refusal a ResourceExhausted that says which limit
// and counted in the metrics.
func TestSubmitDeltaLimits(t *testing.T) {
	ctx := context.Background()
	t.Run("address rate", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DeltaAddrRate, cfg.DeltaAddrBurst = 1, 3
		j := &gateJudge{}
		j.resp = DeltaVerdict{Reason: "signature", Detail: "not a registered node"}
		e := startWith(t, cfg, true, func(s *Server) { s.Judge = j })
		for i := range 3 {
			if _, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(byte(i))}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(9)})
		wantExhausted(t, err, "address 127.0.0.1 exceeds 1 deltas/s (burst 3)")
		if len(j.got) != 3 {
			t.Fatalf("the judge saw %d files, want 3", len(j.got))
		}
		e.clock.Advance(time.Second)
		if _, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(9)}); err != nil {
			t.Fatalf("after a second: %v", err)
		}
		var b strings.Builder
		e.srv.WriteMetrics(&b)
		if !strings.Contains(b.String(), `gym_hanzod_deltas_refused_total{limit="address_rate"} 1`+"\n") {
			t.Fatalf("metrics:\n%s", b.String())
		}
	})
	t.Run("node rate, verified signers only", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DeltaNodeRate, cfg.DeltaNodeBurst = 1, 2
		j := &gateJudge{}
		e := startWith(t, cfg, true, func(s *Server) { s.Judge = j })
		// Forgeries of node 7's key: the judge refuses the signature, and
		// node 7's allowance is untouched.
		j.resp = DeltaVerdict{Reason: "signature", Detail: "does not verify"}
		for range 5 {
			if _, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(7)}); err != nil {
				t.Fatal(err)
			}
		}
		j.resp = DeltaVerdict{Accepted: true, Digest: "d"}
		for range 2 {
			if _, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(7)}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(7)})
		wantExhausted(t, err, "node 0707070707070707070707070707070707070707070707070707070707070707 exceeds 1 deltas/s (burst 2)")
		// Another node is not affected.
		if _, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(8)}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		if _, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(7)}); err != nil {
			t.Fatalf("after a second: %v", err)
		}
	})
	t.Run("in flight", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DeltaAddrInFlight, cfg.DeltaInFlight = 1, 1
		j := &gateJudge{entered: make(chan struct{}, 1), gate: make(chan struct{})}
		j.resp = DeltaVerdict{Accepted: true}
		e := startWith(t, cfg, true, func(s *Server) { s.Judge = j })
		done := make(chan error, 1)
		go func() {
			_, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(1)})
			done <- err
		}()
		<-j.entered
		_, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(2)})
		wantExhausted(t, err, "address 127.0.0.1 already has 1 deltas being judged (at most 1 at once)")
		// Another address (simulated: the limit is per peer host) waits
		// for the one judging slot until its deadline.
		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err = e.srv.admitDelta(dctx, "192.0.2.1", "")
		wantExhausted(t, err, "hanzod is judging 1 deltas at once")
		var b strings.Builder
		e.srv.WriteMetrics(&b)
		for _, want := range []string{`gym_hanzod_deltas_refused_total{limit="address_in_flight"} 1`, `gym_hanzod_deltas_refused_total{limit="busy"} 1`, "gym_hanzod_deltas_in_flight 1"} {
			if !strings.Contains(b.String(), want+"\n") {
				t.Errorf("metrics lack %q:\n%s", want, b.String())
			}
		}
		close(j.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The slots are free again.
		j.gate = nil
		if _, err := e.node.SubmitDelta(ctx, &pb.SubmitDeltaRequest{Delta: signedBy(2)}); err != nil {
			t.Fatal(err)
		}
	})
}
