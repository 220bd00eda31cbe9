package worker

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/protocol/attack"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/ring"
)

// Attacks a worker can be told to mount (Config.Attack). They exist only to
// demonstrate that the ring and the orchestrator detect them.
const (
	AttackSignFlip   = "signflip"   // contribution ×(−1000), not clipped, in the delta and the ring
	AttackNoise      = "noise"      // honest contribution plus Gaussian noise of norm 0.9·C (then clipped)
	AttackReplay     = "replay"     // from the second sync on, the first sync's tensors re-signed
	AttackEquivocate = "equivocate" // a second, different delta (×2) for every slot
	AttackRing       = "ring"       // honest deltas, but contribution ×(−1000) into the ring all-reduce
	// The in-bound attacks of the literature (package attack); they need
	// the honest updates of the sync (Config.Peek).
	AttackALIE         = "alie"          // μ − z·σ of the honest updates per coordinate, z = attack.DefaultALIEZ(n, Config.Colluders) unless AttackParams.ALIEZ
	AttackALIEAdaptive = "alie-adaptive" // ALIE at the largest z the judge's outlier tests (merge.Outliers, default bounds) do not flag
	AttackIPM          = "ipm"           // −ε·μ of the honest updates, ε = 2 unless AttackParams.IPMEpsilon
	AttackMimic        = "mimic"         // a copy of one honest node's update (the first by delta directory)
	AttackMimicNoise   = "mimic-noise"   // that copy plus Gaussian noise of 0.6 (AttackParams.MimicNoise) × the typical distance between honest updates
	// Attacks on the verification from traces (docs/traces.md).
	AttackScale   = "scale"   // the honest contribution ×1.5 (then clipped), with honest traces
	AttackRewards = "rewards" // honest deltas, traces claiming every reward 0.5 higher
	// Attacks of a validator (Config.Role RoleValidator) on its verdicts:
	// docs/validators.md.
	AttackVerdictPass = "verdict-pass" // every check passed, whatever it found
	AttackVerdictFail = "verdict-fail" // every check failed, whatever it found
	AttackVerdictFlip = "verdict-flip" // the opposite of what it found: a bad delta passed, a good one failed
)

// RoleValidator is Config.Role of a validator: it registers as one, never
// trains, and answers the trace checks hanzod assigns it
// (docs/validators.md).
const RoleValidator = "validator"

// NeedsPeek reports whether attack name needs the honest updates of a sync
// (Config.Peek).
func NeedsPeek(name string) bool {
	switch name {
	case AttackALIE, AttackALIEAdaptive, AttackIPM, AttackMimic, AttackMimicNoise:
		return true
	}
	return false
}

// AttackParams are the strengths of the in-bound attacks; zero values take
// package attack's defaults (docs/threat-model.md, "In-bound attacks").
type AttackParams struct {
	// ALIEZ, when set, is alie's z; nil: attack.DefaultALIEZ(n, f), n the
	// ring's members and f Config.Colluders.
	ALIEZ *float64
	// IPMEpsilon is ipm's ε (> 0; 0: attack.DefaultIPMEpsilon).
	IPMEpsilon float64
	// MimicNoise is mimic-noise's noise as a multiple of the typical
	// distance between the honest updates (> 0; 0:
	// attack.DefaultMimicNoise).
	MimicNoise float64
}

// Check reports whether p holds valid values, each for an attack that
// uses it: a strength given for another attack is an error rather than
// silently unused.
func (p AttackParams) Check(name string) error {
	switch {
	case p.ALIEZ != nil && (math.IsNaN(*p.ALIEZ) || math.IsInf(*p.ALIEZ, 0)):
		return fmt.Errorf("%w: ALIE's z %v: want a finite number", ErrConfig, *p.ALIEZ)
	case p.ALIEZ != nil && name != AttackALIE:
		return fmt.Errorf("%w: ALIE's z is set for attack %q: it is alie's (alie-adaptive chooses its own)", ErrConfig, name)
	case p.IPMEpsilon < 0 || math.IsNaN(p.IPMEpsilon) || math.IsInf(p.IPMEpsilon, 0):
		return fmt.Errorf("%w: IPM's ε %v: want a positive number (0: the default, %v)", ErrConfig, p.IPMEpsilon, attack.DefaultIPMEpsilon)
	case p.IPMEpsilon != 0 && name != AttackIPM:
		return fmt.Errorf("%w: IPM's ε is set for attack %q: it is ipm's", ErrConfig, name)
	case p.MimicNoise < 0 || math.IsNaN(p.MimicNoise) || math.IsInf(p.MimicNoise, 0):
		return fmt.Errorf("%w: the noisy mimic's scale %v: want a positive number (0: the default, %v)", ErrConfig, p.MimicNoise, attack.DefaultMimicNoise)
	case p.MimicNoise != 0 && name != AttackMimicNoise:
		return fmt.Errorf("%w: the noisy mimic's scale is set for attack %q: it is mimic-noise's", ErrConfig, name)
	}
	return nil
}

// Defaults.
const (
	DefaultHeartbeat    = 2 * time.Second
	DefaultMinGap       = 1100 * time.Millisecond // hanzod refuses heartbeats closer than 1 s (by its clock: keep a margin)
	DefaultProbeBytes   = 4 << 20
	DefaultProbeTimeout = 5 * time.Second
)

// ErrConfig is wrapped by every error about a worker configuration.
var ErrConfig = errors.New("worker: bad configuration")

// Bases resolves base models named by CID (basecache.Cache implements it).
type Bases interface {
	// Dir returns the verified directory of base model root (fetched
	// and cached as needed).
	Dir(ctx context.Context, root cid.Cid) (string, error)
	// Open returns base model root parsed, once per process.
	Open(ctx context.Context, root cid.Cid) (*basemodel.Base, error)
}

// Datasets resolves the datasets jobs name by CID (a basecache.Cache of
// artifact.KindDataset implements it).
type Datasets interface {
	// Dir returns the verified directory of dataset root (fetched and
	// cached as needed).
	Dir(ctx context.Context, root cid.Cid) (string, error)
}

// Constraints are the operator's limits on the jobs a worker runs: a zero
// field accepts anything.
type Constraints struct {
	Model                   string   // MODEL_NAME
	Beta                    *float64 // GSPO_BETA
	LoRARank                int      // LORA_RANK
	ImportanceSamplingLevel string   // IMPORTANCE_SAMPLING_LEVEL
}

// Check reports why spec does not match c, or nil.
func (c Constraints) Check(spec jobspec.Spec) error {
	switch {
	case c.Model != "" && spec.Model != c.Model:
		return fmt.Errorf("model %q, this worker runs only %q", spec.Model, c.Model)
	case c.Beta != nil && spec.GSPO.Beta != *c.Beta:
		return fmt.Errorf("gspo beta %g, this worker runs only %g", spec.GSPO.Beta, *c.Beta)
	case c.LoRARank != 0 && spec.GSPO.LoRARank != c.LoRARank:
		return fmt.Errorf("lora_rank %d, this worker runs only %d", spec.GSPO.LoRARank, c.LoRARank)
	case c.ImportanceSamplingLevel != "" && spec.GSPO.ImportanceSamplingLevel != c.ImportanceSamplingLevel:
		return fmt.Errorf("importance_sampling_level %q, this worker runs only %q", spec.GSPO.ImportanceSamplingLevel, c.ImportanceSamplingLevel)
	}
	return nil
}

// Config configures a Worker. Key and Orchestrator are required.
type Config struct {
	Key          ed25519.PrivateKey
	Orchestrator Orchestrator

	// ListenAddr is where the ring transport listens (host:port, port 0
	// picks one); ProbeAddr is where the bandwidth probe server listens.
	ListenAddr, ProbeAddr string
	// AdvertiseHost, when set, replaces the host of both listening
	// addresses in what is registered with the orchestrator (for a
	// wildcard listen address).
	AdvertiseHost string
	// MetricsAddr, when set (host:port, port 0 picks one), serves the
	// worker's and its ring's metrics in the Prometheus text format at
	// /metrics (docs/metrics.md).
	MetricsAddr string
	// Artifacts, when set, is served on ArtifactsAddr (host:port, port 0
	// picks one) from the start of Run to its end: the node's artifact
	// server (nodeclient.Client.ArtifactServer), from which other workers
	// fetch the checkpoints this one holds. Off when nil.
	Artifacts     http.Handler
	ArtifactsAddr string
	// PlainRing switches the ring's TLS off; allowed on loopback only.
	PlainRing bool
	// RingStreams is the number of TCP streams to the ring successor; 0
	// (the default) chooses it per link from the round trip measured when
	// the link connects (tcp.AutoStreams).
	RingStreams int

	// DataDir, when set, keeps the delta sequence counter and every
	// accepted delta file (DataDir/deltas/).
	DataDir string
	Threads int // trainer threads (default 1); only changes the speed
	// Base is a base model held locally (the built-in one, or a directory
	// the operator gave, named by its CID), parsed once by the process and
	// shared read-only (nil: New uses basemodel.Builtin). A job naming it
	// trains on it without fetching anything.
	Base *basemodel.Base
	// Bases resolves the other bases jobs name by CID: fetched from hanzod
	// and peers, verified against the CID, cached under the data directory
	// and parsed once (basecache.Cache over the node's artifact store).
	// nil: the worker refuses jobs on any other base than Base and the
	// built-in one.
	Bases Bases
	// Datasets resolves the datasets jobs name by CID: fetched from
	// hanzod and peers, verified against the CID and cached under the
	// data directory, like Bases. nil: the worker refuses jobs on a
	// dataset (it takes only built-in tasks).
	Datasets Datasets
	// MemoryLimit is the most memory, in bytes, a job may need by
	// jobconf.EstimateMemory (computed from the base's config.json before
	// it is loaded): a job that needs more is refused. 0: the host's
	// available memory when the job arrives (MemAvailable); negative: no
	// check.
	MemoryLimit int64
	// Backend trains for the worker (nil: the go backend). The worker
	// takes only jobs it can serve (jobconf.Plan.Serves) and records its
	// name in every delta; it does not close it.
	Backend backend.Backend

	// Heartbeat is the interval of the background heartbeat; MinGap the
	// least time between two orchestrator heartbeat calls (hanzod refuses
	// closer ones), which is also how often the worker polls while it
	// waits for a ring change or the next epoch.
	Heartbeat, MinGap time.Duration
	// MaxBackoff bounds the wait between retries of failing calls.
	MaxBackoff time.Duration
	// RingTimeout is the ring's neighbour silence timeout (default 30 s).
	RingTimeout time.Duration
	// ProbeBytes is what the probe server sends per connection; a
	// measurement of a peer (up to three transfers, the fastest counting;
	// one cut short counts with what arrived) ends after ProbeTimeout, and
	// a peer from which no byte arrived counts as 0 kbit/s.
	ProbeBytes   int
	ProbeTimeout time.Duration

	Constraints Constraints
	// Role is "" for a compute node, RoleValidator for a validator: it
	// polls for checks every CheckPoll (default 2 s) instead of training,
	// and its Orchestrator must implement Checks.
	Role      string
	CheckPoll time.Duration
	// Attack makes the worker misbehave (see the Attack constants). For
	// demonstrations and tests of detection only.
	Attack string
	// Peek returns the honest updates of a sync (flattened as
	// jobconf.Flatten lays them out, in a fixed order) for the attacks that
	// need them (NeedsPeek): an omniscient attacker's side channel that
	// only test clusters provide (PeekDirs; docs/threat-model.md). It may
	// return fewer than all honest updates, or none (the attack then uses
	// the worker's own honest update as the only one it knows).
	Peek func(ctx context.Context, job string, epoch, sync int) ([][]float32, error)
	// Colluders is f, the number of attacking workers, for ALIE's z
	// (attack.DefaultALIEZ with n the ring's members) and the copies of
	// adaptive ALIE's vector among the deltas it tests; 0 means 1.
	Colluders int
	// AttackParams are the in-bound attacks' strengths (zero: the
	// defaults).
	AttackParams AttackParams
	// ExitWhenDone ends Run when the job the worker was assigned is
	// Published (nil) or Failed (ErrJobFailed).
	ExitWhenDone bool

	// OnEvent receives progress events, one call at a time (from more than
	// one goroutine over the worker's life). It must not block for long.
	OnEvent func(Event)
	Logger  *slog.Logger // warnings about transient failures; nil: discarded
	Clock   ring.Clock   // nil: the system clock
}

// DefaultConfig returns a configuration with the defaults filled in and
// loopback listen addresses.
func DefaultConfig() Config {
	return Config{
		ListenAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0", Threads: 1,
		Heartbeat: DefaultHeartbeat, MinGap: DefaultMinGap, MaxBackoff: 30 * time.Second,
		RingTimeout: ring.DefaultTimeout, ProbeBytes: DefaultProbeBytes, ProbeTimeout: DefaultProbeTimeout,
	}
}

// Validate checks c and fills zero fields with defaults.
func (c *Config) Validate() error {
	d := DefaultConfig()
	if len(c.Key) != ed25519.PrivateKeySize {
		return fmt.Errorf("%w: no node key", ErrConfig)
	}
	if c.Orchestrator == nil {
		return fmt.Errorf("%w: no orchestrator", ErrConfig)
	}
	if c.ListenAddr == "" {
		c.ListenAddr = d.ListenAddr
	}
	if c.ProbeAddr == "" {
		c.ProbeAddr = d.ProbeAddr
	}
	if c.Threads == 0 {
		c.Threads = d.Threads
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = d.Heartbeat
	}
	if c.MinGap == 0 {
		c.MinGap = d.MinGap
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = d.MaxBackoff
	}
	if c.RingTimeout == 0 {
		c.RingTimeout = d.RingTimeout
	}
	if c.ProbeBytes == 0 {
		c.ProbeBytes = d.ProbeBytes
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = d.ProbeTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = ring.SystemClock{}
	}
	switch {
	case c.Threads < 1:
		return fmt.Errorf("%w: %d threads", ErrConfig, c.Threads)
	case c.Heartbeat < 0 || c.MinGap < 0 || c.MaxBackoff < 0 || c.RingTimeout < 0 || c.ProbeTimeout < 0:
		return fmt.Errorf("%w: negative duration", ErrConfig)
	case c.ProbeBytes < 1:
		return fmt.Errorf("%w: probe bytes %d", ErrConfig, c.ProbeBytes)
	case c.Artifacts != nil && c.ArtifactsAddr == "":
		return fmt.Errorf("%w: an artifact server without a listen address", ErrConfig)
	case c.Artifacts == nil && c.ArtifactsAddr != "":
		return fmt.Errorf("%w: an artifact listen address without a server", ErrConfig)
	}
	if c.CheckPoll <= 0 {
		c.CheckPoll = 2 * time.Second
	}
	switch {
	case c.Role != "" && c.Role != RoleValidator:
		return fmt.Errorf("%w: role %q (empty for a compute node, or validator)", ErrConfig, c.Role)
	case strings.HasPrefix(c.Attack, "verdict-") != (c.Role == RoleValidator && c.Attack != ""):
		return fmt.Errorf("%w: attack %q is not one a %s mounts", ErrConfig, c.Attack, map[bool]string{true: "validator", false: "compute node"}[c.Role == RoleValidator])
	}
	if err := CheckAttack(c.Attack); err != nil {
		return err
	}
	return c.AttackParams.Check(c.Attack)
}

// CheckAttack reports whether name is an attack Config.Attack accepts ("" is
// none).
func CheckAttack(name string) error {
	switch name {
	case "", AttackSignFlip, AttackNoise, AttackReplay, AttackEquivocate, AttackRing, AttackALIE, AttackALIEAdaptive, AttackIPM, AttackMimic, AttackMimicNoise,
		AttackScale, AttackRewards, AttackVerdictPass, AttackVerdictFail, AttackVerdictFlip:
		return nil
	}
	return fmt.Errorf("%w: unknown attack %q (signflip, noise, replay, equivocate, ring, alie, alie-adaptive, ipm, mimic, mimic-noise, scale, rewards, verdict-pass, verdict-fail, verdict-flip)", ErrConfig, name)
}
