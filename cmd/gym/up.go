package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/valkeyserver"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
)

// upOptions are gym up's flags.
type upOptions struct {
	workers, epochs, stepsPerEpoch, interval, prompts  int
	task, killAt, attack, aggregation, out, modelDir   string
	byzantine, spotCheckBP, threads                    int
	evalSize, shardSize                                int    // --eval-size, --shard-size
	validators                                         int    // --validators N (-1: 2 where hanzod checks on nodes, else 0)
	modelWork                                          string // --model-work auto|nodes|self
	ringGroups                                         int    // --ring-groups G
	validatorAttack                                    string // --validator-attack KIND (the last validator)
	attackZ, attackEps, attackNoise                    float64
	attackZSet                                         bool // --attack-z given
	seed                                               uint64
	keySeed                                            int64 // --key-seed; -1: fresh keys
	json, restartKilled, noOutlierReplays, noScreening bool
	timeout                                            time.Duration
	ipfs                                               string
	backend, python                                    string
	torchDevice, torchDType                            string   // --torch-device, --torch-dtype
	use4bit                                            bool     // --use-4bit: the job's gspo.use_4bit
	maxSeqLen                                          int      // --max-seq-len (0: the profile's, raised to fit the dataset)
	dryRun                                             bool     // --dry-run: plan the job, print it, start nothing
	backends                                           []string // --backend parsed, one per worker
	replicas                                           int
	killLeaderAt                                       string
	ledger, geth                                       string // --ledger embedded|evm, --geth PATH
	confirmations                                      uint64
	learningRate, outerLR, outerMomentum               float64
	// dataParallel submits jobconf.BuiltinDataParallelGSPO (with --interval
	// 1 unless it is given).
	dataParallel bool
	dataFlags           // --dataset PATH|CID and its mapping and reward
	datasetCID   string // the CID the job names (set by runUp)
	datasetStage string // the directory published (set by runUp)
}

func newUp() *cobra.Command {
	g := jobconf.BuiltinGSPO(5)
	o := upOptions{workers: 4, epochs: 3, stepsPerEpoch: 30, interval: 5, prompts: 4, task: "addition", out: "out/up", threads: 2, evalSize: judge.DefaultEvalSize, shardSize: judge.DefaultShardSize, timeout: 15 * time.Minute,
		ledger: "embedded", confirmations: 1, learningRate: -1, outerLR: -1, outerMomentum: g.OuterMomentum, keySeed: -1, dataParallel: true}
	cmd := &cobra.Command{
		Use:   "up [--workers 4] [--epochs 3] [--task NAME] [--kill-worker-at EPOCH:STEP] [--replicas 3 [--kill-leader-at EPOCH:STEP]] [--byzantine K --attack KIND] [--out DIR] [--json]",
		Short: "Run decentralized GSPO training end to end on this machine: hanzod, N workers, one job",
		Long: `up starts the orchestrator (hanzod, embedded store) in this process and N
worker processes on loopback, funds and bonds their stake, submits a job on
the built-in base model and runs it to Published: the workers train LoRA
adapters with GSPO, average them over the authenticated ring all-reduce
(by default every step, as synchronous data parallelism: plain SGD in the
workers, one Adam on the averaged gradient, docs/data-parallel.md;
--data-parallel=false trains the local-steps profile instead: AdamW in
every worker, an average every --interval steps, default 5, stepped by a
Nesterov outer rule), and submit a signed delta for every sync;
hanzod validates and scores the deltas, spot-checks some by deterministic
replay, merges each epoch into the checkpoint of record (PEFT layout,
content-addressed), pays rewards, slashes proven cheating and settles the
job.

--dataset PATH|CID trains on a dataset instead of a built-in task
(docs/datasets.md): a JSONL or Parquet file (published as the train split of
a directory), a directory in the Hugging Face datasets layout, or the CID
of a dataset already in hanzod's store. up publishes a path into hanzod's
store as a dataset artifact and the job names its CID; each worker fetches
it, verifies it and caches it under workers/wN/datasets/. The mapping:
--template "^{question}=" (or --prompt-field), --answer-field, --extract
numeric, --held-out test (or --hold-out-bp); the reward: --reward
'[{"verifier":"numeric","weight":1}]' (default: exact match).

--model DIR trains a Hugging Face model directory instead (Llama, Qwen2,
Qwen3, Mistral; docs/models.md): up publishes it into hanzod's artifact
store as a base-model artifact and the job names its CID; no worker is
given the directory: each fetches the base from hanzod, verifies it against
the CID and caches it under workers/wN/bases/, as on a real cluster.

A live view shows epochs, steps, reward, ring membership and events as they
happen. The run ends with a summary (held-out accuracy before and after,
checkpoint CID and path, rewards and slashes per node, time) and writes to
--out DIR:

  summary.json     the summary (--json prints it on stdout instead of text)
  events.jsonl     hanzod's event log, one JSON object per line
  checkpoint/      the final checkpoint (adapter_model.safetensors,
                   adapter_config.json, README.md); gym eval --checkpoint DIR
  deltas/          every accepted delta (gym delta inspect FILE)
  reward.png       sample reward per step and held-out accuracy per epoch
  hanzod/          hanzod's data directory
  workers/wN/      each worker's key, log, events (events.jsonl) and deltas

Fault and attack demonstrations:
  --kill-worker-at E:S   kill -9 one worker at step S of epoch E; the ring
                         reports it, hanzod removes it, the rest go on
  --restart-killed       then start it again: it rejoins at the next epoch
  --replicas 3           run 3 hanzod replicas (in this process) over a
                         Valkey server the command starts (valkey-server or
                         redis-server on PATH; data in --out/valkey), one
                         signing key (--out/hanzod.key) and the blob store
                         in Valkey; the workers reach whichever leads
  --kill-leader-at E:S   abandon the leading replica (its lease not
                         released, as kill -9 leaves it) once a delta of
                         step S of epoch E is accepted; a standby takes
                         over and finishes the epoch; the summary reports
                         the takeover time
  --byzantine K --attack signflip|noise|replay|equivocate|ring
                         K workers cheat; the job declares f = K (so the
                         aggregation becomes median unless --aggregation
                         says trimmed-mean)
  --validators N [--validator-attack verdict-flip]
                         N staked validators check the sampled deltas for
                         hanzod, two verdicts a check, a third when they
                         disagree; the last one lies with the attack, is
                         outvoted and slashed (docs/validators.md). With
                         --model DIR hanzod never loads the base: two
                         validators (the default then) check the deltas
                         and measure each epoch's held-out figures
  --attack alie|alie-adaptive|ipm|mimic|mimic-noise
                         in-bound attacks of the literature built from the
                         sync's honest updates, which the attackers read
                         from the honest workers' delta files (a test-only
                         side channel): ALIE (mean − z·std per coordinate,
                         z = 1.5 or --attack-z), adaptive ALIE (the
                         largest z hanzod's outlier tests do not flag),
                         IPM (−ε × mean, ε = 2 or --attack-eps), mimic (all
                         copy one honest node's update), noisy mimic (that
                         copy plus noise of 0.6 × the typical distance
                         between honest updates, or --attack-noise);
                         docs/threat-model.md

Backends: --backend go,go,torch,torch gives each worker its training
backend (one name for all, or one per worker); torch workers run python -m
gym_protocol.backend with --python (default $GYM_PYTHON, else python3) and
the job allows any backend when they are mixed (docs/backends.md).

On a chain: --ledger evm starts geth --dev on loopback (the build of
scripts/build-geth.sh in the user cache, or --geth PATH), deploys GYMToken,
MiningPool and PublicationRegistry, mints and stakes 10,000 GYM for every
worker as a node from the worker's own Ethereum key, funds the MiningPool,
and runs hanzod with the chain ledger: it admits only nodes staked on chain
and mirrors every epoch's payment, every slash (with its evidence), every
checkpoint's publication record and the job's locks onto the chain. The
summary then shows what the chain holds, read back from it: each node's
stake, balance and slashes, each epoch's payment with its gas, each
publication record. The chain's data, keys, contracts.json and
accounts.json are under --out DIR/chain (docs/chain.md).

Exits 0 when the job is published, 1 otherwise.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.dataParallel && !cmd.Flags().Changed("interval") {
				o.interval = 1 // a sync every step: AdamW on the averaged gradient
			}
			o.attackZSet = cmd.Flags().Changed("attack-z")
			if err := o.check(); err != nil {
				return usageError{err}
			}
			sum, err := runUp(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil || o.dryRun {
				return err
			}
			if sum.Status != string(state.Published) {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.workers, "workers", o.workers, "worker processes (at least 3: a ring continues only with 3)")
	f.IntVar(&o.epochs, "epochs", o.epochs, "epochs of the job")
	f.IntVar(&o.stepsPerEpoch, "steps-per-epoch", o.stepsPerEpoch, "training steps per epoch (a multiple of --interval)")
	f.IntVar(&o.interval, "interval", o.interval, "aggregate_interval: local steps between ring syncs")
	f.IntVar(&o.prompts, "prompts", o.prompts, "prompts per step per worker (group size 8 completions each)")
	f.StringVar(&o.task, "task", o.task, "built-in task: "+strings.Join(task.Names(), ", "))
	f.StringVar(&o.modelDir, "model", "", "base model: a Hugging Face model directory (default: the built-in base model)")
	o.dataFlags.bind(f, "training data instead of --task: a .jsonl or .parquet file, a datasets directory, or a dataset CID in hanzod's store")
	f.Uint64Var(&o.seed, "seed", 0, "job seed (data order, sampling, adapter initialisation)")
	f.Int64Var(&o.keySeed, "key-seed", o.keySeed, "derive the workers' node keys from this seed (-1: fresh keys): runs with one --seed and --key-seed train each worker on the same data, so settings compare pairwise (gym bench quality); anyone can rebuild such keys, so only for local runs")
	f.StringVar(&o.aggregation, "aggregation", "", "merge rule: mean (quality-weighted), median or trimmed-mean (default mean; median with --byzantine)")
	f.IntVar(&o.spotCheckBP, "spot-check-bp", 0, "share of deltas re-executed by replay, in basis points (0: 1000 = 10%; -1: none)")
	f.StringVar(&o.killAt, "kill-worker-at", "", "EPOCH:STEP: kill -9 worker w0 when it reaches that step of that epoch")
	f.BoolVar(&o.restartKilled, "restart-killed", false, "start the killed worker again 3 s later (same key and data): it re-registers and rejoins at the next epoch boundary")
	f.IntVar(&o.byzantine, "byzantine", 0, "number of cheating workers (the last K)")
	f.IntVar(&o.validators, "validators", -1, "run N staked validators (at least 2) and have them, not hanzod, check the job's sampled deltas, two verdicts a check (docs/validators.md); default 2 when hanzod's model work runs on nodes (--model DIR), else 0")
	f.StringVar(&o.modelWork, "model-work", "auto", "hanzod's --model-work: nodes (validators replay, check and evaluate; hanzod never loads the base's weights), self, or auto (nodes for --model DIR, self for the built-in base)")
	f.StringVar(&o.validatorAttack, "validator-attack", "", "the last validator lies: verdict-pass, verdict-fail or verdict-flip (needs --validators 3 or more)")
	f.StringVar(&o.attack, "attack", "", "what the cheating workers do: signflip (×−1000), noise (Gaussian), replay (re-sign an old delta), equivocate (two deltas per slot), ring (honest deltas, ×−1000 into the ring all-reduce), alie, alie-adaptive, ipm, mimic, mimic-noise (in-bound, from the honest updates)")
	f.Float64Var(&o.attackZ, "attack-z", 0, "--attack alie: ALIE's z (default 1.5, or the paper's formula for n and f where it gives more; 0: the honest mean)")
	f.Float64Var(&o.attackEps, "attack-eps", 0, "--attack ipm: IPM's ε (default 2)")
	f.Float64Var(&o.attackNoise, "attack-noise", 0, "--attack mimic-noise: the noise, as a multiple of the typical distance between honest updates (default 0.6)")
	f.StringVar(&o.out, "out", o.out, "directory for the run's files (replaced if it holds an earlier gym up run)")
	f.BoolVar(&o.json, "json", false, "print the summary as one JSON object on stdout; progress goes to stderr")
	f.IntVar(&o.threads, "threads", o.threads, "threads for hanzod's validation and evaluation")
	f.IntVar(&o.evalSize, "eval-size", o.evalSize, "held-out problems hanzod measures each checkpoint's accuracy on (and the summary its accuracy before and after)")
	f.IntVar(&o.shardSize, "shard-size", o.shardSize, "held-out problems hanzod measures each delta's score (the loss it removes) on")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "give up (and exit 1) if the job has not finished by then")
	f.StringVar(&o.ipfs, "ipfs", os.Getenv("IPFS_URL"), "kubo RPC URL (http://HOST:5001): hanzod pins every checkpoint there; the summary says whether it did [IPFS_URL]")
	f.BoolVar(&o.noOutlierReplays, "no-outlier-replays", false, "hanzod replays only the keyed spot-check share, not the outliers of each sync (to measure the attacks without that defence)")
	f.MarkHidden("no-outlier-replays")
	f.BoolVar(&o.noScreening, "no-screening", false, "hanzod checks deltas only at each epoch's end, not while it runs (to measure what the in-epoch screening is worth, docs/byzantine.md)")
	f.MarkHidden("no-screening")
	f.BoolVar(&o.dryRun, "dry-run", false, "plan the job on the model and dataset as the workers will, print the job it would submit (JSON) and exit without starting anything")
	f.IntVar(&o.maxSeqLen, "max-seq-len", 0, "the job's gspo.max_seq_len (prompt and completion tokens); 0: the built-in profile's, raised to the longest prompt and answer of --dataset as the model tokenizes them")
	f.StringVar(&o.torchDevice, "torch-device", "", "the torch workers' device: cpu, cuda or cuda:N (default cpu)")
	f.StringVar(&o.torchDType, "torch-dtype", "", "the torch workers' dtype: float32 or bfloat16 (default: the base's)")
	f.BoolVar(&o.use4bit, "use-4bit", false, "the job asks for 4-bit NF4 quantization of the base (gspo.use_4bit; torch workers on CUDA with bitsandbytes, refused elsewhere)")
	f.StringVar(&o.backend, "backend", "go", "training backend of the workers: go or torch, or one per worker, comma-separated (go,go,torch,torch)")
	f.StringVar(&o.python, "python", "", "torch workers' Python interpreter (default $GYM_PYTHON, else python3)")
	f.IntVar(&o.ringGroups, "ring-groups", 0, "run the ring all-reduce in two levels over this many groups of workers (0: one flat ring; docs/ring.md, \"Two-level all-reduce\")")
	f.IntVar(&o.replicas, "replicas", 1, "hanzod replicas: more than 1 runs them over a Valkey server started by the command")
	f.StringVar(&o.killLeaderAt, "kill-leader-at", "", "EPOCH:STEP: kill the leading hanzod replica once a delta of that step of that epoch is accepted (needs --replicas 2 or more)")
	f.StringVar(&o.ledger, "ledger", o.ledger, "embedded (hanzod's own ledger) or evm (stake, rewards, slashes and publications on a geth --dev chain)")
	f.StringVar(&o.geth, "geth", "", "geth binary for --ledger evm (default: scripts/build-geth.sh's build in the user cache, else geth on PATH)")
	f.Uint64Var(&o.confirmations, "confirmations", o.confirmations, "blocks each chain transaction waits for (--ledger evm)")
	f.Float64Var(&o.learningRate, "learning-rate", o.learningRate, "gspo.learning_rate: the workers' AdamW rate (-1: the built-in profile's for --workers, 2e-3 × min(workers, 4)^¼)")
	f.Float64Var(&o.outerLR, "outer-lr", o.outerLR, "gspo.outer_learning_rate: the outer optimiser's rate on each sync's averaged update (0: the plain average; -1: the built-in profile's for --workers, √(workers/4) and at least 1)")
	f.Float64Var(&o.outerMomentum, "outer-momentum", o.outerMomentum, "gspo.outer_momentum: the outer optimiser's Nesterov momentum (needs --outer-lr above 0)")
	f.BoolVar(&o.dataParallel, "data-parallel", o.dataParallel, "synchronous data parallelism: workers step plain SGD (1e-3), the ring averages every step (--interval 1 unless given), Adam (1.5e-3) steps the average (docs/data-parallel.md); =false: the local-steps profile (AdamW in every worker, --interval 5 unless given, Nesterov outer rule)")
	return cmd
}

// attackParams are the in-bound attacks' strengths the flags set.
func (o *upOptions) attackParams() worker.AttackParams {
	p := worker.AttackParams{IPMEpsilon: o.attackEps, MimicNoise: o.attackNoise}
	if o.attackZSet {
		z := o.attackZ
		p.ALIEZ = &z
	}
	return p
}

func (o *upOptions) check() error {
	switch {
	case o.workers < 3 || o.workers > 64:
		return fmt.Errorf("--workers %d: want 3..64 (a ring continues only with at least 3 members)", o.workers)
	case o.epochs < 1:
		return fmt.Errorf("--epochs %d: want at least 1", o.epochs)
	case o.interval < 1 || o.stepsPerEpoch < o.interval || o.stepsPerEpoch%o.interval != 0:
		return fmt.Errorf("--steps-per-epoch %d must be a positive multiple of --interval %d", o.stepsPerEpoch, o.interval)
	case o.byzantine < 0 || o.byzantine >= o.workers:
		return fmt.Errorf("--byzantine %d: want 0..%d", o.byzantine, o.workers-1)
	case o.restartKilled && o.killAt == "":
		return errors.New("--restart-killed needs --kill-worker-at")
	case (o.byzantine > 0) != (o.attack != ""):
		return errors.New("--byzantine K and --attack KIND go together")
	case o.validators == 1 || o.validators < -1 || o.validators > 16:
		return fmt.Errorf("--validators %d: want 0 (hanzod checks; not with --model DIR) or 2..16 (two verdicts a check need two validators)", o.validators)
	case o.validatorAttack != "" && (o.validators < 3 || !strings.HasPrefix(o.validatorAttack, "verdict-") || worker.CheckAttack(o.validatorAttack) != nil):
		return fmt.Errorf("--validator-attack %q: want verdict-pass, verdict-fail or verdict-flip with --validators 3 or more (two honest ones to outvote it)", o.validatorAttack)
	case o.out == "":
		return errors.New("--out DIR is required")
	case o.ledger != "embedded" && o.ledger != "evm":
		return fmt.Errorf("--ledger %q: want embedded or evm", o.ledger)
	case o.geth != "" && o.ledger != "evm":
		return errors.New("--geth goes with --ledger evm")
	case o.learningRate != -1 && (o.learningRate <= 0 || o.learningRate > 1):
		return fmt.Errorf("--learning-rate %v: want -1 (the built-in profile's for --workers) or a rate in (0, 1]", o.learningRate)
	case o.outerLR < 0 && o.outerLR != -1:
		return fmt.Errorf("--outer-lr %v: want -1 (the built-in profile's for --workers) or 0..10", o.outerLR)
	case o.dataParallel && o.outerMomentum != 0:
		return errors.New("the data-parallel profile's outer rule is Adam, which has its own moments: leave --outer-momentum out, or train the local-steps profile with --data-parallel=false")
	case o.keySeed < -1:
		return fmt.Errorf("--key-seed %d: want -1 (fresh keys) or a seed of 0 or more", o.keySeed)
	case o.evalSize < 1 || o.evalSize > 100000 || o.shardSize < 1 || o.shardSize > 100000:
		return fmt.Errorf("--eval-size %d, --shard-size %d: want 1..100000 held-out problems", o.evalSize, o.shardSize)
	case o.replicas < 1 || o.replicas > 9:
		return fmt.Errorf("--replicas %d: want 1..9", o.replicas)
	case o.killLeaderAt != "" && o.replicas < 2:
		return errors.New("--kill-leader-at needs --replicas 2 or more (a standby to take over)")
	}
	mw, err := judge.ParseModelWork(o.modelWork)
	if err != nil {
		return fmt.Errorf("--model-work: %w", err)
	}
	onNodes := mw == judge.ModelWorkNodes || (mw == judge.ModelWorkAuto && o.modelDir != "")
	switch {
	case o.validators == -1 && onNodes:
		o.validators = 2 // hanzod has no model to check with: validators do it
	case o.validators == -1:
		o.validators = 0
	case o.validators == 0 && onNodes:
		return fmt.Errorf("--validators 0 with --model-work %s: hanzod does not load the base, so validators check and evaluate every epoch; run 2 or more (or --model-work self)", mw)
	}
	if o.killLeaderAt != "" {
		if _, _, err := parseKillAt(o.killLeaderAt); err != nil {
			return fmt.Errorf("--kill-leader-at: %w", err)
		}
	}
	bs, err := backend.ParseList(o.backend)
	if err != nil {
		return fmt.Errorf("--backend: %w", err)
	}
	if len(bs) == 1 {
		bs = slices.Repeat(bs, o.workers)
	}
	if len(bs) != o.workers {
		return fmt.Errorf("--backend names %d backends for %d workers: give one, or one per worker", len(bs), o.workers)
	}
	o.backends = bs
	if err := worker.CheckAttack(o.attack); err != nil {
		return fmt.Errorf("--attack: %w", err)
	}
	if err := o.attackParams().Check(o.attack); err != nil {
		return fmt.Errorf("--attack-z, --attack-eps, --attack-noise: %w", err)
	}
	if o.aggregation == "" {
		o.aggregation = "mean"
		if o.byzantine > 0 {
			o.aggregation = "median"
		}
	}
	if _, err := merge.ParseRule(o.aggregation); err != nil {
		return err
	}
	if err := merge.CheckDefensible(merge.Rule(o.aggregation), o.workers, o.byzantine); err != nil {
		return err
	}
	if o.killAt != "" {
		if _, _, err := parseKillAt(o.killAt); err != nil {
			return err
		}
	}
	if _, err := task.Lookup(o.task); err != nil {
		return err
	}
	if o.dataset == "" {
		if o.mappingGiven() {
			return errors.New("--prompt-field, --template, --extract, --split, --held-out and --hold-out-bp map a --dataset; give one")
		}
		o.data = jobspec.Data{}
	} else {
		data, err := mappingWithDefaults(o.data)
		if err != nil {
			return err
		}
		o.data = data
	}
	_, err = parseRewardJSON(o.rewardJSON)
	return err
}

// upDataset resolves --dataset: a path is staged (a single file becomes
// the train split of a directory under tmp) and hashed; a CID is taken as
// it is (it must be in hanzod's store).
func upDataset(ctx context.Context, o *upOptions, tmp string) error {
	if o.dataset == "" {
		return nil
	}
	if _, byCID, err := jobspec.DatasetCID(o.dataset); err == nil && byCID {
		o.datasetCID = o.dataset
		return nil
	}
	if _, err := os.Stat(o.dataset); err != nil {
		return fmt.Errorf("--dataset %s: neither a file or directory nor a dataset CID: %w", o.dataset, err)
	}
	st, err := stageDataset(ctx, o.dataset, o.data, tmp)
	if err != nil {
		return err
	}
	o.datasetStage, o.datasetCID = st.dir, st.root.String()
	return nil
}

func parseKillAt(s string) (epoch, step int, err error) {
	a, b, ok := strings.Cut(s, ":")
	epoch, err1 := strconv.Atoi(a)
	step, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || epoch < 1 || step < 1 {
		return 0, 0, fmt.Errorf("--kill-worker-at %q: want EPOCH:STEP, both from 1 (STEP counts within the epoch)", s)
	}
	return epoch, step, nil
}

// upView renders a run's events: the live view (one line per notable
// event, and on a TTY a status line redrawn at most 4 times a second).
type upView struct {
	o     upOptions
	log   io.Writer
	tty   bool
	start time.Time
	spec  jobspec.Spec
	names map[string]string // node id → name
	dir   string

	mu       sync.Mutex
	rewards  map[int][]float64 // global step → sample rewards reported
	ring     string
	epoch    int
	lastLine time.Time
}

func runUp(ctx context.Context, o upOptions, stdout, stderr io.Writer) (*localcluster.Summary, error) {
	v := &upView{o: o, log: stdout, start: time.Now(), names: map[string]string{}, rewards: map[int][]float64{}}
	if o.json || o.dryRun {
		v.log = stderr
	}
	v.tty = isTerminal(v.log)
	if err := localcluster.PrepareDir(o.out); errors.Is(err, localcluster.ErrNotEmpty) {
		return nil, fmt.Errorf("gym up: --out %s is not empty and holds no earlier gym up run; pick another directory", o.out)
	} else if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cfg := localcluster.DefaultConfig()
	cfg.Dir, cfg.Workers, cfg.Gym, cfg.Threads = o.out, o.workers, self, o.threads
	cfg.RingGroups = o.ringGroups
	cfg.EvalSize, cfg.ShardSize, cfg.ModelWork = o.evalSize, o.shardSize, o.modelWork
	cfg.TorchDevice, cfg.TorchDType = o.torchDevice, o.torchDType
	if o.keySeed >= 0 {
		cfg.Key = localcluster.SeededKeys(uint64(o.keySeed))
	}
	model := basemodel.BuiltinName
	var modelBase *basemodel.Base // the base's config and tokenizer: what the job is planned on
	if o.modelDir == "" {
		if cfg.Base, err = loadBase(""); err != nil {
			return nil, err
		}
	} else {
		// The directory is published into hanzod's store as a base-model
		// artifact; the job names its CID, and the workers fetch it.
		if cfg.ModelDir, err = filepath.Abs(o.modelDir); err != nil {
			return nil, err
		}
		// Checked as hanzod reads it: config, tokenizer and the
		// safetensors headers, no weights decoded in this process.
		if modelBase, err = basemodel.OpenConfig(cfg.ModelDir); err != nil {
			return nil, fmt.Errorf("--model %s: %w", o.modelDir, err)
		}
		root, err := basecache.DirCID(ctx, cfg.ModelDir)
		if err != nil {
			return nil, fmt.Errorf("--model %s: %w", o.modelDir, err)
		}
		model = root.String()
	}
	if err := upDataset(ctx, &o, o.out); err != nil {
		return nil, err
	}
	cfg.DatasetDir = o.datasetStage
	cfg.Treasury = ledger.Amount(o.epochs) * 100 * ledger.GYM
	if o.noOutlierReplays {
		cfg.Outliers = merge.OutlierConfig{Far: -1, Near: -1, Twin: -1, Small: -1, Large: -1}
	}
	cfg.NoScreening = o.noScreening
	for i := range o.workers {
		a := ""
		if i >= o.workers-o.byzantine {
			a = o.attack
		}
		cfg.Attacks = append(cfg.Attacks, a)
	}
	cfg.AttackParams = o.attackParams()
	for i := range o.validators {
		a := ""
		if i == o.validators-1 {
			a = o.validatorAttack
		}
		cfg.Validators = append(cfg.Validators, a)
	}
	if o.killAt != "" {
		e, s, _ := parseKillAt(o.killAt)
		cfg.Kill = &localcluster.Kill{Worker: 0, Epoch: e, Step: s, Restart: o.restartKilled, RestartAfter: 3 * time.Second}
	}
	if o.replicas > 1 {
		vs, err := valkeyserver.Start(ctx, filepath.Join(o.out, "valkey"))
		if err != nil {
			return nil, fmt.Errorf("gym up --replicas: %w", err)
		}
		defer vs.Kill()
		v.say("valkey listening on %s (data in %s)", vs.URL(), vs.Dir)
		cfg.Replicas, cfg.ValkeyURL, cfg.LeaseTTL = o.replicas, vs.URL(), 2*time.Second
		if o.killLeaderAt != "" {
			e, s, _ := parseKillAt(o.killLeaderAt)
			cfg.KillLeader = &localcluster.KillLeader{Epoch: e, Step: s}
		}
	}
	cfg.OnEvent = v.event
	cfg.IPFS = o.ipfs
	cfg.Backends, cfg.Python = o.backends, o.python
	if slices.Contains(o.backends, backend.Torch) {
		// A torch worker's sync takes longer than the built-in engine's
		// (a Python process, and its first start imports torch); its ring
		// neighbours wait for it in the all-reduce.
		cfg.RingTimeout = max(cfg.RingTimeout, 2*time.Minute)
	}
	v.spec, v.dir = upSpec(o, model), filepath.Join(o.out, "hanzod")
	// The job is planned here, as every worker will, before anything
	// starts: a dataset or model the job cannot train is refused with the
	// numbers now, not after the cluster is up.
	if modelBase == nil {
		modelBase = cfg.Base
	} else {
		modelBase.Name = model // the job names it by its CID
	}
	if err := fitJob(o, modelBase, &v.spec, v.say); err != nil {
		return nil, usageError{err}
	}
	if o.dryRun {
		b, err := json.MarshalIndent(v.spec, "", "  ")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return nil, nil
	}
	if o.replicas > 1 {
		v.dir = filepath.Join(o.out, "hanzod-N")
	}
	if o.ledger == "evm" {
		stop, err := upChain(ctx, o, &cfg, v)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	sum, err := localcluster.Run(ctx, cfg, v.spec)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("gym up: the job did not finish within --timeout %v; see %s: %w", o.timeout, o.out, err)
		}
		return nil, fmt.Errorf("gym up: %w", err)
	}
	if o.json {
		json.NewEncoder(stdout).Encode(sum)
	} else {
		printSummary(stdout, sum)
	}
	return sum, nil
}

// upSpec is the job gym up submits on the base model named model: the
// built-in model's training profile for --workers (jobconf.BuiltinGSPOFor:
// trainer.DefaultConfig's settings with the rates for that many workers),
// split over the workers; --learning-rate and --outer-lr other than -1
// replace its rates.
func upSpec(o upOptions, model string) jobspec.Spec {
	g := jobconf.BuiltinGSPOFor(o.interval, o.workers)
	if o.dataParallel {
		g = jobconf.BuiltinDataParallelGSPO()
		g.AggregateInterval = o.interval
	}
	if o.learningRate != -1 {
		g.LearningRate = o.learningRate
	}
	if o.outerLR != -1 {
		g.OuterLR = o.outerLR
	}
	g.OuterMomentum = o.outerMomentum
	g.Use4Bit = o.use4bit
	s := jobspec.Spec{
		Model: model, Dataset: o.task, Epochs: o.epochs, MinNodes: o.workers, MaxNodes: o.workers,
		Aggregation: o.aggregation, Byzantine: o.byzantine, SpotCheckBP: o.spotCheckBP,
		StepsPerEpoch: o.stepsPerEpoch, PromptsPerStep: o.prompts, Seed: o.seed,
		GSPO: g, Backend: jobBackend(o.backends),
	}
	if o.validators > 0 {
		s.Validators = 2
	}
	if o.datasetCID != "" {
		s.Dataset, s.Data = o.datasetCID, o.data
	}
	s.Reward, _ = parseRewardJSON(o.rewardJSON) // checked by check
	return s
}

// jobBackend is the backend a job trained by workers of backends asks
// for: go (written as nothing) when all are go, torch when all are torch,
// any when they are mixed.
func jobBackend(backends []string) string {
	switch {
	case !slices.Contains(backends, backend.Torch):
		return ""
	case !slices.Contains(backends, backend.Go):
		return backend.Torch
	}
	return "any"
}

// event renders one event of the cluster.
func (v *upView) event(ev localcluster.Event) {
	switch ev.Kind {
	case localcluster.EventListening:
		v.say("hanzod listening on %s (artifacts %s), data in %s", ev.Addr, ev.ArtifactsAddr, v.dir)
	case localcluster.EventBasePublished:
		v.say("base model %s published into hanzod's store as %s (kind base-model): the job names it, the workers fetch and verify it", ev.Detail, ev.CID)
	case localcluster.EventDatasetPublished:
		v.say("dataset %s published into hanzod's store as %s (kind dataset): the job names it, the workers fetch and verify it", ev.Detail, ev.CID)
	case localcluster.EventRegistered:
		v.mu.Lock()
		for _, w := range ev.Workers {
			v.names[w.ID] = w.Name
		}
		v.mu.Unlock()
		v.say("%d workers registered", len(ev.Workers))
	case localcluster.EventSubmitted:
		s := v.spec
		v.say("job %s submitted: %s on %s, %d epochs × %d steps, sync every %d, %d prompts × %d per step per worker, %s merge%s",
			ev.Job, s.Model, s.Dataset, s.Epochs, s.StepsPerEpoch, s.GSPO.AggregateInterval, s.PromptsPerStep,
			s.GSPO.GroupSize, s.Aggregation, map[bool]string{true: fmt.Sprintf(", f = %d", s.Byzantine)}[s.Byzantine > 0])
	case localcluster.EventLeaderKilled:
		v.say("hanzod leader killed: %s", ev.Detail)
	case localcluster.EventTakeover:
		v.say("hanzod takeover: %s", ev.Detail)
	case localcluster.EventKilled:
		v.say("killed %s (kill -9) at epoch %d step %d", ev.Worker.Name, ev.Epoch, ev.Step)
	case localcluster.EventRestarted:
		v.say("restarted %s (same key and data): it rejoins at the next epoch boundary", ev.Worker.Name)
	case localcluster.EventRestartFailed:
		v.say("restarting %s failed: %v", ev.Worker.Name, ev.Err)
	case localcluster.EventWorker:
		v.workerEvent(ev.Worker, ev.Work)
	case localcluster.EventHanzod:
		v.hanzodEvent(ev.Job, ev.Hanzod)
	}
}

func (v *upView) workerEvent(w *localcluster.Worker, ev worker.Event) {
	v.mu.Lock()
	v.names[w.ID] = w.Name
	if ev.Kind == worker.EventStep {
		v.rewards[ev.Step] = append(v.rewards[ev.Step], ev.Reward)
		v.epoch = max(v.epoch, ev.Epoch)
	}
	v.mu.Unlock()
	switch ev.Kind {
	case worker.EventStep:
		v.status()
	case worker.EventRingFailed:
		v.say("%s: ring call failed, suspect %s", w.Name, v.name(ev.Suspect))
	case worker.EventRingRecovered:
		v.say("%s: ring recovered in %.2f s (generation %d, %d members)", w.Name, ev.Seconds, ev.Generation, ev.Members)
	case worker.EventDeltaRejected:
		v.say("%s: delta rejected (%s) %s", w.Name, ev.Reason, ev.Detail)
	case worker.EventJobRefused:
		v.say("%s: refused the job: %s", w.Name, ev.Reason)
	}
}

func (v *upView) name(id string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if n, ok := v.names[id]; ok {
		return n
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// say prints a line of the live view.
func (v *upView) say(format string, a ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	prefix := ""
	if v.tty {
		prefix = "\r\033[K"
	}
	fmt.Fprintf(v.log, "%s[%6.1fs] %s\n", prefix, time.Since(v.start).Seconds(), fmt.Sprintf(format, a...))
}

// status redraws the one-line status (a TTY only, at most 4 times a second).
func (v *upView) status() {
	if !v.tty {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if time.Since(v.lastLine) < 250*time.Millisecond {
		return
	}
	v.lastLine = time.Now()
	last, rew := 0, 0.0
	for s, r := range v.rewards {
		if s > last && len(r) > 0 {
			last = s
			rew = mean(r)
		}
	}
	fmt.Fprintf(v.log, "\r\033[K[%6.1fs] epoch %d/%d  step %d/%d  reward %.3f  ring %s",
		time.Since(v.start).Seconds(), v.epoch, v.o.epochs, last, v.o.epochs*v.o.stepsPerEpoch, rew, v.ring)
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func (v *upView) hanzodEvent(job string, ev state.Event) {
	switch b := ev.Body.(type) {
	case state.NodeRegistered:
		v.say("hanzod: %s registered", v.name(b.Node))
	case state.JobTransitioned:
		if b.Job == job {
			v.say("hanzod: job %s → %s (%s)", b.From, b.To, b.Reason)
		}
	case state.RingConfigured:
		if b.Job == job {
			var names []string
			for _, id := range b.Ring {
				names = append(names, v.name(id))
			}
			ring := fmt.Sprintf("%s (gen %d)", strings.Join(names, "→"), b.Generation)
			v.mu.Lock()
			v.ring = ring
			v.mu.Unlock()
			v.say("hanzod: ring %s: %s", ring, b.Cause)
		}
	case state.NodeFailed:
		v.say("hanzod: %s failed (%s)", v.name(b.Node), b.Reason)
	case state.SuspectReported:
		v.say("hanzod: %s reports %s (%s)", v.name(b.Reporter), v.name(b.Suspect), b.Failure)
	case state.DeltaJudged:
		if !b.Accepted {
			v.say("hanzod: rejected %s's delta for epoch %d sync %d: %s", v.name(b.Node), b.Epoch, b.Sync, b.Reason)
		}
	case state.Slashed:
		v.say("hanzod: SLASHED %s %.0f GYM (offence %d%s): %s", v.name(b.Account), float64(b.Amount)/float64(ledger.GYM), b.Offence,
			map[bool]string{true: ", banned"}[b.Ban], b.Reason)
	case state.CheckpointPublished:
		var rec struct {
			Accuracy float64 `json:"accuracy"`
			Quality  float64 `json:"quality"`
		}
		json.Unmarshal([]byte(b.Record), &rec)
		v.say("hanzod: epoch %d checkpoint %s: held-out accuracy %.1f%%, mean quality %.3f (record signed)", b.Epoch, b.CID, 100*rec.Accuracy, rec.Quality)
	case state.RewardsPaid:
		var parts []string
		for _, p := range b.Payouts {
			parts = append(parts, fmt.Sprintf("%s %.2f", v.name(p.ID), float64(p.Amount)/float64(ledger.GYM)))
		}
		v.say("hanzod: epoch %d rewards (GYM): %s", b.Epoch, strings.Join(parts, ", "))
	case state.JobSettled:
		v.say("hanzod: job settled, stakes released (record signed)")
	case state.RebaseSet:
		if b.Job == job {
			v.say("hanzod: the members will continue from a state rebuilt from the honest deltas at sync %d (%s)", b.Sync, b.Reason)
		}
	case state.RebasePublished:
		if b.Job == job {
			v.say("hanzod: rebuilt state of epoch %d sync %d published: %s", b.Epoch, b.Sync, b.CID)
		}
	}
}

func printSummary(w io.Writer, s *localcluster.Summary) {
	fmt.Fprintf(w, "\n%s: job %s %s in %.1f s (%d workers, %s, %s merge)\n", map[bool]string{true: "OK", false: "FAILED"}[s.Status == "published"],
		s.Job, s.Status, s.Seconds, s.Workers, s.Task, s.Aggregation)
	if s.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", s.Reason)
	}
	fmt.Fprintf(w, "  held-out accuracy: %.1f%% → %.1f%%   (loss %.3f → %.3f)\n", 100*s.EvalBefore, 100*s.EvalAfter, s.LossBefore, s.LossAfter)
	for _, e := range s.Epochs {
		fmt.Fprintf(w, "  epoch %d: %s  accuracy %.1f%%  %d deltas, %d spot-checked, merged in %.2f s\n", e.Epoch, e.CID, 100*e.Accuracy, e.Deltas, e.SpotChecks, e.MergeSeconds)
		for _, j := range e.Ejections {
			name := j.Node[:min(12, len(j.Node))]
			for _, n := range s.Nodes {
				if n.ID == j.Node {
					name = n.Name
				}
			}
			fmt.Fprintf(w, "    %s ejected while the epoch ran (%s, sync %d): %d sync(s) and %.1f s after its first delta (docs/byzantine.md)\n",
				name, j.Offence, j.Sync, j.Syncs, j.Seconds)
		}
		if len(e.Rebases) > 0 {
			fmt.Fprintf(w, "    the members continued from hanzod's state rebuilt from the honest deltas at sync(s) %v\n", e.Rebases)
		}
		if len(e.TraceChecks) > 0 {
			var lp, rel float64
			var failed, unverifiable int
			for _, c := range e.TraceChecks {
				lp, rel = max(lp, c.LogProbMax), max(rel, c.RelL2)
				failed += b2i(c.Failed != "")
				unverifiable += b2i(c.Unverifiable != "")
			}
			by := map[string]bool{}
			for _, c := range e.TraceChecks {
				for _, v := range c.Validators {
					by[v] = true
				}
			}
			who := ""
			if len(by) > 0 {
				who = fmt.Sprintf(" by %d validator(s)", len(by))
				if by["hanzod"] {
					who = " (some by hanzod: no validator to ask)"
				}
			}
			fmt.Fprintf(w, "    %d checked from their traces%s (docs/traces.md): log-prob Δ ≤ %.2g nats, update rel. L2 ≤ %.2g; %d failed, %d unverifiable\n",
				len(e.TraceChecks), who, lp, rel, failed, unverifiable)
		}
	}
	for _, p := range s.Pins {
		fmt.Fprintf(w, "  IPFS: %s %s after %d attempt(s) %s\n", p.CID, p.State, p.Attempts, p.Error)
	}
	if s.TakeoverSeconds > 0 {
		fmt.Fprintf(w, "  hanzod replicas: %d; leader killed, takeover after %.2f s\n", s.Replicas, s.TakeoverSeconds)
	} else if s.Replicas > 1 {
		fmt.Fprintf(w, "  hanzod replicas: %d\n", s.Replicas)
	}
	if s.RecoverySeconds != nil {
		fmt.Fprintf(w, "  recovery after the kill: %.2f s\n", *s.RecoverySeconds)
	}
	fmt.Fprintf(w, "  %-4s %-14s %9s %8s %8s %8s  %s\n", "node", "id", "reward", "quality", "accepted", "rejected", "slashes")
	for _, n := range s.Nodes {
		tag := n.Attack
		if n.Role != "" {
			tag = strings.TrimSpace(n.Role + " " + n.Attack)
		}
		if n.Killed {
			tag = "killed"
		}
		sl := "-"
		if n.Slashed {
			sl = fmt.Sprintf("%.0f GYM: %s", n.SlashGYM, strings.Join(n.Slashes, "; "))
		}
		fmt.Fprintf(w, "  %-4s %-14s %9.2f %8.3f %8d %8d  %s %s\n", n.Name, n.ID[:12], n.Reward, n.Quality, n.Accepted, n.Rejected, sl, tag)
		if n.Refused != "" {
			fmt.Fprintf(w, "       refused the job: %s\n", n.Refused)
		}
	}
	if s.CheckpointDir != "" {
		fmt.Fprintf(w, "  checkpoint: %s (CID %s)\n  load it: gym eval --checkpoint %s\n", s.CheckpointDir, s.CheckpointCID, s.CheckpointDir)
	}
	if s.RewardPNG != "" {
		fmt.Fprintf(w, "  reward curve: %s\n", s.RewardPNG)
	}
	if c := s.Chain; c != nil {
		printChain(w, s, c)
	}
	fmt.Fprintf(w, "  events, deltas and logs: %s\n", s.Out)
}

// isTerminal says whether w is a terminal (a progress line may redraw).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fitJob plans spec as the workers will (jobconf.FromSpecData) on base
// (the model's config and tokenizer, named as the job names it) and the
// staged dataset's rows. Unless
// --max-seq-len is given, gspo.max_seq_len is raised to the longest prompt
// and answer of the dataset, so that any dataset trains; say reports it.
func fitJob(o upOptions, base *basemodel.Base, spec *jobspec.Spec, say func(string, ...any)) error {
	if base == nil {
		return nil // localcluster's default base: the profile fits it
	}
	var data *task.Data
	if o.datasetStage != "" {
		d, err := jobconf.LoadData(o.datasetStage, *spec)
		if err != nil {
			return fmt.Errorf("--dataset %s: %w", o.dataset, err)
		}
		data = d
	}
	if o.maxSeqLen > 0 {
		spec.GSPO.MaxSeqLen = o.maxSeqLen
	} else if data != nil {
		need, err := trainer.Need(base.Tokenizer, slices.Concat(data.Train, data.Eval))
		if err != nil {
			return fmt.Errorf("--dataset %s: %w", o.dataset, err)
		}
		if need > spec.GSPO.MaxSeqLen {
			say("gspo.max_seq_len %d → %d: the longest prompt and answer of %s as the model tokenizes them (--max-seq-len sets it)",
				spec.GSPO.MaxSeqLen, need, o.dataset)
			spec.GSPO.MaxSeqLen = need
		}
	}
	c := *spec // normalised as hanzod will; what is submitted stays as built
	if err := c.Normalise(); err != nil {
		return err
	}
	if _, err := jobconf.FromSpecData("", c, base, data); err != nil {
		return err
	}
	return nil
}
