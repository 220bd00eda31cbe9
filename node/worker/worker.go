package worker

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
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

	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/tcp"
	"github.com/zooai/gym/protocol/trace"
)

// ErrJobFailed is returned by Run with ExitWhenDone when the job failed.
var ErrJobFailed = errors.New("worker: the job failed")

// Job states as the orchestrator names them in Assignment.State.
const (
	StateProvisioning = "provisioning"
	StateRunning      = "running"
	StatePublished    = "published"
	StateFailed       = "failed"
)

// Worker is one compute node. Build it with New and start it with Run.
type Worker struct {
	c    Config
	id   string
	pub  ed25519.PublicKey
	widx uint64
	base *basemodel.Base
	// baseDirs are the verified directories of the bases fetched by CID
	// (the torch backend loads the directory, not the parsed base).
	baseDirs map[*basemodel.Base]string
	// configBases are the bases named by CID read without their weights,
	// by CID (baseFor with decode false).
	configBases map[string]*basemodel.Base
	seq         *sequencer

	tr    *tcp.Transport
	heart *heart

	emitMu sync.Mutex

	evMu     sync.Mutex
	evidence []ring.Evidence

	ringMu   sync.Mutex
	ringDone ring.Stats // counters of the communicators of finished epochs
	ringCur  *ring.Comm

	counters counters

	lastKey assignKey // under heart.amu

	// The peers hanzod named (probe peers and ring members) → when, the
	// only nodes the probe server answers; the heart, once Run made it.
	probeMu    sync.Mutex
	probeNamed map[string]time.Time
	probeHosts map[string]time.Time // hosts of the named peers' addresses → when
	probePoked time.Time
	probeHeart atomic.Pointer[heart]

	// Run's goroutine only.
	refused  string
	idle     bool
	measured string // job whose peers were measured and reported
	kbps     map[string]uint64
	kbpsJob  string
	doneJob  string // job of the last completed epoch
	doneEp   int
	first    *llama.Adapter // replay attack: the first sync's contribution
	plan     jobconf.Plan
	planJob  string
	builtin  *basemodel.Base // parsed when a job needs it and base is another
	finished map[string]bool // jobs whose job_done was emitted
}

type assignKey struct {
	job, state string
	epoch      int
	paused     bool
	gen        uint64
	inRing     bool
}

// New validates c and loads the base model. It does not touch the network.
func New(c Config) (*Worker, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	id := nodekey.PublicHex(c.Key)
	widx, err := jobconf.Worker(id)
	if err != nil {
		return nil, err
	}
	base := c.Base
	if base == nil {
		if base, err = basemodel.Builtin(); err != nil {
			return nil, err
		}
	}
	seq, err := openSequencer(c.DataDir)
	if err != nil {
		return nil, err
	}
	return &Worker{c: c, id: id, pub: c.Key.Public().(ed25519.PublicKey), widx: widx, base: base, seq: seq,
		finished: map[string]bool{}}, nil
}

// ID is the node id: the public key in hex.
func (w *Worker) ID() string { return w.id }

func (w *Worker) emit(e Event) {
	w.counters.observe(e)
	if w.c.OnEvent == nil {
		return
	}
	e.Time = w.c.Clock.Now().UTC()
	e.Node = w.id
	w.emitMu.Lock()
	defer w.emitMu.Unlock()
	w.c.OnEvent(e)
}

// Report implements ring.Reporter: evidence is kept for the next suspect
// report.
func (w *Worker) Report(e ring.Evidence) {
	w.evMu.Lock()
	defer w.evMu.Unlock()
	if len(w.evidence) < 64 {
		w.evidence = append(w.evidence, e)
	}
}

// takeEvidence returns the evidence naming suspect and forgets all.
func (w *Worker) takeEvidence(suspect string) []ring.Evidence {
	w.evMu.Lock()
	defer w.evMu.Unlock()
	var out []ring.Evidence
	for _, e := range w.evidence {
		if e.SuspectID == suspect {
			out = append(out, e)
		}
	}
	w.evidence = nil
	return out
}

func advertise(addr, host string) string {
	if host == "" {
		return addr
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, port)
}

// Run runs the worker until ctx ends (then it returns nil) or, with
// ExitWhenDone, until its job is Published (nil) or Failed (ErrJobFailed).
func (w *Worker) Run(ctx context.Context) error {
	c := &w.c
	tr, err := tcp.Listen(tcp.Options{Key: c.Key, ListenAddr: c.ListenAddr, Plain: c.PlainRing, Streams: c.RingStreams})
	if err != nil {
		return fmt.Errorf("worker: ring listener: %w", err)
	}
	defer tr.Close()
	w.tr = tr
	ps, err := listenProbe(c.ProbeAddr, c.ProbeBytes, c.Key, w.probeAdmit, w.probeNamedHost)
	if err != nil {
		return fmt.Errorf("worker: probe listener: %w", err)
	}
	defer ps.Close()
	ringAddr, probeAddr := advertise(tr.Addr(), c.AdvertiseHost), advertise(ps.Addr(), c.AdvertiseHost)
	detail := "ring " + ringAddr + " probe " + probeAddr
	if c.Artifacts != nil {
		ln, err := net.Listen("tcp", c.ArtifactsAddr)
		if err != nil {
			return fmt.Errorf("worker: artifact listener: %w", err)
		}
		srv := &http.Server{Handler: c.Artifacts, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		var swg sync.WaitGroup
		swg.Go(func() { srv.Serve(ln) })
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if srv.Shutdown(sctx) != nil {
				srv.Close()
			}
			swg.Wait()
		}()
		detail += " artifacts " + advertise(ln.Addr().String(), c.AdvertiseHost)
	}
	if c.MetricsAddr != "" {
		ln, err := net.Listen("tcp", c.MetricsAddr)
		if err != nil {
			return fmt.Errorf("worker: metrics listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /metrics", func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			w.WriteMetrics(rw)
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		var mwg sync.WaitGroup
		mwg.Go(func() { srv.Serve(ln) })
		defer func() { srv.Close(); mwg.Wait() }()
		detail += " metrics " + ln.Addr().String()
	}
	register := func(ctx context.Context) error {
		if err := c.Orchestrator.Register(ctx, ringAddr, probeAddr); err != nil {
			return err
		}
		w.emit(Event{Kind: EventRegistered, Detail: detail})
		return nil
	}
	w.heart = newHeart(c.Orchestrator, c, register, w.onAssignment)
	w.probeHeart.Store(w.heart)
	for delay := c.MinGap; ; delay = min(2*delay, c.MaxBackoff) {
		err := register(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		c.Logger.Warn("register failed", "err", err, "retry_in", delay)
		if w.heart.sleep(ctx, delay) != nil {
			return nil
		}
	}
	// hanzod counts a registration as the node's first sign of life and
	// refuses a heartbeat less than MinGap after it.
	w.heart.mu.Lock()
	w.heart.last = w.c.Clock.Now()
	w.heart.mu.Unlock()
	hctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.heart.loop(hctx, c.Heartbeat) })
	defer func() { stop(); wg.Wait() }()
	if c.Role == RoleValidator {
		err = w.validate(ctx)
	} else {
		err = w.loop(ctx)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

func (w *Worker) inRing(a Assignment) bool {
	if a.Ring == nil {
		return false
	}
	for _, p := range a.Ring.Members {
		if p.ID == w.id {
			return true
		}
	}
	return false
}

// onAssignment emits "assigned" when what the worker should do changed.
func (w *Worker) onAssignment(a Assignment) {
	w.nameProbePeers(a)
	k := assignKey{job: a.Job, state: a.State, epoch: a.Epoch, paused: a.Paused, inRing: w.inRing(a)}
	if a.Ring != nil {
		k.gen = a.Ring.Generation
	}
	if k == w.lastKey || a.Job == "" {
		w.lastKey = k
		return
	}
	w.lastKey = k
	e := Event{Kind: EventAssigned, Job: a.Job, State: a.State, Epoch: a.Epoch, Generation: k.gen}
	if a.Ring != nil {
		e.Members = len(a.Ring.Members)
	}
	if a.Paused {
		e.Detail = "paused"
	} else if a.State == StateRunning && !k.inRing {
		e.Detail = "not in the ring"
	}
	w.emit(e)
}

// loop is the main loop: it reads assignments and acts on them.
func (w *Worker) loop(ctx context.Context) error {
	var seq uint64
	eager := true
	for {
		a, s, err := w.heart.next(ctx, seq, eager)
		if err != nil {
			return err
		}
		seq, eager = s, false
		if a.Job == "" {
			if !w.idle {
				w.idle = true
				w.emit(Event{Kind: EventIdle})
			}
			continue
		}
		w.idle = false
		if a.Job == w.refused {
			continue
		}
		if err := w.c.Constraints.Check(a.Spec); err != nil {
			w.refuse(ctx, a.Job, err)
			continue
		}
		if w.planJob != a.Job {
			base, err := w.baseFor(ctx, a.Spec, backend.DecodesWeights(w.backend()))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				w.refuse(ctx, a.Job, err)
				continue
			}
			data, err := w.dataFor(ctx, a.Spec)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				w.refuse(ctx, a.Job, err)
				continue
			}
			p, err := jobconf.FromSpecData(a.Job, a.Spec, base, data)
			if err == nil {
				err = p.Serves(w.backend().Name())
			}
			if err == nil {
				err = p.ServesDType(w.backend().DType())
			}
			if err != nil {
				w.refuse(ctx, a.Job, err)
				continue
			}
			w.plan, w.planJob = p, a.Job
			w.counters.setEnvs(p.Envs)
		}
		switch a.State {
		case StateProvisioning:
			w.provision(ctx, a)
		case StateRunning:
			if a.Paused || !w.inRing(a) {
				continue
			}
			if w.doneJob == a.Job && w.doneEp >= a.Epoch {
				eager = true // waiting for the merge of the epoch
				continue
			}
			done, err := w.runEpoch(ctx, a)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, backend.ErrUnservable) {
				// The backend can never train this job here (e.g. 4-bit
				// without CUDA): refuse it rather than retry forever.
				w.refuse(ctx, a.Job, err)
				continue
			}
			if err != nil {
				if !errors.Is(err, errAbandon) {
					w.c.Logger.Warn("epoch abandoned", "job", a.Job, "epoch", a.Epoch, "err", err)
				}
				w.emit(Event{Kind: EventEpochAbandoned, Job: a.Job, Epoch: a.Epoch, Detail: err.Error()})
				eager = true
				continue
			}
			if done {
				w.doneJob, w.doneEp = a.Job, a.Epoch
			}
			seq-- // look at the latest assignment again
			eager = true
		case StatePublished, StateFailed:
			if w.finished[a.Job] {
				continue
			}
			w.finished[a.Job] = true
			w.emit(Event{Kind: EventJobDone, Job: a.Job, State: a.State, Epoch: a.Epoch, Detail: a.Checkpoint})
			if w.c.ExitWhenDone {
				if a.State == StateFailed {
					return ErrJobFailed
				}
				return nil
			}
		default:
			eager = w.doneJob == a.Job // aggregating our epoch: poll
		}
	}
}

// refuse gives up job for good: hanzod is told why (the job's status shows
// it, and hanzod takes the node out of the job), then the event is emitted.
func (w *Worker) refuse(ctx context.Context, job string, err error) {
	w.refused = job
	w.c.Logger.Warn("refusing job", "job", job, "err", err)
	reason := err.Error()
	detail := "reported to hanzod"
	if rerr := w.retry(ctx, "refusal report", 5, func() error { return w.c.Orchestrator.RefuseJob(ctx, job, reason) }); rerr != nil {
		w.c.Logger.Warn("refusal report failed", "job", job, "err", rerr)
		detail = "not reported to hanzod: " + rerr.Error()
	}
	w.emit(Event{Kind: EventJobRefused, Job: job, Reason: reason, Detail: detail})
}

// baseFor returns the base model job spec s trains, checking first that
// the job fits this worker's memory (from the base's config.json, before
// its weights are read): the worker's own base, the built-in one, or a
// base named by CID, fetched, verified and cached through Config.Bases.
// With decode false (a backend that loads the base directory itself:
// backend.DecodesWeights) a base named by CID is read as its config and
// tokenizer only (basemodel.OpenConfig), never through Bases.Open: the
// weights stay bytes on disk for the backend's process.
func (w *Worker) baseFor(ctx context.Context, s jobspec.Spec, decode bool) (*basemodel.Base, error) {
	root, byCID, err := jobspec.ModelCID(s.Model)
	if err != nil && s.Model != w.base.Name {
		return nil, err
	}
	var mc llama.Config
	var local *basemodel.Base
	switch {
	case s.Model == w.base.Name:
		local = w.base
	case !byCID:
		if local, err = w.builtinBase(); err != nil {
			return nil, err
		}
	case w.c.Bases == nil:
		return nil, fmt.Errorf("worker: the job's base model %s is not this worker's (%s), and this worker fetches no base models", s.Model, w.base.Name)
	}
	var dir string
	var headers *basemodel.Base // the base's config and tokenizer, when not decoded
	switch {
	case local != nil:
		mc = local.Weights.Cfg
	default:
		if dir, err = w.fetchDir(ctx, "base model", root, w.c.Bases.Dir); err != nil {
			return nil, err
		}
		if !decode {
			if headers, err = w.configBase(root, dir); err != nil {
				return nil, err
			}
			mc = headers.Weights.Cfg
			break
		}
		// config.json and the weights' headers, checked against each
		// other, no tensor data read (llama.Open bounds what it reads).
		ck, err := llama.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("worker: base model %s: %w", root, err)
		}
		mc = ck.Cfg
		ck.Close()
	}
	if err := w.fits(s, mc, local != nil); err != nil {
		return nil, err
	}
	if local != nil {
		return local, nil
	}
	b, detail := headers, root.String()+" in "+dir
	if b == nil {
		if b, err = w.c.Bases.Open(ctx, root); err != nil {
			return nil, fmt.Errorf("worker: base model %s: %w", root, err)
		}
	} else {
		detail += " (config and tokenizer read; the " + w.backend().Name() + " backend loads the weights)"
	}
	w.emit(Event{Kind: EventBaseReady, Detail: detail})
	if w.baseDirs == nil {
		w.baseDirs = map[*basemodel.Base]string{}
	}
	w.baseDirs[b] = dir // for backends that load the directory themselves
	return b, nil
}

// configBase returns base root's config and tokenizer from its verified
// directory dir (basemodel.OpenConfig, named by its CID), read once per
// process.
func (w *Worker) configBase(root cid.Cid, dir string) (*basemodel.Base, error) {
	if b, ok := w.configBases[root.String()]; ok {
		return b, nil
	}
	b, err := basemodel.OpenConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("worker: base model %s: %w", root, err)
	}
	b.Name = root.String()
	if w.configBases == nil {
		w.configBases = map[string]*basemodel.Base{}
	}
	w.configBases[root.String()] = b
	return b, nil
}

// dataFor returns the rows of the dataset job spec s names by CID
// (fetched, verified and cached through Config.Datasets, then read with
// the job's mapping), or nil for a built-in task.
func (w *Worker) dataFor(ctx context.Context, s jobspec.Spec) (*task.Data, error) {
	root, byCID, err := jobspec.DatasetCID(s.Dataset)
	switch {
	case err != nil:
		return nil, err
	case !byCID:
		return nil, nil
	case w.c.Datasets == nil:
		return nil, fmt.Errorf("worker: the job's dataset %s is named by CID, and this worker fetches no datasets", s.Dataset)
	}
	dir, err := w.fetchDir(ctx, "dataset", root, w.c.Datasets.Dir)
	if err != nil {
		return nil, err
	}
	data, err := jobconf.LoadData(dir, s)
	if err != nil {
		return nil, fmt.Errorf("worker: dataset %s: %w", root, err)
	}
	w.emit(Event{Kind: EventDatasetReady, Detail: fmt.Sprintf("%s in %s: %d training, %d held-out rows", root, dir, len(data.Train), len(data.Eval))})
	return data, nil
}

// fetchDir fetches the artifact root (a base model or a dataset: what
// names it in errors) through dir, retrying transient failures; an
// artifact that does not verify is not retried.
func (w *Worker) fetchDir(ctx context.Context, what string, root cid.Cid, dir func(context.Context, cid.Cid) (string, error)) (string, error) {
	var d string
	err := w.retry(ctx, "fetch "+what, 4, func() error {
		var ferr error
		d, ferr = dir(ctx, root)
		if errors.Is(ferr, basecache.ErrVerify) {
			return permanent{ferr}
		}
		return ferr
	})
	var p permanent
	if errors.As(err, &p) {
		err = p.err
	}
	if err != nil {
		return "", fmt.Errorf("worker: %s %s: %w", what, root, err)
	}
	return d, nil
}

// permanent ends retry at once: a base that does not verify will not
// verify on the next try.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

// fits refuses a job whose estimated memory exceeds what the worker allows.
// A base already loaded (loaded) is in use already: measured against the
// host's available memory, its weights are not counted again.
func (w *Worker) fits(s jobspec.Spec, mc llama.Config, loaded bool) error {
	limit, what := w.c.MemoryLimit, "this worker's limit"
	if limit < 0 {
		return nil
	}
	if limit == 0 {
		avail, err := hostAvailable()
		if err != nil {
			w.c.Logger.Warn("no memory check: host memory unknown", "err", err)
			return nil
		}
		limit, what = avail, "this host's available memory"
	}
	// The estimate of this worker's backend: the go engine's float32, or
	// torch in its dtype with the job's 4-bit (hanzod checks the same
	// against the GPU a torch node reported).
	t := hardware.GoTarget
	if b := w.backend(); b.Name() == backend.Torch {
		t = hardware.Target{Backend: backend.Torch, DType: backend.TrainDType(b.DType(), s.DType, mc), Use4Bit: s.GSPO.Use4Bit}
	}
	m, err := jobconf.EstimateMemoryFor(s, mc, t)
	if err != nil {
		return err
	}
	if loaded && what != "this worker's limit" {
		limit += m.Weights
		what = "this host's available memory plus the loaded base's weights"
	}
	return jobconf.CheckMemory(m, limit, what)
}

// builtinBase parses the built-in base once, for a worker whose own base
// is another.
func (w *Worker) builtinBase() (*basemodel.Base, error) {
	if w.base.Name == basemodel.BuiltinName {
		return w.base, nil
	}
	if w.builtin == nil {
		b, err := basemodel.Builtin()
		if err != nil {
			return nil, err
		}
		w.builtin = b
	}
	return w.builtin, nil
}

// hostAvailable reads MemAvailable from /proc/meminfo, in bytes.
func hostAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil && kb > 0 {
					return kb << 10, nil
				}
			}
		}
	}
	return 0, errors.New("worker: no MemAvailable in /proc/meminfo")
}

// provision measures the bandwidth to the job's peers once each and
// reports it for the peers the assignment names now (a member that left,
// say one that refused the job, is not a peer any more: hanzod refuses a
// report naming it).
func (w *Worker) provision(ctx context.Context, a Assignment) {
	if w.measured == a.Job || len(a.ProbePeers) == 0 {
		return
	}
	if w.kbpsJob != a.Job {
		w.kbps, w.kbpsJob = map[string]uint64{}, a.Job
	}
	report := map[string]uint64{}
	for _, p := range a.ProbePeers {
		if p.ID == w.id {
			continue
		}
		if _, ok := w.kbps[p.ID]; !ok {
			w.kbps[p.ID] = probe(ctx, p.Addr, p.ID, w.c.Key, w.c.ProbeTimeout, w.c.Clock.Now)
		}
		report[p.ID] = w.kbps[p.ID]
	}
	na, err := w.c.Orchestrator.ReportBandwidth(ctx, a.Job, report)
	if err != nil {
		w.c.Logger.Warn("bandwidth report failed", "job", a.Job, "err", err)
		return
	}
	w.measured = a.Job
	var parts []string
	for id, v := range report {
		parts = append(parts, fmt.Sprintf("%s:%d", short(id), v))
	}
	w.emit(Event{Kind: EventBandwidth, Job: a.Job, State: a.State, Detail: "kbit/s " + strings.Join(parts, " ")})
	if na.Job != "" {
		w.heart.set(na)
	}
}

// stillOn reports whether the latest assignment still has this node run
// epoch e of job in a ring.
func (w *Worker) stillOn(job string, e int) (Assignment, bool) {
	a, _, _ := w.heart.current()
	return a, a.Job == job && a.State == StateRunning && a.Epoch == e && w.inRing(a)
}

func ringConfig(job string, e int, r *Ring) (ring.Config, error) {
	cfg := ring.Config{Job: job, Epoch: uint64(e), Generation: r.Generation, Groups: slices.Clone(r.Groups)}
	for _, p := range r.Members {
		pub, err := nodekey.ParsePublicHex(p.ID)
		if err != nil {
			return cfg, fmt.Errorf("worker: ring member %q: %w", p.ID, err)
		}
		cfg.Members = append(cfg.Members, ring.Member{ID: p.ID, PublicKey: pub, Addr: p.Addr})
	}
	return cfg, cfg.Validate()
}

// errAbandon ends an epoch the orchestrator moved on from.
var errAbandon = errors.New("worker: the orchestrator moved on from this epoch")

// retry calls f until it succeeds, ctx ends or it failed attempts times,
// backing off from 100 ms.
func (w *Worker) retry(ctx context.Context, what string, attempts int, f func() error) error {
	delay := 100 * time.Millisecond
	for i := 1; ; i++ {
		err := f()
		var p permanent
		if err == nil || ctx.Err() != nil || i == attempts || errors.As(err, &p) {
			return err
		}
		w.c.Logger.Warn(what+" failed; retrying", "err", err, "attempt", i, "retry_in", delay)
		if w.heart.sleep(ctx, delay) != nil {
			return ctx.Err()
		}
		delay = min(2*delay, w.c.MaxBackoff)
	}
}

// runEpoch trains epoch a.Epoch of a.Job; it reports whether every sync
// was submitted.
func (w *Worker) runEpoch(ctx context.Context, a Assignment) (bool, error) {
	plan, e, job := w.plan, a.Epoch, a.Job
	var start *llama.Adapter
	var outerState []byte // the checkpoint's outer optimiser state (nil: fresh)
	var err error
	switch {
	case e == 1 && a.Checkpoint == "":
		start, err = plan.InitialAdapter(plan.Base.Weights.Cfg)
	case a.Checkpoint == "":
		err = fmt.Errorf("worker: epoch %d of job %s has no checkpoint", e, job)
	default:
		err = w.retry(ctx, "fetch checkpoint", 8, func() error {
			var ferr error
			start, outerState, ferr = w.c.Orchestrator.FetchCheckpoint(ctx, a.Checkpoint, plan.Base.Weights.Cfg)
			return ferr
		})
		if err == nil {
			w.emit(Event{Kind: EventCheckpointLoaded, Job: job, Epoch: e, Adapter: jobconf.Digest(start), Detail: a.Checkpoint})
		}
	}
	if err != nil {
		return false, err
	}
	if a.Checkpoint != "" {
		want, err := plan.InitialAdapter(plan.Base.Weights.Cfg)
		if err != nil {
			return false, err
		}
		if err := sameShape(start, want); err != nil {
			return false, fmt.Errorf("worker: checkpoint %s: %w", a.Checkpoint, err)
		}
	}
	tr, err := w.backend().Start(ctx, backend.Job{Base: plan.Base, BaseDir: w.baseDirs[plan.Base], Config: plan.Trainer, Worker: w.widx, DType: plan.DType,
		Threads: w.c.Threads, FirstStep: plan.FirstStep(e), Adapter: start})
	if err != nil {
		return false, err
	}
	defer tr.Close()
	params := start.NumParams()
	clip := plan.ClipNorm(params)
	cfg, err := ringConfig(job, e, a.Ring)
	if err != nil {
		return false, err
	}
	comm, err := ring.New(ring.Options{Key: w.c.Key, Config: cfg, Transport: w.tr, Timeout: w.c.RingTimeout,
		ClipNorm: clip, Reporter: w})
	if err != nil {
		return false, err
	}
	w.ringMu.Lock()
	w.ringCur = comm
	w.ringMu.Unlock()
	defer func() {
		comm.Close()
		w.ringMu.Lock()
		w.ringDone, w.ringCur = w.ringDone.Add(comm.Stats()), nil
		w.ringMu.Unlock()
	}()
	r := &ringState{comm: comm, gen: a.Ring.Generation, configID: a.Ring.ConfigID, members: len(cfg.Members)}
	// The job's outer optimiser: fresh every epoch, or continued from the
	// checkpoint's state where the job carries it (the outer Adam).
	outer, err := plan.ResumeOuter(outerState, start.NumParams())
	if err != nil {
		return false, fmt.Errorf("worker: checkpoint %s: %w", a.Checkpoint, err)
	}
	t0 := w.c.Clock.Now()
	w.emit(Event{Kind: EventEpochStarted, Job: job, Epoch: e, Step: plan.FirstStep(e), Generation: r.gen,
		Members: len(cfg.Members), Adapter: jobconf.Digest(start)})
	for k := 1; k <= plan.Syncs(); k++ {
		s := tr.Adapter().Clone()
		baseDigest := jobconf.Digest(s)
		var lossSum float64
		var sets []*trace.Set
		for range plan.Interval {
			if _, ok := w.stillOn(job, e); !ok {
				return false, errAbandon
			}
			ts := w.c.Clock.Now()
			st, err := tr.Step(ctx)
			if err != nil {
				return false, err
			}
			lossSum += st.Loss
			if set := tr.Traces(); set != nil {
				sets = append(sets, w.stamp(set, a))
			}
			w.emit(Event{Kind: EventStep, Job: job, Epoch: e, Sync: k, Step: st.Step, Reward: st.RewardMean, Loss: st.Loss,
				Seconds: w.c.Clock.Now().Sub(ts).Seconds()})
		}
		contrib, err := w.contribution(ctx, jobconf.Sub(tr.Adapter(), s), job, e, k, clip, r.members)
		if err != nil {
			return false, err
		}
		d := jobconf.SyncDelta{Job: job, Node: w.id, Epoch: e, Sync: k, Step: uint64(plan.SyncStep(e, k)), Base: baseDigest,
			ClaimedLoss: lossSum / float64(plan.Interval), Samples: plan.Samples(), Delta: contrib, Binding: a.JobBinding,
			Backend: w.backend().Name(), DType: trainerDType(w.backend(), tr)}
		var traces jobconf.Traces
		if w.c.Attack == AttackRewards {
			for _, set := range sets {
				for i := range set.Seqs {
					set.Seqs[i].Reward += 0.5
				}
			}
		}
		if len(sets) == plan.Interval {
			if traces, err = jobconf.EncodeTraces(ctx, sets); err != nil {
				return false, err
			}
			d.Traces = traces.CID
		}
		v, err := w.submit(ctx, d, traces.Compressed)
		if err != nil {
			return false, err
		}
		if w.c.Attack == AttackEquivocate {
			d.Delta = scaled(contrib, 2)
			if _, err := w.submit(ctx, d, traces.Compressed); err != nil {
				return false, err
			}
		}
		if k == plan.Syncs() {
			break
		}
		if rb, ok := w.rebaseFor(v, job, e, k); ok {
			// A member was proven to cheat: the ring's result of this sync
			// is replaced by the state hanzod rebuilt from the honest
			// deltas (docs/byzantine.md).
			t0 := w.c.Clock.Now()
			ad, o, err := w.rebase(ctx, rb, job, e, k, start)
			if err != nil {
				return false, err
			}
			s, outer = ad, o
			if err := tr.SetAdapter(ctx, s); err != nil {
				return false, err
			}
			w.emit(Event{Kind: EventRebased, Job: job, Epoch: e, Sync: k, Step: plan.SyncStep(e, k), Seconds: w.c.Clock.Now().Sub(t0).Seconds(),
				Adapter: jobconf.Digest(s), Detail: rb.Checkpoint})
			continue
		}
		flat := jobconf.Flatten(contrib)
		if w.c.Attack == AttackRing { // the delta was honest; the ring gets garbage
			flat = jobconf.Flatten(scaled(contrib, -1000))
		}
		mean := make([]float32, len(flat))
		secs, err := w.allReduce(ctx, r, job, e, k, uint64(plan.SyncStep(e, k)), mean, flat)
		if err != nil {
			return false, err
		}
		if err := outer.Apply(s, mean); err != nil {
			return false, err
		}
		if err := tr.SetAdapter(ctx, s); err != nil {
			return false, err
		}
		w.emit(Event{Kind: EventRingReduced, Job: job, Epoch: e, Sync: k, Step: plan.SyncStep(e, k), Seconds: secs,
			Generation: r.gen, Members: r.members, Adapter: jobconf.Digest(s)})
	}
	w.emit(Event{Kind: EventEpochDone, Job: job, Epoch: e, Step: plan.SyncStep(e, plan.Syncs()),
		Seconds: w.c.Clock.Now().Sub(t0).Seconds()})
	return true, nil
}

// ringState is the ring configuration an epoch is using.
type ringState struct {
	comm     *ring.Comm
	gen      uint64
	configID string
	members  int
}

// install switches to the orchestrator's ring rg.
func (r *ringState) install(job string, e int, rg *Ring) error {
	cfg, err := ringConfig(job, e, rg)
	if err != nil {
		return err
	}
	if err := r.comm.Reconfigure(cfg); err != nil {
		return err
	}
	r.gen, r.configID, r.members = rg.Generation, rg.ConfigID, len(cfg.Members)
	return nil
}

// RingStats returns the ring's counters since the worker started: every
// epoch's communicator, the running one included.
func (w *Worker) RingStats() ring.Stats {
	w.ringMu.Lock()
	defer w.ringMu.Unlock()
	st := w.ringDone
	if w.ringCur != nil {
		st = st.Add(w.ringCur.Stats())
	}
	if st.Failures == nil { // no epoch yet: every series at zero
		st = st.Add(ring.Stats{})
	}
	return st
}

// allReduce averages flat around the ring into mean, riding out failures:
// report the suspect, wait for a newer ring, retry (flat is only read). It
// returns the seconds of the successful call.
func (w *Worker) allReduce(ctx context.Context, r *ringState, job string, e, k int, step uint64, mean, flat []float32) (float64, error) {
	var failedAt time.Time
	var seq uint64
	for {
		a, ok := w.stillOn(job, e)
		if !ok {
			return 0, errAbandon
		}
		if a.Ring.Generation > r.gen {
			if err := r.install(job, e, a.Ring); err != nil {
				return 0, err
			}
		}
		if a.Paused {
			if _, seq, _ = w.heart.next(ctx, seq, true); ctx.Err() != nil {
				return 0, ctx.Err()
			}
			continue
		}
		w.takeEvidence("") // keep only what this call collects
		t0 := w.c.Clock.Now()
		err := w.supervised(ctx, r, job, e, func(cctx context.Context) error {
			return r.comm.AllReduceInto(cctx, mean, flat, ring.Mean, ring.Call{Step: step})
		})
		if errors.Is(err, errSuperseded) {
			// The orchestrator published a newer ring while this call ran
			// (a member was removed or ejected): the others are on it
			// already. Install it and retry at once; nobody is to blame.
			if failedAt.IsZero() {
				failedAt = w.c.Clock.Now()
			}
			w.emit(Event{Kind: EventRingFailed, Job: job, Epoch: e, Sync: k, Step: int(step), Generation: r.gen,
				Reason: "superseded", Detail: "a newer ring configuration was published during the call"})
			continue
		}
		if err == nil {
			now := w.c.Clock.Now()
			if !failedAt.IsZero() {
				w.emit(Event{Kind: EventRingRecovered, Job: job, Epoch: e, Sync: k, Step: int(step), Generation: r.gen,
					Members: r.members, Seconds: now.Sub(failedAt).Seconds()})
			}
			return now.Sub(t0).Seconds(), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if failedAt.IsZero() {
			failedAt = w.c.Clock.Now()
		}
		var pe *ring.PeerError
		if errors.As(err, &pe) {
			ev := w.takeEvidence(pe.SuspectID)
			kind := suspectKind(pe, ev)
			w.emit(Event{Kind: EventRingFailed, Job: job, Epoch: e, Sync: k, Step: int(step), Generation: r.gen,
				Suspect: pe.SuspectID, Reason: kind, Detail: err.Error()})
			s := Suspect{Job: job, ConfigID: r.configID, Node: pe.SuspectID, Kind: kind, Evidence: SuspectEvidence(pe, ev)}
			if rerr := w.retry(ctx, "suspect report", 5, func() error { return w.c.Orchestrator.ReportSuspect(ctx, s) }); rerr != nil {
				w.c.Logger.Warn("suspect report failed", "suspect", pe.SuspectID, "err", rerr)
			}
		} else {
			w.takeEvidence("")
			w.c.Logger.Warn("ring all-reduce failed", "job", job, "epoch", e, "sync", k, "err", err)
			w.emit(Event{Kind: EventRingFailed, Job: job, Epoch: e, Sync: k, Step: int(step), Generation: r.gen, Detail: err.Error()})
		}
		// Wait for the orchestrator to publish a newer ring (or move on).
		_, seq, _ = w.heart.current()
		for {
			var a Assignment
			if a, seq, err = w.heart.next(ctx, seq, true); err != nil {
				return 0, err
			}
			if _, ok := w.stillOn(job, e); !ok || a.Ring.Generation > r.gen || pe == nil {
				break
			}
		}
		if pe == nil { // not a neighbour's fault: reinstall the current ring
			if a, ok := w.stillOn(job, e); ok {
				if err := r.install(job, e, a.Ring); err != nil {
					return 0, err
				}
			}
		}
	}
}

// errSuperseded ends a ring call whose configuration the orchestrator
// replaced while it ran.
var errSuperseded = errors.New("worker: ring configuration superseded during the call")

// supervised runs a ring call, cancelling it as soon as the latest
// assignment shows a newer ring generation for this epoch (or this node
// left it): members that already installed the new ring must not wait for
// this one to time out on the old.
func (w *Worker) supervised(ctx context.Context, r *ringState, job string, e int, call func(context.Context) error) error {
	cctx, cancel := context.WithCancel(ctx)
	gen := r.gen
	superseded, watched := make(chan struct{}), make(chan struct{})
	defer func() { cancel(); <-watched }()
	go func() {
		defer close(watched)
		for {
			a, _, changed := w.heart.current()
			if a.Job != job || a.Epoch != e || a.Ring == nil || a.Ring.Generation > gen || !w.inRing(a) {
				close(superseded)
				cancel()
				return
			}
			select {
			case <-changed:
			case <-cctx.Done():
				return
			}
		}
	}()
	err := call(cctx)
	if err != nil && ctx.Err() == nil {
		select {
		case <-superseded:
			return errSuperseded
		default:
		}
	}
	return err
}

// stamp fills in what a backend does not know about its traces: the
// model, the dataset, the job, the node and the epoch.
func (w *Worker) stamp(set *trace.Set, a Assignment) *trace.Set {
	h := &set.Header
	h.Model, h.Dataset = a.Spec.Model, a.Spec.Dataset
	if h.Model == "" {
		h.Model = w.plan.Base.Name
	}
	if h.Dataset == "" {
		h.Dataset = w.plan.Trainer.Task
	}
	h.Job, h.Node, h.Epoch = a.Job, w.id, a.Epoch
	return set
}

// TracesSuffix names the file a worker keeps a delta's sync traces in
// (zstd-compressed, as sent) beside the kept delta file; gym delta submit
// sends it with the file.
const TracesSuffix = ".traces.zst"

// submit signs d with a fresh sequence and submits it with its trace
// bundle (zstd-compressed; nil when d names none); a rejection is an
// event, not an error.
func (w *Worker) submit(ctx context.Context, d jobconf.SyncDelta, traces []byte) (Verdict, error) {
	d.Time = w.c.Clock.Now().UTC()
	seq, err := w.seq.next(d.Time)
	if err != nil {
		return Verdict{}, err
	}
	d.Sequence = seq
	file, err := jobconf.Encode(ctx, w.c.Key, d)
	if err != nil {
		return Verdict{}, err
	}
	var v Verdict
	err = w.retry(ctx, "submit delta", 10, func() error {
		var serr error
		v, serr = w.c.Orchestrator.SubmitDelta(ctx, file, traces)
		return serr
	})
	if err != nil {
		return Verdict{}, fmt.Errorf("worker: submit delta (epoch %d sync %d): %w", d.Epoch, d.Sync, err)
	}
	e := Event{Kind: EventDeltaSubmitted, Job: d.Job, Epoch: d.Epoch, Sync: d.Sync, Step: int(d.Step), Loss: d.ClaimedLoss,
		Sequence: seq, Verdict: "accepted", Attack: w.c.Attack, Detail: v.Detail}
	switch {
	case v.Duplicate:
		e.Verdict = "duplicate"
	case !v.Accepted:
		e.Kind, e.Verdict, e.Reason = EventDeltaRejected, "rejected", v.Reason
	}
	w.emit(e)
	if (v.Accepted || v.Duplicate) && w.c.DataDir != "" {
		name := fmt.Sprintf("%s-e%d-s%d-%d.delta", safeName(d.Job), d.Epoch, d.Sync, seq)
		dir := filepath.Join(w.c.DataDir, "deltas")
		err := os.MkdirAll(dir, 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), file, 0o644)
		}
		if err == nil && len(traces) > 0 {
			err = os.WriteFile(filepath.Join(dir, name+TracesSuffix), traces, 0o644)
		}
		if err != nil {
			w.c.Logger.Warn("could not keep the delta file", "err", err)
		}
	}
	return v, nil
}

// rebaseFor returns the rebase of job's epoch e at sync k, if hanzod set
// one: the delta's verdict names it (hanzod sets a rebase only at a sync
// no member submitted yet, so the verdict of this sync's delta is the
// latest news), or the latest assignment does.
func (w *Worker) rebaseFor(v Verdict, job string, e, k int) (Rebase, bool) {
	if r, ok := rebaseAt(v.Rebases, e, k); ok {
		return r, true
	}
	if a, ok := w.stillOn(job, e); ok {
		return rebaseAt(a.Rebases, e, k)
	}
	return Rebase{}, false
}

// rebase waits until hanzod publishes the state of rb (it does once it
// holds every member's delta of the sync), fetches it and checks it
// against the digest hanzod logged: the adapter the members continue from
// and the outer optimiser's state.
func (w *Worker) rebase(ctx context.Context, rb Rebase, job string, e, k int, like *llama.Adapter) (*llama.Adapter, *jobconf.Outer, error) {
	_, seq, _ := w.heart.current()
	for rb.Checkpoint == "" {
		a, ok := w.stillOn(job, e)
		if !ok {
			return nil, nil, errAbandon
		}
		if r, ok := rebaseAt(a.Rebases, e, k); ok && r.Checkpoint != "" {
			rb = r
			break
		}
		// Ask hanzod (at the heartbeat limiter's pace) rather than wait
		// for the next beat: the ring is held until the state is in.
		var err error
		if _, seq, err = w.heart.next(ctx, seq, true); err != nil {
			return nil, nil, err
		}
	}
	plan := w.plan
	var ad *llama.Adapter
	var state []byte
	err := w.retry(ctx, "fetch rebase state", 8, func() error {
		var ferr error
		ad, state, ferr = w.c.Orchestrator.FetchCheckpoint(ctx, rb.Checkpoint, plan.Base.Weights.Cfg)
		return ferr
	})
	if err != nil {
		return nil, nil, err
	}
	if err := sameShape(ad, like); err != nil {
		return nil, nil, fmt.Errorf("worker: rebase state %s: %w", rb.Checkpoint, err)
	}
	if d := jobconf.Digest(ad); d != rb.Digest {
		return nil, nil, fmt.Errorf("worker: rebase state %s has adapter digest %s, hanzod logged %s", rb.Checkpoint, d, rb.Digest)
	}
	o, err := plan.ResumeRebase(state, ad.NumParams())
	if err != nil {
		return nil, nil, fmt.Errorf("worker: rebase state %s: %w", rb.Checkpoint, err)
	}
	return ad, o, nil
}

// sameShape reports how a's tensors differ from want's, or nil.
func sameShape(a, want *llama.Adapter) error {
	at, wt := a.Views(), want.Views()
	if len(at) != len(wt) {
		return fmt.Errorf("%d tensors, the job's adapter has %d", len(at), len(wt))
	}
	for i := range wt {
		if at[i].Name != wt[i].Name || !slices.Equal(at[i].Shape, wt[i].Shape) {
			return fmt.Errorf("tensor %d is %s %v, want %s %v", i, at[i].Name, at[i].Shape, wt[i].Name, wt[i].Shape)
		}
	}
	return nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// trainerDType is the type tr trains in, which its deltas claim: its own
// where it says (a torch trainer follows its base unless the backend's
// dtype is set), else its backend's.
func trainerDType(b backend.Backend, tr backend.Trainer) string {
	if d, ok := tr.(interface{ DType() string }); ok {
		return d.DType()
	}
	return b.DType()
}

// backend is the configured training backend (the go backend by default).
func (w *Worker) backend() backend.Backend {
	if w.c.Backend == nil {
		return backend.GoBackend{}
	}
	return w.c.Backend
}
