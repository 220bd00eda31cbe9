// Package jobconf maps an orchestrator job onto the trainer and fixes
// the schedule both sides of the protocol compute from it: the worker trains
// by it, the orchestrator validates and replays by it. Everything here is a
// pure function of the job spec, so the two can never disagree.
//
// Schedule. Epochs are numbered from 1. Epoch e covers the global steps
// (e−1)·S+1 … e·S where S = steps_per_epoch; every aggregate_interval steps
// (a "sync") a worker submits its contribution — the change of its adapter
// since the sync began — as a signed delta, then ring-all-reduces it. The
// last sync of an epoch is not all-reduced: the orchestrator's merge of the
// epoch's deltas is the checkpoint every worker starts the next epoch from.
package jobconf

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/dataset"
	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/jobspec"
)

// BuiltinModel is the model name of the embedded base model.
const BuiltinModel = jobspec.BuiltinModel

// ErrJob reports a job the trainer cannot run on the base model at hand.
var ErrJob = errors.New("jobconf: job cannot run on this base model")

// Plan is everything a job fixes for training.
type Plan struct {
	Job           string
	Trainer       trainer.Config
	Epochs        int
	StepsPerEpoch int
	Interval      int // aggregate_interval
	// Base is the base model the plan was checked against, the one the
	// job trains (FromSpec's argument).
	Base *basemodel.Base
	// Backend is the training backend the job asks for: go, torch or any.
	Backend string
	// DType is the type the job asks workers to train in ("": any).
	DType string
	// OuterLR, OuterMomentum and OuterAdam are the job's outer optimiser
	// (NewOuter; OuterLR 0: the plain average).
	OuterLR, OuterMomentum float64
	OuterAdam              bool
	// MaxGradNorm is the job's bound G under plain SGD (ClipNorm; 0:
	// √params).
	MaxGradNorm float64
	// Envs are the environment servers the job's reward scores through
	// (its env terms; none for the built-in verifiers alone): a job scored
	// by a server is checked from traces, every backend (docs/traces.md).
	Envs []*envserver.Env
	// Validators is the verdicts per check the job asks of staked
	// validators (0: hanzod checks): every checked delta of such a job,
	// any backend, is checked from its traces by them (docs/validators.md).
	Validators int
}

// EnvReward says whether the job's reward comes (in part) from an
// environment server: its rewards cannot be replayed, only re-asked.
func (p Plan) EnvReward() bool { return len(p.Envs) > 0 }

// Serves reports whether a worker training with backend (go or torch) may
// take the plan's job.
func (p Plan) Serves(backend string) error {
	if p.Backend == "" || p.Backend == backend || p.Backend == "any" {
		if p.Backend == "" && backend != "go" {
			return fmt.Errorf("%w: the job trains with the go backend, this worker with %s", ErrJob, backend)
		}
		return nil
	}
	return fmt.Errorf("%w: the job trains with the %s backend, this worker with %s", ErrJob, p.Backend, backend)
}

// ServesDType reports whether a worker whose backend trains in dtype may
// take the plan's job: the job names no dtype, or that one; a backend
// whose dtype is "" follows the job (backend.TrainDType) in float32 or
// bfloat16.
func (p Plan) ServesDType(dtype string) error {
	if dtype == "" {
		if p.DType == "" || p.DType == Float32 || p.DType == BFloat16 {
			return nil
		}
		return fmt.Errorf("%w: the job trains in %s, which this worker's backend does not (float32 or bfloat16)", ErrJob, p.DType)
	}
	if p.DType != "" && p.DType != dtype {
		return fmt.Errorf("%w: the job trains in %s, this worker in %s (start it with --torch-dtype %s)", ErrJob, p.DType, dtype, p.DType)
	}
	return nil
}

// BuiltinGSPO is the built-in model's training profile written as a job's
// GSPO settings, with aggregate_interval interval: the GSPO keys of
// trainer.DefaultConfig, the settings the embedded toy model was tuned with
// (LoRA rank 8, alpha 16, learning rate 2e-3, 12-token sequences, no
// warm-up, decay or accumulation). gym up --data-parallel=false submits
// it (BuiltinGSPOFor) and examples/local-steps-job.yaml spells it out; gym
// up's default, BuiltinDataParallelGSPO, builds on it.
//
// It is deliberately not jobspec.DefaultGSPO, the seed's defaults for a
// real language model (rank 16, learning rate 2e-5, 8192 tokens, ...) that
// a job file without a gspo section gets: the built-in model does not learn
// its tasks with those. trainer.DefaultConfig is the one source of the
// built-in profile (gym train trains with it directly), jobspec.Fields the
// one source of a job's defaults; FromSpec maps this profile back onto
// exactly trainer.DefaultConfig.
func BuiltinGSPO(interval int) jobspec.GSPO {
	c := trainer.DefaultConfig()
	return jobspec.GSPO{
		ImportanceSamplingLevel: c.ImportanceSamplingLevel, Beta: c.Beta, GroupSize: c.GroupSize, AggregateInterval: interval,
		Use4Bit: c.Use4Bit, LoRARank: c.LoRARank, LoRAAlpha: c.LoRAAlpha, MaxSeqLen: c.MaxSeqLen,
		GradientAccumulationSteps: c.GradientAccumulationSteps, LearningRate: c.LearningRate, WarmupSteps: c.WarmupSteps,
		WeightDecay: c.WeightDecay, LoRATargets: strings.Join(c.LoRATargets, ","),
		OuterLR: BuiltinOuterLR(4),
	}
}

// BuiltinGSPOFor is the built-in local-steps profile for a job of
// workers workers, the one gym up --data-parallel=false submits:
// BuiltinGSPO(interval) with the inner and outer
// rates for that many workers (BuiltinLearningRate, BuiltinOuterLR). One
// worker gets BuiltinGSPO itself.
func BuiltinGSPOFor(interval, workers int) jobspec.GSPO {
	g := BuiltinGSPO(interval)
	g.LearningRate, g.OuterLR = BuiltinLearningRate(workers), BuiltinOuterLR(workers)
	return g
}

// BuiltinDataParallelGSPO is the built-in profile in synchronous
// data-parallel mode (docs/data-parallel.md), the one gym up
// submits by default: the workers step plain SGD at 1e-3
// (gspo.inner_optimizer sgd), the ring averages every step
// (aggregate_interval 1), and Adam at 1.5e-3 steps the average
// (gspo.outer_optimizer adam): AdamW on the averaged gradient, the update
// one worker on the whole batch would make, whatever the number of
// workers. One update per batch (num_iterations 1), so a worker's step is
// exactly the gradient; the outer Adam's state carries across epochs
// (Plan.CarriesOuter). The rates are the middle of the plateau the screen
// measured at four workers (gym bench quality-sim: outer rates 1e-3 to
// 2e-3 within a point of each other, 3e-3 overshooting). max_grad_norm 30
// bounds a contribution at 0.03, about 2.5 times the largest honest one
// measured (docs/data-parallel.md, "The norm bound").
func BuiltinDataParallelGSPO() jobspec.GSPO {
	g := BuiltinGSPO(1)
	g.InnerOptimizer, g.OuterOptimizer = "sgd", "adam"
	g.LearningRate, g.OuterLR, g.OuterMomentum, g.MaxGradNorm, g.NumIterations = 1e-3, 1.5e-3, 0, 30, 1
	return g
}

// BuiltinLearningRate is the built-in profile's inner (AdamW) learning
// rate for a job of workers workers: trainer.DefaultConfig's rate (the
// single worker's, 2e-3) × min(workers, 4)^¼, to three significant digits
// (2.38e-3 for two workers, 2.83e-3 from four on). A worker's batch is the
// single worker's split workers ways, so its gradient is noisier and
// AdamW's second moment larger: its normalised step is shorter, by up to
// √workers when the noise dominates the moment and not at all when the
// signal does. The mean of the workers' steps keeps that length, so the
// run moves slower than one worker on the whole batch; the fourth root is
// the geometric middle of the two regimes (the square-root scaling rule
// for Adam, Malladi et al. 2022, is the noise-dominated end). Above four
// workers the outer rate (BuiltinOuterLR) carries the rest: at eight, the
// inner rate × 8^¼ with the plain average did worse than × 4^¼ with the
// outer rate √2. Measured with gym bench quality's paired runs
// (docs/end-to-end.md, "Convergence").
func BuiltinLearningRate(workers int) float64 {
	lr := trainer.DefaultConfig().LearningRate * math.Pow(float64(min(max(workers, 1), 4)), 0.25)
	scale := math.Pow(10, 2-math.Floor(math.Log10(lr)))
	return math.Round(lr*scale) / scale
}

// BuiltinOuterLR is the built-in profile's outer learning rate for a job
// of workers workers, without momentum: √(workers/4), at least 1 (the
// plain average up to four workers), to two decimals. A worker's batch is
// the single worker's split workers ways; AdamW normalises each worker's
// noisier gradient, and the mean of the normalised updates is shorter than
// one worker's update on the whole batch. Up to four workers every rate
// above 1 did worse than the plain average in the screen; at eight the
// plain average fell 2–11 points behind one worker, which the rate narrows
// (docs/end-to-end.md, "Convergence"; measured with gym bench quality,
// where Nesterov momentum and larger rates did worse). It comes on top of
// the inner rate BuiltinLearningRate, which stops growing at four workers.
func BuiltinOuterLR(workers int) float64 {
	return math.Round(100*math.Max(1, math.Sqrt(float64(workers)/4))) / 100
}

// Check applies the trainer's own rules to a job file's spec
// (jobspec.ParseFile's check): hanzod would accept a job that breaks them
// and fail it once it ran. A job on another model than the built-in one
// passes (its base is not at hand to check against). base loads the
// built-in base model (basemodel.Builtin); it is called only for a job on
// it.
func Check(s jobspec.Spec, base func() (*basemodel.Base, error)) error {
	if s.Model != BuiltinModel {
		return nil
	}
	if _, byCID, _ := jobspec.DatasetCID(s.Dataset); byCID {
		return nil // its rows are not at hand to check against; the workers do
	}
	b, err := base()
	if err != nil {
		return err
	}
	if _, err := FromSpec("job", s, b); err != nil {
		msg := err.Error()
		for _, pre := range []string{ErrJob.Error() + ": ", trainer.ErrConfig.Error() + ": "} {
			msg = strings.TrimPrefix(msg, pre)
		}
		return fmt.Errorf("the trainer cannot run these settings on the built-in model: %s", msg)
	}
	return nil
}

// FromSpec returns the plan of job id with spec s (as accepted by hanzod)
// on base (parsed once by the caller), the model the job names: its
// configuration and tokenizer are what the trainer settings are checked
// against. It is FromSpecData without data: for a job on a built-in task.
func FromSpec(id string, s jobspec.Spec, base *basemodel.Base) (Plan, error) {
	return FromSpecData(id, s, base, nil)
}

// LoadData reads the dataset of spec s from path (its verified copy, a
// file or a directory) with the job's mapping.
func LoadData(path string, s jobspec.Spec) (*task.Data, error) {
	return dataset.Load(path, s.Data.Config())
}

// FromSpecData is FromSpec for a job whose dataset is named by CID: data
// is its rows (LoadData), nil for a built-in task. Rows whose prompt is a
// conversation get their Prompt rendered, in data, by the model's chat
// template. Every row's prompt and answer must tokenize and fit
// max_seq_len and the model's context.
func FromSpecData(id string, s jobspec.Spec, base *basemodel.Base, data *task.Data) (Plan, error) {
	if base == nil || base.Weights == nil || base.Tokenizer == nil {
		return Plan{}, errors.New("jobconf: FromSpec needs the base model")
	}
	if s.Model != base.Name {
		return Plan{}, fmt.Errorf("%w: the job trains model %q, this base model is %q", ErrJob, s.Model, base.Name)
	}
	_, byCID, err := jobspec.DatasetCID(s.Dataset)
	switch {
	case err != nil:
		return Plan{}, fmt.Errorf("%w: %v", ErrJob, err)
	case byCID && data == nil:
		return Plan{}, fmt.Errorf("%w: dataset %s is not loaded", ErrJob, s.Dataset)
	case !byCID && data != nil:
		return Plan{}, fmt.Errorf("%w: dataset %s is a built-in task, given rows", ErrJob, s.Dataset)
	}
	if data != nil && data.Chat() {
		// Rows whose prompt is a conversation are prompted through the
		// model's chat template (package chat, Base.RenderChat).
		if err := data.RenderChat(base.RenderChat); err != nil {
			return Plan{}, fmt.Errorf("%w: dataset %s: %v", ErrJob, s.Dataset, err)
		}
	}
	rs, err := s.RewardSet()
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrJob, err)
	}
	var envs []*envserver.Env
	if rs.HasEnv() {
		// Each plan talks to the job's servers with clients of its own,
		// dialled on first use (docs/environments.md).
		rs = rs.Bind(func(url string) reward.Env {
			e := envserver.NewEnv(context.Background(), url, envserver.DefaultConfig(), nil)
			envs = append(envs, e)
			return e
		})
	}
	c := trainerConfig(s)
	c.Data = data
	if s.Reward != "" || byCID {
		c.Reward = rs // nil otherwise: the trainer's default, the built-in tasks' partial credit
	}
	if data != nil {
		need, err := trainer.Need(base.Tokenizer, data.Train)
		if err == nil {
			var ne int
			ne, err = trainer.Need(base.Tokenizer, data.Eval)
			need = max(need, ne)
		}
		switch {
		case err != nil:
			return Plan{}, fmt.Errorf("%w: dataset %s: %v", ErrJob, s.Dataset, err)
		case need > c.MaxSeqLen:
			return Plan{}, fmt.Errorf("%w: dataset %s has a prompt and answer of %d tokens, gspo.max_seq_len is %d", ErrJob, s.Dataset, need, c.MaxSeqLen)
		case need > base.Weights.Cfg.MaxPositions:
			return Plan{}, fmt.Errorf("%w: dataset %s has a prompt and answer of %d tokens, the model's context is %d", ErrJob, s.Dataset, need, base.Weights.Cfg.MaxPositions)
		}
	}
	spe := s.StepsPerEpoch
	if spe == 0 {
		spe = s.GSPO.AggregateInterval
	}
	p := Plan{Job: id, Trainer: c, Epochs: s.Epochs, StepsPerEpoch: spe, Interval: s.GSPO.AggregateInterval, Base: base, Backend: s.TrainingBackend(), DType: s.DType,
		OuterLR: s.GSPO.OuterLR, OuterMomentum: s.GSPO.OuterMomentum, OuterAdam: s.GSPO.OuterAdam(), MaxGradNorm: s.GSPO.MaxGradNorm, Envs: envs, Validators: s.Validators}
	if p.Interval < 1 || spe%p.Interval != 0 {
		return Plan{}, fmt.Errorf("%w: steps_per_epoch %d must be a positive multiple of aggregate_interval %d", ErrJob, spe, p.Interval)
	}
	if err := c.Validate(base.Weights.Cfg, base.Tokenizer); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrJob, err)
	}
	return p, nil
}

// trainerConfig maps a job's settings onto the trainer's (unchecked).
func trainerConfig(s jobspec.Spec) trainer.Config {
	g := s.GSPO
	c := trainer.DefaultConfig()
	c.Task = s.Dataset
	c.Seed = s.Seed
	c.ImportanceSamplingLevel = g.ImportanceSamplingLevel
	c.Beta = g.Beta
	c.GroupSize = g.GroupSize
	c.AggregateInterval = g.AggregateInterval
	c.Use4Bit = g.Use4Bit
	c.LoRARank = g.LoRARank
	c.LoRAAlpha = g.LoRAAlpha
	c.MaxSeqLen = g.MaxSeqLen
	c.GradientAccumulationSteps = g.GradientAccumulationSteps
	c.LearningRate = g.LearningRate
	c.WarmupSteps = g.WarmupSteps
	c.WeightDecay = g.WeightDecay
	c.SGD = g.InnerSGD()
	c.NumIterations = g.Iterations()
	c.LoRATargets = g.Targets()
	c.PromptsPerStep = s.PromptsPerStep
	if c.PromptsPerStep == 0 {
		c.PromptsPerStep = int(jobspec.Fields.PromptsPerStep.Default) // a job's default, as hanzod documents it
	}
	spe := s.StepsPerEpoch
	if spe == 0 {
		spe = g.AggregateInterval
	}
	c.Steps = s.Epochs * spe
	return c
}

// Syncs is the number of syncs per epoch.
func (p Plan) Syncs() int { return p.StepsPerEpoch / p.Interval }

// FirstStep is the global step before epoch e's first step.
func (p Plan) FirstStep(epoch int) int { return (epoch - 1) * p.StepsPerEpoch }

// SyncStep is the global step at the end of sync k (1-based) of epoch e.
func (p Plan) SyncStep(epoch, k int) int { return p.FirstStep(epoch) + k*p.Interval }

// SyncOf returns the epoch and sync a delta's global step belongs to, and
// false when the step ends no sync of the job.
func (p Plan) SyncOf(step uint64) (epoch, k int, ok bool) {
	if step == 0 || step%uint64(p.Interval) != 0 || step > uint64(p.Epochs*p.StepsPerEpoch) {
		return 0, 0, false
	}
	s := int(step)
	epoch = (s-1)/p.StepsPerEpoch + 1
	return epoch, (s - p.FirstStep(epoch)) / p.Interval, true
}

// Samples is the number of completions a worker trains on in one sync.
func (p Plan) Samples() uint64 {
	return uint64(p.Interval * p.Trainer.PromptsPerStep * p.Trainer.GroupSize)
}

// ClipNorm is the bound C on the L2 norm of an honest contribution. AdamW
// moves a coordinate by at most about the learning rate per update
// (|m̂/√v̂| ≤ 1 with β1 = 0.9, β2 = 0.99), so a sync of `interval` steps of
// num_iterations updates each moves the adapter by at most
// lr·updates·√params. Honest workers clip to it before the ring (a no-op for
// them in practice); the ring refuses partial sums above r·C.
//
// An SGD update is lr × the gradient, which has no such bound of its own.
// Under SGD the job's gspo.max_grad_norm G takes √params' place: C bounds
// the mean gradient norm of the sync's updates by G, a gradient clip
// applied once per sync, which honest workers and every replay apply alike
// (docs/data-parallel.md, "The norm bound"). Without G it is √params, a
// root-mean-square of one per coordinate and update.
func (p Plan) ClipNorm(params int) float64 {
	c := p.Trainer
	updates := float64(p.Interval * c.NumIterations)
	g := math.Sqrt(float64(params))
	if c.SGD && p.MaxGradNorm > 0 {
		g = p.MaxGradNorm
	}
	return c.LearningRate * updates * g * (1 + c.WeightDecay)
}

// Worker is the data index of a node: the first 8 bytes of its public key.
// Problems a worker trains on are a pure function of (seed, worker, step).
func Worker(node string) (uint64, error) {
	if len(node) < 16 {
		return 0, fmt.Errorf("%w: node id %q too short", ErrJob, node)
	}
	return strconv.ParseUint(node[:16], 16, 64)
}

// Digest is the hex SHA3-256 of an adapter's tensors (llama.Digest): the
// base_checkpoint a delta names.
func Digest(a *llama.Adapter) string {
	d := llama.Digest(a.Views())
	return hex.EncodeToString(d[:])
}

// InitialAdapter is the adapter every worker starts epoch 1 from on a base
// of shape mc.
func (p Plan) InitialAdapter(mc llama.Config) (*llama.Adapter, error) {
	return trainer.InitialAdapter(mc, p.Trainer)
}

// Sub returns a − b tensor by tensor (the pseudo-gradient of a sync).
func Sub(a, b *llama.Adapter) *llama.Adapter {
	out := a.Clone()
	bt := b.Views()
	for i, t := range out.Views() {
		for j := range t.Data {
			t.Data[j] -= bt[i].Data[j]
		}
	}
	return out
}

// Flatten concatenates an adapter's tensors in order.
func Flatten(a *llama.Adapter) []float32 {
	var v []float32
	for _, t := range a.Views() {
		v = append(v, t.Data...)
	}
	return v
}

// AddFlat adds v (laid out as Flatten does) into a.
func AddFlat(a *llama.Adapter, v []float32) error {
	if len(v) != a.NumParams() {
		return fmt.Errorf("%w: vector of %d values for an adapter of %d", ErrJob, len(v), a.NumParams())
	}
	off := 0
	for _, t := range a.Views() {
		for j := range t.Data {
			t.Data[j] += v[off+j]
		}
		off += len(t.Data)
	}
	return nil
}

// Norm is the L2 norm of an adapter's values (float64 accumulation in
// Flatten order).
func Norm(a *llama.Adapter) float64 {
	var s float64
	for _, t := range a.Views() {
		for _, v := range t.Data {
			s += float64(v) * float64(v)
		}
	}
	return math.Sqrt(s)
}

// Clip scales a in place so that its norm is at most bound and returns the
// factor applied (1: unchanged). Honest workers clip every contribution
// with it; the orchestrator's replay does the same.
func Clip(a *llama.Adapter, bound float64) float64 {
	n := Norm(a)
	if n <= bound || n == 0 {
		return 1
	}
	f := float32(bound / n)
	for _, t := range a.Views() {
		for j := range t.Data {
			t.Data[j] *= f
		}
	}
	return float64(f)
}

// ClaimedLoss is the loss a worker claims for a sync: the mean of its
// steps' losses, summed in step order.
func ClaimedLoss(losses []float64) float64 {
	var s float64
	for _, l := range losses {
		s += l
	}
	if len(losses) == 0 {
		return 0
	}
	return s / float64(len(losses))
}
