// Package trainer runs GSPO on LoRA adapters of the built-in model: for each
// step it draws the step's problems (a pure function of job seed, worker and
// step), samples G completions per prompt recording π_old, scores them with
// the task's verifiable reward, evaluates the gspo objective against the
// frozen base as reference, back-propagates into the adapter and applies
// AdamW. Everything is deterministic: Replay recomputes any step bit for bit,
// which is what the orchestrator's spot-checks rely on.
//
// The trainer never reads the clock; callers time steps themselves.
package trainer

import (
	"context"
	"fmt"
	"math"

	"github.com/zooai/gym/gspo"
	"github.com/zooai/gym/model"
	"github.com/zooai/gym/optim"
	"github.com/zooai/gym/prng"
	"github.com/zooai/gym/rollout"
	"github.com/zooai/gym/task"
)

// Trainer is one worker's training state.
type Trainer struct {
	cfg    Config
	obj    gspo.Config
	worker uint64
	split  *task.Split
	policy *model.Model // base + adapter
	ref    *model.Model // base alone (frozen reference)
	opt    *optim.AdamW
	step   int
}

// StepStats describe one optimiser step.
type StepStats struct {
	Step        int     `json:"step"`
	RewardMean  float64 `json:"reward_mean"`  // mean partial-credit reward of the samples
	SampleExact float64 `json:"sample_exact"` // fraction of samples that were exactly right
	Loss        float64 `json:"loss"`         // mean over micro-batches and iterations: the claimed loss
	KL          float64 `json:"kl"`
	ClipFrac    float64 `json:"clip_frac"`
	RatioMean   float64 `json:"ratio_mean"`
	RatioStd    float64 `json:"ratio_std"`
	// TokenRatioStd is the spread of per-token ratios at either level.
	TokenRatioStd float64 `json:"token_ratio_std"`
	RatioMin      float64 `json:"ratio_min"`
	RatioMax      float64 `json:"ratio_max"`
	ZeroVar       int     `json:"zero_var_groups"`
	LR            float64 `json:"lr"`
	// Token counts: generated completion tokens, and tokens run through
	// forward and backward passes (policy and reference).
	GenTokens   int  `json:"gen_tokens"`
	TrainTokens int  `json:"train_tokens"`
	SyncDue     bool `json:"sync_due"` // step is a multiple of aggregate_interval
}

// New returns a trainer for worker starting from base weights with a freshly
// initialised adapter. threads only changes the speed, never the results.
func New(base *model.Weights, c Config, worker uint64, threads int) (*Trainer, error) {
	if err := c.Validate(base.Cfg); err != nil {
		return nil, err
	}
	lc, _ := c.lora(base.Cfg)
	a, err := model.InitAdapter(base.Cfg, lc, c.Seed)
	if err != nil {
		return nil, err
	}
	return resume(base, c, worker, threads, State{Adapter: a})
}

// State is what a worker carries from one step to the next.
type State struct {
	Step    int // training steps taken
	Adapter *model.Adapter
	Updates int         // optimiser updates applied (num_iterations per step)
	M, V    [][]float32 // AdamW moments, one per adapter tensor; nil at step 0
}

// State returns a deep copy of the trainer's current state.
func (t *Trainer) State() State {
	s := State{Step: t.step, Adapter: t.policy.A.Clone(), Updates: t.opt.Step}
	for i := range t.opt.M {
		s.M = append(s.M, append([]float32(nil), t.opt.M[i]...))
		s.V = append(s.V, append([]float32(nil), t.opt.V[i]...))
	}
	return s
}

// Resume returns a trainer continuing from s (as returned by State).
func Resume(base *model.Weights, c Config, worker uint64, threads int, s State) (*Trainer, error) {
	if err := c.Validate(base.Cfg); err != nil {
		return nil, err
	}
	return resume(base, c, worker, threads, s)
}

func resume(base *model.Weights, c Config, worker uint64, threads int, s State) (*Trainer, error) {
	obj, _ := c.objective()
	tk, _ := task.Lookup(c.Task)
	a := s.Adapter.Clone()
	ts := a.Tensors()
	sizes := make([]int, len(ts))
	for i, x := range ts {
		sizes[i] = len(x.Data)
	}
	opt, err := optim.New(c.optimizer(), sizes)
	if err != nil {
		return nil, err
	}
	if s.M != nil {
		if len(s.M) != len(sizes) || len(s.V) != len(sizes) {
			return nil, fmt.Errorf("%w: state has %d moment slices, adapter %d tensors", ErrConfig, len(s.M), len(sizes))
		}
		for i := range sizes {
			if len(s.M[i]) != sizes[i] || len(s.V[i]) != sizes[i] {
				return nil, fmt.Errorf("%w: moment %d has the wrong size", ErrConfig, i)
			}
			copy(opt.M[i], s.M[i])
			copy(opt.V[i], s.V[i])
		}
	}
	opt.Step = s.Updates
	return &Trainer{
		cfg: c, obj: obj, worker: worker,
		split:  task.NewSplit(tk, c.EvalSize),
		policy: &model.Model{W: base, A: a, Threads: threads},
		ref:    &model.Model{W: base, Threads: threads},
		opt:    opt, step: s.Step,
	}, nil
}

// Adapter returns the current adapter (not a copy).
func (t *Trainer) Adapter() *model.Adapter { return t.policy.A }

// StepCount is the number of steps taken.
func (t *Trainer) StepCount() int { return t.step }

// Evaluate returns greedy held-out performance of the current policy.
func (t *Trainer) Evaluate() (rollout.Score, error) { return rollout.Evaluate(t.policy, t.split.Eval) }

// EvaluateBase returns greedy held-out performance of the base model.
func (t *Trainer) EvaluateBase() (rollout.Score, error) { return rollout.Evaluate(t.ref, t.split.Eval) }

// Step runs one training step: sampling, num_iterations optimiser updates.
// ctx is checked before the step starts; a started step runs to completion
// (well under a second with the defaults), so the state never holds half a
// step.
func (t *Trainer) Step(ctx context.Context) (StepStats, error) {
	if err := ctx.Err(); err != nil {
		return StepStats{}, err
	}
	c := t.cfg
	k := t.step + 1
	problems := t.split.Batch(c.Seed, t.worker, uint64(k), c.PromptsPerStep)
	ro, err := rollout.Generate(t.policy, problems, c.GroupSize, c.sampling(), prng.New(c.Seed, task.StreamSample, t.worker, uint64(k)))
	if err != nil {
		return StepStats{}, err
	}
	st := StepStats{Step: k, GenTokens: ro.N() * ro.AnswerLen, SyncDue: k%c.AggregateInterval == 0}
	for i := range ro.Rewards {
		st.RewardMean += ro.Rewards[i] / float64(ro.N())
		if ro.Exact[i] {
			st.SampleExact += 1 / float64(ro.N())
		}
	}
	var refLogP [][]float64
	if c.Beta > 0 {
		if refLogP, _, err = t.logProbs(t.ref, ro, 0, ro.N()); err != nil {
			return StepStats{}, err
		}
		st.TrainTokens += ro.N() * (ro.PromptLen + ro.AnswerLen - 1)
	}
	params := tensorsData(t.policy.A.Tensors())
	micro := c.PromptsPerStep / c.GradientAccumulationSteps * c.GroupSize
	passes := float64(c.NumIterations * c.GradientAccumulationSteps)
	st.RatioMin, st.RatioMax = math.Inf(1), math.Inf(-1)
	for it := 0; it < c.NumIterations; it++ {
		grad := t.policy.A.ZeroLike()
		for lo := 0; lo < ro.N(); lo += micro {
			s, err := t.microBatch(ro, refLogP, lo, lo+micro, grad, 1/float32(c.GradientAccumulationSteps))
			if err != nil {
				return StepStats{}, err
			}
			st.Loss += s.Loss / passes
			st.KL += s.KL / passes
			st.ClipFrac += s.ClipFrac / passes
			st.RatioMean += s.RatioMean / passes
			st.RatioStd += s.RatioStd / passes
			st.TokenRatioStd += s.TokenRatioStd / passes
			st.RatioMin = math.Min(st.RatioMin, s.RatioMin)
			st.RatioMax = math.Max(st.RatioMax, s.RatioMax)
			if it == 0 {
				st.ZeroVar += s.ZeroVarGroups
			}
			st.TrainTokens += micro * (ro.PromptLen + ro.AnswerLen - 1)
		}
		lr, err := t.opt.Update(params, tensorsData(grad.Tensors()))
		if err != nil {
			return StepStats{}, err
		}
		st.LR = lr
	}
	t.step = k
	return st, nil
}

func tensorsData(ts []model.Tensor) [][]float32 {
	out := make([][]float32, len(ts))
	for i, x := range ts {
		out[i] = x.Data
	}
	return out
}

// logProbs runs md over sequences [lo, hi) of ro and returns the
// temperature-scaled log-probability of every completion token, with the
// activations and the softmax probabilities for the backward pass.
func (t *Trainer) logProbs(md *model.Model, ro *rollout.Rollouts, lo, hi int) ([][]float64, *lpCache, error) {
	T := ro.PromptLen + ro.AnswerLen
	in := T - 1
	n := hi - lo
	tokens := make([]int, n*in)
	for i := 0; i < n; i++ {
		copy(tokens[i*in:(i+1)*in], ro.Tokens[(lo+i)*T:(lo+i)*T+in])
	}
	act, err := md.Forward(tokens, n, in)
	if err != nil {
		return nil, nil, err
	}
	Vo := md.W.Cfg.Vocab
	invT := float32(1 / t.cfg.Temperature)
	out := make([][]float64, n)
	cache := &lpCache{act: act, probs: make([]float32, n*ro.AnswerLen*Vo), in: in}
	scaled := make([]float32, Vo)
	lp := make([]float32, Vo)
	for i := 0; i < n; i++ {
		out[i] = make([]float64, ro.AnswerLen)
		for a := 0; a < ro.AnswerLen; a++ {
			row := (i*in + ro.PromptLen - 1 + a) * Vo
			for j, v := range act.Logits[row : row+Vo] {
				scaled[j] = v * invT
			}
			model.LogSoftmax(lp, scaled)
			tok := ro.Tokens[(lo+i)*T+ro.PromptLen+a]
			out[i][a] = float64(lp[tok])
			pr := cache.probs[(i*ro.AnswerLen+a)*Vo:]
			for j := range lp {
				pr[j] = float32(math.Exp(float64(lp[j])))
			}
		}
	}
	return out, cache, nil
}

type lpCache struct {
	act   *model.Activations
	probs []float32 // softmax(logits/T) at each completion position
	in    int
}

// microBatch evaluates the objective on sequences [lo, hi) (whole groups)
// and adds weight·gradient to grad.
func (t *Trainer) microBatch(ro *rollout.Rollouts, refLogP [][]float64, lo, hi int, grad *model.Adapter, weight float32) (gspo.Stats, error) {
	lp, cache, err := t.logProbs(t.policy, ro, lo, hi)
	if err != nil {
		return gspo.Stats{}, err
	}
	al := ro.AnswerLen
	b := gspo.Batch{G: ro.G, Rewards: ro.Rewards[lo:hi], LogP: lp, OldLogP: make([][]float64, hi-lo)}
	for i := range b.OldLogP {
		b.OldLogP[i] = make([]float64, al)
		for a := 0; a < al; a++ {
			b.OldLogP[i][a] = float64(ro.OldLogP[(lo+i)*al+a])
		}
	}
	if refLogP != nil {
		b.RefLogP = refLogP[lo:hi]
	}
	res, err := gspo.Compute(t.obj, b)
	if err != nil {
		return gspo.Stats{}, err
	}
	// ∂loss/∂z_j = ∂loss/∂lp · (1[j = token] − p_j)/T at each completion position.
	Vo := t.policy.W.Cfg.Vocab
	T := ro.PromptLen + al
	invT := float32(1 / t.cfg.Temperature)
	dl := make([]float32, len(cache.act.Logits))
	for i := 0; i < hi-lo; i++ {
		for a := 0; a < al; a++ {
			g := weight * float32(res.DLogP[i][a]) * invT
			if g == 0 {
				continue
			}
			row := (i*cache.in + ro.PromptLen - 1 + a) * Vo
			pr := cache.probs[(i*al+a)*Vo : (i*al+a+1)*Vo]
			for j, p := range pr {
				dl[row+j] = -g * p
			}
			dl[row+ro.Tokens[(lo+i)*T+ro.PromptLen+a]] += g
		}
	}
	if err := t.policy.Backward(cache.act, dl, nil, grad); err != nil {
		return gspo.Stats{}, err
	}
	return res.Stats, nil
}

// Replay recomputes a worker's run from the base weights: it trains steps 1
// to step with config c and returns the loss claimed at that step and the
// adapter after it. The result is bit-for-bit what the worker produced, on
// any thread count.
func Replay(ctx context.Context, base *model.Weights, c Config, worker uint64, step int, threads int) (float64, *model.Adapter, error) {
	if step < 1 {
		return 0, nil, fmt.Errorf("%w: replay of step %d", ErrConfig, step)
	}
	t, err := New(base, c, worker, threads)
	if err != nil {
		return 0, nil, err
	}
	var st StepStats
	for t.step < step {
		if st, err = t.Step(ctx); err != nil {
			return 0, nil, err
		}
	}
	return st.Loss, t.Adapter().Clone(), nil
}

// ReplayStep recomputes the single step that follows state s: what a
// spot-check does with the checkpoint a worker started the step from.
func ReplayStep(ctx context.Context, base *model.Weights, c Config, worker uint64, s State, threads int) (float64, *model.Adapter, error) {
	t, err := Resume(base, c, worker, threads, s)
	if err != nil {
		return 0, nil, err
	}
	st, err := t.Step(ctx)
	if err != nil {
		return 0, nil, err
	}
	return st.Loss, t.Adapter().Clone(), nil
}
