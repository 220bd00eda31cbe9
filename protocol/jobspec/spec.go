package jobspec

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Spec is what a submitter asks for: the job as hanzod records it in its
// event log and snapshots (the JSON encoding is that record's).
type Spec struct {
	Model       string `json:"model"`
	Dataset     string `json:"dataset"`
	Epochs      int    `json:"epochs"`
	MinNodes    int    `json:"min_nodes"`
	MaxNodes    int    `json:"max_nodes"` // 0: MinNodes
	MinVRAMMiB  uint64 `json:"min_vram_mib"`
	Aggregation string `json:"aggregation"` // mean, median or trimmed-mean
	// Utility u ≥ 1 weights the job's priority (1 when 0).
	Utility uint64 `json:"utility"`
	// Submitter is the ledger account whose bonded stake s weights the
	// priority (optional).
	Submitter string `json:"submitter,omitempty"`
	// Deadline is a wall time in unix milliseconds (0: none); a job not
	// Published by then fails.
	Deadline int64 `json:"deadline,omitempty"`
	// GSPO is the training configuration. In a submitted spec the zero
	// value means "not given" and becomes DefaultGSPO(); an accepted job
	// always holds a validated, non-zero one. It is omitted from the
	// encoding only when zero (jobs logged before the field existed), so
	// older logs and snapshots still decode and re-encode byte for byte.
	GSPO GSPO `json:"gspo,omitzero"`

	// Settings of the end-to-end run (all optional; zero means the default
	// given). They are omitted from the encoding when zero, so logs written
	// before they existed decode and re-encode unchanged.

	// StepsPerEpoch is the number of training steps in an epoch, a
	// multiple of gspo.aggregate_interval (0: one sync per epoch).
	StepsPerEpoch int `json:"steps_per_epoch,omitempty"`
	// PromptsPerStep is the number of prompts a worker samples per step
	// (0: Fields.PromptsPerStep.Default, 16).
	PromptsPerStep int `json:"prompts_per_step,omitempty"`
	// Seed fixes data order, sampling and adapter initialisation.
	Seed uint64 `json:"seed,omitempty"`
	// Byzantine is the number f of Byzantine workers the job must
	// tolerate; f > 0 needs aggregation median or trimmed-mean and
	// 3f < min_nodes.
	Byzantine int `json:"byzantine,omitempty"`
	// SpotCheckBP is the share of deltas re-executed by deterministic
	// replay, in basis points (0: 1000, that is 10%; -1: none).
	SpotCheckBP int `json:"spot_check_bp,omitempty"`
	// Validators is how many staked validators' verdicts each trace check
	// of the job asks for (docs/validators.md): 0, hanzod checks itself;
	// 2..5, validators do and two that disagree go to a third.
	Validators int `json:"validators,omitempty"`
	// Backend is the training backend workers must train with:
	// "" for go (the built-in engine, whose deltas the judge replays bit
	// for bit; "go" is written as "", its one encoding, which is also what
	// jobs logged before the setting existed carry), "torch" or "any"
	// (docs/backends.md).
	Backend string `json:"backend,omitempty"`
	// DType is the floating-point type workers must train in: "" for any
	// (each node's own; its one encoding, which is also what jobs logged
	// before the setting existed carry), "float32", "bfloat16" or
	// "float16" (torch). hanzod assigns the job only to nodes that report
	// it (package hardware).
	DType string `json:"dtype,omitempty"`
	// Data maps the rows of a dataset named by CID onto problems
	// (docs/datasets.md); zero for a built-in task.
	Data Data `json:"data,omitzero"`
	// Reward is the job's verifiers with their weights (package reward),
	// in canonical form; "" for the default: partial credit on a built-in
	// task, exact match on a dataset.
	Reward Rewards `json:"reward,omitempty"`
}

// TrainingBackend is the backend the job asks for: go, torch or any.
func (s Spec) TrainingBackend() string {
	if s.Backend == "" {
		return Fields.Backend.Default
	}
	return s.Backend
}

// EpochSamples is the number of completions one worker trains on in an
// epoch of a normalised spec: steps_per_epoch (gspo.aggregate_interval
// when 0) × prompts_per_step (its default when 0) × gspo.group_size. hanzod
// refuses a job whose epochs are smaller than its minimum (docs/job-file.md).
func (s Spec) EpochSamples() uint64 {
	steps := s.StepsPerEpoch
	if steps == 0 {
		steps = s.GSPO.AggregateInterval
	}
	prompts := s.PromptsPerStep
	if prompts == 0 {
		prompts = int(Fields.PromptsPerStep.Default)
	}
	return uint64(steps) * uint64(prompts) * uint64(s.GSPO.GroupSize)
}

// SpotCheckShare is the share of deltas a job spot-checks, in basis points.
func (s Spec) SpotCheckShare() int {
	switch {
	case s.SpotCheckBP == 0:
		return int(Fields.SpotCheckBP.Default)
	case s.SpotCheckBP < 0:
		return 0
	}
	return s.SpotCheckBP
}

// GSPO is a job's training configuration: the keys of the seed's
// GSPOConfig (SPEC.md, "Training: GSPO"). The real-valued settings are
// float64s that the state only stores and compares with constants;
// encoding/json writes the shortest decimal that reads back to the same
// bits, so they survive the event log and snapshots exactly, and NaN and
// infinities are refused before anything is logged.
type GSPO struct {
	// ImportanceSamplingLevel is "sequence" (GSPO) or "token" (GRPO).
	ImportanceSamplingLevel string `json:"importance_sampling_level"`
	// Beta weights the KL penalty against the reference policy (0: none).
	Beta float64 `json:"beta"`
	// GroupSize is the number of completions sampled per prompt.
	GroupSize int `json:"group_size"`
	// AggregateInterval is the number of local steps between ring syncs.
	AggregateInterval int     `json:"aggregate_interval"`
	Use4Bit           bool    `json:"use_4bit"`
	LoRARank          int     `json:"lora_rank"`
	LoRAAlpha         float64 `json:"lora_alpha"`
	// MaxSeqLen counts prompt plus completion tokens.
	MaxSeqLen                 int     `json:"max_seq_len"`
	GradientAccumulationSteps int     `json:"gradient_accumulation_steps"`
	LearningRate              float64 `json:"learning_rate"`
	WarmupSteps               int     `json:"warmup_steps"`
	WeightDecay               float64 `json:"weight_decay"`
	// LoRATargets is the set of adapted projections in canonical form
	// (Fields.LoRATargetModules: names joined by commas in transformers'
	// order), "" for the default set (its one encoding, which is also what
	// jobs logged before the setting existed carry).
	LoRATargets string `json:"lora_target_modules,omitempty"`
	// OuterLR and OuterMomentum are the outer optimiser applied at every
	// sync to the averaged update (the ring's mean between workers, the
	// judge's merge into the checkpoint of record): Nesterov momentum on
	// the pseudo-gradient, as DiLoCo does (docs/end-to-end.md, "Outer
	// optimiser"). OuterLR 0 is the plain average, the behaviour of jobs
	// logged before the settings existed (and their one encoding);
	// OuterMomentum needs OuterLR > 0.
	OuterLR       float64 `json:"outer_learning_rate,omitempty"`
	OuterMomentum float64 `json:"outer_momentum,omitempty"`
	// InnerOptimizer is the workers' optimiser: "" (Fields.InnerOptimizer's
	// default, AdamW, and its one encoding) or "sgd". OuterOptimizer is the
	// outer rule: "" (SGD with Nesterov momentum OuterMomentum) or "adam"
	// (Adam at OuterLR on the negated averaged update). sgd inside and
	// adam outside, synced every step, is AdamW on the ring's averaged
	// gradient: synchronous data parallelism (docs/data-parallel.md).
	InnerOptimizer string `json:"inner_optimizer,omitempty"`
	OuterOptimizer string `json:"outer_optimizer,omitempty"`
	// MaxGradNorm is, under InnerOptimizer sgd, the bound G on the mean
	// norm of a sync's gradients: a contribution is clipped to
	// lr·updates·G (jobconf.Plan.ClipNorm), which is also what the ring
	// lets a member add. 0 is G = √params, a root-mean-square of one per
	// coordinate.
	MaxGradNorm float64 `json:"max_grad_norm,omitempty"`
	// NumIterations is the number of optimiser updates a worker takes on
	// each step's batch (TRL's num_iterations, μ): 0 is the default, 2 (its
	// one encoding, which is also what jobs logged before the setting
	// existed carry); Iterations reads it.
	NumIterations int `json:"num_iterations,omitempty"`
}

// Iterations is the number of optimiser updates per batch.
func (g GSPO) Iterations() int {
	if g.NumIterations == 0 {
		return int(Fields.NumIterations.Default)
	}
	return g.NumIterations
}

// InnerSGD reports whether the workers step with plain SGD.
func (g GSPO) InnerSGD() bool { return g.InnerOptimizer == "sgd" }

// OuterAdam reports whether the outer rule is Adam.
func (g GSPO) OuterAdam() bool { return g.OuterOptimizer == "adam" }

// Targets returns the adapted projections' names: LoRATargets split, or
// the default set when it is empty.
func (g GSPO) Targets() []string {
	t := g.LoRATargets
	if t == "" {
		t = Fields.LoRATargetModules.Default
	}
	return strings.Split(t, ",")
}

// DefaultGSPO is the seed's GSPOConfig defaults (docs/job-file.md): the
// defaults of Fields.
func DefaultGSPO() GSPO {
	f := &Fields
	return GSPO{
		ImportanceSamplingLevel: f.ImportanceSamplingLevel.Default, Beta: f.Beta.Default, GroupSize: int(f.GroupSize.Default),
		AggregateInterval: int(f.AggregateInterval.Default), Use4Bit: f.Use4Bit.Default, LoRARank: int(f.LoRARank.Default),
		LoRAAlpha: f.LoRAAlpha.Default, MaxSeqLen: int(f.MaxSeqLen.Default), GradientAccumulationSteps: int(f.GradientAccumulationSteps.Default),
		LearningRate: f.LearningRate.Default, WarmupSteps: int(f.WarmupSteps.Default), WeightDecay: f.WeightDecay.Default,
		OuterLR: f.OuterLR.Default, OuterMomentum: f.OuterMomentum.Default,
	}
}

// ErrInvalid is what every refusal of Normalise is (errors.Is); the
// refusal's text is the reason alone, for the caller to prefix.
var ErrInvalid = errors.New("jobspec: invalid job spec")

type invalid struct{ msg string }

func (e *invalid) Error() string        { return e.msg }
func (e *invalid) Is(target error) bool { return target == ErrInvalid }

func invalidf(format string, args ...any) error { return &invalid{fmt.Sprintf(format, args...)} }

// Normalise fills in the defaults hanzod records (max_nodes, utility,
// aggregation and the GSPO settings when none were given; the run
// settings stay 0, meaning their default) and checks every field against
// Fields. A refusal names the field and its allowed range and is
// ErrInvalid.
func (s *Spec) Normalise() error {
	f := &Fields
	if s.MaxNodes == 0 {
		s.MaxNodes = s.MinNodes
	}
	if s.Utility == 0 {
		s.Utility = uint64(f.Utility.Default)
	}
	if s.Aggregation == "" {
		s.Aggregation = f.Aggregation.Default
	}
	if s.GSPO == (GSPO{}) {
		s.GSPO = DefaultGSPO()
	}
	switch {
	case s.Model == "" || len(s.Model) > f.Model.MaxLen:
		return invalidf("model must be 1..%d bytes", f.Model.MaxLen)
	case s.Dataset == "" || len(s.Dataset) > f.Dataset.MaxLen:
		return invalidf("dataset must be 1..%d bytes", f.Dataset.MaxLen)
	case !f.Epochs.Contains(int64(s.Epochs)):
		return invalidf("epochs %d outside %d..%d", s.Epochs, f.Epochs.Min, f.Epochs.Max)
	case !f.MinNodes.Contains(int64(s.MinNodes)):
		return invalidf("min_nodes %d outside %d..%d (%s)", s.MinNodes, f.MinNodes.Min, f.MinNodes.Max, f.MinNodes.Hint)
	case s.MaxNodes < s.MinNodes || int64(s.MaxNodes) > f.MaxNodes.Max:
		return invalidf("max_nodes %d outside min_nodes..%d", s.MaxNodes, f.MaxNodes.Max)
	case s.MinVRAMMiB > uint64(f.MinVRAMMiB.Max):
		return invalidf("min_vram_mib %d above %d", s.MinVRAMMiB, f.MinVRAMMiB.Max)
	case s.Utility > uint64(f.Utility.Max):
		return invalidf("utility %d above %d", s.Utility, f.Utility.Max)
	case len(s.Submitter) > f.Submitter.MaxLen:
		return invalidf("submitter longer than %d bytes", f.Submitter.MaxLen)
	case s.Deadline < 0:
		return invalidf("negative deadline")
	}
	if s.Backend == f.Backend.Default {
		s.Backend = ""
	}
	if s.Backend != "" && !f.Backend.Contains(s.Backend) {
		return invalidf("backend %q (want go, torch or any)", s.Backend)
	}
	if s.DType == f.DType.Default {
		s.DType = ""
	}
	switch {
	case s.DType != "" && !f.DType.Contains(s.DType):
		return invalidf("dtype %q (want any, float32, bfloat16 or float16)", s.DType)
	case s.Backend == "" && s.DType != "" && s.DType != "float32":
		return invalidf("dtype %s with backend go: the go engine trains in float32 (use backend torch or any)", s.DType)
	}
	if !f.Aggregation.Contains(s.Aggregation) {
		return invalidf("aggregation %q (want mean, median or trimmed-mean)", s.Aggregation)
	}
	switch {
	case s.StepsPerEpoch != 0 && !f.StepsPerEpoch.Contains(int64(s.StepsPerEpoch)):
		return invalidf("steps_per_epoch %d outside 0..%d", s.StepsPerEpoch, f.StepsPerEpoch.Max)
	case s.PromptsPerStep != 0 && !f.PromptsPerStep.Contains(int64(s.PromptsPerStep)):
		return invalidf("prompts_per_step %d outside 0..%d", s.PromptsPerStep, f.PromptsPerStep.Max)
	case s.SpotCheckBP != -1 && !f.SpotCheckBP.Contains(int64(s.SpotCheckBP)):
		return invalidf("spot_check_bp %d outside -1..%d (basis points; 0 means %d%%, -1 none)", s.SpotCheckBP, f.SpotCheckBP.Max, f.SpotCheckBP.Default/100)
	case s.Validators != 0 && (s.Validators < 2 || !f.Validators.Contains(int64(s.Validators))):
		return invalidf("validators %d: 0 (hanzod checks) or 2..%d verdicts per check", s.Validators, f.Validators.Max)
	case s.Byzantine < 0:
		return invalidf("byzantine %d is negative", s.Byzantine)
	case s.Byzantine > 0 && s.Aggregation == "mean":
		return invalidf("byzantine %d declared with aggregation mean: a mean cannot defend against any Byzantine worker; use median or trimmed-mean", s.Byzantine)
	case 3*s.Byzantine >= s.MinNodes:
		return invalidf("byzantine %d with min_nodes %d: %s cannot defend f >= n/3; raise min_nodes above %d or declare fewer", s.Byzantine, s.MinNodes, s.Aggregation, 3*s.Byzantine)
	}
	if err := s.checkData(); err != nil {
		return err
	}
	if err := s.GSPO.normalise(); err != nil {
		return err
	}
	if s.StepsPerEpoch != 0 && s.StepsPerEpoch%s.GSPO.AggregateInterval != 0 {
		return invalidf("steps_per_epoch %d is not a multiple of gspo.aggregate_interval %d", s.StepsPerEpoch, s.GSPO.AggregateInterval)
	}
	return nil
}

// normalise checks g against Fields (and writes -0 as 0); a refusal names
// the setting and its allowed range.
func (g *GSPO) normalise() error {
	// -0 and 0 are the same setting; keep one encoding of it.
	for _, v := range []*float64{&g.Beta, &g.LoRAAlpha, &g.LearningRate, &g.WeightDecay, &g.OuterLR, &g.OuterMomentum, &g.MaxGradNorm} {
		if *v == 0 {
			*v = 0
		}
	}
	f := &Fields
	if int64(g.NumIterations) == f.NumIterations.Default {
		g.NumIterations = 0
	}
	if g.NumIterations != 0 && !f.NumIterations.Contains(int64(g.NumIterations)) {
		return invalidf("%s %d outside %d..%d (%s)", f.NumIterations.Key, g.NumIterations, f.NumIterations.Min, f.NumIterations.Max, f.NumIterations.Hint)
	}
	if !f.ImportanceSamplingLevel.Contains(g.ImportanceSamplingLevel) {
		return invalidf("%s %q (want sequence for GSPO or token for GRPO)", f.ImportanceSamplingLevel.Key, g.ImportanceSamplingLevel)
	}
	for _, r := range []struct {
		f *Real
		v float64
	}{{&f.Beta, g.Beta}, {&f.LoRAAlpha, g.LoRAAlpha}, {&f.LearningRate, g.LearningRate}, {&f.WeightDecay, g.WeightDecay},
		{&f.OuterLR, g.OuterLR}, {&f.OuterMomentum, g.OuterMomentum}, {&f.MaxGradNorm, g.MaxGradNorm}} {
		if !r.f.Contains(r.v) {
			return invalidf("%s %v must %s (%s)", r.f.Key, r.v, r.f.rule(), r.f.Hint)
		}
	}
	for _, w := range []struct {
		f *Whole
		v int
	}{{&f.GroupSize, g.GroupSize}, {&f.AggregateInterval, g.AggregateInterval}, {&f.LoRARank, g.LoRARank},
		{&f.MaxSeqLen, g.MaxSeqLen}, {&f.GradientAccumulationSteps, g.GradientAccumulationSteps}, {&f.WarmupSteps, g.WarmupSteps}} {
		if !w.f.Contains(int64(w.v)) {
			return invalidf("%s %d outside %d..%d (%s)", w.f.Key, w.v, w.f.Min, w.f.Max, w.f.Hint)
		}
	}
	if g.OuterMomentum != 0 && g.OuterLR == 0 {
		return invalidf("%s %v needs %s > 0 (0 is the plain average, which has no momentum)", f.OuterMomentum.Key, g.OuterMomentum, f.OuterLR.Key)
	}
	for _, c := range []struct {
		f *Choice
		v *string
	}{{&f.InnerOptimizer, &g.InnerOptimizer}, {&f.OuterOptimizer, &g.OuterOptimizer}} {
		if *c.v == c.f.Default {
			*c.v = ""
		}
		if *c.v != "" && !c.f.Contains(*c.v) {
			return invalidf("%s %q (want %s)", c.f.Key, *c.v, strings.Join(c.f.Values, " or "))
		}
	}
	switch {
	case g.OuterAdam() && g.OuterLR == 0:
		return invalidf("%s adam needs %s > 0, e.g. 1.5e-3", f.OuterOptimizer.Key, f.OuterLR.Key)
	case g.OuterAdam() && g.OuterMomentum != 0:
		return invalidf("%s adam has its own moments; leave %s out", f.OuterOptimizer.Key, f.OuterMomentum.Key)
	case g.MaxGradNorm != 0 && !g.InnerSGD():
		return invalidf("%s bounds plain SGD's steps and needs %s sgd (AdamW's steps are bounded by the learning rate)", f.MaxGradNorm.Key, f.InnerOptimizer.Key)
	case g.InnerSGD() && !g.OuterAdam():
		return invalidf("%s sgd needs %s adam (plain SGD inside is the data-parallel mode, AdamW on the averaged gradient: docs/data-parallel.md)", f.InnerOptimizer.Key, f.OuterOptimizer.Key)
	}
	if g.LoRATargets != "" {
		t, err := f.LoRATargetModules.Canonical(strings.Split(g.LoRATargets, ","))
		if err != nil {
			return invalidf("%s", err)
		}
		g.LoRATargets = canonicalTargets(t)
	}
	return nil
}

// canonicalTargets is t (a canonical target list) with the default set
// written as "".
func canonicalTargets(t string) string {
	if t == Fields.LoRATargetModules.Default {
		return ""
	}
	return t
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
