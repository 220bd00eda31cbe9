// Package localcluster runs the whole system on one machine: hanzod (the
// real daemon: store, engine, state machine, judge and gRPC server over a
// loopback listener) in this process, and N workers that reach it over
// gRPC, either as `gym worker` processes (the code path a user runs) or
// in this process (for fast tests). It is the one place besides cmd/ that
// wires the orchestrator and the workers together: `gym up` and the
// end-to-end and worker tests are built on it.
//
// Start brings hanzod up and makes and stakes the workers' keys;
// StartWorkers starts them; Submit submits a job and Follow watches
// hanzod's event log until the job ends. Run does all of that for one job
// and leaves the run's files (summary, event log, checkpoint, deltas,
// reward curve) in the cluster's directory. Progress is reported through
// Config.OnEvent; rendering it is the caller's business.
package localcluster

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/node/backend/torch"
	nodedaemon "github.com/zooai/gym/node/daemon"
	"github.com/zooai/gym/node/nodeclient"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/daemon"
	"github.com/zooai/gym/orchestrator/engine"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/server"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
)

// ErrConfig is wrapped by every error about a cluster configuration.
var ErrConfig = errors.New("localcluster: bad configuration")

// Config describes a cluster. Flags and tests map onto it.
type Config struct {
	// Dir holds hanzod's data (Dir/hanzod), its log (Dir/hanzod.log unless
	// Log is set) and each worker's key, log, events and deltas
	// (Dir/workers/wN).
	Dir string
	// Base is the base model, shared by hanzod and the in-process workers
	// (nil: Start uses basemodel.Builtin). Without ModelDir it is the
	// built-in one (or a base named "builtin" by a test).
	Base *basemodel.Base
	// ModelDir is a Hugging Face model directory the job trains: Start
	// publishes it as a base-model artifact into hanzod's store and sets
	// Base to its config and tokenizer (basemodel.OpenConfig, named by its
	// CID) for the cluster's own planning; the summary's accuracy comes
	// from hanzod's merge reports. Neither hanzod nor any worker is given it:
	// jobs name it by CID, and every worker fetches it from hanzod (and
	// peers), verifies it and caches it under its data directory; hanzod's
	// validator exports it from its store and verifies it the same way.
	ModelDir string
	// DatasetDir is a dataset directory (docs/datasets.md; dataset.Stage
	// makes one of a single file) Start publishes into hanzod's store as
	// a dataset artifact. Jobs name it by CID (basecache.DirCID of the
	// directory); every worker fetches it from hanzod and peers, verifies
	// and caches it, as a base model. A job on a dataset that is already
	// in hanzod's store needs no DatasetDir.
	DatasetDir string
	// MemoryLimit[i], when set, is worker i's memory limit in bytes
	// (worker.Config.MemoryLimit; gym worker --max-memory-mib).
	MemoryLimit []int64
	// Workers is the number of workers.
	Workers int
	// Gym is the path of the gym binary: workers run as `gym worker`
	// processes. Empty: workers run in this process (worker.New over the
	// same gRPC client).
	Gym string
	// Attacks[i], when set, makes worker i mount that attack
	// (worker.Attack*).
	Attacks []string
	// AttackParams are the in-bound attacks' strengths for every attacking
	// worker (zero: package attack's defaults).
	AttackParams worker.AttackParams
	// Validators adds a validator per entry (docs/validators.md), after
	// the workers, named v0, v1, …, each with 25,000 GYM bonded; an entry
	// that is not "" is the attack it mounts (worker.AttackVerdict*).
	Validators []string
	// ModelWork is hanzod's --model-work (judge.Config.ModelWork: "" is
	// auto — a base named by CID, as ModelDir's is, is checked and
	// evaluated by validators only, so such a job needs two of them).
	ModelWork string
	// CheckTimeout is how long a validator has for a check (0: the
	// state's default, 10 min).
	CheckTimeout time.Duration
	// Backends[i], when set, is worker i's training backend ("go" or
	// "torch"; default go). Torch workers run python -m
	// gym_protocol.backend with Python ("": $GYM_PYTHON, else python3) and
	// PythonEnv added to its environment.
	Backends  []string
	Python    string
	PythonEnv []string
	// TorchDevice and TorchDType are the torch workers' --torch-device
	// (cpu, cuda, cuda:N; "": cpu) and --torch-dtype ("": the base's).
	TorchDevice, TorchDType string
	// Key, when set, gives worker i its key (reproducible tests); by
	// default each worker gets a fresh one.
	Key func(i int) ed25519.PrivateKey

	// Threads bounds hanzod's validation and evaluation threads;
	// WorkerThreads each worker's training threads.
	Threads, WorkerThreads int
	// Heartbeat is the workers' heartbeat interval and MinGap the least
	// gap between two of their heartbeat calls (in process only: gym
	// worker keeps worker.DefaultMinGap); MinHeartbeatGap is what hanzod
	// refuses below, FailAfter how long a silent node stays a member.
	Heartbeat, MinGap, MinHeartbeatGap, FailAfter time.Duration
	// RingTimeout is how long a ring neighbour may stay silent.
	RingTimeout time.Duration
	// EpochGrace is how long an epoch waits for members that have not
	// finished once the first has.
	EpochGrace time.Duration
	// TickInterval is how often hanzod ticks its state machine.
	TickInterval time.Duration
	// EvalSize and ShardSize are the held-out problems hanzod's validator
	// measures a checkpoint's accuracy and a delta's score on (0: its
	// defaults, judge.DefaultEvalSize and DefaultShardSize); the summary's accuracy before and after is
	// measured on EvalSize problems too.
	EvalSize, ShardSize int
	// Outliers is hanzod's outlier replay configuration
	// (judge.Config.Outliers); every test off measures the attacks
	// without that defence.
	Outliers merge.OutlierConfig
	// NoScreening leaves every check to the epochs' ends
	// (judge.Config.NoScreening): what the screening is worth.
	NoScreening bool
	// NodeRate bounds each node's requests per second at hanzod.
	NodeRate float64
	// Stake is deposited and bonded for every worker (the eligibility
	// minimum by default); Treasury is deposited into the treasury, out of
	// which rewards are paid.
	Stake, Treasury ledger.Amount
	// MinEpochSamples is the least a job's epoch may train per worker
	// (state.Config.MinEpochSamples); 0: hanzod's default.
	MinEpochSamples uint64
	// RingGroups (≥ 2) runs the job's all-reduce in two levels over that
	// many groups (state.Config.Ring.Groups); 0: one flat ring.
	RingGroups int

	// IPFS, when set, is the RPC URL of a kubo node on which hanzod pins
	// every published checkpoint (daemon.Config.IPFS); Run then waits up
	// to PinWait for the job's checkpoints to be pinned and reports them
	// in the summary. PinMinBackoff and PinMaxBackoff bound the waits
	// between tries (0: the daemon's defaults).
	IPFS                         string
	PinWait                      time.Duration
	PinMinBackoff, PinMaxBackoff time.Duration

	// Kill, when set, kills one worker at a step (kill -9 for a process).
	Kill *Kill

	// Replicas is the number of hanzod replicas (0 or 1: one, in process,
	// on the embedded store). More run in this process over the Valkey
	// server at ValkeyURL, sharing one signing key (Dir/hanzod.key) and
	// the blob store, with leases of LeaseTTL (0: 1 s); the workers reach
	// whichever leads (gRPC health checking routes to the SERVING one).
	Replicas  int
	ValkeyURL string
	LeaseTTL  time.Duration
	// KillLeader, when set, abandons the leading replica (what kill -9
	// leaves: the lease is not released) once an accepted delta of a step
	// at or past Step (counted within the epoch, from 1) of Epoch is logged.
	KillLeader *KillLeader
	// Chain, when set, puts hanzod on a chain ledger (gym up --ledger
	// evm): Start makes the workers' keys first, calls Chain with them
	// (in worker order) to deploy, fund, stake and bind them on the
	// chain, and gives hanzod the link it returns (daemon.Config.Chain):
	// hanzod then admits only nodes staked on chain and mirrors rewards,
	// slashes, publications and job locks onto it. ChainReport, when set,
	// reads the job's record back from the chain for the summary once
	// hanzod's mirror has caught up with the log (Run waits up to
	// ChainWait for that, default two minutes).
	Chain       func(ctx context.Context, nodes []ed25519.PrivateKey) (*daemon.ChainLink, error)
	ChainReport func(ctx context.Context, job string) (*ChainSummary, error)
	ChainWait   time.Duration

	// Log receives hanzod's log; nil writes it to Dir/hanzod.log.
	Log *slog.Logger
	// OnEvent receives what happens, one call at a time. It must not
	// block for long.
	OnEvent func(Event)
	// Clock, when set, is in-process worker i's clock for the requests it
	// signs for hanzod (tests: a node whose clock is off); nil: time.Now.
	Clock func(i int) func() time.Time
	// Worker, when set, adjusts the configuration of an in-process worker
	// before it starts (tests: extra event hooks, metrics, constraints).
	Worker func(w *Worker, c *worker.Config)
	// State, when set, adjusts hanzod's state machine rules last (tests:
	// e.g. the uptime a standby needs).
	State func(c *state.Config)
	// KeepLog keeps hanzod's whole event log (no compaction after
	// snapshots): tests that read the log from its first record need it
	// on a slow run (-race), which passes a snapshot's 10,000 events.
	KeepLog bool
}

// KillLeader is the point at which the leading replica is killed.
type KillLeader struct{ Epoch, Step int }

// Kill is a fault to inject: worker Worker is killed once it reports a
// step at or past Step (counted within the epoch, from 1) of Epoch;
// with Restart it is started again RestartAfter later, with its key and
// data directory.
type Kill struct {
	Worker, Epoch, Step int
	Restart             bool
	RestartAfter        time.Duration
}

// DefaultConfig is the profile of `gym up`: loopback liveness (heartbeats
// every 2 s, a silent node failed after 6 s instead of SPEC.md's 30 s for
// WAN links, so a worker killed while the others wait for the epoch's
// merge is noticed quickly; a ring timeout of 10 s for the same reason).
func DefaultConfig() Config {
	return Config{
		Workers: 4, Threads: 2, WorkerThreads: 1,
		Heartbeat: worker.DefaultHeartbeat, MinGap: worker.DefaultMinGap, MinHeartbeatGap: time.Second, FailAfter: 6 * time.Second,
		RingTimeout: 10 * time.Second, EpochGrace: time.Minute, TickInterval: time.Second, NodeRate: 5,
		Stake: 10_000 * ledger.GYM, Treasury: 300 * ledger.GYM,
	}
}

// TestConfig is a profile for in-process tests: workers heartbeat every
// 50 ms and learn of a new ring as fast, hanzod ticks every 100 ms. The
// timeouts stay generous (a node silent for 5 s is failed, a ring
// neighbour for 15 s is reported, an epoch waits a minute for its last
// member) so that a slow machine (a loaded one, the race detector) does
// not fail healthy nodes; a killed worker is found at once anyway, by the
// broken links of its neighbours. The validator scores deltas on 32
// held-out problems and checkpoints on 64.
func TestConfig(dir string, workers int) Config {
	c := DefaultConfig()
	c.Dir, c.Workers = dir, workers
	c.Heartbeat, c.MinGap, c.MinHeartbeatGap, c.FailAfter = 50*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond, 5*time.Second
	c.RingTimeout, c.EpochGrace, c.TickInterval, c.NodeRate = 15*time.Second, time.Minute, 100*time.Millisecond, 1000
	c.EvalSize, c.ShardSize = 64, 32
	c.MinEpochSamples = 1 // test jobs are tiny, to train in well under a second
	c.KeepLog = true
	return c
}

// Validate checks c.
func (c Config) Validate() error {
	if len(c.MemoryLimit) > c.Workers {
		return fmt.Errorf("%w: %d memory limits for %d workers", ErrConfig, len(c.MemoryLimit), c.Workers)
	}
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: no directory", ErrConfig)
	case c.Workers < 0 || c.Workers > 64:
		return fmt.Errorf("%w: %d workers (0..64)", ErrConfig, c.Workers)
	case len(c.Attacks) > c.Workers:
		return fmt.Errorf("%w: %d attacks for %d workers", ErrConfig, len(c.Attacks), c.Workers)
	case c.Threads < 1 || c.WorkerThreads < 1:
		return fmt.Errorf("%w: threads must be at least 1", ErrConfig)
	case c.Heartbeat <= 0 || c.MinGap < 0 || c.MinHeartbeatGap <= 0 || c.MinHeartbeatGap >= c.Heartbeat || c.FailAfter <= c.Heartbeat:
		return fmt.Errorf("%w: heartbeat %v, fail after %v: want a positive heartbeat below FailAfter", ErrConfig, c.Heartbeat, c.FailAfter)
	case c.Gym != "" && (c.Heartbeat < time.Second || c.MinHeartbeatGap > time.Second):
		return fmt.Errorf("%w: gym worker heartbeats at least every 1 s", ErrConfig)
	case c.RingTimeout <= 0 || c.EpochGrace <= 0 || c.TickInterval <= 0 || c.NodeRate <= 0:
		return fmt.Errorf("%w: ring timeout, epoch grace, tick interval and node rate must be positive", ErrConfig)
	case c.EvalSize < 0 || c.ShardSize < 0:
		return fmt.Errorf("%w: negative evaluation sizes", ErrConfig)
	case c.Replicas > 1 && c.ValkeyURL == "":
		return fmt.Errorf("%w: %d replicas need a Valkey server (ValkeyURL)", ErrConfig, c.Replicas)
	case c.KillLeader != nil && (c.Replicas < 2 || c.KillLeader.Epoch < 1 || c.KillLeader.Step < 1):
		return fmt.Errorf("%w: killing the leader at %+v needs at least 2 replicas and a step from 1:1", ErrConfig, *c.KillLeader)
	case c.Kill != nil && (c.Kill.Worker < 0 || c.Kill.Worker >= c.Workers || c.Kill.Epoch < 1 || c.Kill.Step < 1):
		return fmt.Errorf("%w: kill %+v", ErrConfig, *c.Kill)
	}
	params := c.AttackParams != worker.AttackParams{}
	for _, a := range c.Attacks {
		if err := worker.CheckAttack(a); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
		if a != "" {
			if err := c.AttackParams.Check(a); err != nil {
				return fmt.Errorf("%w: %v", ErrConfig, err)
			}
			params = false
		}
	}
	if params {
		return fmt.Errorf("%w: attack strengths %+v without an attacking worker", ErrConfig, c.AttackParams)
	}
	if len(c.Backends) > c.Workers {
		return fmt.Errorf("%w: %d backends for %d workers", ErrConfig, len(c.Backends), c.Workers)
	}
	for _, b := range c.Backends {
		if _, err := backend.Parse(cmp.Or(b, backend.Go)); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	return nil
}

// Event kinds.
const (
	EventListening        = "listening"         // hanzod serves on Addr, its artifact server on ArtifactsAddr
	EventBasePublished    = "base_published"    // ModelDir is in hanzod's store as base-model artifact CID (Detail: its name)
	EventDatasetPublished = "dataset_published" // DatasetDir is in hanzod's store as dataset artifact CID (Detail: its name)
	EventRegistered       = "registered"        // every one of Workers registered
	EventSubmitted        = "submitted"         // Job submitted
	EventWorker           = "worker"            // Work is one of Worker's events
	EventHanzod           = "hanzod"            // Hanzod is an event of hanzod's log (ticks and heartbeats left out)
	EventKilled           = "killed"            // Worker was killed at Epoch, Step (within the epoch)
	EventRestarted        = "restarted"         // Worker was started again
	EventRestartFailed    = "restart_failed"    // starting Worker again failed with Err
	EventLeaderKilled     = "leader_killed"     // the leading replica (Detail) was killed
	EventTakeover         = "takeover"          // another replica leads (Detail: which, after how long)
)

// Event is one thing that happened in the cluster.
type Event struct {
	Kind        string
	Worker      *Worker
	Work        worker.Event
	Hanzod      state.Event
	Job         string
	Epoch, Step int
	Err         error
	Workers     []*Worker
	// Addr and ArtifactsAddr are hanzod's gRPC and artifact server
	// addresses.
	Addr, ArtifactsAddr string
	CID, Detail         string
	// Daemon is hanzod (EventListening): tests watch its state through it.
	Daemon *daemon.Daemon
}

// Worker is one worker of the cluster.
type Worker struct {
	Index            int
	Name, ID, Dir    string
	Attack           string
	Role             string // "" or worker.RoleValidator
	Key              ed25519.PrivateKey
	c                *Cluster
	cmd              *exec.Cmd
	cancel           context.CancelFunc
	done             chan struct{}
	err              error
	killed, restarts bool
	torch            *torch.Backend // an in-process torch worker's backend
}

// Torch is an in-process torch worker's backend while it runs (nil
// otherwise): tests reach its Python process through it.
func (w *Worker) Torch() *torch.Backend {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.torch
}

// Cluster is a running hanzod and its workers.
type Cluster struct {
	cfg    Config
	shared *basemodel.Base // hanzod's and the in-process workers' own base
	log    *slog.Logger
	logf   *os.File
	d      *daemon.Daemon // the first replica
	ds     []*daemon.Daemon
	dead   []bool   // ds[i] was killed (under mu)
	addrs  []string // the replicas' gRPC addresses
	conn   *grpc.ClientConn
	// Takeover is measured when the leader is killed: from the kill to
	// the moment another replica leads (under mu).
	takeover time.Duration
	killed   bool

	ctx    context.Context // workers run under it until Close
	cancel context.CancelFunc

	emu sync.Mutex // one OnEvent call at a time

	mu       sync.Mutex
	workers  []*Worker
	stopping bool
	plan     *jobconf.Plan // of the submitted job (Kill counts steps in it)
	hooks    []func(Event)
	restarts sync.WaitGroup
}

// Start brings hanzod up in this process, waits until it leads, funds the
// treasury and makes and stakes a key for every worker (not started yet).
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var shared *basemodel.Base // hanzod's and the in-process workers' own base
	switch {
	case cfg.ModelDir != "":
		// Its config and tokenizer only: this process is hanzod's, which
		// never decodes a base named by CID unless told to check with it
		// itself (ModelWork self); the summary takes its figures from the
		// merge reports then.
		base, err := basemodel.OpenConfig(cfg.ModelDir)
		if err != nil {
			return nil, err
		}
		root, err := basecache.DirCID(ctx, cfg.ModelDir)
		if err != nil {
			return nil, err
		}
		base.Name = root.String()
		cfg.Base = base
	case cfg.Base == nil:
		base, err := basemodel.Builtin()
		if err != nil {
			return nil, err
		}
		cfg.Base, shared = base, base
	default:
		shared = cfg.Base
	}
	c := &Cluster{cfg: cfg, log: cfg.Log, shared: shared}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	var link *daemon.ChainLink
	if cfg.Chain != nil {
		// The chain needs the node ids before hanzod starts: make the
		// workers' keys now.
		keys := make([]ed25519.PrivateKey, cfg.Workers)
		for i := range keys {
			if cfg.Key != nil {
				keys[i] = cfg.Key(i)
			} else {
				k, err := nodekey.Generate(rand.Reader)
				if err != nil {
					return nil, err
				}
				keys[i] = k
			}
		}
		c.cfg.Key = func(i int) ed25519.PrivateKey { return keys[i] }
		var err error
		if link, err = cfg.Chain(ctx, keys); err != nil {
			return nil, fmt.Errorf("localcluster: chain: %w", err)
		}
	}
	if c.log == nil {
		f, err := os.Create(filepath.Join(cfg.Dir, "hanzod.log"))
		if err != nil {
			return nil, err
		}
		c.logf, c.log = f, slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	dc := daemon.DefaultConfig()
	dc.DataDir, dc.Listen, dc.Metrics, dc.Artifacts = filepath.Join(cfg.Dir, "hanzod"), "127.0.0.1:0", "", "127.0.0.1:0"
	dc.Threads, dc.EpochGrace, dc.TickInterval = cfg.Threads, cfg.EpochGrace, cfg.TickInterval
	dc.LeaseTTL = max(dc.LeaseTTL, 2*cfg.TickInterval)
	if cfg.Replicas > 1 {
		// One key for every replica, as an operator's secret file.
		dc.KeyFile = filepath.Join(cfg.Dir, "hanzod.key")
		if _, err := os.Stat(dc.KeyFile); errors.Is(err, os.ErrNotExist) {
			key, err := nodekey.Generate(rand.Reader)
			if err != nil {
				return nil, err
			}
			if err := nodekey.Save(dc.KeyFile, key, false); err != nil {
				return nil, err
			}
		}
		dc.Store, dc.ValkeyURL = "valkey", cfg.ValkeyURL
		dc.LeaseTTL = cmp.Or(cfg.LeaseTTL, time.Second)
		dc.TickInterval = min(dc.TickInterval, dc.LeaseTTL/2)
	}
	dc.EvalSize, dc.ShardSize, dc.Base, dc.Outliers, dc.ModelWork = cfg.EvalSize, cfg.ShardSize, shared, cfg.Outliers, cfg.ModelWork
	dc.NoScreening = cfg.NoScreening
	s := &dc.Engine.State
	s.HeartbeatInterval, s.FailAfter, s.MinHeartbeatGap = cfg.Heartbeat, cfg.FailAfter, cfg.MinHeartbeatGap
	s.MaxStep = min(s.MaxStep, cfg.FailAfter/2)
	if cfg.ModelDir != "" {
		// Members fetch and verify the base before they report their
		// links: a real-size one takes minutes (hanzod's default is 10).
		s.ProvisionTimeout = 10 * time.Minute
	}
	if cfg.CheckTimeout > 0 {
		s.CheckTimeout = cfg.CheckTimeout
	}
	if cfg.MinEpochSamples > 0 {
		s.MinEpochSamples = cfg.MinEpochSamples
	}
	s.Ring.Groups = cfg.RingGroups
	dc.Server.NodeRate = cfg.NodeRate
	localDeltaLimits(&dc.Server, cfg.Workers+len(cfg.Validators))
	localRegisterLimits(&dc.Server, cfg.Workers+len(cfg.Validators))
	dc.IPFS, dc.PinMinBackoff, dc.PinMaxBackoff = cfg.IPFS, cfg.PinMinBackoff, cfg.PinMaxBackoff
	dc.Chain = link
	if cfg.State != nil {
		cfg.State(s)
	}
	dc.Engine.NoCompaction = cfg.KeepLog
	var addrs []string
	for i := range max(cfg.Replicas, 1) {
		rc := dc
		if cfg.Replicas > 1 {
			rc.DataDir = filepath.Join(cfg.Dir, fmt.Sprintf("hanzod-%d", i))
		}
		d, err := daemon.Start(ctx, rc, c.log.With("replica", i))
		if err != nil {
			for _, d := range c.ds {
				d.Close()
			}
			c.closeLog()
			return nil, fmt.Errorf("localcluster: start hanzod: %w", err)
		}
		c.ds, c.dead = append(c.ds, d), append(c.dead, false)
		addrs = append(addrs, d.Addr())
	}
	c.d, c.addrs = c.ds[0], addrs
	d := c.d
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	var err error
	if c.conn, err = dialReplicas(addrs); err != nil {
		c.Close()
		return nil, err
	}
	c.emit(Event{Kind: EventListening, Addr: d.Addr(), ArtifactsAddr: d.ArtifactsAddr(), Daemon: d})
	if cfg.ModelDir != "" {
		if err := c.publishBase(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	if cfg.DatasetDir != "" {
		if err := c.publishDataset(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.waitLeading(ctx); err != nil {
		c.Close()
		return nil, err
	}
	// hanzod signs its records with a key whose account must hold the
	// orchestrator's stake (docs/orchestrator.md, "The orchestrator's
	// key").
	if err := c.stakeOrchestrator(ctx, dc.OrchestratorStake); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.setup(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) waitLeading(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !c.engine().Leading() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// setup funds the treasury and makes and stakes the workers' keys.
func (c *Cluster) setup(ctx context.Context) error {
	cfg := c.cfg // c.cfg: Key set by Start for a chain
	if cfg.Treasury > 0 {
		if _, err := c.engine().Do(ctx, state.Deposit{Account: ledger.Treasury, Amount: cfg.Treasury}); err != nil {
			return err
		}
	}
	for i := range cfg.Workers {
		w := &Worker{Index: i, Name: fmt.Sprintf("w%d", i), Dir: filepath.Join(cfg.Dir, "workers", fmt.Sprintf("w%d", i)), c: c}
		if i < len(cfg.Attacks) {
			w.Attack = cfg.Attacks[i]
		}
		if err := os.MkdirAll(w.Dir, 0o755); err != nil {
			return err
		}
		var err error
		if cfg.Key != nil {
			w.Key = cfg.Key(i)
		} else if w.Key, err = nodekey.Generate(rand.Reader); err != nil {
			return err
		}
		if err := nodekey.Save(filepath.Join(w.Dir, "node.key"), w.Key, false); err != nil {
			return err
		}
		w.ID = nodekey.PublicHex(w.Key)
		if err := c.Stake(ctx, w.ID); err != nil {
			return fmt.Errorf("localcluster: stake %s: %w", w.Name, err)
		}
		c.workers = append(c.workers, w)
	}
	for i, attack := range cfg.Validators {
		w := &Worker{Index: cfg.Workers + i, Name: fmt.Sprintf("v%d", i), Dir: filepath.Join(cfg.Dir, "validators", fmt.Sprintf("v%d", i)),
			c: c, Role: worker.RoleValidator, Attack: attack}
		if err := os.MkdirAll(w.Dir, 0o755); err != nil {
			return err
		}
		var err error
		if w.Key, err = nodekey.Generate(rand.Reader); err != nil {
			return err
		}
		if err := nodekey.Save(filepath.Join(w.Dir, "node.key"), w.Key, false); err != nil {
			return err
		}
		w.ID = nodekey.PublicHex(w.Key)
		stake := 25_000 * ledger.GYM
		for _, cmd := range []state.Command{state.Deposit{Account: w.ID, Amount: 2 * stake}, state.Bond{Account: w.ID, Amount: stake}} {
			if _, err := c.engine().Do(ctx, cmd); err != nil {
				return fmt.Errorf("localcluster: stake validator %s: %w", w.Name, err)
			}
		}
		c.workers = append(c.workers, w)
	}
	return nil
}

// Validators are the cluster's validators (Config.Validators).
func (c *Cluster) Validators() []*Worker {
	var out []*Worker
	for _, w := range c.Workers() {
		if w.Role == worker.RoleValidator {
			out = append(out, w)
		}
	}
	return out
}

// stakeOrchestrator deposits and bonds amount for hanzod's signing key.
func (c *Cluster) stakeOrchestrator(ctx context.Context, amount ledger.Amount) error {
	if amount == 0 {
		return nil
	}
	acct := c.leader().Judge().Account()
	for _, cmd := range []state.Command{state.Deposit{Account: acct, Amount: amount}, state.Bond{Account: acct, Amount: amount}} {
		if _, err := c.engine().Do(ctx, cmd); err != nil {
			return fmt.Errorf("localcluster: stake hanzod's key: %w", err)
		}
	}
	return nil
}

// Stake deposits twice Config.Stake for account and bonds Config.Stake:
// what makes a node eligible for jobs.
func (c *Cluster) Stake(ctx context.Context, account string) error {
	for _, cmd := range []state.Command{
		state.Deposit{Account: account, Amount: 2 * c.cfg.Stake},
		state.Bond{Account: account, Amount: c.cfg.Stake},
	} {
		if _, err := c.engine().Do(ctx, cmd); err != nil {
			return err
		}
	}
	return nil
}

// Addr is hanzod's gRPC address (plaintext, loopback).
func (c *Cluster) Addr() string { return c.d.Addr() }

// Dir is the cluster's directory (Config.Dir); hanzod's data is in
// Dir/hanzod.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Daemon is the in-process hanzod.
func (c *Cluster) Daemon() *daemon.Daemon { return c.d }

// Base is the base model the cluster's job trains (named by its CID when
// it came from ModelDir).
func (c *Cluster) Base() *basemodel.Base { return c.cfg.Base }

// publishBase publishes ModelDir into hanzod's artifact store as a
// base-model artifact, signed with a publisher key of the cluster's own
// (the CID, not the signer, is what a job trusts); its root must be the
// CID Start computed.
func (c *Cluster) publishBase(ctx context.Context) error {
	key, err := nodekey.Generate(nil)
	if err != nil {
		return err
	}
	name := "local/" + safeArtifactName(filepath.Base(c.cfg.ModelDir))
	// Into every replica's store: base models are artifacts fetched by
	// CID, and a replica serves and reads its own.
	for _, d := range c.ds {
		rec, err := d.ArtifactStore().Publish(ctx, c.cfg.ModelDir, store.Meta{Kind: artifact.KindBaseModel, Name: name}, key, time.Now())
		if err != nil {
			return fmt.Errorf("localcluster: publish %s as a base model: %w", c.cfg.ModelDir, err)
		}
		if root := rec.Manifest.Manifest.Root; root != c.cfg.Base.Name {
			return fmt.Errorf("localcluster: %s was published as %s, but hashes to %s (changed meanwhile?)", c.cfg.ModelDir, root, c.cfg.Base.Name)
		}
	}
	c.emit(Event{Kind: EventBasePublished, CID: c.cfg.Base.Name, Detail: name})
	return nil
}

// publishDataset publishes DatasetDir into every replica's artifact store
// as a dataset artifact.
func (c *Cluster) publishDataset(ctx context.Context) error {
	key, err := nodekey.Generate(nil)
	if err != nil {
		return err
	}
	name := "local/" + safeArtifactName(filepath.Base(c.cfg.DatasetDir))
	var root string
	for _, d := range c.ds {
		rec, err := d.ArtifactStore().Publish(ctx, c.cfg.DatasetDir, store.Meta{Kind: artifact.KindDataset, Name: name}, key, time.Now())
		if err != nil {
			return fmt.Errorf("localcluster: publish %s as a dataset: %w", c.cfg.DatasetDir, err)
		}
		root = rec.Manifest.Manifest.Root
	}
	c.emit(Event{Kind: EventDatasetPublished, CID: root, Detail: name})
	return nil
}

// Plan is the plan of a job with spec on the cluster's base: for a
// dataset named by CID, its rows are read from hanzod's store (exported
// and verified like a worker's copy) with the job's mapping.
func (c *Cluster) Plan(ctx context.Context, spec jobspec.Spec) (jobconf.Plan, error) {
	root, byCID, err := jobspec.DatasetCID(spec.Dataset)
	if err != nil || !byCID {
		return jobconf.FromSpec("", spec, c.cfg.Base)
	}
	arts := c.leader().ArtifactStore()
	cache, err := basecache.NewKind(artifact.KindDataset, filepath.Join(c.cfg.Dir, "datasets"), arts, func(_ context.Context, root cid.Cid) error {
		_, err := arts.Artifact(root)
		return err
	})
	if err != nil {
		return jobconf.Plan{}, err
	}
	dir, err := cache.Dir(ctx, root)
	if err != nil {
		return jobconf.Plan{}, fmt.Errorf("localcluster: dataset %s: %w", root, err)
	}
	data, err := jobconf.LoadData(dir, spec)
	if err != nil {
		return jobconf.Plan{}, fmt.Errorf("localcluster: dataset %s: %w", root, err)
	}
	return jobconf.FromSpecData("", spec, c.cfg.Base, data)
}

// safeArtifactName maps s onto an artifact name segment.
func safeArtifactName(s string) string {
	b := []byte(s)
	for i, ch := range b {
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || (i > 0 && (ch == '.' || ch == '_' || ch == '-'))
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '_' {
		b = append([]byte("m"), b...)
	}
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}

// Engine is hanzod's engine: commands, the state and the event log.
func (c *Cluster) Engine() *engine.Engine { return c.engine() }

// engine is the leading replica's engine (the first live one's while none
// leads).
func (c *Cluster) engine() *engine.Engine { return c.leader().Engine() }

// leader is the leading replica (the first live one while none leads).
func (c *Cluster) leader() *daemon.Daemon {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first *daemon.Daemon
	for i, d := range c.ds {
		if c.dead[i] {
			continue
		}
		if d.Engine().Leading() {
			return d
		}
		if first == nil {
			first = d
		}
	}
	if first == nil {
		return c.d
	}
	return first
}

// KillLeaderNow abandons the leading replica (the lease is not released,
// as after kill -9) and returns how long it took until another replica
// led. It fails with one replica.
func (c *Cluster) KillLeaderNow(ctx context.Context) (time.Duration, error) {
	if len(c.ds) < 2 {
		return 0, fmt.Errorf("%w: killing the leader needs replicas", ErrConfig)
	}
	c.mu.Lock()
	victim := -1
	for i, d := range c.ds {
		if !c.dead[i] && d.Engine().Leading() {
			victim = i
		}
	}
	if victim < 0 {
		c.mu.Unlock()
		return 0, errors.New("localcluster: no replica leads")
	}
	c.dead[victim] = true
	c.mu.Unlock()
	t0 := time.Now()
	c.ds[victim].Abandon()
	c.emit(Event{Kind: EventLeaderKilled, Detail: fmt.Sprintf("replica %d", victim)})
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		c.mu.Lock()
		for i, d := range c.ds {
			if !c.dead[i] && d.Engine().Leading() {
				took := time.Since(t0)
				c.takeover, c.killed = took, true
				c.mu.Unlock()
				c.emit(Event{Kind: EventTakeover, Detail: fmt.Sprintf("replica %d leads after %s", i, took.Round(time.Millisecond))})
				return took, nil
			}
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// Takeover is the measured takeover time of the last killed leader.
func (c *Cluster) Takeover() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takeover, c.killed
}

// Workers lists the workers in order.
func (c *Cluster) Workers() []*Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Worker(nil), c.workers...)
}

// Dial returns hanzod as the node with key sees it over gRPC (the client
// `gym worker` uses), keeping fetched checkpoints under dir.
func (c *Cluster) Dial(key ed25519.PrivateKey, dir string) (*nodeclient.Client, error) {
	return nodeclient.New(nodeclient.Config{Key: key, Conn: c.conn, Dir: dir})
}

// View runs f on hanzod's state.
func (c *Cluster) View(f func(m *state.Machine)) { c.engine().View(f) }

// Job returns a copy of job id.
func (c *Cluster) Job(id string) (state.Job, bool) {
	var j state.Job
	var ok bool
	c.engine().View(func(m *state.Machine) {
		if j, ok = m.Job(id); ok {
			j = j.Clone()
		}
	})
	return j, ok
}

// Poll calls cond every interval until it holds or ctx ends.
func Poll(ctx context.Context, interval time.Duration, cond func() bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// WaitJob waits until cond holds of job id (polled on hanzod's state).
func (c *Cluster) WaitJob(ctx context.Context, id string, cond func(state.Job) bool) error {
	return Poll(ctx, 20*time.Millisecond, func() bool {
		j, ok := c.Job(id)
		return ok && cond(j)
	})
}

func (c *Cluster) emit(ev Event) {
	c.mu.Lock()
	hooks := c.hooks
	c.mu.Unlock()
	c.emu.Lock()
	defer c.emu.Unlock()
	for _, h := range hooks {
		h(ev)
	}
	if c.cfg.OnEvent != nil {
		c.cfg.OnEvent(ev)
	}
}

func (c *Cluster) hook(h func(Event)) {
	c.mu.Lock()
	c.hooks = append(c.hooks, h)
	c.mu.Unlock()
}

// StartWorkers starts every worker.
func (c *Cluster) StartWorkers(ctx context.Context) error {
	for _, w := range c.Workers() {
		if err := c.StartWorker(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// WaitRegistered waits until hanzod knows every worker.
func (c *Cluster) WaitRegistered(ctx context.Context) error {
	n := 0
	err := Poll(ctx, 50*time.Millisecond, func() bool {
		n = 0
		c.engine().View(func(m *state.Machine) {
			for _, w := range c.workers {
				if _, ok := m.Node(w.ID); ok {
					n++
				}
			}
		})
		return n == len(c.workers)
	})
	if err != nil {
		return fmt.Errorf("localcluster: only %d of %d workers registered (see %s/workers/*/worker.log): %w", n, len(c.workers), c.cfg.Dir, err)
	}
	c.emit(Event{Kind: EventRegistered, Workers: c.Workers()})
	return nil
}

// Submit submits a job and returns its id.
func (c *Cluster) Submit(ctx context.Context, spec jobspec.Spec) (string, error) {
	plan, err := c.Plan(ctx, spec)
	if err != nil {
		return "", err
	}
	evs, err := c.engine().Do(ctx, state.SubmitJob{Spec: spec})
	if err != nil {
		return "", fmt.Errorf("localcluster: submit job: %w", err)
	}
	job := evs[0].Body.(state.JobSubmitted).Job
	c.mu.Lock()
	c.plan = &plan
	c.mu.Unlock()
	c.emit(Event{Kind: EventSubmitted, Job: job})
	return job, nil
}

// colluders is the number of attacking workers.
func (c *Cluster) colluders() int {
	n := 0
	for _, a := range c.cfg.Attacks {
		if a != "" {
			n++
		}
	}
	return n
}

// attackParamArgs are gym worker's flags for the strengths p sets.
func attackParamArgs(p worker.AttackParams) []string {
	var args []string
	if p.ALIEZ != nil {
		args = append(args, "--attack-z", strconv.FormatFloat(*p.ALIEZ, 'g', -1, 64))
	}
	if p.IPMEpsilon != 0 {
		args = append(args, "--attack-eps", strconv.FormatFloat(p.IPMEpsilon, 'g', -1, 64))
	}
	if p.MimicNoise != 0 {
		args = append(args, "--attack-noise", strconv.FormatFloat(p.MimicNoise, 'g', -1, 64))
	}
	return args
}

// honestDeltaDirs are the directories where the honest workers keep their
// accepted deltas: the side channel of the omniscient attacks
// (worker.PeekDirs), in worker order.
func (c *Cluster) honestDeltaDirs() []string {
	var dirs []string
	for i := range c.cfg.Workers {
		if i >= len(c.cfg.Attacks) || c.cfg.Attacks[i] == "" {
			dirs = append(dirs, filepath.Join(c.cfg.Dir, "workers", fmt.Sprintf("w%d", i), "deltas"))
		}
	}
	return dirs
}

// StartWorker starts w, or starts it again (same key and data directory)
// after it ended; its log and event lines are appended to its files.
func (c *Cluster) StartWorker(ctx context.Context, w *Worker) error {
	if c.cfg.Gym == "" {
		return c.startInProcess(w)
	}
	return c.startProcess(w)
}

func (c *Cluster) startProcess(w *Worker) error {
	cfg := c.cfg
	args := []string{"worker", "--orchestrator", "grpc://" + strings.Join(c.addrs, ","), "--key", filepath.Join(w.Dir, "node.key"),
		"--data", w.Dir, "--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0", "--threads", fmt.Sprint(cfg.WorkerThreads),
		"--json", "--exit-when-done", "--ring-timeout", cfg.RingTimeout.String()}
	if cfg.Heartbeat != worker.DefaultHeartbeat {
		args = append(args, "--heartbeat", cfg.Heartbeat.String())
	}
	if w.Attack != "" {
		args = append(args, "--attack", w.Attack)
	}
	if w.Role != "" {
		args = append(args, "--role", w.Role)
	}
	if worker.NeedsPeek(w.Attack) {
		args = append(args, "--attack-colluders", fmt.Sprint(c.colluders()))
		if dirs := c.honestDeltaDirs(); len(dirs) > 0 {
			args = append(args, "--attack-peek", strings.Join(dirs, ","))
		}
		args = append(args, attackParamArgs(cfg.AttackParams)...)
	}
	if w.Index < len(cfg.MemoryLimit) && cfg.MemoryLimit[w.Index] != 0 {
		args = append(args, "--max-memory-mib", fmt.Sprint(cfg.MemoryLimit[w.Index]>>20))
	}
	if c.backendOf(w) == backend.Torch {
		args = append(args, "--backend", backend.Torch)
		if cfg.Python != "" {
			args = append(args, "--python", cfg.Python)
		}
		if cfg.TorchDevice != "" {
			args = append(args, "--torch-device", cfg.TorchDevice)
		}
		if cfg.TorchDType != "" {
			args = append(args, "--torch-dtype", cfg.TorchDType)
		}
	}
	cmd := exec.Command(cfg.Gym, args...)
	cmd.Env = append(append(os.Environ(), "GOMAXPROCS=2"), cfg.PythonEnv...)
	logf, err := os.OpenFile(filepath.Join(w.Dir, "worker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	evf, err := os.OpenFile(filepath.Join(w.Dir, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		evf.Close()
		return fmt.Errorf("localcluster: start worker %s: %w", w.Name, err)
	}
	done := make(chan struct{})
	c.mu.Lock()
	w.cmd, w.cancel, w.done, w.err = cmd, nil, done, nil
	c.mu.Unlock()
	go func() {
		defer close(done)
		defer logf.Close()
		defer evf.Close()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			evf.Write(append(sc.Bytes(), '\n'))
			var ev worker.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Kind != "" {
				c.workerEvent(w, ev)
			}
		}
		err := cmd.Wait()
		c.mu.Lock()
		w.err = err
		c.mu.Unlock()
	}()
	return nil
}

func (c *Cluster) startInProcess(w *Worker) error {
	cfg := c.cfg
	logf, err := os.OpenFile(filepath.Join(w.Dir, "worker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	evf, err := os.OpenFile(filepath.Join(w.Dir, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logf.Close()
		return err
	}
	ncc := nodeclient.Config{Key: w.Key, Conn: c.conn, Dir: w.Dir, Role: w.Role}
	if cfg.Clock != nil {
		ncc.Now = cfg.Clock(w.Index)
	}
	nc, err := nodeclient.New(ncc)
	if err != nil {
		logf.Close()
		evf.Close()
		return err
	}
	wc := worker.DefaultConfig()
	wc.Key, wc.Orchestrator, wc.DataDir, wc.Threads, wc.Base = w.Key, nc, w.Dir, cfg.WorkerThreads, c.shared
	// The caches before the test hook (cfg.Worker), which may wrap them.
	if wc.Bases, wc.Datasets, err = nodedaemon.Caches(nc, w.Dir); err != nil {
		logf.Close()
		evf.Close()
		nc.Close()
		return err
	}
	if w.Index < len(cfg.MemoryLimit) {
		wc.MemoryLimit = cfg.MemoryLimit[w.Index]
	}
	wc.Heartbeat, wc.MinGap, wc.RingTimeout, wc.Attack, wc.ExitWhenDone = cfg.Heartbeat, cfg.MinGap, cfg.RingTimeout, w.Attack, w.Role == ""
	wc.Role, wc.CheckPoll = w.Role, 200*time.Millisecond
	if worker.NeedsPeek(w.Attack) {
		wc.Colluders, wc.Peek = c.colluders(), worker.PeekDirs(c.honestDeltaDirs(), cfg.RingTimeout)
		wc.AttackParams = cfg.AttackParams
	}
	wc.MaxBackoff = max(cfg.Heartbeat*4, time.Second)
	wc.ProbeBytes, wc.ProbeTimeout = 256<<10, 2*time.Second
	wc.Logger = slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var emu sync.Mutex
	wc.OnEvent = func(ev worker.Event) {
		emu.Lock()
		b, _ := json.Marshal(ev)
		evf.Write(append(b, '\n'))
		emu.Unlock()
		c.workerEvent(w, ev)
	}
	if cfg.Worker != nil {
		cfg.Worker(w, &wc)
	}
	// The node is put together as gym worker's is (node/daemon): the
	// caches of bases and datasets by CID under its directory, the torch
	// backend where it trains with torch, the worker.
	nd := nodedaemon.Config{Worker: wc, Artifacts: nc, Dir: w.Dir}
	if c.backendOf(w) == backend.Torch {
		nd.Torch = &torch.Options{Python: cfg.Python, Env: cfg.PythonEnv, BaseDir: cfg.ModelDir, Log: logf, Device: cfg.TorchDevice, DType: cfg.TorchDType}
	}
	node, err := nodedaemon.Start(c.ctx, nd)
	if err != nil {
		logf.Close()
		evf.Close()
		nc.Close()
		return fmt.Errorf("localcluster: worker %s: %w", w.Name, err)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	c.mu.Lock()
	w.cmd, w.cancel, w.done, w.err, w.torch = nil, cancel, done, nil, node.Torch()
	c.mu.Unlock()
	go func() {
		defer close(done)
		err := node.Run(ctx)
		nc.Close()
		logf.Close()
		evf.Close()
		c.mu.Lock()
		w.err = err
		c.mu.Unlock()
	}()
	return nil
}

// Done is closed when the worker's current run ended.
func (w *Worker) Done() <-chan struct{} {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.done == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return w.done
}

// Err is how the worker's last run ended (nil while it runs).
func (w *Worker) Err() error {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.err
}

// Killed reports whether the worker was killed; Restarted whether it was
// started again afterwards.
func (w *Worker) Killed() bool {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.killed
}

// Restarted reports whether the worker was started again after a kill.
func (w *Worker) Restarted() bool {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.restarts
}

// Kill stops the worker at once: kill -9 for a process, its context
// cancelled in process.
func (w *Worker) Kill() {
	w.c.mu.Lock()
	w.killed = true
	cmd, cancel := w.cmd, w.cancel
	w.c.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Kill()
	}
	if cancel != nil {
		cancel()
	}
}

// workerEvent handles one event of w: the kill switch, then the callback.
func (c *Cluster) workerEvent(w *Worker, ev worker.Event) {
	c.emit(Event{Kind: EventWorker, Worker: w, Work: ev})
	k := c.cfg.Kill
	if k == nil || ev.Kind != worker.EventStep || w.Index != k.Worker || ev.Epoch != k.Epoch {
		return
	}
	c.mu.Lock()
	plan, killed := c.plan, w.killed
	c.mu.Unlock()
	if plan == nil || killed || ev.Step-plan.FirstStep(k.Epoch) < k.Step {
		return
	}
	w.Kill()
	c.emit(Event{Kind: EventKilled, Worker: w, Epoch: ev.Epoch, Step: ev.Step - plan.FirstStep(k.Epoch)})
	if k.Restart {
		c.restarts.Add(1)
		go c.restart(w, k.RestartAfter)
	}
}

// restart starts a killed worker again after a pause: it registers again
// and rejoins at the next epoch boundary.
func (c *Cluster) restart(w *Worker, after time.Duration) {
	defer c.restarts.Done()
	select {
	case <-w.Done():
	case <-c.ctx.Done():
		return
	}
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
		return
	}
	c.mu.Lock()
	stop := c.stopping
	c.mu.Unlock()
	if stop {
		return
	}
	if err := c.StartWorker(c.ctx, w); err != nil {
		c.emit(Event{Kind: EventRestartFailed, Worker: w, Err: err})
		return
	}
	c.mu.Lock()
	w.restarts = true
	c.mu.Unlock()
	c.emit(Event{Kind: EventRestarted, Worker: w})
}

// StopWorkers waits up to 5 s for each worker to exit on its own, then
// stops it (SIGTERM, then after 5 s SIGKILL; in process its context is
// cancelled). Killed workers are not restarted afterwards.
func (c *Cluster) StopWorkers() {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	for _, w := range c.Workers() {
		c.mu.Lock()
		cmd, cancel, done := w.cmd, w.cancel, w.done
		c.mu.Unlock()
		if done == nil {
			continue
		}
		grace := time.NewTimer(5 * time.Second)
		select {
		case <-done:
		case <-grace.C:
		}
		grace.Stop()
		if cancel != nil {
			cancel()
			<-done
			continue
		}
		cmd.Process.Signal(syscall.SIGTERM)
		grace = time.NewTimer(5 * time.Second)
		select {
		case <-done:
		case <-grace.C:
			cmd.Process.Kill()
			<-done
		}
		grace.Stop()
	}
}

// Close stops the workers (at once) and hanzod.
func (c *Cluster) Close() error {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	// A restart under way finishes (or gives up) first, so that the
	// worker it starts is stopped below.
	c.restarts.Wait()
	for _, w := range c.Workers() {
		c.mu.Lock()
		cmd, done := w.cmd, w.done
		c.mu.Unlock()
		if done == nil {
			continue
		}
		if cmd != nil && cmd.Process != nil {
			select {
			case <-done:
			default:
				cmd.Process.Kill()
			}
		}
		<-done
	}
	var err error
	if c.conn != nil {
		err = c.conn.Close()
	}
	for i, d := range c.ds {
		c.mu.Lock()
		dead := c.dead[i]
		c.mu.Unlock()
		if !dead {
			err = errors.Join(err, d.Close())
		}
	}
	c.closeLog()
	return err
}

// dialReplicas connects to hanzod's replicas (nodeclient.Replicas: calls
// go to the one that leads).
func dialReplicas(addrs []string) (*grpc.ClientConn, error) {
	target, opts := nodeclient.Replicas(addrs)
	return grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))...)
}

func (c *Cluster) closeLog() {
	if c.logf != nil {
		c.logf.Close()
	}
}

// Follow copies hanzod's event log to Dir/events.jsonl as it grows,
// reports its events (but ticks and heartbeats) through OnEvent, and
// returns the job once it ended and settled (or 15 s after it ended
// unsettled). When ctx ends first the job is failed and ctx's error
// returned with the job as it was.
func (c *Cluster) Follow(ctx context.Context, job string) (state.Job, error) {
	// The log goes to Dir as it is read, so a run that hangs or is
	// interrupted can still be inspected.
	logf, err := os.Create(filepath.Join(c.cfg.Dir, "events.jsonl"))
	if err != nil {
		return state.Job{}, err
	}
	defer logf.Close()
	var next uint64 = 1
	var finishedAt time.Time
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	failures := 0
	const page = 1000 // records a read returns at most
	var killing sync.Once
	for {
		// The job as it stands before the read: every event that made it
		// so is in the log by then, so the settlement is written out
		// before the loop returns on it.
		jb, _ := c.Job(job)
		recs, _, err := c.engine().Read(ctx, next, page)
		if err != nil && ctx.Err() == nil {
			// A replica killed under the read: the next one answers.
			if failures++; failures > 50 {
				return state.Job{}, err
			}
		} else {
			failures = 0
		}
		for _, rec := range recs {
			next = rec.Index + 1
			if _, err := logf.Write(append(rec.Data, '\n')); err != nil {
				return state.Job{}, err
			}
			ev, err := state.DecodeEvent(rec.Data)
			if err != nil {
				return state.Job{}, err
			}
			if k := ev.Body.Kind(); k != "ticked" && k != "heartbeat" {
				c.emit(Event{Kind: EventHanzod, Hanzod: ev, Job: job})
			}
			if kl := c.cfg.KillLeader; kl != nil {
				c.mu.Lock()
				plan := c.plan
				c.mu.Unlock()
				if v, ok := ev.Body.(state.DeltaJudged); ok && plan != nil && v.Accepted && v.Job == job && v.Epoch == kl.Epoch &&
					int(v.Step)-plan.FirstStep(kl.Epoch) >= kl.Step {
					killing.Do(func() {
						go func() {
							if _, err := c.KillLeaderNow(ctx); err != nil {
								c.log.Error("killing the leader", "err", err)
							}
						}()
					})
				}
			}
		}
		if jb.State.Terminal() {
			if finishedAt.IsZero() {
				finishedAt = time.Now()
			}
			// Drained: the read answered and had no more to give.
			if drained := err == nil && len(recs) < page; drained && (jb.Settled || time.Since(finishedAt) > 15*time.Second) {
				return jb, nil
			}
		}
		select {
		case <-ctx.Done():
			_, _ = c.engine().Do(context.WithoutCancel(ctx), state.FailJob{Job: job, Reason: "localcluster: " + ctx.Err().Error()})
			return jb, ctx.Err()
		case <-t.C:
		}
	}
}

// CopyDir copies the regular files of src into dst (made if missing).
func CopyDir(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			err = errors.Join(err, out.Close())
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// backendOf is worker w's training backend (Config.Backends).
func (c *Cluster) backendOf(w *Worker) string {
	if w.Index < len(c.cfg.Backends) && c.cfg.Backends[w.Index] != "" {
		return c.cfg.Backends[w.Index]
	}
	return backend.Go
}

// localRegisterLimits fits hanzod's Register limits to a cluster of n
// nodes on this machine: they all register from 127.0.0.1, so the
// per-address limits are the defaults times n, as if each had its own
// address (a node registers once, and again when restarted).
func localRegisterLimits(c *server.Config, n int) {
	n = max(n, 1)
	c.RegisterAddrRate *= float64(n)
	c.RegisterAddrBurst *= n
	c.RegisterNewRate *= float64(n)
	c.RegisterNewBurst *= n
}

// localDeltaLimits fits hanzod's UploadDelta limits to a cluster of n
// nodes on this machine. They all submit from 127.0.0.1, so the
// per-address limits are the defaults times n, as if each had its own
// address. And the built-in model's step takes a fraction of a second
// where a real model's takes seconds, so a job syncing every step
// (docs/data-parallel.md) submits 3–5 deltas a second per node: above the
// per-node default of 2, whose refusals and retries held up every ring
// call (eight workers, seed 0: 106 s, 68 s with these limits;
// docs/data-parallel.md, "Wall time"). Per node it allows 10 a second,
// burst 40. The transport's per-host bounds (connections and calls in
// flight) are likewise the defaults times n, plus room for gym up's own
// clients.
func localDeltaLimits(c *server.Config, n int) {
	n = max(n, 1)
	t := &c.Transport
	t.MaxConnsPerHost = t.MaxConnsPerHost*n + 16
	t.MaxCallsPerHost = t.MaxCallsPerHost*n + 16
	t.MaxConns = max(t.MaxConns, t.MaxConnsPerHost)
	t.MaxCalls = max(t.MaxCalls, t.MaxCallsPerHost)
	c.DeltaAddrRate *= float64(n)
	c.DeltaAddrBurst *= n
	c.DeltaAddrInFlight *= n
	c.DeltaInFlight = max(c.DeltaInFlight, c.DeltaAddrInFlight)
	c.DeltaNodeRate, c.DeltaNodeBurst = max(c.DeltaNodeRate, 10), max(c.DeltaNodeBurst, 40)
}
