// Package judge is hanzod's validator and merger. It checks every
// submitted delta in the order SPEC.md gives — the trailer key against the
// registered nodes before anything is hashed, signature and format without
// decompressing a tensor, metadata (job, epoch, step, sequence: a replayed
// delta is stale, two different deltas for one slot are equivocation),
// shapes, finite values, the norm bound every honest worker clips to — and
// records a typed verdict in the event log. Proven cheating (equivocation,
// a re-signed copy of an earlier delta, a norm above the bound, a
// spot-check that does not replay) is slashed with the evidence kept and
// the cheater is ejected from the ring; it forfeits every delta of the
// epoch it was caught in, and that epoch's reward. Tensors are
// decompressed only once the job, the ring, the slot and the declared
// shapes have been checked, within the job's adapter size and outside the
// judge's lock.
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
// The decisions are pure functions of their inputs (package epoch): the
// admission of a delta (epoch.Screen before decompressing, epoch.Admit) and the evaluation of an epoch — ring
// reconstruction, spot-checks, scores, the merge and the slashes and
// rewards that follow (epoch.Evaluate). The judge is the shell around them:
// it verifies the file, loads the inputs (the state machine's view, the
// accepted files, the ring history from the log), issues the resulting
// commands and writes and publishes the checkpoint.
//
// The judge runs on the leader only. The bytes an epoch's merge needs —
// accepted deltas, evidence, the checkpoints of record — go into a blob
// store every replica reads (package blob: the data directory with the
// embedded store, Valkey with replicas) before the verdict that depends
// on them is logged, so a standby that takes over mid-epoch merges the
// epoch. Every decision it makes goes through the state machine as a
// command, so the log, not the judge's memory, is the record.
package judge

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
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

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/dataset"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/orchestrator/blob"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	ostore "github.com/zooai/gym/orchestrator/store"
	"github.com/zooai/gym/protocol/checkpkg"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
	"github.com/zooai/gym/protocol/trace"
)

// Engine is what the judge needs of the orchestrator engine.
type Engine interface {
	Do(ctx context.Context, cmd state.Command) ([]state.Event, error)
	View(f func(m *state.Machine))
	Read(ctx context.Context, from uint64, max int) ([]ostore.Record, uint64, error)
	First(ctx context.Context) (uint64, error)
}

// DefaultShardSize and DefaultEvalSize are Config's ShardSize and
// EvalSize when they are 0.
const (
	DefaultShardSize = 128
	DefaultEvalSize  = 500
)

// Config's EpochGrace and BlobRetention when they are 0 (hanzod's flags
// show them as their defaults).
const (
	DefaultEpochGrace    = 2 * time.Minute
	DefaultBlobRetention = time.Hour
)

// Config configures a Judge.
type Config struct {
	DataDir string // checkpoints/ (the working copies) and, without Blobs, the blobs go here
	// Blobs keeps the accepted deltas, the evidence and the checkpoints
	// of record where every replica can read them (nil: a blob.Dir on
	// DataDir, for the embedded store's single replica).
	Blobs blob.Store
	Key   ed25519.PrivateKey // hanzod's key: signs records, seeds spot-check sampling
	// MinStake is what the signing key's account (its public key in hex,
	// as a node's) must have bonded in the embedded ledger before the
	// judge merges, publishes or settles anything — records signed by an
	// orchestrator nobody can slash are worth nothing. The daemon sets the
	// orchestrator role's minimum (ledger.MinStake, 50,000 GYM); 0: not
	// checked.
	MinStake ledger.Amount
	Store    *store.Store // content-addressed store checkpoints are published into
	Threads  int          // for evaluation and replay
	// ShardSize is the number of held-out problems ΔL is measured on
	// (default DefaultShardSize); EvalSize the number a checkpoint's
	// accuracy is measured on (default DefaultEvalSize).
	ShardSize, EvalSize int
	// EpochGrace is how long an epoch waits for members that have not
	// finished after the first one did (default 2 min).
	EpochGrace time.Duration
	// BlobRetention is how long a settled job's accepted deltas and
	// evidence stay in the blob store after this judge first saw the job
	// settled (0: one hour; negative: kept for ever). Until then a second
	// file for one of its slots can still be proven an equivocation and
	// an operator can read the files; then the leader deletes them
	// (Step). The checkpoints of record are kept: they are the product.
	BlobRetention time.Duration
	// Weights are α, β, γ of the quality score (zero: 0.5, 0.3, 0.2). What
	// an epoch pays is the state machine's rule (state.Config.EpochReward,
	// RewardPerSample).
	Weights [3]float64
	// Outliers says which deltas are replayed besides the keyed
	// spot-check share (epoch.Input.Outliers; zero: merge's defaults).
	Outliers merge.OutlierConfig
	// NoScreening leaves every check to the end of the epoch: nothing is
	// checked while it runs, a cheater is caught at the merge (the
	// behaviour before in-epoch screening, docs/byzantine.md; for
	// measuring what screening is worth).
	NoScreening bool
	// Base is the base model at hand (basemodel.Builtin, or a directory
	// given to hanzod, named by its CID), parsed once per process: the
	// plans of jobs naming it are checked against it, their deltas scored
	// and replayed on it.
	Base *basemodel.Base
	// Bases resolves the other bases jobs name by CID: from hanzod's own
	// artifact store, verified against the CID, parsed once per process
	// (basecache.Cache). nil: only jobs on Base are judged.
	Bases Bases
	// ModelWork says where the work that needs a job's base model runs —
	// replays, trace checks, the held-out evaluation of each epoch
	// (docs/validators.md, "Evaluations"): ModelWorkNodes, on validators
	// only (hanzod reads a base's config and tokenizer, never its
	// weights); ModelWorkSelf, by hanzod itself where the job asks no
	// validators; ModelWorkAuto (""), on nodes for a base named by CID and
	// by hanzod for the built-in base and Base.
	ModelWork string
	// Datasets resolves the datasets jobs name by CID: from hanzod's own
	// artifact store, verified against the CID (a basecache.Cache of
	// artifact.KindDataset). nil: only jobs on built-in tasks are judged.
	Datasets Datasets
	// NewPlan derives a job's plan from its spec, its base and, for a
	// dataset named by CID, its rows (nil: jobconf.FromSpecData). The
	// judge calls it once per job and spec, not on every step.
	NewPlan func(id string, s jobspec.Spec, base *basemodel.Base, data *task.Data) (jobconf.Plan, error)
	Log     *slog.Logger
	Now     func() time.Time
}

// Bases resolves base models named by CID (basecache.Cache implements it):
// Open parses the weights, OpenConfig only the config and tokenizer (and
// hashes the directory for its SHA3).
type Bases interface {
	Open(ctx context.Context, root cid.Cid) (*basemodel.Base, error)
	OpenConfig(ctx context.Context, root cid.Cid) (*basemodel.Base, error)
}

// Where the work that needs a base model runs (Config.ModelWork).
const (
	ModelWorkAuto  = "auto"
	ModelWorkNodes = "nodes"
	ModelWorkSelf  = "self"
)

// ParseModelWork checks a ModelWork setting ("" is ModelWorkAuto).
func ParseModelWork(s string) (string, error) {
	switch s {
	case "", ModelWorkAuto:
		return ModelWorkAuto, nil
	case ModelWorkNodes, ModelWorkSelf:
		return s, nil
	}
	return "", fmt.Errorf("judge: model work %q: want auto, nodes or self", s)
}

// Datasets resolves datasets named by CID to their verified directories
// (basecache.Cache implements it).
type Datasets interface {
	Dir(ctx context.Context, root cid.Cid) (string, error)
}

// Judge validates, scores and merges. Safe for concurrent use.
type Judge struct {
	cfg  Config
	eng  Engine
	log  *slog.Logger
	base *basemodel.Base

	mu        sync.Mutex                         // decisions on deltas and their commit; the maps below but templates
	templates map[string]*llama.Adapter          // job → an adapter of its shape (under tmu)
	failures  map[string]int                     // job/epoch → merges failed in a row
	seen      map[string]map[string]jobspec.Slot // job → node/tensor digest → slot (replay detection)
	waiting   map[string]time.Time               // job/epoch → when its first member finished
	ready     map[string]bool                    // job/epoch → its start is in the artifact store
	settledAt map[string]time.Time               // job → when this judge first saw it settled
	reclaimed map[string]bool                    // job → its deltas and evidence deleted by this judge
	// pendingChecks: job/epoch → the delegated checks its merge waits
	// for; selfCheck: job/slot → no validator could be asked, hanzod
	// checks it.
	pendingChecks map[string][]pendingCheck
	selfCheck     map[string]bool
	starved       map[string]bool       // job/slot → warned that no validator can be asked
	evalPkgs      map[string]string     // job/request digest → the evaluation package's CID
	smu           sync.Mutex            // a leaf lock: held only around screen and its ejections
	screen        map[string]*screening // job → its running epoch's screening (screen.go)

	history eventHistory // the log's ring configurations and money, read incrementally

	pmu   sync.Mutex // a leaf lock: held only around the plans map
	plans map[string]cachedPlan

	bmu     sync.Mutex      // a leaf lock: held only around builtin and loaded
	builtin *basemodel.Base // parsed when a job needs it and base is another
	loaded  map[string]bool // bases named by CID whose weights were decoded
	tmu     sync.Mutex      // a leaf lock: held only around the templates map

	cmu      sync.Mutex
	verdicts map[[2]string]uint64 // (verdict, reason) → count
	slashes  map[string]uint64    // offence → count
	merges   uint64
	mergeSec float64
	freed    blob.Reclaimed // the blobs of settled jobs deleted
	// The in-epoch screening's counters: checks made, cheaters ejected
	// while their epoch ran, and the lag from a cheater's first delta of
	// the epoch to its ejection (seconds and syncs).
	screenChecks, ejections uint64
	lagSec                  float64
	lagSyncs                uint64
}

func (j *Judge) countScreen(checks int) {
	j.cmu.Lock()
	j.screenChecks += uint64(checks)
	j.cmu.Unlock()
}

func (j *Judge) countEjection(e epoch.Ejection) {
	j.cmu.Lock()
	j.ejections++
	j.lagSec += e.Seconds
	j.lagSyncs += uint64(max(0, e.Syncs))
	j.cmu.Unlock()
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
	for _, o := range []string{"equivocation", "replay", "norm", "spot_check", "trace_check"} {
		fmt.Fprintf(w, "gym_hanzod_slashes_total{offence=%q} %d\n", o, j.slashes[o])
	}
	fmt.Fprintf(w, "# HELP gym_hanzod_bases_loaded Base models named by CID whose weights this hanzod decoded (0 while their model work runs on validators).\n# TYPE gym_hanzod_bases_loaded gauge\ngym_hanzod_bases_loaded %d\n", j.BaseLoads())
	fmt.Fprintf(w, "# HELP gym_hanzod_screen_checks_total Deltas checked (replayed or from their traces) while their epoch ran.\n# TYPE gym_hanzod_screen_checks_total counter\ngym_hanzod_screen_checks_total %d\n", j.screenChecks)
	fmt.Fprintf(w, "# HELP gym_hanzod_in_epoch_ejections_total Cheaters proven, slashed and ejected while their epoch ran.\n# TYPE gym_hanzod_in_epoch_ejections_total counter\ngym_hanzod_in_epoch_ejections_total %d\n", j.ejections)
	fmt.Fprintf(w, "# HELP gym_hanzod_ejection_lag_seconds_total Summed time from each ejected cheater's first accepted delta of the epoch to its ejection.\n# TYPE gym_hanzod_ejection_lag_seconds_total counter\ngym_hanzod_ejection_lag_seconds_total %g\n", j.lagSec)
	fmt.Fprintf(w, "# HELP gym_hanzod_ejection_lag_syncs_total Summed syncs from each ejected cheater's first delta of the epoch to the sync the epoch had reached at its ejection.\n# TYPE gym_hanzod_ejection_lag_syncs_total counter\ngym_hanzod_ejection_lag_syncs_total %d\n", j.lagSyncs)
	fmt.Fprintf(w, "# HELP gym_hanzod_merges_total Epochs merged and published.\n# TYPE gym_hanzod_merges_total counter\ngym_hanzod_merges_total %d\n", j.merges)
	fmt.Fprintf(w, "# HELP gym_hanzod_merge_seconds_total Time spent validating, merging and publishing epochs.\n# TYPE gym_hanzod_merge_seconds_total counter\ngym_hanzod_merge_seconds_total %g\n", j.mergeSec)
	fmt.Fprintf(w, "# HELP gym_hanzod_blobs_deleted_total Blobs (accepted deltas and their traces, evidence) of settled jobs deleted by this replica.\n# TYPE gym_hanzod_blobs_deleted_total counter\ngym_hanzod_blobs_deleted_total %d\n", j.freed.Blobs)
	fmt.Fprintf(w, "# HELP gym_hanzod_blob_bytes_reclaimed_total Bytes of the blobs of settled jobs deleted by this replica.\n# TYPE gym_hanzod_blob_bytes_reclaimed_total counter\ngym_hanzod_blob_bytes_reclaimed_total %d\n", j.freed.Bytes)
}

// Reclaimed is what this judge deleted of settled jobs' blobs so far.
func (j *Judge) Reclaimed() blob.Reclaimed {
	j.cmu.Lock()
	defer j.cmu.Unlock()
	return j.freed
}

// New returns a judge.
func New(cfg Config, eng Engine) (*Judge, error) {
	if len(cfg.Key) != ed25519.PrivateKeySize || cfg.Store == nil || cfg.DataDir == "" || cfg.Base == nil {
		return nil, errors.New("judge: needs a data directory, a key, an artifact store and the base model")
	}
	if cfg.Threads < 1 {
		cfg.Threads = 1
	}
	if cfg.Blobs == nil {
		d, err := blob.NewDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		cfg.Blobs = d
	}
	if cfg.ShardSize == 0 {
		cfg.ShardSize = DefaultShardSize
	}
	if cfg.EvalSize == 0 {
		cfg.EvalSize = DefaultEvalSize
	}
	if cfg.EpochGrace == 0 {
		cfg.EpochGrace = DefaultEpochGrace
	}
	if cfg.BlobRetention == 0 {
		cfg.BlobRetention = DefaultBlobRetention
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
	if cfg.NewPlan == nil {
		cfg.NewPlan = jobconf.FromSpecData
	}
	mw, err := ParseModelWork(cfg.ModelWork)
	if err != nil {
		return nil, err
	}
	cfg.ModelWork = mw
	j := &Judge{cfg: cfg, eng: eng, log: cfg.Log, base: cfg.Base,
		seen: map[string]map[string]jobspec.Slot{}, waiting: map[string]time.Time{}, ready: map[string]bool{},
		pendingChecks: map[string][]pendingCheck{}, selfCheck: map[string]bool{}, starved: map[string]bool{}, evalPkgs: map[string]string{},
		screen:    map[string]*screening{},
		settledAt: map[string]time.Time{}, reclaimed: map[string]bool{},
		templates: map[string]*llama.Adapter{}, failures: map[string]int{},
		verdicts: map[[2]string]uint64{}, slashes: map[string]uint64{},
		plans: map[string]cachedPlan{}, loaded: map[string]bool{},
	}
	return j, nil
}

// cachedPlan is a job's plan and the spec it was derived from.
type cachedPlan struct {
	spec jobspec.Spec
	plan jobconf.Plan
	err  error
}

// plan returns the plan of job id with spec s. It is derived once per job
// and spec (a spec never changes once accepted, but the cache is keyed by
// it all the same): deriving it checks the trainer settings against the
// base model, and Step asks for every running job every second, under the
// engine's lock.
//
// The job's base model is resolved first (baseFor); a base that cannot be
// had is an error that is not cached (it may be published later). Step
// resolves the bases of the jobs it looks at before it takes the engine's
// lock, so plan finds them parsed.
func (j *Judge) plan(id string, s jobspec.Spec) (jobconf.Plan, error) {
	j.pmu.Lock()
	if c, ok := j.plans[id]; ok && c.spec == s {
		j.pmu.Unlock()
		return c.plan, c.err
	}
	j.pmu.Unlock()
	// Not under pmu: a base resolved for the first time is exported,
	// hashed and parsed (basecache serialises that itself).
	base, err := j.baseFor(context.Background(), s.Model)
	if err != nil {
		return jobconf.Plan{}, err
	}
	data, err := j.dataFor(context.Background(), s)
	j.pmu.Lock()
	defer j.pmu.Unlock()
	if c, ok := j.plans[id]; ok && c.spec == s {
		return c.plan, c.err
	}
	if err != nil {
		if dataset.IsData(err) {
			// The rows do not fit the mapping: that will not change,
			// so the refusal is kept like any other plan's.
			j.plans[id] = cachedPlan{spec: s, err: err}
		}
		return jobconf.Plan{}, err
	}
	p, err := j.cfg.NewPlan(id, s, base, data)
	j.plans[id] = cachedPlan{spec: s, plan: p, err: err}
	return p, err
}

// OnNodes reports whether the work that needs model's weights runs on
// validators (Config.ModelWork): then the judge never loads them.
func (j *Judge) OnNodes(model string) bool {
	switch j.cfg.ModelWork {
	case ModelWorkNodes:
		return true
	case ModelWorkSelf:
		return false
	}
	_, byCID, err := jobspec.ModelCID(model)
	return err == nil && byCID && model != j.base.Name
}

// configOnly is base without its weights (what a judge on nodes keeps of
// the built-in base or Base).
func configOnly(b *basemodel.Base) *basemodel.Base {
	return &basemodel.Base{Name: b.Name, Weights: &llama.Weights{Cfg: b.Weights.Cfg}, Tokenizer: b.Tokenizer, SHA3: b.SHA3, ConfigOnly: true}
}

// BaseLoads is how many bases named by CID this judge decoded the weights
// of (0 while every job's model work runs on nodes).
func (j *Judge) BaseLoads() int {
	j.bmu.Lock()
	defer j.bmu.Unlock()
	return len(j.loaded)
}

// baseFor returns the base model a job names: the judge's own (Base), or a
// base named by CID from Bases (hanzod's store: verified, parsed once).
// For a job whose model work runs on nodes (OnNodes) it is a ConfigOnly
// base: the config, tokenizer and SHA3, no weights.
func (j *Judge) baseFor(ctx context.Context, model string) (*basemodel.Base, error) {
	onNodes := j.OnNodes(model)
	if model == j.base.Name {
		if onNodes {
			return configOnly(j.base), nil
		}
		return j.base, nil
	}
	root, byCID, err := jobspec.ModelCID(model)
	switch {
	case err != nil:
		return nil, err
	case !byCID:
		j.bmu.Lock()
		defer j.bmu.Unlock()
		if j.builtin == nil {
			if j.builtin, err = basemodel.Builtin(); err != nil {
				return nil, err
			}
		}
		if onNodes {
			return configOnly(j.builtin), nil
		}
		return j.builtin, nil
	case j.cfg.Bases == nil:
		return nil, fmt.Errorf("judge: no base-model store to find %s in", model)
	case onNodes:
		return j.cfg.Bases.OpenConfig(ctx, root)
	}
	b, err := j.cfg.Bases.Open(ctx, root)
	if err == nil {
		j.bmu.Lock()
		j.loaded[root.String()] = true
		j.bmu.Unlock()
	}
	return b, err
}

// dataFor returns the rows of the dataset spec s names by CID (from
// Datasets: hanzod's store, verified), nil for a built-in task. A dataset
// whose rows do not fit the mapping is an error, as for a worker.
func (j *Judge) dataFor(ctx context.Context, s jobspec.Spec) (*task.Data, error) {
	root, byCID, err := jobspec.DatasetCID(s.Dataset)
	switch {
	case err != nil || !byCID:
		return nil, nil // a built-in task, or a name NewPlan refuses
	case j.cfg.Datasets == nil:
		return nil, fmt.Errorf("judge: no dataset store to find %s in", s.Dataset)
	}
	dir, err := j.cfg.Datasets.Dir(ctx, root)
	if err != nil {
		return nil, err
	}
	return jobconf.LoadData(dir, s)
}

// Rejection reasons (Verdict.Reason, SubmitDeltaResponse.reason).
const (
	ReasonSignature    = epoch.ReasonSignature
	ReasonFormat       = epoch.ReasonFormat
	ReasonMetadata     = epoch.ReasonMetadata
	ReasonStale        = epoch.ReasonStale
	ReasonLate         = epoch.ReasonLate
	ReasonNotMember    = epoch.ReasonNotMember
	ReasonEquivocation = epoch.ReasonEquivocation
	ReasonReplay       = epoch.ReasonReplay
	ReasonShape        = epoch.ReasonShape
	ReasonNonFinite    = epoch.ReasonNonFinite
	ReasonNorm         = epoch.ReasonNorm
	ReasonSpotCheck    = epoch.ReasonSpotCheck
	ReasonTraces       = epoch.ReasonTraces
)

// Verdict is the judge's answer to a submitted delta (the server sends it
// as a SubmitDeltaResponse).
type Verdict struct {
	Accepted  bool
	Duplicate bool   // accepted before: the same file, or the same tensors under new metadata
	Reason    string // why it was rejected: one of the Reason constants
	Detail    string
	Digest    string // the file's signature digest
}

func reject(reason, format string, a ...any) Verdict {
	return Verdict{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

var accepted = Verdict{Accepted: true}
var duplicate = Verdict{Accepted: true, Duplicate: true}

// fileDigest is the signature digest of a delta file: SHA3-256 over
// header ‖ payload (everything but the 96-byte trailer).
func fileDigest(file []byte) string { return checkpkg.FileDigest(file) }

// submission is a parsed delta.
type submission struct {
	file   []byte
	digest string
	node   string
	meta   delta.MetadataFields
	sync   int
	// traces is the bundle the delta names (tracesCID), uncompressed and
	// checked; nil when it names none.
	traces    []byte
	tracesCID string
}

// Submit validates one delta file and records the verdict. An error is
// the judge's own failure (the log, the disk), never the delta's.
//
// The file costs the judge in proportion to what its sender may spend:
// the trailer's key is read at its fixed place and a file of an
// unregistered signer is refused before anything is hashed; then the
// signature, checksum and structure are verified without decompressing
// any tensor (delta.Inspect) and the verdicts that need no tensor data —
// the job, the epoch, membership, the slot, the declared shapes against
// the job's adapter — are given (epoch.Screen). Only then are the tensors
// decompressed, within exactly the job's adapter size and outside the
// judge's lock; the lock covers the decision and its commit.
func (j *Judge) Submit(ctx context.Context, file, traces []byte) (Verdict, error) {
	return j.counted(j.submit(ctx, file, traces, nil))
}

// counted counts a verdict by its outcome.
func (j *Judge) counted(resp Verdict, err error) (Verdict, error) {
	if err != nil {
		return Verdict{}, err
	}
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

// maxMetadataBytes bounds a submitted delta's __metadata__ entry (a worker
// writes a few hundred bytes).
const maxMetadataBytes = 64 << 10

// submit judges a file; with u set, one announced by u (SubmitUpload).
func (j *Judge) submit(ctx context.Context, file, traces []byte, u *Upload) (Verdict, error) {
	ra := bytes.NewReader(file)
	_, key, err := delta.PeekSigner(ra, int64(len(file)))
	if err != nil {
		return reject(ReasonFormat, "%v", err), nil
	}
	// Signature against the registered key: the trailer key must be a
	// registered node's — checked before the file is even hashed.
	node := hex.EncodeToString(key)
	var known bool
	j.eng.View(func(m *state.Machine) { _, known = m.Node(node) })
	if !known {
		return reject(ReasonSignature, "signed by %s, which is not a registered node", node), nil
	}
	digest := fileDigest(file)
	if u != nil {
		switch {
		case node != u.Node:
			return reject(ReasonSignature, "the file's trailer names %s; the upload was announced by %s", node, u.Node), nil
		case digest != u.Digest:
			return reject(ReasonFormat, "the file's digest is %s; the upload announced %s", digest, u.Digest), nil
		}
	}
	v, err := j.judge(ctx, file, traces, ra, node, digest)
	v.Digest = digest
	return v, err
}

func (j *Judge) judge(ctx context.Context, file, traces []byte, ra *bytes.Reader, node, digest string) (Verdict, error) {
	f, err := delta.Inspect(ctx, ra, int64(len(file)), delta.Limits{MaxTotalBytes: 64 << 20, MaxMetadataBytes: maxMetadataBytes})
	if err != nil {
		if errors.Is(err, delta.ErrSignature) {
			return reject(ReasonSignature, "%v", err), nil
		}
		return reject(ReasonFormat, "%v", err), nil
	}
	info := f.Info()
	if info.Metadata == nil {
		return reject(ReasonMetadata, "the delta has no __metadata__ entry (job, epoch, step, node, sequence are required)"), nil
	}
	meta, err := info.Metadata.Fields()
	if err != nil {
		return reject(ReasonMetadata, "%v", err), nil
	}
	if meta.Node != node {
		return reject(ReasonMetadata, "metadata names node %s but the file is signed by %s", meta.Node, node), nil
	}
	if _, err := jobconf.DTypeOf(info.Metadata); err != nil {
		return reject(ReasonMetadata, "%v", err), nil
	}
	s := &submission{file: file, digest: digest, node: node, meta: meta}
	sub := epoch.Submission{Node: node, Digest: digest, Meta: meta}
	sub.SyncKey, sub.HasSyncKey = info.Metadata.Get(jobconf.KeySync)
	sub.Binding, sub.HasBinding = info.Metadata.Get(jobconf.KeyBinding)
	for _, e := range info.Entries {
		if e.Name != delta.MetadataName {
			sub.Tensors = append(sub.Tensors, delta.Tensor{Name: e.Name, DType: e.DType, Shape: e.Shape})
		}
	}
	decoded := false
	// A first look without the lock: most refusals need nothing more.
	st, jobID, v, err := j.standing(ctx, s, false)
	if jobID == "" || err != nil {
		return v, err
	}
	first, more := epoch.Screen(sub, st)
	if first.Outcome == epoch.Duplicate && !more {
		// The very file accepted before (a retry, or a client sending a
		// worker's kept files): its traces were checked and kept then.
		return duplicate, nil
	}
	for {
		if more && !decoded {
			// The traces are checked (decompressed, hashed, read) outside
			// the lock, and only for a file no cheaper check refused.
			if v, ok := checkTraces(ctx, s, info.Metadata, traces); !ok {
				return v, nil
			}
			// Decompress outside the lock. Screen compared the declared
			// shapes with the job's adapter, so this is bounded by its size.
			for i := range sub.Tensors {
				t, err := f.Tensor(sub.Tensors[i].Name)
				if err != nil {
					return reject(ReasonFormat, "%v", err), nil
				}
				sub.Tensors[i] = t
			}
			sub.Decoded = epoch.Decode(st.Template, sub)
			decoded = true
		}
		j.mu.Lock()
		st, jobID, v, err = j.standing(ctx, s, true)
		if jobID == "" || err != nil {
			j.mu.Unlock()
			return v, err
		}
		var a epoch.Admission
		if a, more = epoch.Screen(sub, st); more && !decoded {
			j.mu.Unlock() // the job moved on since the first look: decode, then decide
			continue
		}
		if more {
			a = epoch.Admit(sub, st)
		}
		v, err = j.conclude(ctx, s, jobID, a)
		j.mu.Unlock()
		return v, err
	}
}

// standing reads the job's standing for s (the job's id "" with the
// verdict when there is no such job or plan). With full set, which needs
// j.mu, it also loads the adapter already accepted for the slot, if it is
// another file, and the job's tensor digests.
func (j *Judge) standing(ctx context.Context, s *submission, full bool) (epoch.Standing, string, Verdict, error) {
	var job state.Job
	var st epoch.Standing
	meta := s.meta
	j.eng.View(func(m *state.Machine) {
		var ok bool
		if job, ok = m.Job(meta.Job); ok {
			st.Member = contains(job.Ring, s.node)
			st.Held = job.Slots[jobspec.Slot{Epoch: int(meta.Epoch), Step: meta.Step, Node: s.node}]
			if t := job.Tally[s.node]; t != nil {
				st.LastSeq = t.LastSeq
			}
			// What follows reads only the job's id, spec, state and
			// epoch: drop the shared maps rather than clone them on every
			// submission.
			job.Slots, job.Tally, job.Suspects, job.Bandwidth = nil, nil, nil, nil
		}
	})
	if job.ID == "" {
		return st, "", reject(ReasonMetadata, "job %q does not exist", meta.Job), nil
	}
	var err error
	if st.Plan, err = j.plan(job.ID, job.Spec); err != nil {
		return st, "", reject(ReasonMetadata, "%v", err), nil
	}
	if st.Template, err = j.template(st.Plan); err != nil {
		return st, "", Verdict{}, err
	}
	st.Epoch, st.State, st.Open = job.Epoch, string(job.State), job.State == state.Running
	st.Binding = jobconf.Binding(j.cfg.Key.Public().(ed25519.PublicKey), job.ID)
	if !full {
		return st, job.ID, Verdict{}, nil
	}
	here := jobspec.Slot{Epoch: int(meta.Epoch), Step: meta.Step, Node: s.node}
	// A settled job's files are deleted after Config.BlobRetention: a
	// file for one of its slots can then be neither accepted nor proven
	// to conflict with the one held.
	gone := func(err error) bool { return job.Settled && errors.Is(err, blob.ErrNotFound) }
	if st.Held != "" && st.Held != s.digest {
		if st.HeldAdapter, _, err = j.loadDelta(ctx, job.ID, here, st.Template); gone(err) {
			return st, "", reject(ReasonLate, "job %s is settled and its deltas were deleted", job.ID), nil
		} else if err != nil {
			return st, "", Verdict{}, err
		}
	}
	if st.Seen, err = j.seenFor(ctx, job.ID, st.Template); gone(err) {
		return st, "", reject(ReasonLate, "job %s is settled and its deltas were deleted", job.ID), nil
	} else if err != nil {
		return st, "", Verdict{}, err
	}
	return st, job.ID, Verdict{}, nil
}

// conclude acts on an admission: records a rejection (punishing the
// offence it proves), or keeps an accepted file and records it. Call with
// j.mu held.
func (j *Judge) conclude(ctx context.Context, s *submission, job string, a epoch.Admission) (Verdict, error) {
	meta := s.meta
	here := jobspec.Slot{Epoch: int(meta.Epoch), Step: meta.Step, Node: s.node}
	s.sync = a.Sync
	switch a.Outcome {
	case epoch.Duplicate:
		return duplicate, nil
	case epoch.Rejected:
		resp, err := j.record(ctx, s, job, a.Reason, a.Detail)
		if err != nil || a.Offence == nil {
			return resp, err
		}
		files := []*submission{s}
		if o := a.Offence; o.Earlier != nil {
			first, dg, _ := j.readDelta(ctx, job, *o.Earlier, o.EarlierDigest)
			files = []*submission{{file: first, digest: dg}, s}
		}
		j.punish(ctx, job, s.node, a.Offence.Name, a.Offence.Detail, files)
		return resp, nil
	}
	// Accepted: keep the file (and its traces) where every replica reads
	// it, then record the verdict (the worker is answered after both).
	if s.tracesCID != "" {
		if err := j.cfg.Blobs.Put(ctx, tracesBlob(job, s.tracesCID), s.traces); err != nil {
			return Verdict{}, fmt.Errorf("judge: keep accepted delta's traces: %w", err)
		}
	}
	if err := j.cfg.Blobs.Put(ctx, deltaBlob(job, s.digest), s.file); err != nil {
		return Verdict{}, fmt.Errorf("judge: keep accepted delta: %w", err)
	}
	v := state.DeltaJudged{Job: job, Node: s.node, Epoch: a.Epoch, Sync: a.Sync, Step: meta.Step, Sequence: meta.Sequence,
		Samples: meta.Samples, Digest: s.digest, Accepted: true}
	if _, err := j.eng.Do(ctx, state.JudgeDelta{Verdict: v}); err != nil {
		if errors.Is(err, state.ErrPrecondition) {
			return reject(ReasonLate, "%v", err), nil
		}
		return Verdict{}, err
	}
	j.seen[job][s.node+"/"+a.TensorDigest] = here
	j.noteAccepted(job, a.Epoch, s.node)
	j.log.Debug("delta accepted", "job", job, "node", short(s.node), "epoch", a.Epoch, "sync", a.Sync)
	return accepted, nil
}

// template returns an adapter of the job's shape (cached: building one
// builds a trainer).
func (j *Judge) template(plan jobconf.Plan) (*llama.Adapter, error) {
	j.tmu.Lock()
	defer j.tmu.Unlock()
	if t, ok := j.templates[plan.Job]; ok {
		return t, nil
	}
	t, err := plan.InitialAdapter(plan.Base.Weights.Cfg)
	if err != nil {
		return nil, err
	}
	j.templates[plan.Job] = t
	return t, nil
}

// record logs a rejection attributable to a node of a job.
func (j *Judge) record(ctx context.Context, s *submission, job, reason, detail string) (Verdict, error) {
	v := state.DeltaJudged{Job: job, Node: s.node, Epoch: int(s.meta.Epoch), Sync: s.sync, Step: s.meta.Step,
		Sequence: s.meta.Sequence, Digest: s.digest, Reason: reason, Detail: trim(detail, 1024)}
	if _, err := j.eng.Do(ctx, state.JudgeDelta{Verdict: v}); err != nil {
		return Verdict{}, err
	}
	j.log.Info("delta rejected", "job", job, "node", short(s.node), "reason", reason, "detail", detail)
	return reject(reason, "%s", detail), nil
}

// Evidence is what a slash keeps: the offence and the signed files (their
// digests, signatures and metadata; the files themselves are kept under
// the data directory's evidence/ and are small enough to inline here).
type Evidence struct {
	Offence string `json:"offence"`
	Detail  string `json:"detail"`
	// Job and Epoch name the epoch of a ring frame's offence: a node
	// slashed on ring evidence forfeits that epoch's deltas and reward as
	// one slashed on submission or by a spot-check does (offenders reads
	// them back from the log).
	Job    string         `json:"job,omitempty"`
	Epoch  int            `json:"epoch,omitempty"`
	Files  []EvidenceFile `json:"files"`
	Frames []RingFrame    `json:"ring_frames,omitempty"` // signed ring frames (RingEvidence)
	// Verdicts are the signed verdicts of a delegated check, for a false
	// validation report (OffenceFalseVerdict).
	Verdicts []state.Ask `json:"verdicts,omitempty"`
}

// EvidenceFile is one signed delta of the evidence.
type EvidenceFile struct {
	Digest string `json:"digest"`
	Blob   string `json:"blob,omitempty"`  // its name in the blob store every replica reads
	Path   string `json:"path,omitempty"`  // the file, when the blob store is a directory
	Delta  string `json:"delta,omitempty"` // base64 of the whole file when it fits
}

const maxInlineEvidence = 24 << 10

// punish slashes node once per offence and slot (the reason names both),
// keeps the evidence and ejects the node from the ring.
func (j *Judge) punish(ctx context.Context, job, node, offence, detail string, files []*submission) {
	j.penalize(ctx, job, node, Evidence{Offence: offence, Detail: detail}, files)
}

// punishRing slashes and ejects node for a ring frame of epoch e above the
// norm bound.
func (j *Judge) punishRing(ctx context.Context, job string, e int, node, detail string, f RingFrame) {
	j.penalize(ctx, job, node, Evidence{Offence: "norm", Detail: detail, Job: job, Epoch: e, Frames: []RingFrame{f}}, nil)
}

func (j *Judge) penalize(ctx context.Context, job, node string, ev Evidence, files []*submission) {
	j.penalizeAt(ctx, job, node, ev, files, 0)
}

// penalizeAt is penalize for an offence proven by the delta of sync sync
// (0: not known). A member of a running epoch's ring is ejected while the
// epoch runs, and the others continue from a rebuilt state
// (afterEjection).
func (j *Judge) penalizeAt(ctx context.Context, job, node string, ev Evidence, files []*submission, sync int) {
	offence, detail := ev.Offence, ev.Detail
	var member bool
	var jb state.Job
	j.eng.View(func(m *state.Machine) {
		var ok bool
		if jb, ok = m.Job(job); ok && jb.State == state.Running && contains(jb.Ring, node) {
			member, jb = true, jb.Clone()
		}
	})
	for _, f := range files {
		if f == nil || len(f.file) == 0 {
			continue
		}
		name := "evidence/" + job + "/" + f.digest + ".delta"
		ef := EvidenceFile{Digest: f.digest}
		if err := j.cfg.Blobs.Put(ctx, name, f.file); err == nil || errors.Is(err, blob.ErrConflict) {
			ef.Blob = name
			if d, ok := j.cfg.Blobs.(*blob.Dir); ok {
				ef.Path = d.Path(name)
			}
		} else {
			j.log.Warn("evidence not kept", "job", job, "digest", f.digest, "err", err)
		}
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
	} else if err == nil && member {
		if err := j.afterEjection(ctx, jb, node, offence, sync); err != nil {
			j.log.Warn("no rebase after the ejection", "job", job, "node", short(node), "err", err)
		}
	}
}

// deltaBlob names an accepted delta file in the blob store: by the
// signature digest the log's verdict records.
func deltaBlob(job, digest string) string { return "deltas/" + job + "/" + digest + ".delta" }

// tracesBlob is the blob name of a trace bundle a delta of job names.
func tracesBlob(job, cid string) string { return "traces/" + job + "/" + cid + ".jsonl" }

// checkTraces checks the trace bundle a delta names against what the
// worker sent (traces, zstd-compressed): the same bytes (CID), a bundle
// that reads, every set the signer's, of the delta's job and epoch. A
// delta of a backend that cannot be replayed bit for bit must name one;
// traces sent with a delta that names none are refused too. On success
// s holds the bundle.
func checkTraces(ctx context.Context, s *submission, m *delta.Metadata, traces []byte) (Verdict, bool) {
	want, err := jobconf.TracesOf(m)
	if err != nil {
		return reject(ReasonTraces, "%v", err), false
	}
	be, err := jobconf.BackendOf(m)
	if err != nil {
		return reject(ReasonMetadata, "%v", err), false
	}
	switch {
	case want == "" && len(traces) > 0:
		return reject(ReasonTraces, "traces were sent with a delta whose metadata names none (%q)", jobconf.KeyTraces), false
	case want == "" && be != "go":
		return reject(ReasonTraces, "a %s delta must name its sync's rollout traces (metadata %q) and send them: hanzod checks it from them (docs/traces.md)", be, jobconf.KeyTraces), false
	case want == "":
		return Verdict{}, true
	case len(traces) == 0:
		return reject(ReasonTraces, "the delta names traces %s but none were sent", want), false
	}
	bundle, sets, err := jobconf.DecodeTraces(ctx, traces, want)
	if err != nil {
		return reject(ReasonTraces, "%v", err), false
	}
	for i, set := range sets {
		if h := set.Header; h.Job != s.meta.Job || h.Node != s.node || h.Epoch != int(s.meta.Epoch) {
			return reject(ReasonTraces, "trace set %d is of job %q node %.12s epoch %d, the delta of job %q node %.12s epoch %d",
				i+1, h.Job, h.Node, h.Epoch, s.meta.Job, s.node, s.meta.Epoch), false
		}
	}
	s.traces, s.tracesCID = bundle, want
	return Verdict{}, true
}

// legacyDeltaPath is where judges before the blob store kept an accepted
// delta (read when the blob is missing, for a data directory written by
// one).
func (j *Judge) legacyDeltaPath(job string, s jobspec.Slot) string {
	return filepath.Join(j.cfg.DataDir, "deltas", job, fmt.Sprintf("e%04d-s%08d-%s.delta", s.Epoch, s.Step, s.Node))
}

// AcceptedDelta returns the accepted delta file of job's slot sl (from
// the blob store, checked against the digest the log records).
func (j *Judge) AcceptedDelta(ctx context.Context, job string, sl jobspec.Slot) ([]byte, error) {
	b, _, err := j.readDelta(ctx, job, sl, "")
	return b, err
}

// readDelta returns the accepted file of slot sl and its digest: the one
// the log records for the slot (digest "" looks it up), read from the blob
// store and checked against it.
func (j *Judge) readDelta(ctx context.Context, job string, sl jobspec.Slot, digest string) ([]byte, string, error) {
	if digest == "" {
		j.eng.View(func(m *state.Machine) {
			if jb, ok := m.Job(job); ok {
				digest = jb.Slots[sl]
			}
		})
	}
	if digest == "" {
		return nil, "", fmt.Errorf("judge: slot %s of %s has no accepted delta", sl, job)
	}
	b, err := j.cfg.Blobs.Get(ctx, deltaBlob(job, digest))
	if errors.Is(err, blob.ErrNotFound) {
		if lb, lerr := os.ReadFile(j.legacyDeltaPath(job, sl)); lerr == nil {
			b, err = lb, nil
		}
	}
	if err != nil {
		return nil, digest, fmt.Errorf("judge: accepted delta of slot %s: %w", sl, err)
	}
	if got := fileDigest(b); got != digest {
		return nil, digest, fmt.Errorf("judge: accepted delta of slot %s: the stored file's digest is %s, the log's %s", sl, got, digest)
	}
	return b, digest, nil
}

// seenFor returns job's tensor digests (node/digest → slot), loading them
// from the accepted files on first use after a start.
func (j *Judge) seenFor(ctx context.Context, job string, template *llama.Adapter) (map[string]jobspec.Slot, error) {
	if s, ok := j.seen[job]; ok {
		return s, nil
	}
	s := map[string]jobspec.Slot{}
	var keys []jobspec.Slot
	j.eng.View(func(m *state.Machine) {
		if jb, ok := m.Job(job); ok {
			keys = make([]jobspec.Slot, 0, len(jb.Slots))
			for k := range jb.Slots {
				keys = append(keys, k)
			}
		}
	})
	for _, sl := range keys {
		a, _, err := j.loadDelta(ctx, job, sl, template)
		if err != nil {
			return nil, err
		}
		d := llama.Digest(a.Views())
		s[sl.Node+"/"+hex.EncodeToString(d[:])] = sl
	}
	j.seen[job] = s
	return s, nil
}

// loadDelta reads an accepted delta back (verifying it again: the disk is
// not trusted more than the network).
func (j *Judge) loadDelta(ctx context.Context, job string, sl jobspec.Slot, template *llama.Adapter) (*llama.Adapter, delta.MetadataFields, error) {
	d, err := j.loadDeltaBackend(ctx, job, sl, template)
	return d.adapter, d.meta, err
}

// storedDelta is an accepted delta read back.
type storedDelta struct {
	adapter *llama.Adapter
	meta    delta.MetadataFields
	backend string // jobconf.BackendOf
	dtype   string // jobconf.DTypeOf
	traces  string // jobconf.TracesOf: the CID of its trace bundle, or ""
}

// loadDeltaBackend is loadDelta that also returns the backend and dtype the
// delta's metadata claims (jobconf.BackendOf, DTypeOf) and the traces it
// names.
func (j *Judge) loadDeltaBackend(ctx context.Context, job string, sl jobspec.Slot, template *llama.Adapter) (storedDelta, error) {
	var out storedDelta
	b, _, err := j.readDelta(ctx, job, sl, "")
	if err != nil {
		return out, err
	}
	d, err := delta.Read(ctx, bytes.NewReader(b), delta.DefaultLimits())
	if err != nil {
		return out, fmt.Errorf("judge: accepted delta of slot %s no longer verifies: %w", sl, err)
	}
	if out.meta, err = d.Info.Metadata.Fields(); err != nil {
		return out, err
	}
	if out.backend, err = jobconf.BackendOf(d.Info.Metadata); err != nil {
		return out, err
	}
	if out.dtype, err = jobconf.DTypeOf(d.Info.Metadata); err != nil {
		return out, err
	}
	if out.traces, err = jobconf.TracesOf(d.Info.Metadata); err != nil {
		return out, err
	}
	out.adapter, err = jobconf.Decode(template, d.Tensors)
	return out, err
}

// loadTraces reads the trace bundle cid of job back from the blob store.
func (j *Judge) loadTraces(ctx context.Context, job, cid string) ([]*trace.Set, error) {
	b, err := j.cfg.Blobs.Get(ctx, tracesBlob(job, cid))
	if err != nil {
		return nil, fmt.Errorf("judge: traces %s: %w", cid, err)
	}
	return jobconf.ReadTraces(ctx, b, cid)
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
