package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/heldout"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/merge"
	"github.com/zooai/gym/nodekey"
	hanzod "github.com/zooai/gym/orchestrator/daemon"
	"github.com/zooai/gym/orchestrator/engine"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/peft"
	"github.com/zooai/gym/plot"
	"github.com/zooai/gym/task"
)

// upOptions are gym up's flags.
type upOptions struct {
	workers, epochs, stepsPerEpoch, interval, prompts int
	task, killAt, attack, aggregation, out            string
	byzantine, spotCheckBP, threads                   int
	seed                                              uint64
	json, restartKilled                               bool
	timeout                                           time.Duration
}

func newUp() *cobra.Command {
	o := upOptions{workers: 4, epochs: 3, stepsPerEpoch: 30, interval: 5, prompts: 4, task: "addition", out: "out/up", threads: 2, timeout: 15 * time.Minute}
	cmd := &cobra.Command{
		Use:   "up [--workers 4] [--epochs 3] [--task NAME] [--kill-worker-at EPOCH:STEP] [--byzantine K --attack KIND] [--out DIR] [--json]",
		Short: "Run decentralized GSPO training end to end on this machine: hanzod, N workers, one job",
		Long: `up starts the orchestrator (hanzod, embedded store) in this process and N
worker processes on loopback, funds and bonds their stake, submits a job on
the embedded base model and runs it to Published: the workers train LoRA
adapters with GSPO, average them every --interval steps over the
authenticated ring all-reduce, and submit a signed delta for every sync;
hanzod validates and scores the deltas, spot-checks some by deterministic
replay, merges each epoch into the checkpoint of record (PEFT layout,
content-addressed), pays rewards, slashes proven cheating and settles the
job.

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
  --byzantine K --attack signflip|noise|replay|equivocate
                         K workers cheat; the job declares f = K (so the
                         aggregation becomes median unless --aggregation
                         says trimmed-mean)

Exits 0 when the job is published, 1 otherwise.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return usageError{err}
			}
			sum, err := runUp(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
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
	f.Uint64Var(&o.seed, "seed", 0, "job seed (data order, sampling, adapter initialisation)")
	f.StringVar(&o.aggregation, "aggregation", "", "merge rule: mean (quality-weighted), median or trimmed-mean (default mean; median with --byzantine)")
	f.IntVar(&o.spotCheckBP, "spot-check-bp", 0, "share of deltas re-executed by replay, in basis points (0: 1000 = 10%; -1: none)")
	f.StringVar(&o.killAt, "kill-worker-at", "", "EPOCH:STEP: kill -9 worker w0 when it reaches that step of that epoch")
	f.BoolVar(&o.restartKilled, "restart-killed", false, "start the killed worker again 3 s later (same key and data): it re-registers and rejoins at the next epoch boundary")
	f.IntVar(&o.byzantine, "byzantine", 0, "number of cheating workers (the last K)")
	f.StringVar(&o.attack, "attack", "", "what the cheating workers do: signflip (×−1000), noise (Gaussian), replay (re-sign an old delta), equivocate (two deltas per slot), ring (honest deltas, ×−1000 into the ring all-reduce)")
	f.StringVar(&o.out, "out", o.out, "directory for the run's files (replaced if it holds an earlier gym up run)")
	f.BoolVar(&o.json, "json", false, "print the summary as one JSON object on stdout; progress goes to stderr")
	f.IntVar(&o.threads, "threads", o.threads, "threads for hanzod's validation and evaluation")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "give up (and exit 1) if the job has not finished by then")
	return cmd
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
	case o.out == "":
		return errors.New("--out DIR is required")
	}
	switch o.attack {
	case "", "signflip", "noise", "replay", "equivocate", "ring":
	default:
		return fmt.Errorf("--attack %q: want signflip, noise, replay, equivocate or ring", o.attack)
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

// upNode is one node in the summary.
type upNode struct {
	Name     string   `json:"name"`
	ID       string   `json:"id"`
	Attack   string   `json:"attack,omitempty"`
	Killed   bool     `json:"killed,omitempty"`
	Restart  bool     `json:"restarted,omitempty"`
	Reward   float64  `json:"reward"` // GYM
	Slashed  bool     `json:"slashed"`
	SlashGYM float64  `json:"slashed_gym,omitempty"`
	Slashes  []string `json:"slashes,omitempty"`
	Accepted int      `json:"deltas_accepted"`
	Rejected int      `json:"deltas_rejected"`
	Quality  float64  `json:"mean_quality"` // rejected deltas count as 0
}

// upSummary is what gym up reports.
type upSummary struct {
	Status          string         `json:"status"`
	Job             string         `json:"job"`
	Reason          string         `json:"reason,omitempty"`
	Task            string         `json:"task"`
	Aggregation     string         `json:"aggregation"`
	Workers         int            `json:"workers"`
	EvalBefore      float64        `json:"eval_before"`
	EvalAfter       float64        `json:"eval_after"`
	LossBefore      float64        `json:"loss_before"`
	LossAfter       float64        `json:"loss_after"`
	CheckpointCID   string         `json:"checkpoint_cid"`
	CheckpointDir   string         `json:"checkpoint_dir"`
	Epochs          []upEpoch      `json:"epochs"`
	Nodes           []upNode       `json:"nodes"`
	Events          map[string]int `json:"events"`
	Seconds         float64        `json:"seconds"`
	RecoverySeconds *float64       `json:"recovery_seconds,omitempty"`
	Settled         bool           `json:"settled"`
	RewardPNG       string         `json:"reward_png"`
	Out             string         `json:"out"`
}

type upEpoch struct {
	Epoch             int      `json:"epoch"`
	CID               string   `json:"cid"`
	Accuracy          float64  `json:"accuracy"`
	Quality           float64  `json:"quality"`
	Deltas            int      `json:"deltas"`
	SpotChecks        int      `json:"spot_checks"`
	Excluded          []string `json:"excluded,omitempty"`
	RingDisagreements []string `json:"ring_disagreements,omitempty"`
	MergeSeconds      float64  `json:"merge_seconds"`
}

// workerEvent is one line of `gym worker --json` (worker package doc).
type workerEvent struct {
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"`
	Node       string    `json:"node"`
	Job        string    `json:"job"`
	State      string    `json:"state"`
	Epoch      int       `json:"epoch"`
	Sync       int       `json:"sync"`
	Step       int       `json:"step"`
	Reward     float64   `json:"reward"`
	Loss       float64   `json:"loss"`
	Seconds    float64   `json:"seconds"`
	Verdict    string    `json:"verdict"`
	Reason     string    `json:"reason"`
	Suspect    string    `json:"suspect"`
	Generation uint64    `json:"generation"`
	Members    int       `json:"members"`
	Detail     string    `json:"detail"`
}

type upWorker struct {
	name, id, dir, attack string
	cmd                   *exec.Cmd
	done                  chan struct{}
	killed, restarted     bool
}

// upRun is the state of one gym up run.
type upRun struct {
	o        upOptions
	out, log io.Writer // progress goes to log
	tty      bool
	start    time.Time
	d        *hanzod.Daemon
	eng      *engine.Engine
	plan     jobconf.Plan
	job      string
	workers  []*upWorker
	self     string // this executable: workers are `self worker …`
	addr     string // hanzod's gRPC address
	stopping bool

	mu        sync.Mutex
	rewards   map[int][]float64          // global step → sample rewards reported
	paid      map[string]ledger.Amount   // node → rewards paid in the job
	slashed   map[string][]state.Slashed // node → its slashes
	ring      string
	epoch     int
	killedAt  time.Time
	recovered *float64
	lastLine  time.Time
	events    map[string]int
	names     map[string]string // node id → name
}

func runUp(ctx context.Context, o upOptions, stdout, stderr io.Writer) (*upSummary, error) {
	r := &upRun{o: o, out: stdout, log: stdout, start: time.Now(), rewards: map[int][]float64{}, events: map[string]int{},
		names: map[string]string{}, paid: map[string]ledger.Amount{}, slashed: map[string][]state.Slashed{}}
	if o.json {
		r.log = stderr
	}
	if f, ok := r.log.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			r.tty = true
		}
	}
	if err := prepareOut(o.out); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	// hanzod, in this process.
	dc := hanzod.DefaultConfig()
	dc.DataDir, dc.Listen, dc.Metrics, dc.Artifacts = filepath.Join(o.out, "hanzod"), "127.0.0.1:0", "", "127.0.0.1:0"
	dc.Threads, dc.EpochGrace = o.threads, time.Minute
	// Loopback liveness: heartbeats every 2 s (the workers' default), a
	// silent node failed after 6 s instead of SPEC.md's 30 s for WAN links,
	// so a worker killed while the others wait for the epoch's merge is
	// noticed quickly; the workers' ring timeout is 10 s for the same
	// reason (a dead node the ring had not connected to yet is found by it).
	dc.Engine.State.HeartbeatInterval, dc.Engine.State.FailAfter = 2*time.Second, 6*time.Second
	hlog, err := os.Create(filepath.Join(o.out, "hanzod.log"))
	if err != nil {
		return nil, err
	}
	defer hlog.Close()
	d, err := hanzod.Start(ctx, dc, slog.New(slog.NewTextHandler(hlog, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		return nil, fmt.Errorf("gym up: start hanzod: %w", err)
	}
	defer d.Close()
	r.d, r.eng = d, d.Engine()
	r.say("hanzod listening on %s (artifacts %s), data in %s", d.Addr(), d.ArtifactsAddr(), dc.DataDir)
	for !r.eng.Leading() {
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
	spec := r.spec()
	base, err := basemodel.Load()
	if err != nil {
		return nil, err
	}
	if r.plan, err = jobconf.FromSpec("", spec, base); err != nil {
		return nil, err
	}
	if err := r.fund(ctx); err != nil {
		return nil, err
	}
	if err := r.startWorkers(ctx, d.Addr()); err != nil {
		r.stopWorkers()
		return nil, err
	}
	defer r.stopWorkers()
	if err := r.waitRegistered(ctx); err != nil {
		return nil, err
	}
	evs, err := r.eng.Do(ctx, state.SubmitJob{Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("gym up: submit job: %w", err)
	}
	r.job = evs[0].Body.(state.JobSubmitted).Job
	r.say("job %s submitted: %s on %s, %d epochs × %d steps, sync every %d, %d prompts × %d per step per worker, %s merge%s",
		r.job, spec.Model, spec.Dataset, spec.Epochs, spec.StepsPerEpoch, spec.GSPO.AggregateInterval, spec.PromptsPerStep,
		spec.GSPO.GroupSize, spec.Aggregation, map[bool]string{true: fmt.Sprintf(", f = %d", spec.Byzantine)}[spec.Byzantine > 0])
	jb, err := r.follow(ctx)
	r.stopWorkers()
	if err != nil {
		return nil, err
	}
	sum, err := r.summarise(ctx, jb)
	if err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(sum, "", "  ")
	if err := os.WriteFile(filepath.Join(o.out, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if o.json {
		json.NewEncoder(stdout).Encode(sum)
	} else {
		printSummary(stdout, sum)
	}
	return sum, nil
}

// prepareOut makes an empty output directory, replacing only an earlier
// gym up run.
func prepareOut(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case len(ents) > 0:
		if _, err := os.Stat(filepath.Join(dir, ".gym-up")); err != nil {
			return fmt.Errorf("gym up: --out %s is not empty and holds no earlier gym up run; pick another directory", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ".gym-up"), []byte("this directory holds a gym up run; gym up replaces it\n"), 0o644)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// spec is the job gym up submits: the built-in model's training profile
// (jobconf.BuiltinGSPO, trainer.DefaultConfig's settings), split over the
// workers.
func (r *upRun) spec() jobspec.Spec {
	o := r.o
	return jobspec.Spec{
		Model: jobconf.BuiltinModel, Dataset: o.task, Epochs: o.epochs, MinNodes: o.workers, MaxNodes: o.workers,
		Aggregation: o.aggregation, Byzantine: o.byzantine, SpotCheckBP: o.spotCheckBP,
		StepsPerEpoch: o.stepsPerEpoch, PromptsPerStep: o.prompts, Seed: o.seed,
		GSPO: jobconf.BuiltinGSPO(o.interval),
	}
}

// fund makes the workers' keys and gives each the stake eligibility needs,
// and the treasury what rewards need.
func (r *upRun) fund(ctx context.Context) error {
	o := r.o
	if _, err := r.eng.Do(ctx, state.Deposit{Account: ledger.Treasury, Amount: ledger.Amount(o.epochs) * 100 * ledger.GYM}); err != nil {
		return err
	}
	for i := 0; i < o.workers; i++ {
		w := &upWorker{name: fmt.Sprintf("w%d", i), dir: filepath.Join(o.out, "workers", fmt.Sprintf("w%d", i))}
		if i >= o.workers-o.byzantine {
			w.attack = o.attack
		}
		if err := os.MkdirAll(w.dir, 0o755); err != nil {
			return err
		}
		key, err := nodekey.Generate(rand.Reader)
		if err != nil {
			return err
		}
		if err := nodekey.Save(filepath.Join(w.dir, "node.key"), key, false); err != nil {
			return err
		}
		w.id = nodekey.PublicHex(key)
		r.names[w.id] = w.name
		for _, c := range []state.Command{
			state.Deposit{Account: w.id, Amount: 20_000 * ledger.GYM},
			state.Bond{Account: w.id, Amount: 10_000 * ledger.GYM},
		} {
			if _, err := r.eng.Do(ctx, c); err != nil {
				return fmt.Errorf("gym up: fund %s: %w", w.name, err)
			}
		}
		r.workers = append(r.workers, w)
	}
	return nil
}

func (r *upRun) startWorkers(ctx context.Context, addr string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r.self, r.addr = self, addr
	for _, w := range r.workers {
		if err := r.startWorker(w); err != nil {
			return err
		}
	}
	return nil
}

// startWorker starts (or restarts: same key and data directory) worker w;
// its log and event lines are appended to the worker's files.
func (r *upRun) startWorker(w *upWorker) error {
	args := []string{"worker", "--orchestrator", "grpc://" + r.addr, "--key", filepath.Join(w.dir, "node.key"),
		"--data", w.dir, "--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0", "--threads", "1", "--json", "--exit-when-done",
		"--ring-timeout", "10s"}
	if w.attack != "" {
		args = append(args, "--attack", w.attack)
	}
	cmd := exec.Command(r.self, args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	logf, err := os.OpenFile(filepath.Join(w.dir, "worker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	evf, err := os.OpenFile(filepath.Join(w.dir, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		evf.Close()
		return fmt.Errorf("gym up: start worker %s: %w", w.name, err)
	}
	done := make(chan struct{})
	r.mu.Lock()
	w.cmd, w.done = cmd, done
	r.mu.Unlock()
	go func() {
		defer close(done)
		defer logf.Close()
		defer evf.Close()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			evf.Write(append(sc.Bytes(), '\n'))
			var ev workerEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Kind != "" {
				r.workerEvent(w, ev)
			}
		}
		cmd.Wait()
	}()
	return nil
}

func (r *upRun) stopWorkers() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	for _, w := range r.workers {
		r.mu.Lock()
		cmd, done := w.cmd, w.done
		r.mu.Unlock()
		if cmd == nil || cmd.Process == nil {
			continue
		}
		select {
		case <-done:
			continue
		case <-time.After(5 * time.Second):
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
}

func (r *upRun) waitRegistered(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := 0
		r.eng.View(func(m *state.Machine) {
			for _, w := range r.workers {
				if _, ok := m.Node(w.id); ok {
					n++
				}
			}
		})
		if n == len(r.workers) {
			r.say("%d workers registered", n)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gym up: only %d of %d workers registered within 60 s; see %s/workers/*/worker.log", n, len(r.workers), r.o.out)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// workerEvent handles one line from a worker: reward bookkeeping, the
// kill switch, and the notable events for the live view.
func (r *upRun) workerEvent(w *upWorker, ev workerEvent) {
	r.mu.Lock()
	r.events["worker_"+ev.Kind]++
	switch ev.Kind {
	case "step":
		r.rewards[ev.Step] = append(r.rewards[ev.Step], ev.Reward)
		if ev.Epoch > r.epoch {
			r.epoch = ev.Epoch
		}
	case "ring_reduced", "ring_recovered":
		if !r.killedAt.IsZero() && r.recovered == nil {
			s := time.Since(r.killedAt).Seconds()
			r.recovered = &s
		}
	}
	r.mu.Unlock()
	switch ev.Kind {
	case "step":
		if ke, ks, err := parseKillAt(r.o.killAt); r.o.killAt != "" && err == nil && w == r.victim() && !w.killed &&
			ev.Epoch == ke && ev.Step-r.plan.FirstStep(ke) >= ks {
			w.killed = true
			w.cmd.Process.Kill()
			r.mu.Lock()
			r.killedAt = time.Now()
			r.mu.Unlock()
			r.say("killed %s (kill -9) at epoch %d step %d", w.name, ev.Epoch, ev.Step-r.plan.FirstStep(ke))
			if r.o.restartKilled {
				go r.restart(w)
			}
		}
		r.status()
	case "ring_failed":
		r.say("%s: ring call failed, suspect %s", w.name, r.name(ev.Suspect))
	case "ring_recovered":
		r.say("%s: ring recovered in %.2f s (generation %d, %d members)", w.name, ev.Seconds, ev.Generation, ev.Members)
	case "delta_rejected":
		r.say("%s: delta rejected (%s) %s", w.name, ev.Reason, ev.Detail)
	case "job_refused":
		r.say("%s: refused the job: %s", w.name, ev.Reason)
	}
}

func (r *upRun) victim() *upWorker { return r.workers[0] }

// restart starts a killed worker again after a pause, with its key and
// data directory: it registers again and rejoins at the next epoch
// boundary.
func (r *upRun) restart(w *upWorker) {
	r.mu.Lock()
	done := w.done
	r.mu.Unlock()
	<-done
	time.Sleep(3 * time.Second)
	r.mu.Lock()
	stop := r.stopping
	r.mu.Unlock()
	if stop {
		return
	}
	if err := r.startWorker(w); err != nil {
		r.say("restarting %s failed: %v", w.name, err)
		return
	}
	r.mu.Lock()
	w.restarted = true
	r.mu.Unlock()
	r.say("restarted %s (same key and data): it rejoins at the next epoch boundary", w.name)
}

func (r *upRun) name(id string) string {
	if n, ok := r.names[id]; ok {
		return n
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// say prints a line of the live view.
func (r *upRun) say(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prefix := ""
	if r.tty {
		prefix = "\r\033[K"
	}
	fmt.Fprintf(r.log, "%s[%6.1fs] %s\n", prefix, time.Since(r.start).Seconds(), fmt.Sprintf(format, a...))
}

// status redraws the one-line status (a TTY only, at most 4 times a second).
func (r *upRun) status() {
	if !r.tty {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastLine) < 250*time.Millisecond {
		return
	}
	r.lastLine = time.Now()
	last, rew := 0, 0.0
	for s, v := range r.rewards {
		if s > last && len(v) > 0 {
			last = s
			rew = mean(v)
		}
	}
	fmt.Fprintf(r.log, "\r\033[K[%6.1fs] epoch %d/%d  step %d/%d  reward %.3f  ring %s",
		time.Since(r.start).Seconds(), r.epoch, r.o.epochs, last, r.o.epochs*r.o.stepsPerEpoch, rew, r.ring)
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// follow watches hanzod's event log until the job is published or failed
// and settled, printing what happens.
func (r *upRun) follow(ctx context.Context) (state.Job, error) {
	// The log goes to --out as it is read, so a run that hangs or is
	// interrupted can still be inspected.
	logf, err := os.Create(filepath.Join(r.o.out, "events.jsonl"))
	if err != nil {
		return state.Job{}, err
	}
	defer logf.Close()
	var next uint64 = 1
	var finishedAt time.Time
	for {
		recs, _, err := r.eng.Read(ctx, next, 1000)
		if err != nil {
			return state.Job{}, err
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
			r.hanzodEvent(ev)
		}
		var jb state.Job
		r.eng.View(func(m *state.Machine) {
			jb, _ = m.Job(r.job)
			jb = jb.Clone()
		})
		if jb.State.Terminal() {
			if finishedAt.IsZero() {
				finishedAt = time.Now()
			}
			if jb.Settled || time.Since(finishedAt) > 15*time.Second {
				return jb, nil
			}
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			_, _ = r.eng.Do(context.Background(), state.FailJob{Job: r.job, Reason: "gym up: timed out after " + r.o.timeout.String()})
			return jb, fmt.Errorf("gym up: the job did not finish within --timeout %v (state %s); see %s", r.o.timeout, jb.State, r.o.out)
		}
	}
}

func (r *upRun) hanzodEvent(ev state.Event) {
	kind := ev.Body.Kind()
	if kind == "ticked" || kind == "heartbeat" {
		return
	}
	r.mu.Lock()
	r.events[kind]++
	r.mu.Unlock()
	switch b := ev.Body.(type) {
	case state.RewardsPaid:
		if b.Job == r.job {
			r.mu.Lock()
			for _, p := range b.Payouts {
				r.paid[p.ID] += p.Amount
			}
			r.mu.Unlock()
		}
	case state.Slashed:
		r.mu.Lock()
		r.slashed[b.Account] = append(r.slashed[b.Account], b)
		r.mu.Unlock()
	}
	switch b := ev.Body.(type) {
	case state.NodeRegistered:
		r.say("hanzod: %s registered", r.name(b.Node))
	case state.JobTransitioned:
		if b.Job == r.job {
			r.say("hanzod: job %s → %s (%s)", b.From, b.To, b.Reason)
		}
	case state.RingConfigured:
		if b.Job == r.job {
			var names []string
			for _, id := range b.Ring {
				names = append(names, r.name(id))
			}
			r.mu.Lock()
			r.ring = fmt.Sprintf("%s (gen %d)", strings.Join(names, "→"), b.Generation)
			ring := r.ring
			r.mu.Unlock()
			r.say("hanzod: ring %s: %s", ring, b.Cause)
		}
	case state.NodeFailed:
		r.say("hanzod: %s failed (%s)", r.name(b.Node), b.Reason)
	case state.SuspectReported:
		r.say("hanzod: %s reports %s (%s)", r.name(b.Reporter), r.name(b.Suspect), b.Failure)
	case state.DeltaJudged:
		if !b.Accepted {
			r.say("hanzod: rejected %s's delta for epoch %d sync %d: %s", r.name(b.Node), b.Epoch, b.Sync, b.Reason)
		}
	case state.Slashed:
		r.say("hanzod: SLASHED %s %.0f GYM (offence %d%s): %s", r.name(b.Account), float64(b.Amount)/float64(ledger.GYM), b.Offence,
			map[bool]string{true: ", banned"}[b.Ban], b.Reason)
	case state.CheckpointPublished:
		var rec struct {
			Accuracy float64 `json:"accuracy"`
			Quality  float64 `json:"quality"`
		}
		json.Unmarshal([]byte(b.Record), &rec)
		r.say("hanzod: epoch %d checkpoint %s: held-out accuracy %.1f%%, mean quality %.3f (record signed)", b.Epoch, b.CID, 100*rec.Accuracy, rec.Quality)
	case state.RewardsPaid:
		var parts []string
		for _, p := range b.Payouts {
			parts = append(parts, fmt.Sprintf("%s %.2f", r.name(p.ID), float64(p.Amount)/float64(ledger.GYM)))
		}
		r.say("hanzod: epoch %d rewards (GYM): %s", b.Epoch, strings.Join(parts, ", "))
	case state.JobSettled:
		r.say("hanzod: job settled, stakes released (record signed)")
	}
}

// summarise evaluates before and after, gathers rewards and slashes, and
// copies the inspectable files into --out.
func (r *upRun) summarise(ctx context.Context, jb state.Job) (*upSummary, error) {
	o := r.o
	sum := &upSummary{Status: string(jb.State), Job: jb.ID, Reason: jb.Reason, Task: o.task, Aggregation: o.aggregation,
		Workers: o.workers, Seconds: time.Since(r.start).Seconds(), Settled: jb.Settled, Out: o.out}
	r.mu.Lock()
	sum.RecoverySeconds = r.recovered
	sum.Events = map[string]int{}
	for k, v := range r.events {
		sum.Events[k] = v
	}
	r.mu.Unlock()
	base, err := basemodel.Load()
	if err != nil {
		return nil, err
	}
	init, err := r.plan.InitialAdapter(base)
	if err != nil {
		return nil, err
	}
	before, err := heldout.Evaluate(base, init, o.task, 500, o.threads)
	if err != nil {
		return nil, err
	}
	sum.EvalBefore, sum.LossBefore = before.Accuracy, before.Loss
	jd := r.d.Judge()
	// The judge's merge report of every epoch: the epochs of the summary
	// and every delta's quality score.
	quality := map[string][]float64{}
	for e := 1; e <= len(jb.CIDs); e++ {
		b, err := os.ReadFile(filepath.Join(o.out, "hanzod", "checkpoints", jb.ID, fmt.Sprintf("merge-%04d.json", e)))
		if err != nil {
			continue
		}
		var rep judge.EpochReport
		if json.Unmarshal(b, &rep) != nil {
			continue
		}
		sum.Epochs = append(sum.Epochs, upEpoch{Epoch: e, CID: rep.CID, Accuracy: rep.Accuracy, Quality: rep.Quality,
			Deltas: len(rep.Scores), SpotChecks: rep.SpotChecks, Excluded: rep.Excluded, RingDisagreements: rep.RingDisagreements,
			MergeSeconds: rep.MergeSeconds})
		for _, s := range rep.Scores {
			quality[s.Node] = append(quality[s.Node], s.Quality)
		}
	}
	if jb.State == state.Published && len(jb.CIDs) > 0 {
		src := jd.CheckpointDir(jb.ID, len(jb.CIDs))
		dst := filepath.Join(o.out, "checkpoint")
		if err := copyDir(src, dst); err != nil {
			return nil, err
		}
		a, _, err := peft.Read(dst)
		if err != nil {
			return nil, err
		}
		after, err := heldout.Evaluate(base, a, o.task, 500, o.threads)
		if err != nil {
			return nil, err
		}
		sum.EvalAfter, sum.LossAfter = after.Accuracy, after.Loss
		sum.CheckpointCID, sum.CheckpointDir = jb.CIDs[len(jb.CIDs)-1], dst
	}
	if err := copyDir(filepath.Join(o.out, "hanzod", "deltas", jb.ID), filepath.Join(o.out, "deltas")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	r.mu.Lock()
	rewards, slashes := r.paid, r.slashed
	r.mu.Unlock()
	for _, w := range r.workers {
		r.mu.Lock()
		restarted := w.restarted
		r.mu.Unlock()
		n := upNode{Name: w.name, ID: w.id, Attack: w.attack, Killed: w.killed, Restart: restarted, Reward: float64(rewards[w.id]) / float64(ledger.GYM)}
		for _, s := range slashes[w.id] {
			n.Slashed = true
			n.SlashGYM += float64(s.Amount) / float64(ledger.GYM)
			n.Slashes = append(n.Slashes, s.Reason)
		}
		if t := jb.Tally[w.id]; t != nil {
			n.Accepted, n.Rejected = t.Accepted, t.Rejected
		}
		// Mean quality over every delta the node submitted: a rejected or
		// spot-check-excluded delta scores 0.
		if tot := n.Accepted + n.Rejected; tot > 0 {
			sumq := 0.0
			for _, q := range quality[w.id] {
				sumq += q
			}
			n.Quality = sumq / float64(tot)
		}
		sum.Nodes = append(sum.Nodes, n)
	}
	// The reward curve.
	var xs, ys []float64
	r.mu.Lock()
	steps := make([]int, 0, len(r.rewards))
	for s := range r.rewards {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	for _, s := range steps {
		xs, ys = append(xs, float64(s)), append(ys, mean(r.rewards[s]))
	}
	r.mu.Unlock()
	ax, ay := []float64{0}, []float64{sum.EvalBefore}
	for _, e := range sum.Epochs {
		ax, ay = append(ax, float64(e.Epoch*o.stepsPerEpoch)), append(ay, e.Accuracy)
	}
	chart := plot.Chart{Title: fmt.Sprintf("gym up: %d workers, %s, %s merge", o.workers, o.task, o.aggregation), YMin: 0, YMax: 1,
		Series: []plot.Series{{Name: "sample reward (mean over workers)", X: xs, Y: ys, Color: plot.Palette[0]},
			{Name: "held-out accuracy of the checkpoint of record", X: ax, Y: ay, Color: plot.Palette[1]}}}
	var img bytes.Buffer
	if len(xs) > 1 {
		if err := chart.WritePNG(&img); err != nil {
			return nil, err
		}
		sum.RewardPNG = filepath.Join(o.out, "reward.png")
		if err := os.WriteFile(sum.RewardPNG, img.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return sum, nil
}

func copyDir(src, dst string) error {
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
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func printSummary(w io.Writer, s *upSummary) {
	fmt.Fprintf(w, "\n%s: job %s %s in %.1f s (%d workers, %s, %s merge)\n", map[bool]string{true: "OK", false: "FAILED"}[s.Status == "published"],
		s.Job, s.Status, s.Seconds, s.Workers, s.Task, s.Aggregation)
	if s.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", s.Reason)
	}
	fmt.Fprintf(w, "  held-out accuracy: %.1f%% → %.1f%%   (loss %.3f → %.3f)\n", 100*s.EvalBefore, 100*s.EvalAfter, s.LossBefore, s.LossAfter)
	for _, e := range s.Epochs {
		fmt.Fprintf(w, "  epoch %d: %s  accuracy %.1f%%  %d deltas, %d spot-checked, merged in %.2f s\n", e.Epoch, e.CID, 100*e.Accuracy, e.Deltas, e.SpotChecks, e.MergeSeconds)
	}
	if s.RecoverySeconds != nil {
		fmt.Fprintf(w, "  recovery after the kill: %.2f s\n", *s.RecoverySeconds)
	}
	fmt.Fprintf(w, "  %-4s %-14s %9s %8s %8s %8s  %s\n", "node", "id", "reward", "quality", "accepted", "rejected", "slashes")
	for _, n := range s.Nodes {
		tag := n.Attack
		if n.Killed {
			tag = "killed"
		}
		sl := "-"
		if n.Slashed {
			sl = fmt.Sprintf("%.0f GYM: %s", n.SlashGYM, strings.Join(n.Slashes, "; "))
		}
		fmt.Fprintf(w, "  %-4s %-14s %9.2f %8.3f %8d %8d  %s %s\n", n.Name, n.ID[:12], n.Reward, n.Quality, n.Accepted, n.Rejected, sl, tag)
	}
	if s.CheckpointDir != "" {
		fmt.Fprintf(w, "  checkpoint: %s (CID %s)\n  load it: gym eval --checkpoint %s\n", s.CheckpointDir, s.CheckpointCID, s.CheckpointDir)
	}
	if s.RewardPNG != "" {
		fmt.Fprintf(w, "  reward curve: %s\n", s.RewardPNG)
	}
	fmt.Fprintf(w, "  events, deltas and logs: %s\n", s.Out)
}
