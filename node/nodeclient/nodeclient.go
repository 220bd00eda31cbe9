// Package nodeclient is the node side of the hanzod API: it signs every
// node request with the node key (strictly increasing sequence numbers that
// survive restarts and clock steps: they follow the clock corrected by
// hanzod's, never go back, and their high-water mark is kept on disk),
// signs with hanzod's time (the offset measured from its replies, so a
// node whose clock is off is not locked out), maps assignments into the
// worker's types, submits deltas, and fetches published checkpoints from
// the artifact server hanzod names and from other workers at once,
// verifying every block against its CID and the manifest against hanzod's
// key. It can serve the checkpoints it holds to other workers
// (ArtifactServer).
package nodeclient

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/keys/edkey"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

// Config configures a Client.
type Config struct {
	Key  ed25519.PrivateKey
	Conn grpc.ClientConnInterface
	// Dir holds the node's artifact store (checkpoints fetched from
	// hanzod), created if missing.
	Dir string
	// Hardware the node reports when it registers: its accelerators,
	// backends and dtypes (hardware.Report; without accelerators, the cpu
	// entry of this host, hardware.Host), and the gpu model and VRAM of
	// older hanzods (empty: the report's largest accelerator,
	// hardware.Report.Summary).
	Hardware         hardware.Report
	Region, GPUModel string
	VRAMMiB          uint64
	Now              func() time.Time
	// ExtraSources are artifact servers besides hanzod's, typically other
	// workers run with --artifacts-listen: a checkpoint is fetched from
	// hanzod and all of them at once, and the fetch goes on from the others
	// when one leaves. A peer without a key is asked for it first (trust on
	// first use); the manifest must be signed by hanzod's key whoever
	// serves it. SetSources replaces them.
	ExtraSources []transfer.Peer
	// Role is what the node registers as: "" a compute node, "validator"
	// a validator (docs/validators.md).
	Role string
	// Hanzod, when set, is hanzod's instance key, which every request is
	// signed for (its audience, nodeauth.Auth). When nil the key is read
	// from HanzodKeyFile in Dir, or else learnt from hanzod's first
	// refusal (the trailer server.KeyTrailer: trust on first use, sound
	// over TLS) and written there; a hanzod that names another key is
	// refused either way.
	Hanzod ed25519.PublicKey
}

// Client implements worker.Orchestrator over gRPC.
type Client struct {
	cfg      Config
	node     pb.NodeServiceClient
	id       string
	mu       sync.Mutex // serialises signed requests: sequence numbers must arrive in order
	seq      uint64
	reserved uint64       // sequence numbers up to this are recorded on disk as used
	offset   atomic.Int64 // hanzod's clock minus ours (ns), measured from its replies
	store    *store.Store
	http     *http.Client

	hanzod ed25519.PublicKey // the audience of requests (nil: not known yet); guarded by mu
	pinned bool              // hanzod came from Config.Hanzod

	amu   sync.Mutex // guards what the artifact server reads, apart from mu (held across RPCs)
	arts  string     // artifact server of the last assignment: KEYHEX@host:port
	extra []transfer.Peer
	named map[string]time.Time // node ids hanzod named in an assignment → when
}

// New returns a client.
func New(cfg Config) (*Client, error) {
	if len(cfg.Key) != ed25519.PrivateKeySize || cfg.Conn == nil || cfg.Dir == "" {
		return nil, errors.New("nodeclient: needs a key, a connection and a directory")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Hardware = defaultHardware(cfg.Hardware, hardware.Host)
	if gpu, vram := cfg.Hardware.Summary(); cfg.GPUModel == "" && cfg.VRAMMiB == 0 && vram > 0 {
		cfg.GPUModel, cfg.VRAMMiB = gpu, vram
	}
	if cfg.GPUModel == "" {
		cfg.GPUModel = "cpu"
	}
	if cfg.VRAMMiB == 0 {
		cfg.VRAMMiB = 1
	}
	st, err := store.Open(store.DefaultConfig(filepath.Join(cfg.Dir, "artifacts")))
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, node: pb.NewNodeServiceClient(cfg.Conn), id: hex.EncodeToString(cfg.Key.Public().(ed25519.PublicKey)),
		store: st, http: &http.Client{Timeout: 2 * time.Minute, Transport: transfer.NewTransport()},
		extra: slices.Clone(cfg.ExtraSources), named: map[string]time.Time{}}
	if c.seq, err = readSeq(c.seqPath()); err != nil {
		st.Close()
		return nil, err
	}
	c.reserved = c.seq
	c.hanzod, c.pinned = cfg.Hanzod, cfg.Hanzod != nil
	if c.hanzod == nil {
		if c.hanzod, err = readHanzodKey(filepath.Join(cfg.Dir, HanzodKeyFile)); err != nil {
			st.Close()
			return nil, err
		}
	}
	return c, nil
}

// HanzodKeyFile is the file in Config.Dir holding hanzod's instance key
// (hex) as first learnt: the node signs its requests for that hanzod only.
const HanzodKeyFile = "hanzod-key"

func readHanzodKey(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k, err := parseKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("nodeclient: %s: %w (delete it to learn hanzod's key again)", path, err)
	}
	return k, nil
}

func parseKey(h string) (ed25519.PublicKey, error) {
	raw, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("hanzod key %q is not hex", h)
	}
	if err := edkey.CheckPublicKey(raw); err != nil {
		return nil, fmt.Errorf("hanzod key %s: %s", h, edkey.Reason(err))
	}
	return ed25519.PublicKey(raw), nil
}

// Hanzod is the key of the hanzod this node signs for (nil until known).
func (c *Client) Hanzod() ed25519.PublicKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hanzod
}

// learnKey reads hanzod's key from a refusal's trailer: a node that knew
// none pins it (HanzodKeyFile) and reports true; one that knows another
// gets an error (it reached a different hanzod). Call with c.mu held.
func (c *Client) learnKey(tr metadata.MD) (bool, error) {
	v := tr.Get(KeyTrailer)
	if len(v) != 1 {
		return false, nil
	}
	k, err := parseKey(v[0])
	if err != nil {
		return false, fmt.Errorf("nodeclient: hanzod's trailer %s: %w", KeyTrailer, err)
	}
	if c.hanzod != nil {
		if k.Equal(c.hanzod) {
			return false, nil
		}
		where := filepath.Join(c.cfg.Dir, HanzodKeyFile) + ", delete it if hanzod's key changed for good"
		if c.pinned {
			where = "configured"
		}
		return false, fmt.Errorf("nodeclient: this hanzod's key is %s, but the node signs for %x (%s): it reached a different hanzod", v[0], []byte(c.hanzod), where)
	}
	if err := atomicfile.WriteBytes(filepath.Join(c.cfg.Dir, HanzodKeyFile), 0o644, true, []byte(v[0]+"\n")); err != nil {
		return false, fmt.Errorf("nodeclient: record hanzod's key: %w", err)
	}
	c.hanzod = k
	return true, nil
}

// SeqFile is the file in Config.Dir holding the high-water mark of the
// node's sequence numbers (decimal): every number the node signs is below
// it, so a restarted node continues above them even if its clock went
// back.
const SeqFile = "auth-seq"

// seqReserve is how far ahead of use the high-water mark is written (in
// sequence numbers, which follow the clock in nanoseconds: ~18 minutes),
// so the file is rewritten every few minutes, not on every request.
const seqReserve = 1 << 40

// seqStep is the least the high-water mark is written ahead of the number
// in use (a million requests).
const seqStep = 1 << 20

func (c *Client) seqPath() string { return filepath.Join(c.cfg.Dir, SeqFile) }

func readSeq(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("nodeclient: %s: %w (delete it only if the node key is new)", path, err)
	}
	return v, nil
}

// Store is the node's artifact store (the checkpoints and base models it
// fetched).
func (c *Client) Store() *store.Store { return c.store }

// SetSources replaces the extra artifact sources (Config.ExtraSources).
func (c *Client) SetSources(peers []transfer.Peer) {
	c.amu.Lock()
	defer c.amu.Unlock()
	c.extra = slices.Clone(peers)
}

// Close closes the artifact store.
func (c *Client) Close() error { return c.store.Close() }

// ID is the node id.
func (c *Client) ID() string { return c.id }

// auth returns a fresh envelope; call with c.mu held. The timestamp is
// hanzod's time as measured (our clock plus the offset); the sequence
// number follows it in nanoseconds but never goes back, and is above the
// high-water mark on disk, so neither a clock step back nor a restart
// makes it look like a replay.
func (c *Client) auth() (nodeauth.Auth, error) {
	now := c.now()
	c.seq = max(c.seq+1, uint64(now.UnixNano()))
	if c.seq >= c.reserved {
		// Ahead of the clock (restarted at the mark on disk), numbers
		// grow one a request: a short step ahead suffices, so restarts do
		// not push them further ahead of hanzod's clock than it allows.
		r := max(c.seq+seqStep, uint64(now.UnixNano())+seqReserve)
		if err := atomicfile.WriteBytes(c.seqPath(), 0o644, true, []byte(strconv.FormatUint(r, 10)+"\n")); err != nil {
			return nodeauth.Auth{}, fmt.Errorf("nodeclient: record the sequence high-water mark: %w", err)
		}
		c.reserved = r
	}
	return nodeauth.Auth{Node: c.id, Seq: c.seq, Timestamp: now.UnixMilli(), Audience: c.hanzod}, nil
}

// unuse takes back the sequence number of a request hanzod refused as
// unauthenticated (refused before anything was recorded, so never
// accepted): seq and reserved are the values before it was signed. A
// number picked from a clock far off, before the offset was known, does
// not stay ahead of hanzod's clock, here or on disk. Call with c.mu held.
func (c *Client) unuse(seq, reserved uint64) error {
	c.seq = seq
	if c.reserved != reserved {
		if err := atomicfile.WriteBytes(c.seqPath(), 0o644, true, []byte(strconv.FormatUint(reserved, 10)+"\n")); err != nil {
			return fmt.Errorf("nodeclient: record the sequence high-water mark: %w", err)
		}
		c.reserved = reserved
	}
	return nil
}

// Offset is hanzod's clock minus the node's, as last measured.
func (c *Client) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// now is hanzod's time as the node estimates it: its clock plus the
// measured offset. Everything the node signs for hanzod or for other
// nodes (requests, artifact authorizations and their expiries) uses it,
// so nodes whose clocks disagree still agree on time.
func (c *Client) now() time.Time { return c.cfg.Now().Add(c.Offset()) }

// observe records hanzod's time serverMs, read in a reply to a request
// sent at t0 and answered at t1 (our clock): the offset is measured
// against the midpoint. It reports whether the offset moved by more than
// a second.
func (c *Client) observe(serverMs int64, t0, t1 time.Time) bool {
	if serverMs <= 0 {
		return false
	}
	mid := t0.Add(t1.Sub(t0) / 2)
	off := time.UnixMilli(serverMs).Sub(mid)
	moved := (off - c.Offset()).Abs() > time.Second
	c.offset.Store(int64(off))
	return moved
}

// signed runs one signed request: send signs a with the key and sends it,
// returning hanzod's time from the reply. A request refused as
// unauthenticated gives its sequence number back (unuse) and is signed
// again when its trailers taught the node something: hanzod's key, not
// known before (learnKey), or that our clock estimate was off by more
// than a second (a stale timestamp, or a sequence number behind after a
// clock step; once). Call with c.mu held.
func (c *Client) signed(send func(a nodeauth.Auth, opts ...grpc.CallOption) (int64, error)) error {
	timeFixed := false
	for attempt := 0; ; attempt++ {
		seq, reserved := c.seq, c.reserved
		a, err := c.auth()
		if err != nil {
			return err
		}
		var tr metadata.MD
		t0 := c.cfg.Now()
		ms, err := send(a, grpc.Trailer(&tr))
		t1 := c.cfg.Now()
		if err == nil {
			c.observe(ms, t0, t1)
			return nil
		}
		if status.Code(err) != codes.Unauthenticated {
			return err
		}
		if uerr := c.unuse(seq, reserved); uerr != nil {
			return errors.Join(err, uerr)
		}
		learnt, kerr := c.learnKey(tr)
		if kerr != nil {
			return fmt.Errorf("%w (%v)", kerr, err)
		}
		moved := false
		if v := tr.Get(TimeTrailer); len(v) == 1 {
			if ms, perr := strconv.ParseInt(v[0], 10, 64); perr == nil {
				moved = c.observe(ms, t0, t1)
			}
		}
		switch {
		case attempt < 2 && learnt:
		case attempt < 2 && moved && !timeFixed:
			timeFixed = true
		default:
			return err
		}
	}
}

// CallTimeout bounds a node request whose context has no deadline, and
// SubmitTimeout a delta's submission (an upload and the judge's
// verdict): a call to a replica whose host dropped off the network fails
// instead of holding the client (whose requests are serialised) until
// TCP gives up; the next goes to the replica that leads (Replicas).
const (
	CallTimeout   = 15 * time.Second
	SubmitTimeout = 2 * time.Minute
)

// callContext is ctx with timeout d unless ctx has a deadline.
func callContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// TimeTrailer is the trailer in which hanzod sends its clock with every
// NodeService reply (server.TimeTrailer), and KeyTrailer its instance key
// with every signed one (server.KeyTrailer).
const (
	TimeTrailer = "hanzod-time-ms"
	KeyTrailer  = "hanzod-key"
)

func pbAuth(a nodeauth.Auth) *pb.Auth {
	return &pb.Auth{Node: a.Node, Seq: a.Seq, TimestampMs: a.Timestamp, Signature: a.Sig}
}

// Register implements worker.Orchestrator.
func (c *Client) Register(ctx context.Context, ringAddr, probeAddr string) error {
	ctx, cancel := callContext(ctx, CallTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signed(func(a nodeauth.Auth, opts ...grpc.CallOption) (int64, error) {
		r := nodeauth.Register{Auth: a, Address: ringAddr, Region: c.cfg.Region, GPUModel: c.cfg.GPUModel, VRAMMiB: c.cfg.VRAMMiB, ProbeAddress: probeAddr, Role: c.cfg.Role,
			Hardware: c.cfg.Hardware}
		r.Sign(c.cfg.Key, r.SignedBytes())
		req := &pb.RegisterRequest{Auth: pbAuth(r.Auth), Address: r.Address, Region: r.Region,
			GpuModel: r.GPUModel, VramMib: r.VRAMMiB, ProbeAddress: probeAddr, Role: r.Role, Backends: r.Hardware.Backends, Dtypes: r.Hardware.DTypes}
		for _, x := range r.Hardware.Accelerators {
			req.Accelerators = append(req.Accelerators, &pb.Accelerator{Name: x.Name, TotalMib: x.TotalMiB, FreeMib: x.FreeMiB, Compute: x.Compute})
		}
		resp, err := c.node.Register(ctx, req, opts...)
		return resp.GetServerTimeMs(), err
	})
}

// Heartbeat implements worker.Orchestrator.
func (c *Client) Heartbeat(ctx context.Context) (worker.Assignment, error) {
	ctx, cancel := callContext(ctx, CallTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	var r *pb.HeartbeatResponse
	err := c.signed(func(a nodeauth.Auth, opts ...grpc.CallOption) (int64, error) {
		h := nodeauth.Heartbeat{Auth: a}
		h.Sign(c.cfg.Key, h.SignedBytes())
		var err error
		r, err = c.node.Heartbeat(ctx, &pb.HeartbeatRequest{Auth: pbAuth(h.Auth)}, opts...)
		return r.GetServerTimeMs(), err
	})
	if status.Code(err) == codes.NotFound {
		return worker.Assignment{}, fmt.Errorf("%w: %v", worker.ErrUnknownNode, err)
	}
	if err != nil {
		return worker.Assignment{}, err
	}
	return c.assignment(r.Assignment), nil
}

// ReportBandwidth implements worker.Orchestrator.
func (c *Client) ReportBandwidth(ctx context.Context, job string, kbps map[string]uint64) (worker.Assignment, error) {
	ctx, cancel := callContext(ctx, CallTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	var r *pb.ReportBandwidthResponse
	err := c.signed(func(a nodeauth.Auth, opts ...grpc.CallOption) (int64, error) {
		b := nodeauth.ReportBandwidth{Auth: a, Job: job}
		var links []*pb.Link
		for _, p := range sortedKeys(kbps) {
			b.Links = append(b.Links, nodeauth.Link{Peer: p, Kbps: kbps[p]})
			links = append(links, &pb.Link{Peer: p, Kbps: kbps[p]})
		}
		b.Sign(c.cfg.Key, b.SignedBytes())
		var err error
		r, err = c.node.ReportBandwidth(ctx, &pb.ReportBandwidthRequest{Auth: pbAuth(b.Auth), Job: job, Links: links}, opts...)
		return 0, err
	})
	if err != nil {
		return worker.Assignment{}, err
	}
	return c.assignment(r.Assignment), nil
}

// SubmitDelta implements worker.Orchestrator: the file and its traces go
// up in one UploadDelta stream (Upload), announced for the hanzod the
// node registered with.
func (c *Client) SubmitDelta(ctx context.Context, file, traces []byte) (worker.Verdict, error) {
	ctx, cancel := callContext(ctx, SubmitTimeout)
	defer cancel()
	hanzod := c.Hanzod()
	if hanzod == nil {
		return worker.Verdict{}, errors.New("nodeclient: hanzod's key is not known yet: register before submitting deltas")
	}
	r, err := Upload(ctx, c.node, c.cfg.Key, hanzod, c.now(), file, traces)
	if err != nil {
		return worker.Verdict{}, err
	}
	return worker.Verdict{Accepted: r.Accepted, Duplicate: r.Duplicate, Reason: r.Reason, Detail: r.Detail, Rebases: rebases(r.Rebases)}, nil
}

// ReportSuspect implements worker.Orchestrator.
func (c *Client) ReportSuspect(ctx context.Context, s worker.Suspect) error {
	ctx, cancel := callContext(ctx, CallTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signed(func(a nodeauth.Auth, opts ...grpc.CallOption) (int64, error) {
		r := nodeauth.ReportSuspect{Auth: a, Job: s.Job, ConfigID: s.ConfigID, Suspect: s.Node, Kind: s.Kind, Evidence: s.Evidence}
		r.Sign(c.cfg.Key, r.SignedBytes())
		_, err := c.node.ReportSuspect(ctx, &pb.ReportSuspectRequest{Auth: pbAuth(r.Auth), Job: s.Job, ConfigId: s.ConfigID,
			Suspect: s.Node, Kind: s.Kind, Evidence: s.Evidence}, opts...)
		return 0, err
	})
}

// FetchCheckpoint implements worker.Orchestrator: the checkpoint is fetched
// from hanzod's artifact server into the node's store (blocks already held
// are not fetched again), its manifest must be signed by hanzod's key, and
// it is read back as a PEFT adapter for a base model of shape mc, with the
// bytes of its outer optimiser's state (jobconf.OuterFile; nil if absent).
func (c *Client) FetchCheckpoint(ctx context.Context, root string, mc llama.Config) (*llama.Adapter, []byte, error) {
	rc, err := cid.Decode(root)
	if err != nil {
		return nil, nil, fmt.Errorf("nodeclient: checkpoint %q: %w", root, err)
	}
	client, peer, peers, err := c.sources(ctx)
	if err != nil {
		return nil, nil, err
	}
	g := transfer.Get{Client: client, Peers: peers, Store: c.store,
		Trust: func(k ed25519.PublicKey) bool { return k.Equal(peer.Key) }, Now: c.now}
	if _, _, err := transfer.GetArtifact(ctx, rc, g); err != nil {
		return nil, nil, fmt.Errorf("nodeclient: fetch checkpoint %s from %s and %d peer(s): %w", root, peer.URL, len(peers)-1, err)
	}
	dir := filepath.Join(c.cfg.Dir, "checkpoints", root)
	if _, err := os.Stat(filepath.Join(dir, peft.WeightsFile)); err != nil {
		err := atomicfile.Dir(dir, 0o755, func(tmp string) error { return c.store.Export(ctx, rc, tmp, "") })
		if err != nil && !errors.Is(err, fs.ErrExist) { // ErrExist: another fetch of the same root won
			return nil, nil, err
		}
	}
	a, _, err := peft.Read(dir, mc)
	if err != nil {
		return nil, nil, err
	}
	outer, err := os.ReadFile(filepath.Join(dir, jobconf.OuterFile))
	if errors.Is(err, fs.ErrNotExist) {
		outer, err = nil, nil
	}
	return a, outer, err
}

// sources are where artifacts are fetched from: hanzod's artifact server
// (named by the last assignment) first, then the extra peers that answer.
func (c *Client) sources(ctx context.Context) (*transfer.Client, transfer.Peer, []transfer.Peer, error) {
	c.amu.Lock()
	arts, extra := c.arts, slices.Clone(c.extra)
	c.amu.Unlock()
	if arts == "" {
		return nil, transfer.Peer{}, nil, errors.New("nodeclient: hanzod named no artifact server (start hanzod with --artifacts)")
	}
	peer, err := transfer.ParsePeer(arts)
	if err != nil {
		return nil, transfer.Peer{}, nil, err
	}
	client := &transfer.Client{Key: c.cfg.Key, HTTP: c.http, Now: c.now}
	peers := []transfer.Peer{peer}
	for _, p := range extra {
		if p.Key == nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			p, err = client.Resolve(rctx, p)
			cancel()
			if err != nil {
				continue // a peer that is not there is no source
			}
		}
		if !p.Key.Equal(c.cfg.Key.Public().(ed25519.PublicKey)) {
			peers = append(peers, p)
		}
	}
	return client, peer, peers, nil
}

// FetchBase makes the base-model artifact root complete in the node's
// store, fetched from hanzod's artifact server and the extra peers at
// once (blocks already held are not fetched again). Whoever signed its
// manifest, the content is the CID's: every block is verified against it
// and the whole DAG against the manifest (basecache checks the kind and
// the exported directory).
func (c *Client) FetchBase(ctx context.Context, root cid.Cid) error {
	client, peer, peers, err := c.sources(ctx)
	if err != nil {
		return err
	}
	if _, err := c.store.Artifact(root); err == nil {
		// Complete already: fetch only the blocks gone since (a block
		// that rotted is removed from the store when it is read).
		sess := c.store.Session()
		defer sess.Close()
		var cfg transfer.FetchConfig
		for _, p := range peers {
			cfg.Sources = append(cfg.Sources, client.Source(p))
		}
		if _, err := transfer.Fetch(ctx, root, sess, cfg); err != nil {
			return fmt.Errorf("nodeclient: repair base model %s from %s and %d peer(s): %w", root, peer.URL, len(peers)-1, err)
		}
		return nil
	}
	g := transfer.Get{Client: client, Peers: peers, Store: c.store, Now: c.now}
	if _, _, err := transfer.GetArtifact(ctx, root, g); err != nil {
		return fmt.Errorf("nodeclient: fetch base model %s from %s and %d peer(s): %w", root, peer.URL, len(peers)-1, err)
	}
	return nil
}

// RefuseJob implements worker.Orchestrator: the refusal, signed, goes into
// the job's record at hanzod (its status shows it). A reason longer than
// hanzod keeps is cut at a character boundary.
func (c *Client) RefuseJob(ctx context.Context, job, reason string) error {
	ctx, cancel := callContext(ctx, CallTimeout)
	defer cancel()
	if len(reason) > MaxReason {
		reason = strings.ToValidUTF8(reason[:MaxReason], "")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signed(func(a nodeauth.Auth, opts ...grpc.CallOption) (int64, error) {
		r := nodeauth.RefuseJob{Auth: a, Job: job, Reason: reason}
		r.Sign(c.cfg.Key, r.SignedBytes())
		_, err := c.node.RefuseJob(ctx, &pb.RefuseJobRequest{Auth: pbAuth(r.Auth), Job: job, Reason: reason}, opts...)
		return 0, err
	})
}

// MaxReason is the longest refusal reason hanzod records.
const MaxReason = 1024

func (c *Client) assignment(p *pb.Assignment) worker.Assignment {
	if p == nil {
		return worker.Assignment{}
	}
	a := worker.Assignment{Job: p.Job, State: p.JobState, Epoch: int(p.Epoch), Paused: p.Paused, Checkpoint: p.Checkpoint, JobBinding: p.JobBinding}
	c.noteAssignment(p)
	a.Rebases = rebases(p.Rebases)
	if p.Spec != nil {
		a.Spec = jobspec.FromProto(p.Spec)
	}
	for i, id := range p.ProbePeers {
		pe := worker.Peer{ID: id}
		if i < len(p.ProbeAddresses) {
			pe.Addr = p.ProbeAddresses[i]
		}
		a.ProbePeers = append(a.ProbePeers, pe)
	}
	if r := p.Ring; r != nil {
		ring := &worker.Ring{ConfigID: r.ConfigId, Generation: r.Generation}
		for _, g := range r.Groups {
			ring.Groups = append(ring.Groups, int(g))
		}
		for i, id := range r.Members {
			pe := worker.Peer{ID: id}
			if i < len(r.Addresses) {
				pe.Addr = r.Addresses[i]
			}
			ring.Members = append(ring.Members, pe)
		}
		a.Ring = ring
	}
	return a
}

// rebases converts the wire form of rebases.
func rebases(ps []*pb.Rebase) []worker.Rebase {
	var out []worker.Rebase
	for _, r := range ps {
		out = append(out, worker.Rebase{Epoch: int(r.Epoch), Sync: int(r.Sync), Checkpoint: r.Checkpoint, Digest: r.Digest})
	}
	return out
}

func sortedKeys(m map[string]uint64) []string { return slices.Sorted(maps.Keys(m)) }

var _ worker.Orchestrator = (*Client)(nil)

// defaultHardware is r with, when it lists no accelerator, the cpu entry
// host reads (none when host fails: the node then reports what r says).
func defaultHardware(r hardware.Report, host func() (hardware.Accelerator, error)) hardware.Report {
	if len(r.Accelerators) > 0 {
		return r
	}
	if h, err := host(); err == nil {
		r.Accelerators = []hardware.Accelerator{h}
	}
	return r
}
