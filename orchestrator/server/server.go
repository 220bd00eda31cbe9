// Package server exposes the orchestrator engine over gRPC: NodeService
// for signed worker requests and OrchestratorService for clients and
// operators (api/hanzod/v1). It translates messages into state commands,
// bounds message sizes and per-node request rates, and maps the state
// machine's sentinel errors onto gRPC status codes with messages that say
// what to fix.
package server

import (
	"context"
	"crypto/ed25519"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/keys/edkey"
	"github.com/zooai/gym/orchestrator/engine"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

// Config bounds what clients may send.
type Config struct {
	// MaxMessageBytes bounds every message of every call, an upload's
	// chunks included: a larger one is refused with ResourceExhausted from
	// its length prefix, before it is read.
	MaxMessageBytes int
	// MaxDeltaBytes and MaxTracesBytes bound an upload's file and its
	// compressed traces (a real model's adapter is tens of MiB); the
	// judge bounds the file further by the job's adapter before it is
	// read (docs/orchestrator.md, "Delta upload").
	MaxDeltaBytes  int64
	MaxTracesBytes int64
	// UploadTimeout bounds an upload from its announcement to its last
	// chunk, waiting for a slot included (the judge's work after it is
	// not counted).
	UploadTimeout time.Duration
	// Transport bounds connections, calls in flight and headers.
	Transport Transport
	// NodeRate and NodeBurst bound each node's requests (token bucket).
	NodeRate  float64
	NodeBurst int
	// SubmitRate and SubmitBurst bound each signing submitter's job
	// submissions; AddrRate and AddrBurst bound SubmitJob calls from each
	// peer address (host), signed or not, operator's included.
	SubmitRate  float64
	SubmitBurst int
	AddrRate    float64
	AddrBurst   int
	// AdminToken, when set, is required as "authorization: Bearer TOKEN"
	// for ledger operations and unsigned job submissions; when empty they
	// are allowed from loopback peers only.
	AdminToken string
	// UploadDelta is bounded on its own: per peer address a token bucket
	// (DeltaAddrRate uploads/s, burst DeltaAddrBurst), taken before the
	// announcement's signature is checked, and at most DeltaAddrInFlight
	// uploads at once; per node (the announcement's signer, once its
	// signature verified) DeltaNodeRate uploads/s, burst DeltaNodeBurst;
	// and at most DeltaInFlight uploads received or judged at once in all
	// (an upload waits for a slot until its deadline).
	DeltaAddrRate     float64
	DeltaAddrBurst    int
	DeltaAddrInFlight int
	DeltaNodeRate     float64
	DeltaNodeBurst    int
	DeltaInFlight     int
	// Register is bounded per peer address (host; IPv6 per /64) before
	// its signature is checked: RegisterAddrRate registrations/s, burst
	// RegisterAddrBurst, re-registrations included. A key hanzod does not
	// know that has not bonded its role's stake (a new free key) also
	// takes a token of its address's RegisterNewRate/s, burst
	// RegisterNewBurst: far fewer, so one address cannot mint identities.
	RegisterAddrRate  float64
	RegisterAddrBurst int
	RegisterNewRate   float64
	RegisterNewBurst  int
}

// DefaultConfig allows 1 MiB messages, uploads of a 64 MiB delta file (the
// judge reads at most 64 MiB) with 64 MiB of compressed traces within 10
// minutes, and 5 requests a second per node (burst 20): a heartbeat every
// 10 s plus bandwidth reports fit easily.
// A worker submits one delta a sync (seconds apart at the least); an
// address may hold a few workers. A submitter may submit a job every 10 s
// (burst 5), an address 1 a second (burst 20). An address registers once
// a second (burst 30: a host's workers restarting at once), and new
// unstaked keys once a minute (burst 16).
func DefaultConfig() Config {
	return Config{MaxMessageBytes: 1 << 20, MaxDeltaBytes: 64 << 20, MaxTracesBytes: 64 << 20, UploadTimeout: 10 * time.Minute,
		Transport: DefaultTransport(), NodeRate: 5, NodeBurst: 20,
		DeltaAddrRate: 10, DeltaAddrBurst: 40, DeltaAddrInFlight: 8,
		DeltaNodeRate: 2, DeltaNodeBurst: 10, DeltaInFlight: 16,
		SubmitRate: 0.1, SubmitBurst: 5, AddrRate: 1, AddrBurst: 20,
		RegisterAddrRate: 1, RegisterAddrBurst: 30, RegisterNewRate: 1.0 / 60, RegisterNewBurst: 16}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.MaxMessageBytes < 4096 || c.NodeRate <= 0 || c.NodeBurst < 1 {
		return fmt.Errorf("server: MaxMessageBytes ≥ 4096, NodeRate > 0 and NodeBurst ≥ 1 required")
	}
	if c.MaxDeltaBytes < 1024 || c.MaxTracesBytes < 0 || c.UploadTimeout <= 0 {
		return fmt.Errorf("server: MaxDeltaBytes ≥ 1024, MaxTracesBytes ≥ 0 and a positive UploadTimeout required")
	}
	if err := c.Transport.Validate(); err != nil {
		return err
	}
	if c.DeltaAddrRate <= 0 || c.DeltaAddrBurst < 1 || c.DeltaAddrInFlight < 1 || c.DeltaNodeRate <= 0 || c.DeltaNodeBurst < 1 || c.DeltaInFlight < 1 {
		return fmt.Errorf("server: the UploadDelta limits (DeltaAddrRate, DeltaAddrBurst, DeltaAddrInFlight, DeltaNodeRate, DeltaNodeBurst, DeltaInFlight) must be positive")
	}
	if c.SubmitRate <= 0 || c.SubmitBurst < 1 || c.AddrRate <= 0 || c.AddrBurst < 1 {
		return fmt.Errorf("server: SubmitRate, AddrRate > 0 and SubmitBurst, AddrBurst ≥ 1 required")
	}
	if c.RegisterAddrRate <= 0 || c.RegisterAddrBurst < 1 || c.RegisterNewRate <= 0 || c.RegisterNewBurst < 1 {
		return fmt.Errorf("server: RegisterAddrRate, RegisterNewRate > 0 and RegisterAddrBurst, RegisterNewBurst ≥ 1 required")
	}
	return nil
}

// Server implements both services.
type Server struct {
	pb.UnimplementedNodeServiceServer
	pb.UnimplementedOrchestratorServiceServer
	cfg     Config
	eng     *engine.Engine
	now     func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket

	// UploadDelta's limits (see Config).
	dmu        sync.Mutex
	addrBucket limiter
	nodeBucket limiter
	addrFlight map[string]int
	inFlight   chan struct{}
	refused    map[string]uint64 // limit → deltas refused by it

	gate *gate // connections and calls in flight by peer host

	reqs *requestMetrics // latency and result of every call

	// Judge validates uploaded deltas (nil: UploadDelta is Unavailable).
	// Set before serving.
	Judge Judge
	// Artifacts is where nodes fetch checkpoints ("KEYHEX@host:port"),
	// sent in every assignment. Set before serving.
	Artifacts string
	// Instance is hanzod's signing key, which job bindings
	// (jobconf.Binding, sent in assignments) are computed with; the judge
	// checks deltas against the same. Set before serving.
	Instance ed25519.PublicKey
	// StakeCheck, when set, must accept a node before its registration is
	// decided (hanzod with a chain ledger: the node's on-chain stake);
	// a refusal is PermissionDenied. Set before serving.
	StakeCheck func(ctx context.Context, node string) error
	// Pins, when set, says how the IPFS pinning of a CID stands (hanzod
	// with IPFS_URL); GetJob and ListJobs report it for every checkpoint.
	// Set before serving.
	Pins func(cid string) (*pb.Pin, bool)
	// ModelShape, when set, reads the shape of a submitted job's base
	// (hanzod: the built-in base, or the config.json of a base in its
	// artifact store; never the weights) for the scheduler's memory
	// estimate: nil and no error when it has none (the job is then
	// matched by min_vram_mib alone), an error when the base's config.json
	// is there and names what no node can run (the submission is
	// refused with it). Set before serving.
	ModelShape func(ctx context.Context, model string) (*hardware.Shape, error)
}

// Judge validates uploaded delta files and records its verdicts. An error
// is the judge's own failure, not the delta's: a rejection is a verdict.
type Judge interface {
	// Preflight decides what an upload's announcement and head decide
	// (judge.Judge.Preflight): proceed false with the verdict to answer
	// at once, or true when the file must be read and submitted.
	Preflight(ctx context.Context, u Upload) (v DeltaVerdict, proceed bool, err error)
	// Submit judges the announced file and the trace bundle it names
	// (zstd-compressed; nil when it names none).
	Submit(ctx context.Context, u Upload, file, traces []byte) (DeltaVerdict, error)
}

// Upload is a delta upload's announcement, its signature verified: the
// node, the file's digest and sizes, and the file's first chunk.
type Upload struct {
	Node        string
	Job         string
	Digest      string
	DeltaBytes  int64
	TracesBytes int64
	Head        []byte
}

// DeltaVerdict is a judge's answer to a submitted delta (judge.Verdict has
// the same fields), sent as a SubmitDeltaResponse.
type DeltaVerdict struct {
	Accepted  bool
	Duplicate bool
	Reason    string
	Detail    string
	Digest    string
}

// RingJudge is a Judge that also checks the evidence of suspect reports
// for proof of misbehaviour inside the ring (judge.Judge.RingEvidence).
type RingJudge interface {
	RingEvidence(ctx context.Context, job, suspect string, evidence []byte) (bool, error)
}

// New returns a server over eng; now is the clock of the rate limiter.
func New(cfg Config, eng *engine.Engine, now func() time.Time) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, eng: eng, now: now, buckets: map[string]*bucket{},
		addrBucket: limiter{rate: cfg.DeltaAddrRate, burst: cfg.DeltaAddrBurst, buckets: map[string]*bucket{}},
		nodeBucket: limiter{rate: cfg.DeltaNodeRate, burst: cfg.DeltaNodeBurst, buckets: map[string]*bucket{}},
		addrFlight: map[string]int{}, inFlight: make(chan struct{}, cfg.DeltaInFlight), refused: map[string]uint64{},
		reqs: newRequestMetrics(), gate: newGate(),
	}, nil
}

// Options are the grpc.Server options the limits need: the transport's
// (Transport), message sizes, keepalive, the request metrics, and
// malformed messages answered InvalidArgument (Attach). Serve on
// Listener(l) for the connection bounds.
func (s *Server) Options() []grpc.ServerOption {
	return append(s.transportOptions(),
		grpc.ChainUnaryInterceptor(s.reqs.unary),
		grpc.ChainStreamInterceptor(s.reqs.stream),
		grpc.KeepaliveEnforcementPolicy(KeepalivePolicy),
	)
}

// KeepalivePolicy lets clients ping every 5 s, also without a call in
// flight (gRPC's default refuses pings more often than every 5 minutes):
// nodeclient pings every 10 s to find a replica whose host dropped off
// the network (nodeclient.Keepalive).
var KeepalivePolicy = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}

// Attach registers both services on g, each message that does not parse
// answered InvalidArgument (gRPC says Internal).
func (s *Server) Attach(g *grpc.Server) {
	g.RegisterService(strictDecode(&pb.NodeService_ServiceDesc), s)
	g.RegisterService(strictDecode(&pb.OrchestratorService_ServiceDesc), s)
}

type bucket struct {
	tokens float64
	last   time.Time
}

const maxBuckets = 200_000

func (s *Server) allow(node string) bool {
	return s.allowAt("node:"+node, s.cfg.NodeRate, s.cfg.NodeBurst)
}

// allowAt takes a token from key's bucket (rate tokens a second, at most
// burst).
func (s *Server) allowAt(key string, rate float64, burst int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := bucketIn(&s.buckets, key, s.now(), rate, burst)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// bucketIn returns key's token bucket in m, refilled to now (rate tokens a
// second, at most burst); a new key starts full. Past maxBuckets keys, m
// forgets them all rather than grow without bound.
func bucketIn(m *map[string]*bucket, key string, now time.Time, rate float64, burst int) *bucket {
	b, ok := (*m)[key]
	if !ok {
		if len(*m) >= maxBuckets {
			*m = map[string]*bucket{}
		}
		b = &bucket{tokens: float64(burst), last: now}
		(*m)[key] = b
	}
	b.tokens = min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	return b
}

// Status maps an engine or state error onto a gRPC status.
func Status(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Internal
	switch {
	case errors.Is(err, engine.ErrNotLeader), errors.Is(err, store.ErrFenced):
		code = codes.Unavailable
	case errors.Is(err, state.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, state.ErrUnauthenticated):
		code = codes.Unauthenticated
	case errors.Is(err, state.ErrPermission):
		code = codes.PermissionDenied
	case errors.Is(err, state.ErrPrecondition):
		code = codes.FailedPrecondition
	case errors.Is(err, state.ErrExhausted):
		code = codes.ResourceExhausted
	case errors.Is(err, state.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, store.ErrCompacted): // Events before the log's start: the snapshot covers them
		code = codes.OutOfRange
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

func auth(a *pb.Auth) (state.Auth, error) {
	if a == nil {
		return state.Auth{}, status.Error(codes.InvalidArgument, "auth is missing: sign the request with the node key")
	}
	return state.Auth{Node: a.Node, Seq: a.Seq, Timestamp: a.TimestampMs, Sig: a.Signature}, nil
}

// KeyTrailer is the trailer in which every signed NodeService reply, a
// refusal included, carries hanzod's instance key (hex): the audience a
// node signs its requests for. A node that does not know it yet learns it
// from its first refusal (nodeclient pins it in its data directory).
const KeyTrailer = "hanzod-key"

// nodeAuth is a node request's signed envelope with its audience filled
// in: this hanzod's instance key, so a request signed for another hanzod
// does not verify here. It sends the key in the KeyTrailer.
func (s *Server) nodeAuth(ctx context.Context, p *pb.Auth) (state.Auth, error) {
	if s.Instance != nil {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(KeyTrailer, hex.EncodeToString(s.Instance))) // fails only outside a gRPC call
	}
	a, err := auth(p)
	a.Audience = s.Instance
	return a, err
}

// admit checks a node request's signature before it costs the engine
// anything, then the node's rate.
func (s *Server) admit(a state.Auth, msg []byte) error {
	pub, err := state.ParsePublicKey(a.Node)
	if err != nil {
		return Status(err)
	}
	if err := edkey.Verify(pub, msg, a.Sig); err != nil {
		return status.Errorf(codes.Unauthenticated, "node %s: %v (sign the request bytes described in docs/orchestrator.md for this hanzod's key, sent in the trailer %s)", a.Node, err, KeyTrailer)
	}
	if !s.allow(a.Node) {
		return status.Errorf(codes.ResourceExhausted, "node %s exceeds %.0f requests/s (burst %d); slow down", a.Node, s.cfg.NodeRate, s.cfg.NodeBurst)
	}
	return nil
}

// TimeTrailer is the trailer in which every NodeService reply, a refusal
// included, carries hanzod's clock (unix milliseconds, decimal): a node
// whose request was refused as stale learns its offset from it.
const TimeTrailer = "hanzod-time-ms"

// stamp sets the time trailer and returns the time it carries.
func (s *Server) stamp(ctx context.Context) int64 {
	now := s.now().UnixMilli()
	_ = grpc.SetTrailer(ctx, metadata.Pairs(TimeTrailer, strconv.FormatInt(now, 10))) // fails only outside a gRPC call
	return now
}

func (s *Server) do(ctx context.Context, cmd state.Command) ([]state.Event, error) {
	evs, err := s.eng.Do(ctx, cmd)
	return evs, Status(err)
}

// Register implements NodeService.
func (s *Server) Register(ctx context.Context, r *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	s.stamp(ctx)
	a, err := s.nodeAuth(ctx, r.Auth)
	if err != nil {
		return nil, err
	}
	cmd := state.Register{Auth: a, Address: r.Address, Region: r.Region, GPUModel: r.GpuModel, VRAMMiB: r.VramMib, Report: r.AttestationReport, ProbeAddress: r.ProbeAddress, Role: r.Role,
		Hardware: hardwareFrom(r.Accelerators, r.Backends, r.Dtypes)}
	host := peerHost(ctx)
	if !s.allowAt("register:"+host, s.cfg.RegisterAddrRate, s.cfg.RegisterAddrBurst) {
		return nil, status.Errorf(codes.ResourceExhausted, "%s exceeds %.2g registrations/s (burst %d); slow down", host, s.cfg.RegisterAddrRate, s.cfg.RegisterAddrBurst)
	}
	if err := s.admit(a, cmd.SignedBytes()); err != nil {
		return nil, err
	}
	var known, staked bool
	s.eng.View(func(m *state.Machine) {
		_, known = m.Node(a.Node)
		staked = m.Staked(a.Node, r.Role)
	})
	if !known && !staked && !s.allowAt("register-new:"+host, s.cfg.RegisterNewRate, s.cfg.RegisterNewBurst) {
		return nil, status.Errorf(codes.ResourceExhausted, "%s registered %d new keys without stake lately (at most one per %.0f s); bond the role's stake for this key first, or retry later", host, s.cfg.RegisterNewBurst, 1/s.cfg.RegisterNewRate)
	}
	if s.StakeCheck != nil {
		if err := s.StakeCheck(ctx, a.Node); err != nil {
			return nil, status.Errorf(codes.PermissionDenied, "%v", err)
		}
	}
	evs, err := s.do(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.RegisterResponse{Attestation: evs[0].Body.(state.NodeRegistered).Attestation, ServerTimeMs: s.stamp(ctx)}, nil
}

// Heartbeat implements NodeService.
func (s *Server) Heartbeat(ctx context.Context, r *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	s.stamp(ctx)
	a, err := s.nodeAuth(ctx, r.Auth)
	if err != nil {
		return nil, err
	}
	cmd := state.Heartbeat{Auth: a}
	if err := s.admit(a, cmd.SignedBytes()); err != nil {
		return nil, err
	}
	if _, err := s.do(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.HeartbeatResponse{Assignment: s.assignment(a.Node), ServerTimeMs: s.stamp(ctx)}, nil
}

// ReportBandwidth implements NodeService.
func (s *Server) ReportBandwidth(ctx context.Context, r *pb.ReportBandwidthRequest) (*pb.ReportBandwidthResponse, error) {
	s.stamp(ctx)
	a, err := s.nodeAuth(ctx, r.Auth)
	if err != nil {
		return nil, err
	}
	cmd := state.ReportBandwidth{Auth: a, Job: r.Job}
	for _, l := range r.Links {
		cmd.Links = append(cmd.Links, state.Link{Peer: l.Peer, Kbps: l.Kbps})
	}
	if err := s.admit(a, cmd.SignedBytes()); err != nil {
		return nil, err
	}
	if _, err := s.do(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.ReportBandwidthResponse{Assignment: s.assignment(a.Node)}, nil
}

func ring(m *state.Machine, j state.Job) *pb.RingConfig {
	if len(j.Ring) == 0 {
		return nil
	}
	r := &pb.RingConfig{ConfigId: j.ConfigID, Generation: j.Generation, Members: append([]string(nil), j.Ring...), BottleneckKbps: j.Bottleneck}
	for _, id := range j.Ring {
		n, _ := m.Node(id)
		r.Addresses = append(r.Addresses, n.Address)
	}
	for _, g := range j.RingGroups {
		r.Groups = append(r.Groups, uint32(g))
	}
	return r
}

func (s *Server) assignment(node string) *pb.Assignment {
	out := &pb.Assignment{}
	s.eng.View(func(m *state.Machine) {
		n, ok := m.Node(node)
		if !ok {
			return
		}
		if n.Job == "" {
			// Idle. If the node's most recent job has ended, say so (with
			// its final checkpoint), so its workers can finish.
			ids := m.Jobs()
			for i := len(ids) - 1; i >= 0; i-- {
				j, _ := m.Job(ids[i])
				if contains(j.Participants, node) {
					if j.State.Terminal() {
						out.Job, out.JobState, out.Epoch = j.ID, string(j.State), int32(j.Epoch)
						if len(j.CIDs) > 0 {
							out.Checkpoint = j.CIDs[len(j.CIDs)-1]
						}
					}
					return
				}
			}
			return
		}
		j, _ := m.Job(n.Job)
		out.Job, out.JobState, out.Epoch, out.Paused = j.ID, string(j.State), int32(j.Epoch), j.Paused
		out.Spec, out.Artifacts = jobspec.ToProto(j.Spec), s.Artifacts
		if s.Instance != nil {
			out.JobBinding = jobconf.Binding(s.Instance, j.ID)
		}
		if len(j.CIDs) > 0 {
			out.Checkpoint = j.CIDs[len(j.CIDs)-1]
		}
		if j.State == state.Provisioning {
			for _, p := range j.Members {
				if p != node {
					pn, _ := m.Node(p)
					out.ProbePeers = append(out.ProbePeers, p)
					out.ProbeAddresses = append(out.ProbeAddresses, pn.ProbeAddress)
				}
			}
		}
		out.Ring = ring(m, j)
		if j.State == state.Running {
			out.Rebases = rebasesTo(j.Rebases)
		}
	})
	return out
}

func specFrom(p *pb.JobSpec) (jobspec.Spec, error) {
	if p == nil {
		return jobspec.Spec{}, status.Error(codes.InvalidArgument, "spec is missing")
	}
	return jobspec.FromProto(p), nil
}

func jobTo(m *state.Machine, j state.Job) *pb.Job {
	return &pb.Job{
		Id: j.ID, Spec: jobspec.ToProto(j.Spec), State: string(j.State), Epoch: int32(j.Epoch), Ring: ring(m, j), Paused: j.Paused,
		Cids: append([]string(nil), j.CIDs...), Reason: j.Reason, Members: append([]string(nil), j.Members...),
		Settled: j.Settled, Refusals: refusals(j.Refusals), MemoryEstimated: j.Shape != nil,
	}
}

// refusals lists a job's refusals by node.
func refusals(m map[string]string) []*pb.Refusal {
	var out []*pb.Refusal
	for _, n := range slices.Sorted(maps.Keys(m)) {
		out = append(out, &pb.Refusal{Node: n, Reason: m[n]})
	}
	return out
}

// addPins fills j.Pins from s.Pins, in the order of j.Cids.
func (s *Server) addPins(j *pb.Job) {
	if s.Pins == nil {
		return
	}
	for _, c := range j.Cids {
		if p, ok := s.Pins(c); ok {
			j.Pins = append(j.Pins, p)
		}
	}
}

// SubmitJob implements OrchestratorService. A submission is either
// signed by a submitter key (auth and spec_bytes; the state then bounds
// it: state.SubmitJob) or the operator's (spec; the admin token, or
// loopback when hanzod has none). Every call counts against its peer
// address's rate, a signed one also against its key's.
func (s *Server) SubmitJob(ctx context.Context, r *pb.SubmitJobRequest) (*pb.SubmitJobResponse, error) {
	if host := peerHost(ctx); !s.allowAt("addr:"+host, s.cfg.AddrRate, s.cfg.AddrBurst) {
		return nil, status.Errorf(codes.ResourceExhausted, "%s exceeds %.2g job submissions/s (burst %d); slow down", host, s.cfg.AddrRate, s.cfg.AddrBurst)
	}
	cmd := state.SubmitJob{}
	if r.Auth == nil {
		if err := s.operator(ctx); err != nil {
			return nil, status.Errorf(status.Code(err), "%s; or sign the submission with a key that has a ledger account (gym job submit --key FILE)", status.Convert(err).Message())
		}
		if len(r.SpecBytes) > 0 {
			return nil, status.Error(codes.InvalidArgument, "spec_bytes without auth: an unsigned (operator) submission sends spec")
		}
		spec, err := specFrom(r.Spec)
		if err != nil {
			return nil, err
		}
		cmd.Spec = spec
	} else {
		a, err := auth(r.Auth)
		if err != nil {
			return nil, err
		}
		if r.Spec != nil {
			return nil, status.Error(codes.InvalidArgument, "a signed submission sends the signed spec_bytes, not spec")
		}
		signed := nodeauth.SubmitJob{Auth: a, Spec: r.SpecBytes}
		pub, err := state.ParsePublicKey(a.Node)
		if err != nil {
			return nil, Status(err)
		}
		if err := edkey.Verify(pub, signed.SignedBytes(), a.Sig); err != nil {
			return nil, status.Errorf(codes.Unauthenticated, "submitter %s: %v (sign the bytes described in docs/orchestrator.md)", a.Node, err)
		}
		if !s.allowAt("submit:"+a.Node, s.cfg.SubmitRate, s.cfg.SubmitBurst) {
			return nil, status.Errorf(codes.ResourceExhausted, "submitter %s exceeds %.2g job submissions/s (burst %d); slow down", a.Node, s.cfg.SubmitRate, s.cfg.SubmitBurst)
		}
		var p pb.JobSpec
		if err := proto.Unmarshal(r.SpecBytes, &p); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "spec_bytes is not a JobSpec: %v", err)
		}
		cmd = state.SubmitJob{Spec: jobspec.FromProto(&p), By: a.Node, Seq: a.Seq, Timestamp: a.Timestamp}
	}
	if s.ModelShape != nil {
		sh, err := s.ModelShape(ctx, cmd.Spec.Model)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "model %s: %v", cmd.Spec.Model, err)
		}
		cmd.Shape = sh
	}
	evs, err := s.do(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &pb.SubmitJobResponse{Job: evs[0].Body.(state.JobSubmitted).Job}, nil
}

// peerHost is the caller's address without the port (addrHost).
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "unknown"
	}
	return addrHost(p.Addr)
}

// addrHost is a peer address without the port; IPv6 peers are grouped by
// /64 (one host usually holds a whole /64).
func addrHost(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		if tcp.IP.To4() == nil && len(tcp.IP) == net.IPv6len {
			return tcp.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
		}
		return tcp.IP.String()
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

// GetJob implements OrchestratorService.
func (s *Server) GetJob(ctx context.Context, r *pb.GetJobRequest) (*pb.Job, error) {
	var out *pb.Job
	s.eng.View(func(m *state.Machine) {
		if j, ok := m.Job(r.Job); ok {
			out = jobTo(m, j)
			out.Artifacts = s.Artifacts
			s.addPins(out)
			explain(m, &j, out, s.now().UnixMilli())
		}
	})
	if out == nil {
		return nil, status.Errorf(codes.NotFound, "job %q not found (list jobs with ListJobs)", r.Job)
	}
	return out, nil
}

// ListJobs implements OrchestratorService.
func (s *Server) ListJobs(ctx context.Context, r *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	out := &pb.ListJobsResponse{}
	s.eng.View(func(m *state.Machine) {
		for _, id := range m.Jobs() {
			j, _ := m.Job(id)
			pj := jobTo(m, j)
			pj.Artifacts = s.Artifacts
			s.addPins(pj)
			out.Jobs = append(out.Jobs, pj)
		}
	})
	return out, nil
}

// ListNodes implements OrchestratorService.
func (s *Server) ListNodes(ctx context.Context, r *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	out := &pb.ListNodesResponse{}
	now := s.now().UnixMilli()
	var missing bool
	s.eng.View(func(m *state.Machine) {
		var job *state.Job
		if r.Job != "" {
			j, ok := m.Job(r.Job)
			if !ok {
				missing = true
				return
			}
			job = &j
		}
		for _, id := range m.Nodes() {
			n, _ := m.Node(id)
			pn := &pb.Node{
				Id: n.ID, Address: n.Address, Region: n.Region, GpuModel: n.GPUModel, VramMib: n.VRAMMiB,
				Attestation: n.Attestation, Status: string(n.Status), Job: n.Job, UptimeBp: int32(m.UptimeBP(&n)),
				Ineligible: m.Ineligible(&n, 0, now), ProbeAddress: n.ProbeAddress,
				Accelerators: acceleratorsTo(n.Hardware.Accelerators), Backends: n.Hardware.Backends, Dtypes: n.Hardware.DTypes,
			}
			if job != nil {
				f, why := m.JobFit(&n, job, now)
				pn.Fit = eligibilityTo(state.NodeFit{Node: n.ID, Fit: f, Why: why})
			}
			out.Nodes = append(out.Nodes, pn)
		}
	})
	if missing {
		return nil, status.Errorf(codes.NotFound, "job %q not found (list jobs with ListJobs)", r.Job)
	}
	return out, nil
}

func accountTo(a ledger.Account) *pb.Account {
	out := &pb.Account{Id: a.ID, Free: uint64(a.Free), Bonded: uint64(a.Bonded), Unbonding: uint64(a.Unbonded()), Banned: a.Banned}
	for _, sl := range a.Slashes {
		out.Slashes = append(out.Slashes, &pb.Slash{Offence: int32(sl.Offence), Amount: uint64(sl.Amount), AtUnixMs: sl.At, Reason: sl.Reason, Evidence: sl.Evidence})
	}
	return out
}

func (s *Server) account(id string) *pb.Account {
	var a ledger.Account
	s.eng.View(func(m *state.Machine) { a = m.Account(id) })
	return accountTo(a)
}

// GetBalance implements OrchestratorService.
func (s *Server) GetBalance(ctx context.Context, r *pb.GetBalanceRequest) (*pb.Account, error) {
	if r.Account == "" {
		return nil, status.Error(codes.InvalidArgument, "account is empty")
	}
	return s.account(r.Account), nil
}

// operator checks that the caller may run ledger operations.
func (s *Server) operator(ctx context.Context) error {
	if s.cfg.AdminToken != "" {
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get("authorization") {
			if t, ok := strings.CutPrefix(v, "Bearer "); ok && subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.AdminToken)) == 1 {
				return nil
			}
		}
		return status.Error(codes.Unauthenticated, "operator calls (ledger operations, job lifecycle, unsigned job submissions) need \"authorization: Bearer <admin token>\"")
	}
	p, ok := peer.FromContext(ctx)
	if ok {
		if tcp, ok := p.Addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
			return nil
		}
	}
	return status.Error(codes.PermissionDenied, "operator calls (ledger operations, job lifecycle, unsigned job submissions) are allowed from loopback only unless hanzod has an admin token")
}

func (s *Server) ledgerOp(ctx context.Context, r *pb.LedgerRequest, cmd state.Command) (*pb.Account, error) {
	if err := s.operator(ctx); err != nil {
		return nil, err
	}
	if _, err := s.do(ctx, cmd); err != nil {
		return nil, err
	}
	return s.account(r.Account), nil
}

// Deposit implements OrchestratorService.
func (s *Server) Deposit(ctx context.Context, r *pb.LedgerRequest) (*pb.Account, error) {
	return s.ledgerOp(ctx, r, state.Deposit{Account: r.Account, Amount: ledger.Amount(r.Amount), Request: r.RequestId})
}

// Bond implements OrchestratorService.
func (s *Server) Bond(ctx context.Context, r *pb.LedgerRequest) (*pb.Account, error) {
	return s.ledgerOp(ctx, r, state.Bond{Account: r.Account, Amount: ledger.Amount(r.Amount), Request: r.RequestId})
}

// Unbond implements OrchestratorService.
func (s *Server) Unbond(ctx context.Context, r *pb.LedgerRequest) (*pb.Account, error) {
	return s.ledgerOp(ctx, r, state.Unbond{Account: r.Account, Amount: ledger.Amount(r.Amount), Request: r.RequestId})
}

// Withdraw implements OrchestratorService.
func (s *Server) Withdraw(ctx context.Context, r *pb.LedgerRequest) (*pb.Account, error) {
	return s.ledgerOp(ctx, r, state.Withdraw{Account: r.Account, Request: r.RequestId})
}

func (s *Server) jobAfter(ctx context.Context, job string, cmd state.Command) (*pb.Job, error) {
	if err := s.operator(ctx); err != nil {
		return nil, err
	}
	if _, err := s.do(ctx, cmd); err != nil {
		return nil, err
	}
	return s.GetJob(ctx, &pb.GetJobRequest{Job: job})
}

// EndEpoch implements OrchestratorService.
func (s *Server) EndEpoch(ctx context.Context, r *pb.EndEpochRequest) (*pb.Job, error) {
	return s.jobAfter(ctx, r.Job, state.EndEpoch{Job: r.Job, Epoch: int(r.Epoch)})
}

// PublishCheckpoint implements OrchestratorService.
func (s *Server) PublishCheckpoint(ctx context.Context, r *pb.PublishCheckpointRequest) (*pb.Job, error) {
	return s.jobAfter(ctx, r.Job, state.PublishCheckpoint{Job: r.Job, Epoch: int(r.Epoch), CID: r.Cid})
}

// FailJob implements OrchestratorService.
func (s *Server) FailJob(ctx context.Context, r *pb.FailJobRequest) (*pb.Job, error) {
	return s.jobAfter(ctx, r.Job, state.FailJob{Job: r.Job, Reason: r.Reason})
}

// Slash implements OrchestratorService.
func (s *Server) Slash(ctx context.Context, r *pb.SlashRequest) (*pb.Account, error) {
	if err := s.operator(ctx); err != nil {
		return nil, err
	}
	if _, err := s.do(ctx, state.Slash{Node: r.Node, Reason: r.Reason, Evidence: r.Evidence}); err != nil {
		return nil, err
	}
	return s.account(r.Node), nil
}

// PayRewards implements OrchestratorService: the operator pays an epoch
// by hand. The state machine decides the amount as for the judge's
// payments (the contributions' compute at the per-sample rate, capped at
// the epoch reward and at r.Total when set) and who pays it (the job's
// submitter's escrow, or the treasury).
func (s *Server) PayRewards(ctx context.Context, r *pb.PayRewardsRequest) (*pb.PayRewardsResponse, error) {
	if err := s.operator(ctx); err != nil {
		return nil, err
	}
	if len(r.Contributions) > 100_000 {
		return nil, status.Error(codes.InvalidArgument, "at most 100000 contributions per epoch")
	}
	cmd := state.PayRewards{Job: r.Job, Epoch: int(r.Epoch), Total: ledger.Amount(r.Total)}
	for _, c := range r.Contributions {
		cmd.Contributions = append(cmd.Contributions, ledger.Contribution{ID: c.Account, Compute: c.Compute, Quality: c.Quality, Participation: c.Participation})
	}
	evs, err := s.do(ctx, cmd)
	if err != nil {
		return nil, err
	}
	out := &pb.PayRewardsResponse{}
	for _, p := range evs[0].Body.(state.RewardsPaid).Payouts {
		out.Payouts = append(out.Payouts, &pb.Payout{Account: p.ID, Amount: uint64(p.Amount)})
	}
	return out, nil
}

// WriteMetrics writes the server's counters in the Prometheus text format
// (docs/metrics.md).
func (s *Server) WriteMetrics(w io.Writer) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	fmt.Fprintf(w, "# HELP gym_hanzod_deltas_refused_total Delta uploads refused by a limit before the validator saw them (bad_file: an authenticated node's file that was not what it announced, charged again).\n# TYPE gym_hanzod_deltas_refused_total counter\n")
	for _, l := range []string{"address_in_flight", "address_rate", "announcement", "bad_file", "busy", "node_rate", "size"} {
		fmt.Fprintf(w, "gym_hanzod_deltas_refused_total{limit=%q} %d\n", l, s.refused[l])
	}
	fmt.Fprintf(w, "# HELP gym_hanzod_deltas_in_flight Delta uploads being received or judged.\n# TYPE gym_hanzod_deltas_in_flight gauge\ngym_hanzod_deltas_in_flight %d\n", len(s.inFlight))
	s.gate.write(w)
	// Gathering from a registry of in-memory metrics cannot fail; a write
	// error is the scraper's connection, which the HTTP server handles.
	_ = s.reqs.write(w)
}

// limiter is a set of token buckets by key.
type limiter struct {
	rate    float64
	burst   int
	buckets map[string]*bucket
}

func (l *limiter) get(key string, now time.Time) *bucket {
	return bucketIn(&l.buckets, key, now, l.rate, l.burst)
}

// has reports whether key has a token left, without taking it.
func (l *limiter) has(key string, now time.Time) bool { return l.get(key, now).tokens >= 1 }

// take takes a token of key if it has one.
func (l *limiter) take(key string, now time.Time) bool {
	b := l.get(key, now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// charge takes a token of key, going below zero if need be (a node that
// sent several files at once pays for each).
func (l *limiter) charge(key string, now time.Time) { l.get(key, now).tokens-- }

// ReportSuspect implements NodeService.
func (s *Server) ReportSuspect(ctx context.Context, r *pb.ReportSuspectRequest) (*pb.ReportSuspectResponse, error) {
	s.stamp(ctx)
	a, err := s.nodeAuth(ctx, r.Auth)
	if err != nil {
		return nil, err
	}
	cmd := state.ReportSuspect{Auth: a, Job: r.Job, ConfigID: r.ConfigId, Suspect: r.Suspect, Kind: r.Kind, Evidence: r.Evidence}
	if err := s.admit(a, cmd.SignedBytes()); err != nil {
		return nil, err
	}
	if _, err := s.do(ctx, cmd); err != nil {
		return nil, err
	}
	// A report whose evidence proves the suspect misbehaved (a signed ring
	// frame above the norm bound) gets it slashed and ejected at once,
	// whatever the other reports say.
	// The report itself is recorded either way: a failure to check its
	// evidence is the judge's to log, not the reporter's to retry.
	if rj, ok := s.Judge.(RingJudge); ok && len(r.Evidence) > 0 {
		_, _ = rj.RingEvidence(ctx, r.Job, r.Suspect, r.Evidence)
	}
	return &pb.ReportSuspectResponse{Assignment: s.assignment(a.Node)}, nil
}

// RefuseJob implements NodeService: the refusal is recorded in the job and
// the node taken out of it (state.RefuseJob).
func (s *Server) RefuseJob(ctx context.Context, r *pb.RefuseJobRequest) (*pb.RefuseJobResponse, error) {
	s.stamp(ctx)
	a, err := s.nodeAuth(ctx, r.Auth)
	if err != nil {
		return nil, err
	}
	cmd := state.RefuseJob{Auth: a, Job: r.Job, Reason: r.Reason}
	if err := s.admit(a, cmd.SignedBytes()); err != nil {
		return nil, err
	}
	if _, err := s.do(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.RefuseJobResponse{Assignment: s.assignment(a.Node)}, nil
}

// ListChecks implements NodeService: the open checks of a validator.
func (s *Server) ListChecks(ctx context.Context, r *pb.ListChecksRequest) (*pb.ListChecksResponse, error) {
	now := s.stamp(ctx)
	a, err := s.nodeAuth(ctx, r.Auth)
	if err != nil {
		return nil, err
	}
	req := nodeauth.ListChecks{Auth: a}
	if err := s.admit(a, req.SignedBytes()); err != nil {
		return nil, err
	}
	var open []state.OpenCheck
	s.eng.View(func(m *state.Machine) {
		if err = m.AuthorizeValidator(now, a, req.SignedBytes()); err == nil {
			open = m.OpenChecks(a.Node)
		}
	})
	if err != nil {
		return nil, Status(err)
	}
	out := &pb.ListChecksResponse{Artifacts: s.Artifacts, ServerTimeMs: now}
	for _, o := range open {
		out.Checks = append(out.Checks, &pb.CheckAssignment{Job: o.Job, Epoch: int32(o.Check.Epoch), Step: o.Check.Step, Node: o.Check.Node,
			Digest: o.Check.Digest, Package: o.Check.Package, DeadlineUnixMs: now + o.Deadline, Spec: jobspec.ToProto(o.Spec)})
	}
	return out, nil
}

// SubmitVerdict implements NodeService: a validator's signed verdict.
func (s *Server) SubmitVerdict(ctx context.Context, r *pb.SubmitVerdictRequest) (*pb.SubmitVerdictResponse, error) {
	s.stamp(ctx)
	a, err := s.nodeAuth(ctx, r.Auth)
	if err != nil {
		return nil, err
	}
	if r.Epoch < 0 {
		return nil, status.Error(codes.InvalidArgument, "negative epoch")
	}
	cmd := state.SubmitVerdict{Auth: a, Job: r.Job, Epoch: uint64(r.Epoch), Step: r.Step, Subject: r.Node, Digest: r.Digest,
		Package: r.Package, Outcome: r.Outcome, Check: r.Check, Detail: r.Detail, Figures: r.Figures}
	if err := s.admit(a, cmd.SignedBytes()); err != nil {
		return nil, err
	}
	if _, err := s.do(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.SubmitVerdictResponse{}, nil
}

// Events implements OrchestratorService.
func (s *Server) Events(ctx context.Context, r *pb.EventsRequest) (*pb.EventsResponse, error) {
	if err := s.operator(ctx); err != nil { // the log holds evidence and stakes: operators only
		return nil, err
	}
	limit := int(r.Limit)
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	// No log holds 2^62 events. Clamping keeps After+1 from wrapping to 0
	// (which a store refuses) and a store's signed index arithmetic from
	// overflowing; past the end the page is empty.
	recs, last, err := s.eng.Read(ctx, min(r.After, 1<<62)+1, limit)
	if err != nil {
		return nil, Status(err)
	}
	out := &pb.EventsResponse{Last: last}
	for _, rec := range recs {
		out.Events = append(out.Events, string(rec.Data))
	}
	return out, nil
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
