package torch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	trainerv1 "github.com/zooai/gym/api/trainer/v1"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/protocol/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backend is the torch backend: one supervised process, one trainer at a
// time.
type Backend struct {
	o   Options
	sup *supervisor
	mu  sync.Mutex // one call at a time
	// loaded is the process generation the current trainer loaded into.
	loaded int
	cur    *Trainer
	stop   func() bool
	// hook, in tests, is called at points of a step ("generated" after
	// Generate, "stepped" after Step) with the process.
	hook func(stage string, pid int, exchange string)
}

// New checks the Python environment and makes the private directory; the
// process starts on first use. ctx bounds the backend's life: when it is
// done, the process is killed.
func New(ctx context.Context, o Options) (*Backend, error) {
	if err := CheckDType(o.DType); err != nil {
		return nil, err
	}
	if err := CheckPython(ctx, o.python(), o.Env); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gym-torch-")
	if err != nil {
		return nil, err
	}
	x := filepath.Join(dir, "exchange")
	if err := os.Mkdir(x, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if o.BaseDir == "" {
		bd := filepath.Join(dir, "base")
		if err := basemodel.Export(bd); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		o.BaseDir = bd
	} else if o.BaseDir, err = filepath.Abs(o.BaseDir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b := &Backend{o: o, sup: &supervisor{o: o, dir: dir, exchange: x}}
	b.stop = context.AfterFunc(ctx, func() { b.sup.close() })
	// Start the process now: importing torch takes seconds, which the
	// first step (and its ring neighbours) should not wait for. A failure
	// here is seen again, and reported, by the first call.
	go b.sup.get(ctx)
	return b, nil
}

// Name is backend.Torch.
func (b *Backend) Name() string { return backend.Torch }

// LoadsBaseDir is true (backend.DirLoader): the process loads the base's
// directory; the worker reads only its config and tokenizer
// (basemodel.OpenConfig) and never decodes its weights.
func (b *Backend) LoadsBaseDir() bool { return true }

// DType is the type the model is loaded and trained in when
// Options.DType sets it; empty, each job trains in its own type or its
// base's (backend.TrainDType, Trainer.DType).
func (b *Backend) DType() string { return b.o.DType }

// CheckDType reports whether dtype is one Options.DType accepts: "" (each
// job's base's), backend.Float32 or backend.BFloat16. float16 is refused
// with the reason: the process can load it, but the judge has no measured
// trace-check tolerances for float16 deltas (tracecheck.Tolerances).
func CheckDType(dtype string) error {
	switch dtype {
	case "", backend.Float32, backend.BFloat16:
		return nil
	case "float16":
		return fmt.Errorf("torch: dtype float16: trace checks have no measured tolerances for float16 deltas, so hanzod would refuse them; train in bfloat16 (half the memory of float32, like float16) or float32")
	}
	return fmt.Errorf("torch: dtype %q: want float32 or bfloat16 (or none: the base's)", dtype)
}

// Close kills the process and removes the private directory.
func (b *Backend) Close() error {
	b.stop()
	b.sup.close()
	return os.RemoveAll(b.sup.dir)
}

// Restarts is the number of process starts so far.
func (b *Backend) Restarts() int {
	b.sup.mu.Lock()
	defer b.sup.mu.Unlock()
	return b.sup.starts
}

// Pid is the running process's id (0 when none runs).
func (b *Backend) Pid() int {
	b.sup.mu.Lock()
	defer b.sup.mu.Unlock()
	if b.sup.cur == nil {
		return 0
	}
	return b.sup.cur.Pid()
}

// Health asks the process how it is, starting it if needed.
func (b *Backend) Health(ctx context.Context) (*trainerv1.HealthResponse, error) {
	p, err := b.sup.get(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout())
	defer cancel()
	return p.client.Health(ctx, &trainerv1.HealthRequest{})
}

func (b *Backend) timeout() time.Duration {
	if b.o.CallTimeout > 0 {
		return b.o.CallTimeout
	}
	return 10 * time.Minute
}

// Trainer is a job's training state in the torch backend. The Go side
// keeps the step count and the last verified adapter; the process keeps
// the model and the optimiser's moments (lost, and reset, when the
// process is restarted).
type Trainer struct {
	b       *Backend
	j       backend.Job
	dtype   string // backend.TrainDType
	split   *task.Split
	step    int
	adapter *llama.Adapter // last verified adapter
	files   int
	timing  Timing
	traces  *trace.Set // the last step's
	reset   bool       // the optimiser state was reset since the last step
}

// Timing splits the last step's wall time: what the process spent
// sampling (Generate) and training (Step), and the rest — the seam: the
// calls, the files written, read and checked, and scoring here.
type Timing struct {
	Wall, Generate, Train float64 // seconds
}

// Seam is the time spent in neither engine.
func (t Timing) Seam() float64 { return t.Wall - t.Generate - t.Train }

// LastTiming is the timing of the last successful step.
func (t *Trainer) LastTiming() Timing { return t.timing }

// ErrProcess reports that the backend process died, hung or answered
// garbage during a call; the process has been restarted.
var ErrProcess = errors.New("torch: backend process failure")

// Start loads the job into the process.
func (b *Backend) Start(ctx context.Context, j backend.Job) (backend.Trainer, error) {
	return b.StartTrainer(ctx, j)
}

// StartTrainer is Start with the concrete type.
func (b *Backend) StartTrainer(ctx context.Context, j backend.Job) (*Trainer, error) {
	if j.Adapter == nil {
		return nil, fmt.Errorf("torch: a job without a starting adapter")
	}
	if err := j.Config.Validate(j.Base.Weights.Cfg, j.Base.Tokenizer); err != nil {
		return nil, err
	}
	split, err := j.Config.Split(j.Config.EvalSize)
	if err != nil {
		return nil, err
	}
	t := &Trainer{b: b, j: j, dtype: backend.TrainDType(b.o.DType, j.DType, j.Base.Weights.Cfg), split: split, step: j.FirstStep, adapter: j.Adapter.Clone()}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur, b.loaded = t, 0
	if err := b.call(ctx, t, func(ctx context.Context, p *proc) error { return nil }); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Trainer) file(kind string) string {
	t.files++
	return kind + "-" + strconv.Itoa(t.files) + ".safetensors"
}

func (t *Trainer) path(name string) string { return filepath.Join(t.b.sup.exchange, name) }

// load sends the job to process p, starting from the last verified adapter.
func (b *Backend) load(ctx context.Context, t *Trainer, p *proc) error {
	c := t.j.Config
	name := t.file("start")
	if err := WriteAdapter(t.path(name), t.adapter); err != nil {
		return err
	}
	defer os.Remove(t.path(name))
	s := optimSchedule(c)
	dir := b.o.BaseDir
	if t.j.BaseDir != "" {
		dir = t.j.BaseDir // the job's base, fetched by CID
		// The process refuses a relative path (a worker with a relative
		// --data keeps its bases under it).
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		dir = abs
	}
	req := &trainerv1.LoadRequest{
		BaseDir: dir, LoraRank: uint32(c.LoRARank), LoraAlpha: c.LoRAAlpha, LoraTargetModules: c.LoRATargets,
		Dtype: t.dtype, Device: b.o.Device, Use_4Bit: b.o.Use4Bit || c.Use4Bit, Seed: c.Seed, Adapter: name,
		Threads: uint32(max(t.j.Threads, 0)),
		Gspo: &trainerv1.GSPO{ImportanceSamplingLevel: c.ImportanceSamplingLevel, Beta: c.Beta, EpsilonLow: c.EpsilonLow,
			EpsilonHigh: c.EpsilonHigh, AdvantageEpsilon: 1e-4, Temperature: c.Temperature,
			NumIterations: uint32(c.NumIterations), GradientAccumulationSteps: uint32(c.GradientAccumulationSteps)},
		Adamw: &trainerv1.AdamW{LearningRate: c.LearningRate, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: c.WeightDecay,
			WarmupUpdates: uint32(c.WarmupSteps), TotalUpdates: uint32(s.total), MinLearningRate: s.minLR, Sgd: c.SGD},
	}
	resp, err := p.client.Load(ctx, req)
	if c := status.Code(err); c == codes.FailedPrecondition || c == codes.InvalidArgument {
		return fmt.Errorf("%w: %s", backend.ErrUnservable, status.Convert(err).Message())
	}
	if err != nil {
		return outOfMemory(err)
	}
	if resp.Dtype != t.dtype {
		return fmt.Errorf("%w: the process loaded the base in %q, asked for %q", ErrGarbage, resp.Dtype, t.dtype)
	}
	got, err := ReadAdapter(t.path(resp.Adapter), t.adapter)
	os.Remove(t.path(resp.Adapter))
	if err != nil {
		return err
	}
	if d := relDiff(got, t.adapter); d != 0 {
		return fmt.Errorf("%w: the process loaded an adapter that differs from the one sent (relative difference %g)", ErrGarbage, d)
	}
	return nil
}

type schedule struct {
	total int
	minLR float64
}

// optimSchedule is trainer.Config's schedule (package optim's Schedule).
func optimSchedule(c trainer.Config) schedule {
	if c.CosineDecay {
		return schedule{total: c.Steps * c.NumIterations, minLR: c.LearningRate / 10}
	}
	return schedule{}
}

// relDiff is ‖a − b‖ / ‖b‖ over all tensors (‖a − b‖ when b is zero).
func relDiff(a, b *llama.Adapter) float64 {
	var num, den float64
	av, bv := a.Views(), b.Views()
	for i := range av {
		for k, x := range av[i].Data {
			d := float64(x) - float64(bv[i].Data[k])
			num += d * d
			den += float64(bv[i].Data[k]) * float64(bv[i].Data[k])
		}
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// outOfMemory turns the process's ResourceExhausted answer (CUDA out of
// memory, service.py) into ErrUnservable, so the worker refuses the job with
// the reason in its status instead of retrying an epoch that cannot fit;
// other errors pass unchanged. The process has already released its cached
// GPU memory, and the next job loads afresh.
func outOfMemory(err error) error {
	if status.Code(err) != codes.ResourceExhausted {
		return err
	}
	return fmt.Errorf("%w: the trainer ran out of device memory (%s); this node cannot train the job at this size: "+
		"use a device with more memory, 4-bit quantization (--use-4bit, if the job allows it), or a job with a "+
		"smaller max_seq_len, group_size or prompts_per_step", backend.ErrUnservable, status.Convert(err).Message())
}

// retryable reports an error after which the process is restarted and
// the call tried again: the process died, hung, or answered garbage.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, ErrGarbage) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok { // not from the call: an error of this side
		return false
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.Canceled:
		return true
	}
	return false
}

// call runs f against a live process that has t loaded, restarting the
// process (and reloading t) once when it dies, hangs or answers garbage.
// b.mu is held.
func (b *Backend) call(ctx context.Context, t *Trainer, f func(ctx context.Context, p *proc) error) error {
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		p, err := b.sup.get(ctx)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, b.timeout())
		err = nil
		if b.cur != t || b.loaded != p.gen {
			if err = b.load(cctx, t, p); err == nil {
				b.cur, b.loaded = t, p.gen
				// A trainer loaded again after its first step starts
				// with fresh moments: its next traces say so.
				t.reset = t.reset || t.step > t.j.FirstStep
			}
		}
		if err == nil {
			err = f(cctx, p)
		}
		cancel()
		if err == nil {
			return nil
		}
		if !retryable(ctx, err) {
			select {
			case <-p.exited: // died during the call: the error is about that
			default:
				return outOfMemory(err)
			}
		}
		last = fmt.Errorf("%w (process %d, start %d): %v: %s", ErrProcess, p.Pid(), p.gen, err, p.stderr)
		b.sup.restart(p)
		b.loaded = 0
	}
	return last
}

// Step samples the step's problems in the process, scores the completions
// here with the job's task, and runs the GSPO step in the process. The
// returned adapter is checked before it replaces the current one.
func (t *Trainer) Step(ctx context.Context) (trainer.StepStats, error) {
	if err := ctx.Err(); err != nil {
		return trainer.StepStats{}, err
	}
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	c := t.j.Config
	k := t.step + 1
	problems := t.split.Batch(c.Seed, t.j.Worker, uint64(k), c.PromptsPerStep)
	prompts := make([][]int, len(problems))
	maxNew := 0
	for i, p := range problems {
		pr, ans, err := task.Tokenize(t.j.Base.Tokenizer, p)
		if err != nil {
			return trainer.StepStats{}, err
		}
		prompts[i] = pr
		maxNew = max(maxNew, len(ans))
	}
	seed := prng.New(c.Seed, task.StreamSample, t.j.Worker, uint64(k)).Uint64()
	var st trainer.StepStats
	var next *llama.Adapter
	var tm Timing
	var set *trace.Set
	t0 := time.Now()
	err := b.call(ctx, t, func(ctx context.Context, p *proc) error {
		t0 = time.Now() // a retried step is timed from its last attempt
		gen := t.file("gen")
		defer os.Remove(t.path(gen))
		req := &trainerv1.GenerateRequest{GroupSize: uint32(c.GroupSize), MaxNewTokens: uint32(maxNew),
			Temperature: c.Temperature, TopK: uint32(c.TopK), Seed: seed, Out: gen}
		for _, pr := range prompts {
			ids := make([]int32, len(pr))
			for i, v := range pr {
				ids[i] = int32(v)
			}
			req.Prompts = append(req.Prompts, &trainerv1.Prompt{Ids: ids})
		}
		gr, err := p.client.Generate(ctx, req)
		if err != nil {
			return err
		}
		tm.Generate = gr.Seconds
		if b.hook != nil {
			b.hook("generated", p.Pid(), b.sup.exchange)
		}
		tr, err := ReadTraces(t.path(gen), t.j.Base.Weights.Cfg.Vocab)
		if err != nil {
			return err
		}
		if tr.G != c.GroupSize || len(tr.Prompts) != len(prompts) {
			return fmt.Errorf("%w: traces of %d prompts in groups of %d, asked for %d in groups of %d", ErrGarbage, len(tr.Prompts), tr.G, len(prompts), c.GroupSize)
		}
		for i := range prompts {
			if !slices.Equal(tr.Prompts[i], prompts[i]) {
				return fmt.Errorf("%w: traces prompt %d is not the one sent", ErrGarbage, i)
			}
		}
		for _, comp := range tr.Completions {
			if len(comp) > maxNew {
				return fmt.Errorf("%w: a completion of %d tokens, at most %d asked", ErrGarbage, len(comp), maxNew)
			}
		}
		st = trainer.StepStats{Step: k, SyncDue: k%c.AggregateInterval == 0}
		tr.Rewards = make([]float64, len(tr.Completions))
		// The traces the worker names in its delta: the sampler's seed
		// is the one torch drew with (torch's generator, no prng stream).
		set = &trace.Set{Header: trace.Header{Format: trace.Format, Version: trace.Version, Policy: fmt.Sprintf("%x", llama.Digest(t.adapter.Views())),
			Step: k, Seed: seed, Temperature: c.Temperature, TopK: c.TopK, MaxNew: maxNew, Prompts: len(prompts), GroupSize: c.GroupSize,
			Vocab: t.j.Base.Weights.Cfg.Vocab}, Seqs: make([]trace.Sequence, len(tr.Completions))}
		eos := t.j.Base.Weights.Cfg.EOS
		sc := c.Scorer()
		for i, comp := range tr.Completions {
			ids := comp
			if n := len(ids); slices.Contains(eos, ids[n-1]) {
				ids = ids[:n-1]
			}
			text, err := t.j.Base.Tokenizer.Decode(ids, true)
			if err != nil {
				return err
			}
			pr := problems[i/c.GroupSize]
			x := reward.Sample{Prompt: pr.Prompt, Answer: pr.Answer, Completion: text}
			tr.Rewards[i] = sc.Score(x)
			set.Seqs[i] = trace.Sequence{Prompt: i / c.GroupSize, Sample: i % c.GroupSize, PromptText: pr.Prompt, Answer: pr.Answer,
				PromptIDs: tr.Prompts[i/c.GroupSize], Completion: text, CompletionIDs: comp, LogProbs: tr.OldLogP[i], Reward: tr.Rewards[i],
				RewardFailed: rollout.Failed(sc, pr, text)}
			st.RewardMean += tr.Rewards[i] / float64(len(tr.Completions))
			if sc.Correct(x) {
				st.SampleExact += 1 / float64(len(tr.Completions))
			}
			st.GenTokens += len(comp)
		}
		in, out := t.file("traces"), t.file("adapter")
		defer os.Remove(t.path(in))
		defer os.Remove(t.path(out))
		if err := WriteTraces(t.path(in), tr); err != nil {
			return err
		}
		resp, err := p.client.Step(ctx, &trainerv1.StepRequest{Traces: in, GroupSize: uint32(c.GroupSize), Out: out})
		if err != nil {
			return err
		}
		if b.hook != nil {
			b.hook("stepped", p.Pid(), b.sup.exchange)
		}
		if resp.Adapter != out || resp.Stats == nil {
			return fmt.Errorf("%w: step answered adapter %q (asked %q)", ErrGarbage, resp.Adapter, out)
		}
		s := resp.Stats
		for _, v := range []float64{s.Loss, s.Kl, s.ClipFrac, s.RatioMean, s.RatioStd, s.TokenRatioStd, s.LearningRate} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: step statistics are not finite (loss %v)", ErrGarbage, s.Loss)
			}
		}
		if next, err = ReadAdapter(t.path(out), t.adapter); err != nil {
			return err
		}
		st.Loss, st.KL, st.ClipFrac, st.RatioMean, st.RatioStd = s.Loss, s.Kl, s.ClipFrac, s.RatioMean, s.RatioStd
		st.TokenRatioStd, st.RatioMin, st.RatioMax = s.TokenRatioStd, s.RatioMin, s.RatioMax
		st.ZeroVar, st.LR, st.TrainTokens = int(s.ZeroVarGroups), s.LearningRate, int(s.TrainTokens)
		tm.Train = resp.Seconds
		return nil
	})
	if err != nil {
		return trainer.StepStats{}, err
	}
	tm.Wall = time.Since(t0).Seconds()
	set.Header.OptimizerReset, t.reset = t.reset, false
	t.adapter, t.step, t.timing, t.traces = next, k, tm, set
	return st, nil
}

// DType is the type the trainer's model is loaded and trained in
// (backend.TrainDType): what its deltas claim.
func (t *Trainer) DType() string { return t.dtype }

// Traces are the last step's traces, as sampled and scored.
func (t *Trainer) Traces() *trace.Set { return t.traces }

// Adapter is the last verified adapter.
func (t *Trainer) Adapter() *llama.Adapter { return t.adapter }

// StepCount is the number of steps taken.
func (t *Trainer) StepCount() int { return t.step }

// SetAdapter continues from a, keeping the process's optimiser state.
func (t *Trainer) SetAdapter(ctx context.Context, a *llama.Adapter) error {
	if !a.SameShape(t.adapter) {
		return fmt.Errorf("torch: SetAdapter with an adapter of another shape")
	}
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.call(ctx, t, func(ctx context.Context, p *proc) error {
		name := t.file("set")
		defer os.Remove(t.path(name))
		if err := WriteAdapter(t.path(name), a); err != nil {
			return err
		}
		_, err := p.client.SetAdapter(ctx, &trainerv1.SetAdapterRequest{Adapter: name})
		return err
	})
	if err != nil {
		return err
	}
	t.adapter = a.Clone()
	return nil
}

// Call runs f with a live process that has t loaded (restarting it once if
// it fails): for calls beyond the Trainer interface (Evaluate, tests).
func (t *Trainer) Call(ctx context.Context, f func(ctx context.Context, c trainerv1.TrainerServiceClient, exchange string) error) error {
	t.b.mu.Lock()
	defer t.b.mu.Unlock()
	return t.b.call(ctx, t, func(ctx context.Context, p *proc) error { return f(ctx, p.client, t.b.sup.exchange) })
}

// Evaluate decodes the held-out problems greedily in the process and
// scores them here.
func (t *Trainer) Evaluate(ctx context.Context) (accuracy, mean float64, err error) {
	probs := t.split.Eval
	sc := t.j.Config.Scorer()
	req := &trainerv1.EvaluateRequest{}
	maxNew := 0
	for _, p := range probs {
		pr, ans, err := task.Tokenize(t.j.Base.Tokenizer, p)
		if err != nil {
			return 0, 0, err
		}
		ids := make([]int32, len(pr))
		for i, v := range pr {
			ids[i] = int32(v)
		}
		req.Prompts = append(req.Prompts, &trainerv1.Prompt{Ids: ids})
		maxNew = max(maxNew, len(ans))
	}
	req.MaxNewTokens = uint32(maxNew)
	var resp *trainerv1.EvaluateResponse
	err = t.Call(ctx, func(ctx context.Context, c trainerv1.TrainerServiceClient, _ string) error {
		var err error
		resp, err = c.Evaluate(ctx, req)
		if err == nil && len(resp.Completions) != len(probs) {
			err = fmt.Errorf("%w: %d completions for %d prompts", ErrGarbage, len(resp.Completions), len(probs))
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	eos := t.j.Base.Weights.Cfg.EOS
	vocab := t.j.Base.Weights.Cfg.Vocab
	for i, comp := range resp.Completions {
		ids := make([]int, 0, len(comp.Ids))
		for _, v := range comp.Ids {
			if v < 0 || int(v) >= vocab || len(ids) >= maxNew {
				return 0, 0, fmt.Errorf("%w: evaluation completion %d", ErrGarbage, i)
			}
			ids = append(ids, int(v))
		}
		if n := len(ids); n > 0 && slices.Contains(eos, ids[n-1]) {
			ids = ids[:n-1]
		}
		text, err := t.j.Base.Tokenizer.Decode(ids, true)
		if err != nil {
			return 0, 0, err
		}
		x := reward.Sample{Prompt: probs[i].Prompt, Answer: probs[i].Answer, Completion: text}
		mean += sc.Score(x) / float64(len(probs))
		if sc.Correct(x) {
			accuracy += 1 / float64(len(probs))
		}
	}
	return accuracy, mean, nil
}

// Close forgets the trainer (the process stays for the next one).
func (t *Trainer) Close() error { return nil }
