// Package trainer runs GSPO on LoRA adapters of a base model (package
// llama): for each step it draws the step's problems (a pure function of
// job seed, worker and step), samples G completions per prompt recording
// π_old, scores their decoded text with the task's verifiable reward,
// evaluates the gspo objective against the frozen base as reference,
// back-propagates into the adapter and applies AdamW. Everything is
// deterministic and independent of the thread count: Replay recomputes any
// step bit for bit, which is what the orchestrator's spot-checks rely on.
//
// The trainer never reads the clock; callers time steps themselves.
package trainer

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/gspo"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/optim"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
)

// Trainer is one worker's training state.
type Trainer struct {
	cfg    Config
	obj    gspo.Config
	worker uint64
	split  *task.Split
	tok    *tokenizer.Tokenizer
	policy *llama.Model // base + adapter
	ref    *llama.Model // base alone (frozen reference)
	opt    *optim.AdamW
	step   int
	last   *rollout.Rollouts // the last step's
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

// New returns a trainer for worker starting from base weights (whose
// tokenizer is tok) with a freshly initialised adapter. threads only
// changes the speed, never the results.
func New(base *llama.Weights, tok *tokenizer.Tokenizer, c Config, worker uint64, threads int) (*Trainer, error) {
	if err := c.Validate(base.Cfg, tok); err != nil {
		return nil, err
	}
	a, err := InitialAdapter(base.Cfg, c)
	if err != nil {
		return nil, err
	}
	return resume(base, tok, c, worker, threads, State{Adapter: a})
}

// InitialAdapter is the adapter a run of c starts from on a model of shape
// mc: lora_A drawn from the job seed, lora_B zero.
func InitialAdapter(mc llama.Config, c Config) (*llama.Adapter, error) {
	ts, err := c.targets()
	if err != nil {
		return nil, err
	}
	return llama.InitAdapter(mc, c.LoRARank, c.LoRAAlpha, ts, c.Seed)
}

// State is what a worker carries from one step to the next.
type State struct {
	Step    int // training steps taken
	Adapter *llama.Adapter
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
func Resume(base *llama.Weights, tok *tokenizer.Tokenizer, c Config, worker uint64, threads int, s State) (*Trainer, error) {
	if err := c.Validate(base.Cfg, tok); err != nil {
		return nil, err
	}
	return resume(base, tok, c, worker, threads, s)
}

func resume(base *llama.Weights, tok *tokenizer.Tokenizer, c Config, worker uint64, threads int, s State) (*Trainer, error) {
	obj, _ := c.objective()
	split, err := c.Split(c.EvalSize)
	if err != nil {
		return nil, err
	}
	if s.Adapter == nil {
		return nil, fmt.Errorf("%w: state without an adapter", ErrConfig)
	}
	if want, err := InitialAdapter(base.Cfg, c); err != nil || !want.SameShape(s.Adapter) {
		return nil, fmt.Errorf("%w: the state's adapter does not have the shape lora_rank %d, lora_alpha %v on %v give", ErrConfig, c.LoRARank, c.LoRAAlpha, c.LoRATargets)
	}
	a := s.Adapter.Clone()
	policy, err := llama.New(base, a, threads)
	if err != nil {
		return nil, err
	}
	ref, err := llama.New(base, nil, threads)
	if err != nil {
		return nil, err
	}
	ts := a.Views()
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
		split: split, tok: tok,
		policy: policy, ref: ref,
		opt: opt, step: s.Step,
	}, nil
}

// Rebase returns a trainer that continues t's state (step, update count,
// moments) from adapter a instead of t's own: what a worker does with the
// ring's result at a sync. It is Resume(…, State with a) bit for bit,
// without checking the configuration again (Resume's check tokenizes the
// task's problems; t's configuration passed it already), which a job
// syncing every step would pay at every step.
func (t *Trainer) Rebase(a *llama.Adapter) (*Trainer, error) {
	st := t.State()
	st.Adapter = a
	return resume(t.policy.W, t.tok, t.cfg, t.worker, t.policy.Threads, st)
}

// Adapter returns the current adapter (not a copy).
func (t *Trainer) Adapter() *llama.Adapter { return t.policy.A }

// StepCount is the number of steps taken.
func (t *Trainer) StepCount() int { return t.step }

// Rollouts returns what the last step trained on (nil before the first):
// the rollouts it sampled, or those Train was given. The caller must not
// change them.
func (t *Trainer) Rollouts() *rollout.Rollouts { return t.last }

// Batch returns the problems of training step k (counted from 1 over the
// whole job) of this trainer's worker: what Step samples for that step, and
// so the prompts a delta of that step must have used.
func (t *Trainer) Batch(k int) []task.Problem {
	return t.split.Batch(t.cfg.Seed, t.worker, uint64(k), t.cfg.PromptsPerStep)
}

// Evaluate returns greedy held-out performance of the current policy.
func (t *Trainer) Evaluate() (rollout.Score, error) {
	return rollout.Evaluate(t.policy, t.tok, t.split.Eval, t.cfg.Reward)
}

// EvaluateBase returns greedy held-out performance of the base model.
func (t *Trainer) EvaluateBase() (rollout.Score, error) {
	return rollout.Evaluate(t.ref, t.tok, t.split.Eval, t.cfg.Reward)
}

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
	problems := t.Batch(k)
	ro, err := rollout.Generate(t.policy, t.tok, problems, c.GroupSize, c.sampling(), prng.New(c.Seed, task.StreamSample, t.worker, uint64(k)))
	if err != nil {
		return StepStats{}, err
	}
	st, err := t.train(ro)
	if err != nil {
		return StepStats{}, err
	}
	st.Step, st.SyncDue = k, k%c.AggregateInterval == 0
	t.step, t.last = k, ro
	return st, nil
}

// StepEpisodes is Step for a multi-turn task: it plays G episodes of each
// of the step's problems against env (package episode, with ec: the chat
// template, tool-call format and limits) and trains on the model's tokens
// of them (rollout.FromEpisodes: the environment's turns are context, a
// group with an episode the environment failed is left out, excluded
// says which). Episode g of problem p is session
// "w<worker>-s<step>-p<p>-g<g>" given the problem's prompt at /reset, its
// replies sampled from prng.New(seed, "samp", worker, step, p·G+g): a pure
// function of the step and the environment's answers, so the step
// replays against the episodes' records (episode.Transcripts) without
// the environment. The episodes are in Rollouts().Episodes. Episodes are
// played one after another.
func (t *Trainer) StepEpisodes(ctx context.Context, env episode.Env, ec episode.Config) (StepStats, []bool, error) {
	if err := ctx.Err(); err != nil {
		return StepStats{}, nil, err
	}
	c := t.cfg
	k := t.step + 1
	problems := t.Batch(k)
	eps := make([]*episode.Episode, 0, len(problems)*c.GroupSize)
	for p, pr := range problems {
		for g := range c.GroupSize {
			s := &rollout.Sampler{Model: t.policy, Cfg: c.sampling(), RNG: prng.New(c.Seed, task.StreamSample, t.worker, uint64(k), uint64(p*c.GroupSize+g))}
			e, err := episode.Play(ctx, ec, s, env, fmt.Sprintf("w%x-s%d-p%d-g%d", t.worker, k, p, g), pr.Prompt)
			if err != nil {
				return StepStats{}, nil, err
			}
			eps = append(eps, e)
		}
	}
	ro, excluded, err := rollout.FromEpisodes(problems, c.GroupSize, eps)
	if err != nil {
		return StepStats{}, nil, err
	}
	st, err := t.train(ro)
	if err != nil {
		return StepStats{}, nil, err
	}
	st.Step, st.SyncDue = k, k%c.AggregateInterval == 0
	t.step, t.last = k, ro
	return st, excluded, nil
}

// Train runs the optimiser part of a step on rollouts sampled elsewhere
// (by another backend, or by a test): the reference pass, then
// num_iterations updates, exactly as Step does after sampling. It counts
// as a step. ro.Rewards must be set; ro.Exact may be nil.
func (t *Trainer) Train(ctx context.Context, ro *rollout.Rollouts) (StepStats, error) {
	if err := ctx.Err(); err != nil {
		return StepStats{}, err
	}
	if err := t.checkRollouts(ro); err != nil {
		return StepStats{}, err
	}
	st, err := t.train(ro)
	if err != nil {
		return StepStats{}, err
	}
	t.step++
	t.last = ro
	st.Step, st.SyncDue = t.step, t.step%t.cfg.AggregateInterval == 0
	return st, nil
}

// Gradient returns the loss and the adapter gradient of the first pass
// of a step on ro (the reference pass included), without changing the
// trainer: what a backend's step computes before its first update.
func (t *Trainer) Gradient(ro *rollout.Rollouts) (float64, *llama.Adapter, error) {
	if err := t.checkRollouts(ro); err != nil {
		return 0, nil, err
	}
	refLogP, _, err := t.refPass(ro)
	if err != nil {
		return 0, nil, err
	}
	c := t.cfg
	micro := c.PromptsPerStep / c.GradientAccumulationSteps * c.GroupSize
	grad := t.policy.A.Zeroed()
	var loss float64
	parts := float64(ro.N() / micro)
	for lo := 0; lo < ro.N(); lo += micro {
		s, _, err := t.microBatch(ro, refLogP, lo, lo+micro, grad, float32(1/parts))
		if err != nil {
			return 0, nil, err
		}
		loss += s.Loss / parts
	}
	return loss, grad, nil
}

// checkRollouts reports rollouts Train cannot use: prompts_per_step
// groups of group_size completions, token ids in the vocabulary.
func (t *Trainer) checkRollouts(ro *rollout.Rollouts) error {
	vocab := t.policy.W.Cfg.Vocab
	if ro == nil || ro.G != t.cfg.GroupSize || len(ro.Prompts) != t.cfg.PromptsPerStep || len(ro.Completions) != len(ro.Prompts)*ro.G ||
		len(ro.OldLogP) != len(ro.Completions) || len(ro.Rewards) != len(ro.Completions) {
		return fmt.Errorf("%w: malformed rollouts", ErrConfig)
	}
	if ro.Mask != nil && len(ro.Mask) != len(ro.Completions) {
		return fmt.Errorf("%w: %d mask rows for %d rollouts", ErrConfig, len(ro.Mask), len(ro.Completions))
	}
	for i, comp := range ro.Completions {
		if len(comp) == 0 || len(ro.OldLogP[i]) != len(comp) || len(ro.Prompts[i/ro.G]) == 0 {
			return fmt.Errorf("%w: rollout %d is empty or its log-probabilities do not match", ErrConfig, i)
		}
		if ro.Mask != nil && len(ro.Mask[i]) != len(comp) {
			return fmt.Errorf("%w: rollout %d's mask does not match its tokens", ErrConfig, i)
		}
		for _, id := range append(slices.Clone(ro.Prompts[i/ro.G]), comp...) {
			if id < 0 || id >= vocab {
				return fmt.Errorf("%w: rollout %d has token %d outside the vocabulary", ErrConfig, i, id)
			}
		}
	}
	return nil
}

// refPass is the reference log-probabilities of ro (nil when β is 0) and
// the positions it ran.
func (t *Trainer) refPass(ro *rollout.Rollouts) ([][]float64, int, error) {
	if t.cfg.Beta == 0 {
		return nil, 0, nil
	}
	lb, err := t.logProbs(t.ref, ro, 0, ro.N(), false)
	if err != nil {
		return nil, 0, err
	}
	return lb.logP, lb.tokens, nil
}

// train is a step after sampling: statistics of the samples, the
// reference pass, num_iterations optimiser updates.
func (t *Trainer) train(ro *rollout.Rollouts) (StepStats, error) {
	c := t.cfg
	st := StepStats{GenTokens: ro.Tokens()}
	for i := range ro.Rewards {
		st.RewardMean += ro.Rewards[i] / float64(ro.N())
		if ro.Exact != nil && ro.Exact[i] {
			st.SampleExact += 1 / float64(ro.N())
		}
	}
	refLogP, n, err := t.refPass(ro)
	if err != nil {
		return StepStats{}, err
	}
	st.TrainTokens += n
	params := tensorsData(t.policy.A.Views())
	micro := c.PromptsPerStep / c.GradientAccumulationSteps * c.GroupSize
	passes := float64(c.NumIterations * c.GradientAccumulationSteps)
	st.RatioMin, st.RatioMax = math.Inf(1), math.Inf(-1)
	for it := 0; it < c.NumIterations; it++ {
		grad := t.policy.A.Zeroed()
		for lo := 0; lo < ro.N(); lo += micro {
			s, tokens, err := t.microBatch(ro, refLogP, lo, lo+micro, grad, 1/float32(c.GradientAccumulationSteps))
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
			st.TrainTokens += tokens
		}
		lr, err := t.opt.Update(params, tensorsData(grad.Views()))
		if err != nil {
			return StepStats{}, err
		}
		st.LR = lr
	}
	return st, nil
}

func tensorsData(ts []llama.AdapterTensor) [][]float32 {
	out := make([][]float32, len(ts))
	for i, x := range ts {
		out[i] = x.Data
	}
	return out
}

// lpBatch is a forward pass over sequences of a rollout: each sequence is
// its prompt and completion without the last token, right-padded to the
// longest (causal attention: padding after a position cannot change it).
type lpBatch struct {
	act     *llama.Activations // kept for the backward pass (nil for the reference)
	scaled  []float32          // logits / temperature [n·T, V]
	targets []int              // the completion token each row predicts, -1 elsewhere
	rows    [][]int            // per sequence, the rows of its completion tokens
	logP    [][]float64        // log softmax(logits/T) of each completion token
	tokens  int                // positions run through the model (padding excluded)
}

// logProbs runs md over sequences [lo, hi) of ro and returns the
// temperature-scaled log-probability of every completion token.
func (t *Trainer) logProbs(md *llama.Model, ro *rollout.Rollouts, lo, hi int, keep bool) (*lpBatch, error) {
	n := hi - lo
	T := 0
	for i := lo; i < hi; i++ {
		T = max(T, len(ro.Prompts[i/ro.G])+len(ro.Completions[i])-1)
	}
	tokens := make([]int, n*T) // padding: token 0
	lb := &lpBatch{targets: make([]int, n*T), rows: make([][]int, n), logP: make([][]float64, n)}
	for i := range lb.targets {
		lb.targets[i] = -1
	}
	for s := range n {
		prompt, comp := ro.Prompts[(lo+s)/ro.G], ro.Completions[lo+s]
		seq := append(append(tokens[s*T:s*T], prompt...), comp[:len(comp)-1]...)
		lb.tokens += len(seq)
		for a, tok := range comp {
			r := s*T + len(prompt) - 1 + a
			lb.targets[r] = tok
			lb.rows[s] = append(lb.rows[s], r)
		}
	}
	var logits []float32
	if keep {
		act, err := md.Forward(tokens, n, T)
		if err != nil {
			return nil, err
		}
		lb.act, logits = act, act.Logits
	} else {
		var err error
		if logits, err = md.Logits(tokens, n, T); err != nil {
			return nil, err
		}
	}
	invT := float32(1 / t.cfg.Temperature)
	lb.scaled = logits
	if invT != 1 {
		lb.scaled = make([]float32, len(logits))
		for i, v := range logits {
			lb.scaled[i] = v * invT
		}
	}
	lp, err := llama.TokenLogProbs(md.Threads, lb.scaled, md.W.Cfg.Vocab, lb.targets)
	if err != nil {
		return nil, err
	}
	for s, rows := range lb.rows {
		lb.logP[s] = make([]float64, len(rows))
		for a, r := range rows {
			lb.logP[s][a] = float64(lp[r])
		}
	}
	return lb, nil
}

// microBatch evaluates the objective on sequences [lo, hi) (whole groups)
// and adds weight·gradient to grad. It returns the objective's statistics
// and the number of positions it ran through the model.
func (t *Trainer) microBatch(ro *rollout.Rollouts, refLogP [][]float64, lo, hi int, grad *llama.Adapter, weight float32) (gspo.Stats, int, error) {
	lb, err := t.logProbs(t.policy, ro, lo, hi, true)
	if err != nil {
		return gspo.Stats{}, 0, err
	}
	b := gspo.Batch{G: ro.G, Rewards: ro.Rewards[lo:hi], LogP: lb.logP, OldLogP: make([][]float64, hi-lo)}
	for i := range b.OldLogP {
		b.OldLogP[i] = make([]float64, len(ro.OldLogP[lo+i]))
		for a, v := range ro.OldLogP[lo+i] {
			b.OldLogP[i][a] = float64(v)
		}
	}
	if refLogP != nil {
		b.RefLogP = refLogP[lo:hi]
	}
	if ro.Mask != nil {
		b.Mask = ro.Mask[lo:hi]
	}
	res, err := gspo.Compute(t.obj, b)
	if err != nil {
		return gspo.Stats{}, 0, err
	}
	// ∂loss/∂z = ∂loss/∂lp · ∂lp/∂(z/T) / T at each completion position.
	invT := float32(1 / t.cfg.Temperature)
	dLogP := make([]float32, len(lb.targets))
	for s, rows := range lb.rows {
		for a, r := range rows {
			dLogP[r] = weight * float32(res.DLogP[s][a]) * invT
		}
	}
	dl, err := llama.TokenLogProbsBackward(t.policy.Threads, lb.scaled, t.policy.W.Cfg.Vocab, lb.targets, dLogP)
	if err != nil {
		return gspo.Stats{}, 0, err
	}
	if err := t.policy.Backward(lb.act, dl, grad); err != nil {
		return gspo.Stats{}, 0, err
	}
	return res.Stats, lb.tokens, nil
}

// Replay recomputes a worker's run from the base weights: it trains steps 1
// to step with config c and returns the loss claimed at that step and the
// adapter after it. The result is bit-for-bit what the worker produced, on
// any thread count.
func Replay(ctx context.Context, base *llama.Weights, tok *tokenizer.Tokenizer, c Config, worker uint64, step int, threads int) (float64, *llama.Adapter, error) {
	if step < 1 {
		return 0, nil, fmt.Errorf("%w: replay of step %d", ErrConfig, step)
	}
	t, err := New(base, tok, c, worker, threads)
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
func ReplayStep(ctx context.Context, base *llama.Weights, tok *tokenizer.Tokenizer, c Config, worker uint64, s State, threads int) (float64, *llama.Adapter, error) {
	t, err := Resume(base, tok, c, worker, threads, s)
	if err != nil {
		return 0, nil, err
	}
	st, err := t.Step(ctx)
	if err != nil {
		return 0, nil, err
	}
	return st.Loss, t.Adapter().Clone(), nil
}
