// Package judge is hanzod's validator and merger. It checks every
// submitted delta in the order SPEC.md gives — signature against the
// registered key, format, metadata (job, epoch, step, sequence: a replayed
// delta is stale, two different deltas for one slot are equivocation),
// shapes, finite values, the norm bound every honest worker clips to — and
// records a typed verdict in the event log. Proven cheating (equivocation,
// a re-signed copy of an earlier delta, a norm above the bound, a
// spot-check that does not replay) is slashed with the evidence kept and
// the cheater is ejected from the ring.
//
// At the end of an epoch it reconstructs what an honest ring produced from
// the submitted deltas (ring.Reference, bit for bit) and flags nodes whose
// claimed base disagrees, re-executes a share of the deltas by
// deterministic replay, scores every delta (q = α·ΔL + β·S + γ·C on a
// held-out shard), merges each sync's deltas with the job's rule (package
// merge) into the checkpoint of record, publishes it in the PEFT layout
// into the content-addressed store with a signed publication record, pays
// the epoch's rewards and, when the job ends, writes its signed settlement.
//
// The judge runs on the leader only; its files (accepted deltas,
// evidence, checkpoints) live in the data directory. Every decision it
// makes goes through the state machine as a command, so the log, not the
// judge's memory, is the record.
package judge

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha3"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/model"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	ostore "github.com/zooai/gym/orchestrator/store"
)

// Engine is what the judge needs of the orchestrator engine.
type Engine interface {
	Do(ctx context.Context, cmd state.Command) ([]state.Event, error)
	View(f func(m *state.Machine))
	Read(ctx context.Context, from uint64, max int) ([]ostore.Record, uint64, error)
}

// Config configures a Judge.
type Config struct {
	DataDir string             // deltas/, evidence/ and checkpoints/ go here
	Key     ed25519.PrivateKey // hanzod's key: signs records, seeds spot-check sampling
	Store   *store.Store       // content-addressed store checkpoints are published into
	Threads int                // for evaluation and replay
	// ShardSize is the number of held-out problems ΔL is measured on
	// (default 128); EvalSize the number a checkpoint's accuracy is
	// measured on (default 500).
	ShardSize, EvalSize int
	// EpochGrace is how long an epoch waits for members that have not
	// finished after the first one did (default 2 min).
	EpochGrace time.Duration
	// Reward is paid from the treasury per epoch when it holds enough
	// (default 100 GYM).
	Reward  ledger.Amount
	Weights [3]float64 // α, β, γ of the quality score; zero: 0.5, 0.3, 0.2
	Log     *slog.Logger
	Now     func() time.Time
}

// Judge validates, scores and merges. Safe for concurrent use.
type Judge struct {
	cfg  Config
	eng  Engine
	log  *slog.Logger
	base *model.Weights

	mu        sync.Mutex
	templates map[string]*model.Adapter    // job → an adapter of its shape
	failures  map[string]int               // job/epoch → merges failed in a row
	seen      map[string]map[string]string // job → tensor digest → slot (replay detection)
	waiting   map[string]time.Time         // job/epoch → when its first member finished

	history eventHistory // the log's ring configurations and money, read incrementally

	cmu      sync.Mutex
	verdicts map[[2]string]uint64 // (verdict, reason) → count
	slashes  map[string]uint64    // offence → count
	merges   uint64
	mergeSec float64
}

func (j *Judge) countVerdict(verdict, reason string) {
	j.cmu.Lock()
	j.verdicts[[2]string{verdict, reason}]++
	j.cmu.Unlock()
}

func (j *Judge) countSlash(offence string) {
	j.cmu.Lock()
	j.slashes[offence]++
	j.cmu.Unlock()
}

func (j *Judge) countMerge(sec float64) {
	j.cmu.Lock()
	j.merges++
	j.mergeSec += sec
	j.cmu.Unlock()
}

// WriteMetrics writes the judge's counters in the Prometheus text format
// (docs/metrics.md): deltas by verdict and reason, slashes by offence,
// merges and the time they took.
func (j *Judge) WriteMetrics(w io.Writer) {
	j.cmu.Lock()
	defer j.cmu.Unlock()
	fmt.Fprintf(w, "# HELP gym_hanzod_deltas_total Deltas judged by verdict and rejection reason.\n# TYPE gym_hanzod_deltas_total counter\n")
	keys := make([][2]string, 0, len(j.verdicts))
	for k := range j.verdicts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a][0]+keys[a][1] < keys[b][0]+keys[b][1] })
	for _, k := range keys {
		fmt.Fprintf(w, "gym_hanzod_deltas_total{verdict=%q,reason=%q} %d\n", k[0], k[1], j.verdicts[k])
	}
	fmt.Fprintf(w, "# HELP gym_hanzod_slashes_total Slashes decided by the validator, by offence.\n# TYPE gym_hanzod_slashes_total counter\n")
	for _, o := range []string{"equivocation", "replay", "norm", "spot_check"} {
		fmt.Fprintf(w, "gym_hanzod_slashes_total{offence=%q} %d\n", o, j.slashes[o])
	}
	fmt.Fprintf(w, "# HELP gym_hanzod_merges_total Epochs merged and published.\n# TYPE gym_hanzod_merges_total counter\ngym_hanzod_merges_total %d\n", j.merges)
	fmt.Fprintf(w, "# HELP gym_hanzod_merge_seconds_total Time spent validating, merging and publishing epochs.\n# TYPE gym_hanzod_merge_seconds_total counter\ngym_hanzod_merge_seconds_total %g\n", j.mergeSec)
}

// New returns a judge.
func New(cfg Config, eng Engine) (*Judge, error) {
	if len(cfg.Key) != ed25519.PrivateKeySize || cfg.Store == nil || cfg.DataDir == "" {
		return nil, errors.New("judge: needs a data directory, a key and an artifact store")
	}
	if cfg.Threads < 1 {
		cfg.Threads = 1
	}
	if cfg.ShardSize == 0 {
		cfg.ShardSize = 128
	}
	if cfg.EvalSize == 0 {
		cfg.EvalSize = 500
	}
	if cfg.EpochGrace == 0 {
		cfg.EpochGrace = 2 * time.Minute
	}
	if cfg.Reward == 0 {
		cfg.Reward = 100 * ledger.GYM
	}
	if cfg.Weights == [3]float64{} {
		cfg.Weights = [3]float64{0.5, 0.3, 0.2}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	base, err := basemodel.Load()
	if err != nil {
		return nil, err
	}
	j := &Judge{cfg: cfg, eng: eng, log: cfg.Log, base: base,
		seen: map[string]map[string]string{}, waiting: map[string]time.Time{},
		templates: map[string]*model.Adapter{}, failures: map[string]int{},
		verdicts: map[[2]string]uint64{}, slashes: map[string]uint64{},
	}
	return j, nil
}

// Rejection reasons (SubmitDeltaResponse.reason).
const (
	ReasonSignature    = "signature"
	ReasonFormat       = "format"
	ReasonMetadata     = "metadata"
	ReasonStale        = "stale"
	ReasonLate         = "late"
	ReasonNotMember    = "not_member"
	ReasonEquivocation = "equivocation"
	ReasonReplay       = "replay"
	ReasonShape        = "shape"
	ReasonNonFinite    = "non_finite"
	ReasonNorm         = "norm"
	ReasonSpotCheck    = "spot_check"
)

func reject(reason, format string, a ...any) *pb.SubmitDeltaResponse {
	return &pb.SubmitDeltaResponse{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// fileDigest is the signature digest of a delta file: SHA3-256 over
// header ‖ payload (everything but the 96-byte trailer).
func fileDigest(file []byte) string {
	n := max(len(file)-delta.SignatureSize-ed25519.PublicKeySize, 0)
	d := sha3.Sum256(file[:n])
	return hex.EncodeToString(d[:])
}

// submission is a parsed delta.
type submission struct {
	file   []byte
	digest string
	node   string
	meta   delta.MetadataFields
	sync   int
	adapt  *model.Adapter
	tdig   string // digest of the tensors alone (replay detection)
}

// Submit validates one delta file and records the verdict.
func (j *Judge) Submit(ctx context.Context, file []byte) (*pb.SubmitDeltaResponse, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	resp, err := j.submit(ctx, file)
	if err != nil {
		return nil, err
	}
	resp.Digest = fileDigest(file)
	switch {
	case resp.Duplicate:
		j.countVerdict("duplicate", "")
	case resp.Accepted:
		j.countVerdict("accepted", "")
	default:
		j.countVerdict("rejected", resp.Reason)
	}
	return resp, nil
}

func (j *Judge) submit(ctx context.Context, file []byte) (*pb.SubmitDeltaResponse, error) {
	lim := delta.DefaultLimits()
	lim.MaxTotalBytes = 64 << 20
	d, err := delta.Read(ctx, bytes.NewReader(file), lim)
	if err != nil {
		if errors.Is(err, delta.ErrSignature) {
			return reject(ReasonSignature, "%v", err), nil
		}
		return reject(ReasonFormat, "%v", err), nil
	}
	s := &submission{file: file, digest: fileDigest(file), node: hex.EncodeToString(d.Info.PublicKey)}

	// Signature against the registered key: the trailer key must be a
	// registered node's.
	var job state.Job
	var known, member bool
	var slotDigest string
	var tally state.Tally
	var meta delta.MetadataFields
	if d.Info.Metadata == nil {
		return reject(ReasonMetadata, "the delta has no __metadata__ entry (job, epoch, step, node, sequence are required)"), nil
	}
	meta, err = d.Info.Metadata.Fields()
	if err != nil {
		return reject(ReasonMetadata, "%v", err), nil
	}
	s.meta = meta
	j.eng.View(func(m *state.Machine) {
		_, known = m.Node(s.node)
		var ok bool
		if job, ok = m.Job(meta.Job); ok {
			member = contains(job.Ring, s.node)
			slotDigest = job.Slots[jobspec.Slot{Epoch: int(meta.Epoch), Step: meta.Step, Node: s.node}]
			if t := job.Tally[s.node]; t != nil {
				tally = *t
			}
			// What follows reads only the job's id, spec, state and
			// epoch: drop the shared maps rather than clone them on every
			// submission.
			job.Slots, job.Tally, job.Suspects, job.Bandwidth = nil, nil, nil, nil
		}
	})
	if !known {
		return reject(ReasonSignature, "signed by %s, which is not a registered node", s.node), nil
	}
	if meta.Node != s.node {
		return reject(ReasonMetadata, "metadata names node %s but the file is signed by %s", meta.Node, s.node), nil
	}
	if job.ID == "" {
		return reject(ReasonMetadata, "job %q does not exist", meta.Job), nil
	}
	plan, err := jobconf.FromSpec(job.ID, job.Spec)
	if err != nil {
		return reject(ReasonMetadata, "%v", err), nil
	}
	epoch, k, ok := plan.SyncOf(meta.Step)
	if !ok || epoch != int(meta.Epoch) {
		return j.record(ctx, s, job.ID, ReasonMetadata, fmt.Sprintf("step %d of epoch %d ends no sync of the job (syncs every %d steps, %d per epoch)", meta.Step, meta.Epoch, plan.Interval, plan.StepsPerEpoch))
	}
	s.sync = k
	if raw, ok := d.Info.Metadata.Get(jobconf.KeySync); !ok || string(raw) != fmt.Sprint(k) {
		return j.record(ctx, s, job.ID, ReasonMetadata, fmt.Sprintf("metadata sync %s, step %d is sync %d", raw, meta.Step, k))
	}
	if meta.Samples != plan.Samples() {
		return j.record(ctx, s, job.ID, ReasonMetadata, fmt.Sprintf("samples %d, a sync of this job trains on %d", meta.Samples, plan.Samples()))
	}
	if slotDigest != "" {
		if slotDigest == s.digest {
			return &pb.SubmitDeltaResponse{Accepted: true, Duplicate: true}, nil
		}
		// The same tensors under new metadata are a worker that restarted
		// and trained the sync again (deterministically): a duplicate.
		// Different tensors for one slot are equivocation.
		if same, err := j.sameTensors(ctx, job, s, d.Tensors); err != nil {
			return nil, err
		} else if same {
			return &pb.SubmitDeltaResponse{Accepted: true, Duplicate: true}, nil
		}
		return j.equivocation(ctx, s, job, slotDigest)
	}
	if meta.Sequence <= tally.LastSeq {
		return j.record(ctx, s, job.ID, ReasonStale, fmt.Sprintf("sequence %d, the last accepted was %d (a replayed delta)", meta.Sequence, tally.LastSeq))
	}
	if int(meta.Epoch) != job.Epoch || job.State != state.Running {
		return j.record(ctx, s, job.ID, ReasonLate, fmt.Sprintf("job is %s in epoch %d; this delta is for epoch %d", job.State, job.Epoch, meta.Epoch))
	}
	if !member {
		return j.record(ctx, s, job.ID, ReasonNotMember, "the node is not in the job's ring")
	}
	template, err := j.template(plan)
	if err != nil {
		return nil, err
	}
	s.adapt, err = jobconf.Decode(template, d.Tensors)
	switch {
	case errors.Is(err, jobconf.ErrNonFinite):
		return j.record(ctx, s, job.ID, ReasonNonFinite, err.Error())
	case err != nil:
		return j.record(ctx, s, job.ID, ReasonShape, err.Error())
	}
	bound := plan.ClipNorm(template.NumParams())
	if n := jobconf.Norm(s.adapt); n > bound*(1+1e-6) {
		resp, err := j.record(ctx, s, job.ID, ReasonNorm, fmt.Sprintf("norm %.6g above the bound %.6g every honest contribution is clipped to", n, bound))
		if err == nil {
			j.punish(ctx, job.ID, s.node, "norm", fmt.Sprintf("delta for slot %s has norm %.6g > bound %.6g", jobspec.Slot{Epoch: epoch, Step: meta.Step, Node: s.node}.String(), n, bound), []*submission{s})
		}
		return resp, err
	}
	td := model.Digest(s.adapt.Tensors())
	s.tdig = hex.EncodeToString(td[:])
	seen, err := j.seenFor(ctx, job.ID, template)
	if err != nil {
		return nil, err
	}
	// A node's own earlier tensors under a new slot are a re-signed copy.
	// An all-zero contribution (every group had equal rewards) can repeat
	// honestly and proves nothing.
	if prev, ok := seen[s.node+"/"+s.tdig]; ok && jobconf.Norm(s.adapt) > 0 {
		resp, err := j.record(ctx, s, job.ID, ReasonReplay, "the tensors are a copy of the delta accepted for slot "+prev)
		if err == nil {
			first, _ := os.ReadFile(j.deltaPath(job.ID, prev))
			j.punish(ctx, job.ID, s.node, "replay", "re-signed copy of the delta of slot "+prev+" submitted for slot "+jobspec.Slot{Epoch: epoch, Step: meta.Step, Node: s.node}.String(),
				[]*submission{{file: first, digest: fileDigest(first)}, s})
		}
		return resp, err
	}
	// Accepted: keep the file, then record the verdict.
	slot := jobspec.Slot{Epoch: epoch, Step: meta.Step, Node: s.node}.String()
	if err := os.MkdirAll(filepath.Dir(j.deltaPath(job.ID, slot)), 0o755); err != nil {
		return nil, err
	}
	if err := writeFile(j.deltaPath(job.ID, slot), file); err != nil {
		return nil, err
	}
	v := state.DeltaJudged{Job: job.ID, Node: s.node, Epoch: epoch, Sync: k, Step: meta.Step, Sequence: meta.Sequence,
		Samples: meta.Samples, Digest: s.digest, Accepted: true}
	if _, err := j.eng.Do(ctx, state.JudgeDelta{Verdict: v}); err != nil {
		if errors.Is(err, state.ErrPrecondition) {
			return reject(ReasonLate, "%v", err), nil
		}
		return nil, err
	}
	seen[s.node+"/"+s.tdig] = slot
	j.log.Debug("delta accepted", "job", job.ID, "node", short(s.node), "epoch", epoch, "sync", k)
	return &pb.SubmitDeltaResponse{Accepted: true}, nil
}

// sameTensors reports whether the delta accepted for s's slot carries the
// same tensors as ts.
func (j *Judge) sameTensors(ctx context.Context, job state.Job, s *submission, ts []delta.Tensor) (bool, error) {
	plan, err := jobconf.FromSpec(job.ID, job.Spec)
	if err != nil {
		return false, err
	}
	template, err := j.template(plan)
	if err != nil {
		return false, err
	}
	held, _, err := j.loadDelta(ctx, job.ID, jobspec.Slot{Epoch: int(s.meta.Epoch), Step: s.meta.Step, Node: s.node}.String(), template)
	if err != nil {
		return false, err
	}
	got, err := jobconf.Decode(template, ts)
	if err != nil {
		return false, nil
	}
	return model.Digest(held.Tensors()) == model.Digest(got.Tensors()), nil
}

// template returns an adapter of the job's shape (cached: building one
// builds a trainer). Call with j.mu held.
func (j *Judge) template(plan jobconf.Plan) (*model.Adapter, error) {
	if t, ok := j.templates[plan.Job]; ok {
		return t, nil
	}
	t, err := plan.InitialAdapter(j.base)
	if err != nil {
		return nil, err
	}
	j.templates[plan.Job] = t
	return t, nil
}

// record logs a rejection attributable to a node of a job.
func (j *Judge) record(ctx context.Context, s *submission, job, reason, detail string) (*pb.SubmitDeltaResponse, error) {
	v := state.DeltaJudged{Job: job, Node: s.node, Epoch: int(s.meta.Epoch), Sync: s.sync, Step: s.meta.Step,
		Sequence: s.meta.Sequence, Digest: s.digest, Reason: reason, Detail: trim(detail, 1024)}
	if _, err := j.eng.Do(ctx, state.JudgeDelta{Verdict: v}); err != nil {
		return nil, err
	}
	j.log.Info("delta rejected", "job", job, "node", short(s.node), "reason", reason, "detail", detail)
	return reject(reason, "%s", detail), nil
}

func (j *Judge) equivocation(ctx context.Context, s *submission, job state.Job, held string) (*pb.SubmitDeltaResponse, error) {
	slot := jobspec.Slot{Epoch: int(s.meta.Epoch), Step: s.meta.Step, Node: s.node}.String()
	resp, err := j.record(ctx, s, job.ID, ReasonEquivocation, "a different delta ("+held[:16]+"…) is already accepted for slot "+slot)
	if err != nil {
		return nil, err
	}
	first, _ := os.ReadFile(j.deltaPath(job.ID, slot))
	j.punish(ctx, job.ID, s.node, "equivocation", "two different signed deltas for slot "+slot, []*submission{{file: first, digest: held}, s})
	return resp, nil
}

// Evidence is what a slash keeps: the offence and the signed files (their
// digests, signatures and metadata; the files themselves are kept under
// the data directory's evidence/ and are small enough to inline here).
type Evidence struct {
	Offence string         `json:"offence"`
	Detail  string         `json:"detail"`
	Files   []EvidenceFile `json:"files"`
	Frames  []RingFrame    `json:"ring_frames,omitempty"` // signed ring frames (RingEvidence)
}

// EvidenceFile is one signed delta of the evidence.
type EvidenceFile struct {
	Digest string `json:"digest"`
	Path   string `json:"path"`
	Delta  string `json:"delta,omitempty"` // base64 of the whole file when it fits
}

const maxInlineEvidence = 24 << 10

// punish slashes node once per offence and slot (the reason names both),
// keeps the evidence and ejects the node from the ring.
func (j *Judge) punish(ctx context.Context, job, node, offence, detail string, files []*submission) {
	j.penalize(ctx, job, node, Evidence{Offence: offence, Detail: detail}, files)
}

// punishRing slashes and ejects node for a ring frame above the norm bound.
func (j *Judge) punishRing(ctx context.Context, job, node, detail string, f RingFrame) {
	j.penalize(ctx, job, node, Evidence{Offence: "norm", Detail: detail, Frames: []RingFrame{f}}, nil)
}

func (j *Judge) penalize(ctx context.Context, job, node string, ev Evidence, files []*submission) {
	offence, detail := ev.Offence, ev.Detail
	for _, f := range files {
		if f == nil || len(f.file) == 0 {
			continue
		}
		p := filepath.Join(j.cfg.DataDir, "evidence", job, f.digest+".delta")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			_ = writeFile(p, f.file)
		}
		ef := EvidenceFile{Digest: f.digest, Path: p}
		if len(f.file) <= maxInlineEvidence {
			ef.Delta = base64.StdEncoding.EncodeToString(f.file)
		}
		ev.Files = append(ev.Files, ef)
	}
	b, _ := json.Marshal(ev)
	reason := trim(offence+": "+detail, 1024)
	var already bool
	j.eng.View(func(m *state.Machine) {
		for _, sl := range m.Account(node).Slashes {
			if sl.Reason == reason {
				already = true
			}
		}
	})
	if !already {
		if _, err := j.eng.Do(ctx, state.Slash{Node: node, Reason: reason, Evidence: b}); err != nil {
			j.log.Warn("slash refused", "node", short(node), "offence", offence, "err", err)
		} else {
			j.countSlash(offence)
			j.log.Warn("slashed", "job", job, "node", short(node), "offence", offence, "detail", detail)
		}
	}
	if _, err := j.eng.Do(ctx, state.Eject{Job: job, Node: node, Reason: offence + " proven by the validator"}); err != nil && !errors.Is(err, state.ErrPrecondition) {
		j.log.Warn("eject refused", "node", short(node), "err", err)
	}
}

func (j *Judge) deltaPath(job, slot string) string {
	return filepath.Join(j.cfg.DataDir, "deltas", job, slotFile(slot))
}

// slotFile names a slot's file: epoch-step-node.delta, sortable.
func slotFile(slot string) string {
	var e, st int
	var node string
	fmt.Sscanf(slot, "%d/%d/%s", &e, &st, &node)
	return fmt.Sprintf("e%04d-s%08d-%s.delta", e, st, node)
}

// seenFor returns job's tensor digests (node/digest → slot), loading them
// from the accepted files on first use after a start.
func (j *Judge) seenFor(ctx context.Context, job string, template *model.Adapter) (map[string]string, error) {
	if s, ok := j.seen[job]; ok {
		return s, nil
	}
	s := map[string]string{}
	var slots map[string]string
	j.eng.View(func(m *state.Machine) {
		if jb, ok := m.Job(job); ok {
			slots = make(map[string]string, len(jb.Slots))
			for k, v := range jb.Slots {
				slots[k.String()] = v
			}
		}
	})
	for slot := range slots {
		a, _, err := j.loadDelta(ctx, job, slot, template)
		if err != nil {
			return nil, err
		}
		d := model.Digest(a.Tensors())
		node := slot[lastSlash(slot)+1:]
		s[node+"/"+hex.EncodeToString(d[:])] = slot
	}
	j.seen[job] = s
	return s, nil
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// loadDelta reads an accepted delta back (verifying it again: the disk is
// not trusted more than the network).
func (j *Judge) loadDelta(ctx context.Context, job, slot string, template *model.Adapter) (*model.Adapter, delta.MetadataFields, error) {
	b, err := os.ReadFile(j.deltaPath(job, slot))
	if err != nil {
		return nil, delta.MetadataFields{}, fmt.Errorf("judge: accepted delta of slot %s: %w", slot, err)
	}
	d, err := delta.Read(ctx, bytes.NewReader(b), delta.DefaultLimits())
	if err != nil {
		return nil, delta.MetadataFields{}, fmt.Errorf("judge: accepted delta of slot %s no longer verifies: %w", slot, err)
	}
	meta, err := d.Info.Metadata.Fields()
	if err != nil {
		return nil, meta, err
	}
	a, err := jobconf.Decode(template, d.Tensors)
	return a, meta, err
}

// sampled reports whether a delta is spot-checked: a keyed hash of its
// digest below the job's share, so a worker cannot predict it.
func (j *Judge) sampled(digest string, bp int) bool {
	h := sha256.New()
	h.Write([]byte("zoo-gym/spot-check/v1\x00"))
	h.Write(j.cfg.Key.Seed())
	h.Write([]byte(digest))
	return int(binary.BigEndian.Uint64(h.Sum(nil))%10000) < bp
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// trim cuts s to at most n bytes at a character boundary: a cut inside a
// UTF-8 sequence would be logged as U+FFFD, longer than n and no longer a
// prefix of s.
func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func writeFile(path string, b []byte) error {
	return atomicfile.Write(path, 0o644, true, func(w io.Writer) error { _, err := w.Write(b); return err })
}
