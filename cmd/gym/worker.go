package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/node/backend/torch"
	nodedaemon "github.com/zooai/gym/node/daemon"
	"github.com/zooai/gym/node/nodeclient"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/hardware"
)

// DialOptions is what a DialFunc needs to reach hanzod for gym worker.
type DialOptions struct {
	Addr    string             // --orchestrator
	Key     ed25519.PrivateKey // the node key: every request is signed with it
	DataDir string             // --data (may be empty): where the client may keep state
	// TLSCA and TLSServerName are gym's --tls-ca and --tls-server-name
	// (their environment defaults included).
	TLSCA, TLSServerName string
	// Role is what the node registers as: "" a compute node, "validator".
	Role string
	// Hardware is what the node registers it has (workerHardware).
	Hardware hardware.Report
}

// DialFunc connects gym worker to hanzod. The closer is closed when the
// worker ends.
type DialFunc func(ctx context.Context, o DialOptions) (worker.Orchestrator, io.Closer, error)

func newWorker() *cobra.Command { return newWorkerCmd(dialHanzod) }

// workerOptions are gym worker's flags beyond worker.Config.
type workerOptions struct {
	orchestrator, keyPath  string
	beta, loraRank         string
	modelDir               string
	maxMemoryMiB           int64
	json                   bool
	logSteps               int
	tls                    bool
	heartbeat, ringTimeout time.Duration
	artifactsAllow         []string
	artifactsAllowAny      bool
	artifactsPeers         []string
	attackPeek             []string
	attackZ                float64 // --attack-z, when given
	backend, python        string
	torchDevice, torchType string
	accelerators           []string // --accelerator
}

// artifactNode is what --artifacts-* need of the orchestrator client
// (nodeclient.Client): its store served, and more sources for its fetches.
type artifactNode interface {
	ArtifactServer(nodeclient.ServeConfig) (*transfer.Server, error)
	SetSources([]transfer.Peer)
}

func newWorkerCmd(dial DialFunc) *cobra.Command {
	cfg := worker.DefaultConfig()
	cfg.Threads = runtime.NumCPU()
	var o workerOptions
	cmd := &cobra.Command{
		Use:   "worker --orchestrator ADDR --key KEY [--data DIR] [--listen ADDR] [--probe-listen ADDR] [--threads N] [--exit-when-done] [--json]",
		Short: "Run a compute node: train jobs hanzod assigns, in a ring with other workers",
		Long: `worker registers this node with hanzod and trains the jobs it is assigned.

While a job is provisioned it measures the bandwidth to its peers (each
worker serves probes on --probe-listen); while it runs, it trains the job's
LoRA adapter with GSPO, signs and submits its contribution every sync as a
delta, and averages contributions with its ring neighbours over the
authenticated ring all-reduce (listening on --listen, TLS 1.3 bound to the
node key). After each epoch it continues from the checkpoint hanzod merged.
A neighbour that fails or misbehaves is reported with the ring's evidence,
and the sync is retried in the ring hanzod repairs.

The node key is --key, else DIR/node.key with --data DIR (made if missing).
With --data, every accepted delta is kept in DIR/deltas/ and the delta
sequence counter in DIR/sequence.

A job names its base model: "builtin", or the CID of a base-model artifact
(gym artifact publish --kind base-model DIR). The worker fetches such a base
from hanzod and peers, verifies it against the CID, keeps it under
DIR/bases (with --data; a temporary directory otherwise) and parses it once;
--model-dir gives it a Hugging Face model directory it already has, used
for jobs naming that directory's CID. Before loading a base, the worker
estimates the job's memory from config.json and refuses a job that needs
more than --max-memory-mib (default: the host's available memory). A
refusal is sent to hanzod, which shows it in the job's status.

--model, --gspo-beta, --lora-rank and --importance-sampling-level restrict
the jobs this node accepts (others are refused and the node stays idle);
they default to MODEL_NAME, GSPO_BETA, LORA_RANK and
IMPORTANCE_SAMPLING_LEVEL. RING_POSITION is ignored: hanzod orders the ring
by measured bandwidth.

Output: one line per event, or with --json one JSON object per event per
line on stdout (fields: time, kind, node, job, state, epoch, sync, step,
reward, loss, seconds, sequence, verdict, reason, suspect, generation,
members, adapter, attack, detail; zero fields are omitted; see 'go doc
github.com/zooai/gym/worker'). Warnings go to stderr.

--exit-when-done exits when the assigned job ends: status 0 when it was
published, 1 when it failed.

Checkpoints: the worker fetches each checkpoint hanzod publishes from
hanzod's artifact server and, with --artifacts-peers, from other workers at
the same time (the fetch goes on from the others when one leaves; the
manifest must be signed by hanzod whoever serves it). With
--artifacts-listen ADDR it serves the checkpoints it holds to other workers:
to the nodes hanzod named to it (its ring and probe peers), to the keys of
--artifacts-allow, or with --artifacts-allow-any to any node, and only
checkpoints signed by hanzod except for --artifacts-allow keys. Its address
is printed in the registered event.

--backend torch trains with PyTorch, transformers and PEFT instead of the
built-in engine: the worker starts python -m gym_protocol.backend (the
python/ package: pip install ./python) with --python, $GYM_PYTHON or
python3, supervises it (restarted when it dies or hangs, killed with the
worker) and checks every adapter it returns before using it.
--torch-device (cpu, cuda, cuda:N) and --torch-dtype (float32, bfloat16;
default the base's: bfloat16 for a bfloat16 checkpoint, else float32) place
the model: the process loads it straight onto the device in that type, and
this process reads only the base's config and tokenizer, never its
weights. USE_4BIT=true loads the base in 4 bits (CUDA and bitsandbytes
only). A
worker takes only the jobs its backend can serve (a job's backend: go,
torch or any); see docs/backends.md.

Hardware: the worker registers what it has, signed: its accelerators (with
--backend torch on CUDA the GPUs nvidia-smi lists, name, total and free
memory and compute capability; or those of --accelerator), always the
host's memory as the accelerator "cpu" (MemTotal and MemAvailable), its
backend and the types it trains in (float32 for go; --torch-dtype, and nf4
on CUDA, for torch). hanzod gives it only jobs that fit them, and 'gym job
status' and 'gym node list --job ID' say why a node cannot take a job
(docs/job-file.md, "Where a job runs").

--role validator makes the node a validator (docs/validators.md): it
registers as one (its account needs 25,000 GYM bonded), is never put into
a ring, and runs the trace checks hanzod assigns it for jobs that ask for
validators (a job file's validators: K), answering each with a signed
verdict. A verdict the other validators' majority contradicts is slashed.

--metrics HOST:PORT serves the worker's metrics (events by kind, deltas by
verdict, step, reward, loss) and the ring's (calls, failures by cause,
evidence by violation, frames and bytes, call time, last bus bandwidth) in
the Prometheus text format at /metrics; see docs/metrics.md.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			return runWorker(c, dial, cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.keyPath, "key", "", "node key (default DIR/node.key with --data DIR, made if missing)")
	f.StringVar(&cfg.DataDir, "data", "", "directory for the node key, delta sequence and accepted deltas")
	f.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "ring listen address HOST:PORT (port 0 picks one)")
	f.StringVar(&cfg.ProbeAddr, "probe-listen", cfg.ProbeAddr, "bandwidth probe listen address HOST:PORT (port 0 picks one)")
	f.StringVar(&cfg.AdvertiseHost, "advertise-host", "", "host to register instead of the listen addresses' (for a wildcard --listen)")
	f.BoolVar(&o.tls, "ring-tls", true, "TLS 1.3 on ring links (false: plain TCP, loopback only)")
	f.IntVar(&cfg.RingStreams, "ring-streams", cfg.RingStreams, "parallel TCP streams to the ring successor (0: chosen per link from its measured round trip; each member chooses for the link it dials)")
	f.IntVar(&cfg.Threads, "threads", cfg.Threads, "training threads (only changes the speed)")
	f.DurationVar(&o.heartbeat, "heartbeat", worker.DefaultHeartbeat, "heartbeat interval (at least 1s: hanzod refuses faster ones)")
	f.DurationVar(&o.ringTimeout, "ring-timeout", cfg.RingTimeout, "how long a ring neighbour may stay silent")
	f.BoolVar(&cfg.ExitWhenDone, "exit-when-done", false, "exit when the assigned job is published (0) or failed (1)")
	f.BoolVar(&o.json, "json", false, "print one JSON object per event per line")
	f.IntVar(&o.logSteps, "log-steps", 10, "without --json, print every Nth step")
	f.StringVar(&cfg.Constraints.Model, "model", os.Getenv("MODEL_NAME"), "only run jobs of this model [MODEL_NAME]")
	f.StringVar(&o.modelDir, "model-dir", "", "a base model this node has: a Hugging Face model directory, used for jobs naming its CID")
	f.Int64Var(&o.maxMemoryMiB, "max-memory-mib", 0, "refuse jobs whose estimated memory exceeds this (0: the host's available memory)")
	f.StringVar(&o.beta, "gspo-beta", os.Getenv("GSPO_BETA"), "only run jobs with this GSPO beta [GSPO_BETA]")
	f.StringVar(&o.loraRank, "lora-rank", os.Getenv("LORA_RANK"), "only run jobs with this LoRA rank [LORA_RANK]")
	f.StringVar(&cfg.Constraints.ImportanceSamplingLevel, "importance-sampling-level", os.Getenv("IMPORTANCE_SAMPLING_LEVEL"),
		"only run jobs with this importance sampling level, sequence or token [IMPORTANCE_SAMPLING_LEVEL]")
	f.StringVar(&cfg.MetricsAddr, "metrics", "", "serve Prometheus metrics (gym_worker_*, gym_ring_*) at http://HOST:PORT/metrics (default off)")
	f.StringVar(&cfg.ArtifactsAddr, "artifacts-listen", "", "serve fetched checkpoints to other workers on HOST:PORT (default off; port 0 picks one)")
	f.StringSliceVar(&o.artifactsAllow, "artifacts-allow", nil, "keys (hex) that may read every artifact this worker serves")
	f.BoolVar(&o.artifactsAllowAny, "artifacts-allow-any", false, "let any node read the checkpoints hanzod signed, not only the nodes hanzod named to this one")
	f.StringSliceVar(&o.artifactsPeers, "artifacts-peers", nil, "other workers' artifact servers to fetch checkpoints from as well: [KEYHEX@]HOST:PORT, comma-separated")
	f.StringVar(&o.backend, "backend", envOr("GYM_BACKEND", "go"), "training backend: go (built-in, replayable bit for bit) or torch (PyTorch; docs/backends.md) [GYM_BACKEND]")
	f.StringVar(&o.python, "python", "", "--backend torch: the Python interpreter (default $GYM_PYTHON, else python3)")
	f.StringVar(&o.torchDevice, "torch-device", "cpu", "--backend torch: cpu, cuda or cuda:N")
	f.StringVar(&o.torchType, "torch-dtype", "", "--backend torch: float32 or bfloat16 (default: the base's, bfloat16 for a bfloat16 checkpoint, else float32)")
	f.StringArrayVar(&o.accelerators, "accelerator", nil, "a device this node reports to hanzod, NAME:TOTAL_MIB[:FREE_MIB[:COMPUTE]] (repeatable; cpu:MIB for host memory); default: the host's memory, and with --backend torch on CUDA the GPUs nvidia-smi lists")
	f.StringVar(&cfg.Role, "role", "", "validator: check other nodes' deltas for hanzod instead of training (25,000 GYM bonded; docs/validators.md)")
	f.StringVar(&cfg.Attack, "attack", "", "misbehave on purpose, to demonstrate that the ring and hanzod detect it: signflip, noise, replay, equivocate, ring, alie, alie-adaptive, ipm, mimic, mimic-noise, scale or rewards; a validator verdict-pass, verdict-fail or verdict-flip (demos and tests only)")
	f.MarkHidden("attack")
	f.StringSliceVar(&o.attackPeek, "attack-peek", nil, "alie, alie-adaptive, ipm, mimic, mimic-noise: the honest workers' delta directories on this machine, read as an omniscient attacker's side channel (test clusters only)")
	f.MarkHidden("attack-peek")
	f.IntVar(&cfg.Colluders, "attack-colluders", 1, "alie, alie-adaptive: the number f of attacking workers (for z)")
	f.MarkHidden("attack-colluders")
	f.Float64Var(&o.attackZ, "attack-z", 0, "alie: z (default: 1.5, or the paper's formula for n and f where it gives more)")
	f.MarkHidden("attack-z")
	f.Float64Var(&cfg.AttackParams.IPMEpsilon, "attack-eps", 0, "ipm: ε (default 2)")
	f.MarkHidden("attack-eps")
	f.Float64Var(&cfg.AttackParams.MimicNoise, "attack-noise", 0, "mimic-noise: the noise as a multiple of the typical distance between honest updates (default 0.6)")
	f.MarkHidden("attack-noise")
	return cmd
}

func runWorker(c *cobra.Command, dial DialFunc, cfg worker.Config, o workerOptions) error {
	stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
	// --orchestrator is gym's persistent flag (with --tls-ca and
	// --tls-server-name), so a dialer built on orchestratorFlags sees the
	// same address.
	flag := func(name, def string) string {
		if fl := c.Flags().Lookup(name); fl != nil {
			return fl.Value.String()
		}
		return def
	}
	o.orchestrator = flag("orchestrator", envOr("ORCHESTRATOR_URL", defaultOrchestrator))
	if cfg.DataDir != "" {
		// Absolute: the torch backend's process is handed the base's
		// directory under it, and it refuses a relative path.
		abs, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return usageError{fmt.Errorf("--data %s: %w", cfg.DataDir, err)}
		}
		cfg.DataDir = abs
	}
	dialOpts := DialOptions{Addr: o.orchestrator, DataDir: cfg.DataDir, Role: cfg.Role,
		TLSCA: flag("tls-ca", os.Getenv("ORCHESTRATOR_TLS_CA")), TLSServerName: flag("tls-server-name", os.Getenv("ORCHESTRATOR_TLS_SERVER_NAME"))}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if o.heartbeat < time.Second {
		return usageError{fmt.Errorf("--heartbeat %v: hanzod refuses heartbeats less than 1s apart", o.heartbeat)}
	}
	if o.logSteps < 1 {
		return usageError{errors.New("--log-steps must be at least 1")}
	}
	cfg.Heartbeat, cfg.MinGap, cfg.RingTimeout, cfg.PlainRing = o.heartbeat, worker.DefaultMinGap, o.ringTimeout, !o.tls
	if o.modelDir != "" {
		open := basemodel.Open
		if o.backend == backend.Torch && cfg.Role != worker.RoleValidator {
			// The torch process loads the directory (its BaseDir): this
			// process reads only the config and tokenizer.
			open = basemodel.OpenConfig
		}
		b, err := open(o.modelDir)
		if err != nil {
			return fmt.Errorf("--model-dir %s: %w", o.modelDir, err)
		}
		root, err := basecache.DirCID(c.Context(), o.modelDir)
		if err != nil {
			return fmt.Errorf("--model-dir %s: %w", o.modelDir, err)
		}
		b.Name = root.String()
		cfg.Base = b
		fmt.Fprintf(stderr, "gym worker: --model-dir %s is base model %s\n", o.modelDir, b.Name)
	}
	if o.maxMemoryMiB < 0 {
		return usageError{fmt.Errorf("--max-memory-mib %d: want 0 (the host's available memory) or more", o.maxMemoryMiB)}
	}
	cfg.MemoryLimit = o.maxMemoryMiB << 20
	if o.beta != "" {
		b, err := strconv.ParseFloat(o.beta, 64)
		if err != nil {
			return usageError{fmt.Errorf("--gspo-beta (GSPO_BETA) %q: %v", o.beta, err)}
		}
		cfg.Constraints.Beta = &b
	}
	if o.loraRank != "" {
		r, err := strconv.Atoi(o.loraRank)
		if err != nil || r < 1 {
			return usageError{fmt.Errorf("--lora-rank (LORA_RANK) %q: want a positive integer", o.loraRank)}
		}
		cfg.Constraints.LoRARank = r
	}
	switch cfg.Constraints.ImportanceSamplingLevel {
	case "", "sequence", "token":
	default:
		return usageError{fmt.Errorf("--importance-sampling-level (IMPORTANCE_SAMPLING_LEVEL) %q: want sequence or token", cfg.Constraints.ImportanceSamplingLevel)}
	}
	be, err := backend.Parse(o.backend)
	if err != nil {
		return usageError{fmt.Errorf("--backend: %w", err)}
	}
	if be == backend.Torch {
		if err := torch.CheckDType(o.torchType); err != nil {
			return usageError{fmt.Errorf("--torch-dtype: %w", err)}
		}
	}
	// USE_4BIT (the seed's): 4-bit quantization is a torch-backend
	// feature; the go backend trains at full precision, so asking for it
	// there is refused rather than silently ignored.
	use4bit := false
	switch v := os.Getenv("USE_4BIT"); strings.ToLower(v) {
	case "", "0", "false", "no":
	case "1", "true", "yes":
		if be != backend.Torch {
			return usageError{fmt.Errorf("USE_4BIT=%s: 4-bit quantization needs the torch backend (--backend torch, on a CUDA machine); unset USE_4BIT or set it to false", v)}
		}
		use4bit = true
	default:
		return usageError{fmt.Errorf("USE_4BIT=%q: want true or false", v)}
	}
	if pos := os.Getenv("RING_POSITION"); pos != "" {
		logger.Info("RING_POSITION is ignored: hanzod chooses the ring order from measured bandwidth", "RING_POSITION", pos)
	}
	if err := worker.CheckAttack(cfg.Attack); err != nil {
		return usageError{fmt.Errorf("--attack: %w", err)}
	}
	if c.Flags().Changed("attack-z") {
		cfg.AttackParams.ALIEZ = &o.attackZ
	}
	if err := cfg.AttackParams.Check(cfg.Attack); err != nil {
		return usageError{fmt.Errorf("--attack-z, --attack-eps, --attack-noise: %w", err)}
	}
	if len(o.attackPeek) > 0 {
		cfg.Peek = worker.PeekDirs(o.attackPeek, o.ringTimeout)
	}
	if cfg.Attack != "" {
		logger.Warn("attack mode: this worker misbehaves on purpose", "attack", cfg.Attack)
	}
	key, err := workerKey(o.keyPath, cfg.DataDir, stderr)
	if err != nil {
		return err
	}
	cfg.Key = key
	ctx := c.Context()
	var torchOpts *torch.Options
	if be == backend.Torch {
		torchOpts = &torch.Options{Python: o.python, Device: o.torchDevice, DType: o.torchType, Use4Bit: use4bit,
			BaseDir: o.modelDir, Log: stderr}
	}
	if dialOpts.Hardware, err = workerHardware(ctx, machineProbe, o.accelerators, be, o.torchDevice, o.torchType); err != nil {
		return err
	}
	dialOpts.Key = key
	orch, closer, err := dial(ctx, dialOpts)
	if err != nil {
		return err
	}
	if closer != nil {
		defer closer.Close()
	}
	cfg.Orchestrator = orch
	cfg.Logger = logger
	// Bases and datasets jobs name by CID are fetched into the node's
	// artifact store from hanzod and peers, exported and verified under
	// DIR/bases and DIR/datasets (node/daemon).
	nodeArtifacts, _ := orch.(nodedaemon.Artifacts)
	if cfg.ArtifactsAddr != "" || len(o.artifactsPeers) > 0 || len(o.artifactsAllow) > 0 || o.artifactsAllowAny {
		an, ok := orch.(artifactNode)
		if !ok {
			return usageError{errors.New("--artifacts-*: this orchestrator client keeps no artifact store")}
		}
		srv, err := workerArtifacts(an, &cfg, o, logger)
		if err != nil {
			return err
		}
		if srv != nil {
			defer srv.Close()
		}
	}
	enc := json.NewEncoder(stdout)
	cfg.OnEvent = func(e worker.Event) {
		if o.json {
			enc.Encode(e)
			return
		}
		if e.Kind == worker.EventStep && e.Step%o.logSteps != 0 {
			return
		}
		fmt.Fprintln(stdout, e)
	}
	node, err := nodedaemon.Start(ctx, nodedaemon.Config{Worker: cfg, Artifacts: nodeArtifacts, Torch: torchOpts})
	if err != nil {
		if errors.Is(err, worker.ErrConfig) {
			return usageError{err}
		}
		return err
	}
	defer node.Close()
	fmt.Fprintf(stderr, "gym worker: node %s, orchestrator %s\n", node.Worker().ID(), o.orchestrator)
	err = node.Run(ctx)
	if errors.Is(err, worker.ErrJobFailed) {
		return &exitError{code: 1, msg: "the job failed"}
	}
	return err
}

// workerKey loads --key, or DIR/node.key, making the latter if missing.
func workerKey(keyPath, dir string, stderr io.Writer) (ed25519.PrivateKey, error) {
	if keyPath != "" {
		return nodekey.Load(keyPath)
	}
	if dir == "" {
		return nil, usageError{errors.New("--key KEY or --data DIR is required (make a key with 'gym keygen --out KEY')")}
	}
	p := filepath.Join(dir, "node.key")
	key, err := nodekey.Load(p)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if key, err = nodekey.Generate(nil); err != nil {
		return nil, err
	}
	if err := nodekey.Save(p, key, false); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "gym worker: made node key %s (public %s)\n", p, nodekey.PublicHex(key))
	return key, nil
}

// workerArtifacts applies the --artifacts-* flags: more sources for
// checkpoint fetches, and the artifact server (nil when not listening).
func workerArtifacts(an artifactNode, cfg *worker.Config, o workerOptions, logger *slog.Logger) (*transfer.Server, error) {
	var peers []transfer.Peer
	for _, f := range o.artifactsPeers {
		for _, a := range strings.Split(f, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			p, err := transfer.ParsePeer(a)
			if err != nil {
				return nil, usageError{fmt.Errorf("--artifacts-peers: %w", err)}
			}
			peers = append(peers, p)
		}
	}
	an.SetSources(peers)
	keys, err := parseKeys(o.artifactsAllow)
	if err != nil {
		return nil, err
	}
	if cfg.ArtifactsAddr == "" {
		if len(keys) > 0 || o.artifactsAllowAny {
			return nil, usageError{errors.New("--artifacts-allow and --artifacts-allow-any need --artifacts-listen")}
		}
		return nil, nil
	}
	srv, err := an.ArtifactServer(nodeclient.ServeConfig{Allow: keys, AllowAny: o.artifactsAllowAny, Logger: logger.With("part", "artifacts")})
	if err != nil {
		return nil, err
	}
	cfg.Artifacts = srv
	return srv, nil
}
