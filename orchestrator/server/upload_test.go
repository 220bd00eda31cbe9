package server

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/protocol/checkpkg"
	"github.com/zooai/gym/protocol/nodeauth"
)

// chunkOf splits b into messages of one part kind.
func chunksOf(b []byte, size int, part func([]byte) *pb.DeltaChunk) []*pb.DeltaChunk {
	var out []*pb.DeltaChunk
	for off := 0; off < len(b); off += size {
		out = append(out, part(b[off:min(len(b), off+size)]))
	}
	return out
}

func deltaPart(b []byte) *pb.DeltaChunk { return &pb.DeltaChunk{Part: &pb.DeltaChunk_Delta{Delta: b}} }
func tracesPart(b []byte) *pb.DeltaChunk {
	return &pb.DeltaChunk{Part: &pb.DeltaChunk_Traces{Traces: b}}
}

// announce is n's signed announcement of file and traces for hanzod.
func (n *node) announce(hanzod ed25519.PublicKey, file, traces []byte) *pb.DeltaChunk {
	return n.announceAs(hanzod, checkpkg.FileDigest(file), uint64(len(file)), uint64(len(traces)))
}

// announceAs is n's signed announcement of a file with the given digest
// and sizes.
func (n *node) announceAs(hanzod ed25519.PublicKey, digest string, deltaBytes, tracesBytes uint64) *pb.DeltaChunk {
	u := nodeauth.UploadDelta{Auth: nodeauth.Auth{Timestamp: n.e.clock.Now().UnixMilli(), Audience: hanzod},
		Job: "job-00000001", Digest: digest, DeltaBytes: deltaBytes, TracesBytes: tracesBytes}
	nodeauth.SignUpload(n.key, &u)
	return &pb.DeltaChunk{Part: &pb.DeltaChunk_Header{Header: &pb.DeltaUpload{Auth: pbAuth(u.Auth), Job: u.Job, Digest: u.Digest,
		DeltaBytes: u.DeltaBytes, TracesBytes: u.TracesBytes}}}
}

// send sends msgs as one upload and returns the answer.
func (e *env) send(ctx context.Context, msgs ...*pb.DeltaChunk) (*pb.SubmitDeltaResponse, error) {
	st, err := e.node.UploadDelta(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if err := st.Send(m); err != nil {
			break
		}
	}
	return st.CloseAndRecv()
}

// upload sends file and traces as n would, in chunks of 64 KiB.
func (n *node) upload(ctx context.Context, file, traces []byte) (*pb.SubmitDeltaResponse, error) {
	msgs := append([]*pb.DeltaChunk{n.announce(n.e.srv.Instance, file, traces)}, chunksOf(file, 64<<10, deltaPart)...)
	return n.e.send(ctx, append(msgs, chunksOf(traces, 64<<10, tracesPart)...)...)
}

func registered(t *testing.T, e *env, name string) *node {
	t.Helper()
	n := &node{key: key(name), e: e}
	if _, err := n.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantMessage(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	wantCode(t, err, code)
	if !strings.Contains(status.Convert(err).Message(), msg) {
		t.Fatalf("message %q lacks %q", status.Convert(err).Message(), msg)
	}
}

// TestUploadDelta: an upload is announced by the file's signer for this
// hanzod, its head preflighted before anything more is read, then
// received exactly as announced and judged.
func TestUploadDelta(t *testing.T) {
	ctx := context.Background()
	t.Run("no judge", func(t *testing.T) {
		e := start(t, DefaultConfig(), true)
		_, err := e.send(ctx, deltaPart([]byte("x")))
		wantCode(t, err, codes.Unavailable)
	})
	j := &fakeJudge{}
	instance, _, _ := ed25519.GenerateKey(bytes.NewReader(make([]byte, 64)))
	e := startWith(t, DefaultConfig(), true, func(s *Server) { s.Judge = j; s.Instance = instance })
	n := registered(t, e, "uploader")
	file := bytes.Repeat([]byte("0123456789abcdef"), 20_000) // 320 000 bytes: five chunks
	traces := bytes.Repeat([]byte("t"), 100_000)

	// Accepted: the judge sees the head (the first chunk), then the file
	// and traces exactly.
	j.resp = DeltaVerdict{Accepted: true, Digest: "ab"}
	got, err := n.upload(ctx, file, traces)
	if err != nil || !got.Accepted || got.Digest != "ab" {
		t.Fatalf("upload: %v %v", got, err)
	}
	if len(j.heads) != 1 || !bytes.Equal(j.heads[0], file[:64<<10]) || !bytes.Equal(j.got[0], file) || !bytes.Equal(j.traces[0], traces) {
		t.Fatalf("the judge saw heads %d, files %d", len(j.heads), len(j.got))
	}
	// A verdict from the head: answered without the file being judged.
	j.refuse, j.pre = true, DeltaVerdict{Reason: "not_member", Detail: "the node is not in the job's ring"}
	got, err = n.upload(ctx, file, traces)
	if err != nil || got.Accepted || got.Reason != "not_member" || len(j.got) != 1 {
		t.Fatalf("preflight refusal: %v %v (%d files judged)", got, err, len(j.got))
	}
	j.refuse = false

	// Refused before the judge: a first message that is not the header;
	// a header another key signed, or signed for another hanzod; an
	// unregistered node; digests and sizes out of bounds.
	_, err = e.send(ctx, deltaPart(file[:10]))
	wantMessage(t, err, codes.InvalidArgument, "starts with its header")
	forged := n.announce(instance, file, nil)
	forged.GetHeader().DeltaBytes++
	_, err = e.send(ctx, forged, deltaPart(file))
	wantCode(t, err, codes.Unauthenticated)
	other, _, _ := ed25519.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{1}, 64)))
	_, err = e.send(ctx, n.announce(other, file, nil), deltaPart(file))
	wantCode(t, err, codes.Unauthenticated)
	stranger := &node{key: key("stranger"), e: e}
	_, err = e.send(ctx, stranger.announce(instance, file, nil), deltaPart(file))
	wantMessage(t, err, codes.NotFound, "not registered")
	_, err = e.send(ctx, n.announceAs(instance, checkpkg.FileDigest(file), 1<<40, 0))
	wantMessage(t, err, codes.InvalidArgument, "this hanzod takes 1 to")
	if len(j.heads) != 2 {
		t.Fatalf("the judge saw %d heads, want 2", len(j.heads))
	}

	// Not as announced: more bytes, fewer, traces before the file's end,
	// a second header.
	for name, msgs := range map[string][]*pb.DeltaChunk{
		"more":          {n.announce(instance, file, nil), deltaPart(file), deltaPart([]byte("x"))},
		"fewer":         {n.announce(instance, file, nil), deltaPart(file[:1000])},
		"traces first":  {n.announce(instance, file, traces), deltaPart(file[:1000]), tracesPart(traces)},
		"second header": {n.announce(instance, file, nil), deltaPart(file[:1000]), n.announce(instance, file, nil)},
	} {
		_, err := e.send(ctx, msgs...)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if len(j.got) != 1 {
		t.Fatalf("the judge judged %d files, want 1", len(j.got))
	}
}

// TestUploadLimits: uploads are bounded per address (rate and uploads in
// flight, before the announcement's signature is checked), per node (once
// it is), and in flight in all; each refusal a ResourceExhausted that
// says which limit, counted in the metrics.
func TestUploadLimits(t *testing.T) {
	ctx := context.Background()
	file := []byte("a delta file")
	t.Run("address rate", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DeltaAddrRate, cfg.DeltaAddrBurst = 1, 3
		j := &fakeJudge{resp: DeltaVerdict{Accepted: true}}
		e := startWith(t, cfg, true, func(s *Server) { s.Judge = j })
		stranger := &node{key: key("stranger"), e: e}
		// Unauthenticated announcements spend the address's tokens too.
		for range 3 {
			_, err := e.send(ctx, stranger.announce(nil, file, nil), deltaPart(file))
			wantCode(t, err, codes.NotFound)
		}
		n := registered(t, e, "n")
		_, err := n.upload(ctx, file, nil)
		wantMessage(t, err, codes.ResourceExhausted, "address 127.0.0.1 exceeds 1 uploads/s (burst 3)")
		e.clock.Advance(time.Second)
		if _, err := n.upload(ctx, file, nil); err != nil {
			t.Fatalf("after a second: %v", err)
		}
		var b strings.Builder
		e.srv.WriteMetrics(&b)
		for _, want := range []string{`gym_hanzod_deltas_refused_total{limit="address_rate"} 1`, `gym_hanzod_deltas_refused_total{limit="announcement"} 3`} {
			if !strings.Contains(b.String(), want+"\n") {
				t.Fatalf("metrics lack %q:\n%s", want, b.String())
			}
		}
	})
	t.Run("node rate", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DeltaNodeRate, cfg.DeltaNodeBurst = 1, 2
		j := &fakeJudge{resp: DeltaVerdict{Accepted: true}}
		e := startWith(t, cfg, true, func(s *Server) { s.Judge = j })
		n, m := registered(t, e, "n"), registered(t, e, "m")
		// Announcements naming n's key without its signature do not touch
		// its allowance.
		for range 5 {
			forged := m.announce(nil, file, nil)
			forged.GetHeader().Auth.Node = n.id()
			_, err := e.send(ctx, forged, deltaPart(file))
			wantCode(t, err, codes.Unauthenticated)
		}
		for range 2 {
			if _, err := n.upload(ctx, file, nil); err != nil {
				t.Fatal(err)
			}
		}
		_, err := n.upload(ctx, file, nil)
		wantMessage(t, err, codes.ResourceExhausted, "exceeds 1 uploads/s (burst 2)")
		if _, err := m.upload(ctx, file, nil); err != nil {
			t.Fatalf("another node: %v", err)
		}
		// A file that is not what its node announced costs it once more.
		j.resp = DeltaVerdict{Reason: "format", Detail: "digest differs"}
		e.clock.Advance(2 * time.Second)
		if _, err := n.upload(ctx, file, nil); err != nil {
			t.Fatal(err)
		}
		_, err = n.upload(ctx, file, nil)
		wantMessage(t, err, codes.ResourceExhausted, "exceeds 1 uploads/s")
	})
	t.Run("in flight", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DeltaAddrInFlight, cfg.DeltaInFlight = 1, 1
		j := &fakeJudge{resp: DeltaVerdict{Accepted: true}, entered: make(chan struct{}, 1), gate: make(chan struct{})}
		e := startWith(t, cfg, true, func(s *Server) { s.Judge = j })
		n := registered(t, e, "n")
		done := make(chan error, 1)
		go func() {
			_, err := n.upload(ctx, file, nil)
			done <- err
		}()
		<-j.entered
		_, err := n.upload(ctx, file, nil)
		wantMessage(t, err, codes.ResourceExhausted, "address 127.0.0.1 already has 1 uploads in flight (at most 1 at once)")
		var b strings.Builder
		e.srv.WriteMetrics(&b)
		for _, want := range []string{`gym_hanzod_deltas_refused_total{limit="address_in_flight"} 1`, "gym_hanzod_deltas_in_flight 1"} {
			if !strings.Contains(b.String(), want+"\n") {
				t.Errorf("metrics lack %q:\n%s", want, b.String())
			}
		}
		close(j.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		j.mu.Lock()
		j.gate = nil
		j.mu.Unlock()
		if _, err := n.upload(ctx, file, nil); err != nil {
			t.Fatalf("the slots are free again: %v", err)
		}
	})
}

// TestUploadStalled: an upload that stops sending is ended at
// UploadTimeout and its slots freed. (Nothing else depends on the
// timeout's length: a slow machine only makes the stall start later.)
func TestUploadStalled(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.UploadTimeout, cfg.DeltaInFlight, cfg.DeltaAddrInFlight = time.Second, 1, 1
	j := &fakeJudge{resp: DeltaVerdict{Accepted: true}}
	e := startWith(t, cfg, true, func(s *Server) { s.Judge = j })
	n := registered(t, e, "n")
	file := bytes.Repeat([]byte("x"), 1000)
	st, err := e.node.UploadDelta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(n.announce(nil, file, nil))
	st.Send(deltaPart(file[:100])) // and nothing more, the stream left open
	var out pb.SubmitDeltaResponse
	wantMessage(t, st.RecvMsg(&out), codes.DeadlineExceeded, "did not finish within 1s")
	waitFor(t, func() bool {
		var b strings.Builder
		e.srv.WriteMetrics(&b)
		return strings.Contains(b.String(), "gym_hanzod_deltas_in_flight 0\n")
	})
	if len(j.got) != 0 {
		t.Fatal("a stalled upload reached the judge")
	}
}

// rawCodec sends bytes as they are, under the proto codec's name, so the
// server parses them as protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *(v.(*[]byte)) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

// TestMessageBounds: every message of every call is bounded at
// MaxMessageBytes before it is read, an upload's chunks included; a
// message that does not parse is the client's fault (InvalidArgument).
func TestMessageBounds(t *testing.T) {
	ctx := context.Background()
	j := &fakeJudge{resp: DeltaVerdict{Accepted: true}}
	e := startWith(t, DefaultConfig(), true, func(s *Server) { s.Judge = j })
	_, err := e.orch.GetJob(ctx, &pb.GetJobRequest{Job: string(make([]byte, 2<<20))})
	wantMessage(t, err, codes.ResourceExhausted, "larger than max")
	_, err = e.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: &pb.Auth{Signature: make([]byte, 3<<20)}})
	wantMessage(t, err, codes.ResourceExhausted, "larger than max")
	n := registered(t, e, "n")
	big := make([]byte, 2<<20)
	_, err = e.send(ctx, n.announce(nil, big, nil), deltaPart(big))
	wantMessage(t, err, codes.ResourceExhausted, "larger than max")
	if len(j.heads) != 0 {
		t.Fatal("an oversized chunk reached the judge")
	}

	conn := rawConn(t, e)
	var out []byte
	for _, method := range []string{pb.NodeService_Heartbeat_FullMethodName, pb.OrchestratorService_GetJob_FullMethodName} {
		err = conn.Invoke(ctx, method, []byte{0xff, 0xff, 0xff}, &out, grpc.ForceCodec(rawCodec{}))
		wantMessage(t, err, codes.InvalidArgument, "does not parse")
	}
	st, err := conn.NewStream(ctx, &pb.NodeService_ServiceDesc.Streams[0], pb.NodeService_UploadDelta_FullMethodName, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	st.SendMsg([]byte{0xff, 0xff, 0xff})
	st.CloseSend()
	wantMessage(t, st.RecvMsg(&out), codes.InvalidArgument, "does not parse")
}

func rawConn(t *testing.T, e *env) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestTransportLimits: connections past the per-host bound are closed on
// accept, calls past the per-host bound refused before their message is
// read, oversized header lists refused; the figures are in the metrics.
func TestTransportLimits(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Transport.MaxConnsPerHost, cfg.Transport.MaxCallsPerHost = 3, 2
	j := &fakeJudge{resp: DeltaVerdict{Accepted: true}}
	e := startWith(t, cfg, true, func(s *Server) { s.Judge = j })
	// Two calls held open (uploads that never finish their header)...
	var held []grpc.ClientStream
	for range 2 {
		st, err := e.node.UploadDelta(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, st)
	}
	// ...and the third is refused until one ends. (The tap sees the
	// streams as their headers arrive: wait until both are counted.)
	waitFor(t, func() bool {
		var b strings.Builder
		e.srv.WriteMetrics(&b)
		return strings.Contains(b.String(), "gym_hanzod_calls_in_flight 2\n")
	})
	_, err := e.orch.ListJobs(ctx, &pb.ListJobsRequest{})
	wantMessage(t, err, codes.ResourceExhausted, "calls in flight (at most 2)")
	held[0].CloseSend()
	held[0].RecvMsg(new(pb.SubmitDeltaResponse))
	waitFor(t, func() bool {
		_, err := e.orch.ListJobs(ctx, &pb.ListJobsRequest{})
		return err == nil
	})

	// Connections: the env's own is one; two more are let in, the fourth
	// is closed at once.
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	conns[2].SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := conns[2].Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection past the bound was served")
	}
	// Header lists: 16 KiB at most.
	_, err = e.orch.ListJobs(metadata.AppendToOutgoingContext(ctx, "authorization", strings.Repeat("a", 64<<10)), &pb.ListJobsRequest{})
	if err == nil {
		t.Fatal("a 64 KiB header list was served")
	}
	var b strings.Builder
	e.srv.WriteMetrics(&b)
	for _, want := range []string{`gym_hanzod_calls_refused_total{bound="host"} 1`, `gym_hanzod_connections_refused_total{bound="host"} 1`} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}

// waitFor polls cond (a condition another goroutine makes true) for up
// to a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
