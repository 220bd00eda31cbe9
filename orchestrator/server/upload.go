package server

import (
	"context"
	"errors"
	"io"
	"regexp"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/nodeauth"
)

// hexDigest is a file's signature digest as an announcement names it.
var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// UploadDelta implements NodeService (docs/orchestrator.md, "Delta
// upload"). Each step costs more than the one before and runs only when
// the cheaper ones passed: the address's rate and uploads in flight; the
// announcement's signature, timestamp and node (a registered compute
// node, not banned); the node's rate; the announced sizes against the
// configured bounds; a slot among the uploads in flight; the judge's
// preflight of the file's head (job, membership, binding, epoch, sequence,
// the size against the job's adapter, a duplicate); only then the rest of
// the file and the traces, exactly the announced sizes, within
// UploadTimeout; and the judge's verdict.
func (s *Server) UploadDelta(stream grpc.ClientStreamingServer[pb.DeltaChunk, pb.SubmitDeltaResponse]) error {
	ctx := stream.Context()
	s.stamp(ctx)
	if s.Judge == nil {
		return status.Error(codes.Unavailable, "this hanzod does not validate deltas (no judge configured)")
	}
	// The upload, from its first message to its last, is bounded by
	// UploadTimeout (waiting for a slot included); the judge's work after
	// it is bounded by the caller's deadline only.
	rctx, cancel := context.WithTimeout(ctx, s.cfg.UploadTimeout)
	defer cancel()
	chunks := receive(rctx, stream)
	next := func() (*pb.DeltaChunk, error) { return nextChunk(rctx, chunks, s.cfg.UploadTimeout) }
	first, err := next()
	if err != nil {
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "an upload starts with its header (DeltaUpload), signed by the node")
	}
	addr := peerHost(ctx)
	u, release, err := s.admitUpload(rctx, addr, h)
	if err != nil {
		return err
	}
	defer release()
	head, err := next()
	if err != nil {
		return err
	}
	if head.GetDelta() == nil {
		return status.Error(codes.InvalidArgument, "the upload's second message is the file's first bytes (its header and whole __metadata__ entry)")
	}
	u.Head = head.GetDelta()
	if int64(len(u.Head)) > u.DeltaBytes {
		return status.Errorf(codes.InvalidArgument, "the file was announced as %d bytes; %d came", u.DeltaBytes, len(u.Head))
	}
	v, proceed, err := s.Judge.Preflight(ctx, u)
	if err != nil {
		return err
	}
	if !proceed {
		return stream.SendAndClose(s.verdictTo(u, v))
	}
	file := make([]byte, 0, u.DeltaBytes)
	file = append(file, u.Head...)
	var traces []byte
	if u.TracesBytes > 0 {
		traces = make([]byte, 0, u.TracesBytes)
	}
	for {
		c, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch p := c.Part.(type) {
		case *pb.DeltaChunk_Delta:
			if len(traces) > 0 {
				return status.Error(codes.InvalidArgument, "the file's bytes came after the traces': send the whole file first")
			}
			if int64(len(file)+len(p.Delta)) > u.DeltaBytes {
				return status.Errorf(codes.InvalidArgument, "the file was announced as %d bytes; more came", u.DeltaBytes)
			}
			file = append(file, p.Delta...)
		case *pb.DeltaChunk_Traces:
			if int64(len(file)) != u.DeltaBytes {
				return status.Errorf(codes.InvalidArgument, "traces came after %d of the file's %d bytes: send the whole file first", len(file), u.DeltaBytes)
			}
			if int64(len(traces)+len(p.Traces)) > u.TracesBytes {
				return status.Errorf(codes.InvalidArgument, "the traces were announced as %d bytes; more came", u.TracesBytes)
			}
			traces = append(traces, p.Traces...)
		default:
			return status.Error(codes.InvalidArgument, "an upload has one header, first")
		}
	}
	if int64(len(file)) != u.DeltaBytes || int64(len(traces)) != u.TracesBytes {
		return status.Errorf(codes.InvalidArgument, "the upload ended after %d of the file's %d bytes and %d of the traces' %d", len(file), u.DeltaBytes, len(traces), u.TracesBytes)
	}
	v, err = s.Judge.Submit(ctx, u, file, traces)
	if err != nil {
		return err
	}
	if v.Reason == "signature" || v.Reason == "format" {
		// An authenticated node sent a file that is not what it signed
		// for: it pays for the work once more.
		s.dmu.Lock()
		s.nodeBucket.charge(u.Node, s.now())
		s.refused["bad_file"]++
		s.dmu.Unlock()
	}
	return stream.SendAndClose(s.verdictTo(u, v))
}

// verdictTo is the response to u: the verdict and, for a delta kept (or
// kept before), the rebases of its job's epoch so far. The state is read
// after the verdict was logged, and a rebase is set only at a sync no
// delta of the epoch reached yet (state.SetRebase): a member that submits
// a rebase's sync learns of it here, before it would all-reduce.
func (s *Server) verdictTo(u Upload, v DeltaVerdict) *pb.SubmitDeltaResponse {
	out := &pb.SubmitDeltaResponse{Accepted: v.Accepted, Duplicate: v.Duplicate, Reason: v.Reason, Detail: v.Detail, Digest: v.Digest}
	if v.Accepted || v.Duplicate {
		s.eng.View(func(m *state.Machine) {
			if j, ok := m.Job(u.Job); ok {
				out.Rebases = rebasesTo(j.Rebases)
			}
		})
	}
	return out
}

// rebasesTo is the wire form of a job's rebases.
func rebasesTo(rs []state.Rebase) []*pb.Rebase {
	var out []*pb.Rebase
	for _, r := range rs {
		out = append(out, &pb.Rebase{Epoch: int32(r.Epoch), Sync: int32(r.Sync), Checkpoint: r.CID, Digest: r.Digest})
	}
	return out
}

// chunk is one received message or the error that ended the stream.
type chunk struct {
	c   *pb.DeltaChunk
	err error
}

// receive reads stream's messages on a goroutine, so that the handler can
// give up on a stalled upload (its return ends the stream, which ends the
// goroutine's Recv).
func receive(ctx context.Context, stream grpc.ClientStreamingServer[pb.DeltaChunk, pb.SubmitDeltaResponse]) <-chan chunk {
	ch := make(chan chunk)
	go func() {
		for {
			c, err := stream.Recv()
			select {
			case ch <- chunk{c, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// nextChunk is the next message, io.EOF at the stream's end; ctx ends the
// wait (the upload's timeout, limit).
func nextChunk(ctx context.Context, ch <-chan chunk, limit time.Duration) (*pb.DeltaChunk, error) {
	select {
	case c := <-ch:
		if c.err != nil && !errors.Is(c.err, io.EOF) {
			if _, ok := status.FromError(c.err); ok {
				return nil, c.err
			}
			return nil, status.Error(codes.Canceled, c.err.Error())
		}
		if c.err == nil {
			if err := malformed(c.c, "an upload message"); err != nil {
				return nil, err
			}
		}
		return c.c, c.err
	case <-ctx.Done():
		if err := ctx.Err(); errors.Is(err, context.Canceled) {
			return nil, status.Error(codes.Canceled, "the upload was canceled")
		}
		return nil, status.Errorf(codes.DeadlineExceeded, "the upload did not finish within %v (hanzod's upload timeout)", limit)
	}
}

// admitUpload applies the upload's limits to an announcement from addr, in
// the cheap order, and returns the upload and the function that frees its
// slots.
func (s *Server) admitUpload(ctx context.Context, addr string, h *pb.DeltaUpload) (Upload, func(), error) {
	s.dmu.Lock()
	now := s.now()
	refuse := func(limit string, err error) (Upload, func(), error) {
		s.refused[limit]++
		s.dmu.Unlock()
		return Upload{}, nil, err
	}
	if s.addrFlight[addr] >= s.cfg.DeltaAddrInFlight {
		return refuse("address_in_flight", status.Errorf(codes.ResourceExhausted, "address %s already has %d uploads in flight (at most %d at once); wait for their verdicts", addr, s.addrFlight[addr], s.cfg.DeltaAddrInFlight))
	}
	if !s.addrBucket.take(addr, now) {
		return refuse("address_rate", status.Errorf(codes.ResourceExhausted, "address %s exceeds %g uploads/s (burst %d); slow down", addr, s.cfg.DeltaAddrRate, s.cfg.DeltaAddrBurst))
	}
	a, err := s.nodeAuth(ctx, h.Auth)
	if err != nil {
		return refuse("announcement", err)
	}
	ann := nodeauth.UploadDelta{Auth: a, Job: h.Job, Digest: h.Digest, DeltaBytes: h.DeltaBytes, TracesBytes: h.TracesBytes}
	s.eng.View(func(m *state.Machine) { err = m.AuthorizeUploader(now.UnixMilli(), a, ann.SignedBytes()) })
	if err != nil {
		return refuse("announcement", Status(err))
	}
	if !s.nodeBucket.take(a.Node, now) {
		return refuse("node_rate", status.Errorf(codes.ResourceExhausted, "node %s exceeds %g uploads/s (burst %d); slow down", a.Node, s.cfg.DeltaNodeRate, s.cfg.DeltaNodeBurst))
	}
	switch {
	case !hexDigest.MatchString(h.Digest):
		return refuse("announcement", status.Error(codes.InvalidArgument, "digest: 64 lowercase hex characters, the SHA3-256 signature digest of the file"))
	case h.DeltaBytes == 0 || h.DeltaBytes > uint64(s.cfg.MaxDeltaBytes):
		return refuse("size", status.Errorf(codes.InvalidArgument, "a delta file of %d bytes: this hanzod takes 1 to %d", h.DeltaBytes, s.cfg.MaxDeltaBytes))
	case h.TracesBytes > uint64(s.cfg.MaxTracesBytes):
		return refuse("size", status.Errorf(codes.InvalidArgument, "traces of %d bytes: this hanzod takes at most %d", h.TracesBytes, s.cfg.MaxTracesBytes))
	}
	s.addrFlight[addr]++
	s.dmu.Unlock()
	done := func() {
		s.dmu.Lock()
		if s.addrFlight[addr]--; s.addrFlight[addr] <= 0 {
			delete(s.addrFlight, addr)
		}
		s.dmu.Unlock()
	}
	select {
	case s.inFlight <- struct{}{}:
	case <-ctx.Done():
		done()
		s.dmu.Lock()
		s.refused["busy"]++
		s.dmu.Unlock()
		return Upload{}, nil, status.Errorf(codes.ResourceExhausted, "hanzod has %d uploads in flight and none finished before the deadline; retry later", s.cfg.DeltaInFlight)
	}
	u := Upload{Node: a.Node, Job: h.Job, Digest: h.Digest, DeltaBytes: int64(h.DeltaBytes), TracesBytes: int64(h.TracesBytes)}
	return u, func() { <-s.inFlight; done() }, nil
}

// Info implements OrchestratorService.
func (s *Server) Info(ctx context.Context, r *pb.InfoRequest) (*pb.InfoResponse, error) {
	return &pb.InfoResponse{InstanceKey: append([]byte(nil), s.Instance...), ServerTimeMs: s.now().UnixMilli(),
		MaxMessageBytes: uint64(s.cfg.MaxMessageBytes), MaxDeltaBytes: uint64(s.cfg.MaxDeltaBytes), MaxTracesBytes: uint64(s.cfg.MaxTracesBytes)}, nil
}

// strictDecode returns a copy of desc whose unary handlers answer a
// request that does not parse (lenientCodec marked it) with
// InvalidArgument, the client's fault.
func strictDecode(desc *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *desc
	out.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error {
				if err := dec(v); err != nil {
					return err
				}
				return malformed(v, m.MethodName+"'s message")
			}, ic)
		}
		out.Methods[i] = m
	}
	return &out
}
