package trainer

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/zooai/gym/model/gspo"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/optim"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
)

// Config is a GSPO job's training configuration. Keys follow the seed's
// GSPOConfig (importance_sampling_level, beta, group_size,
// aggregate_interval, use_4bit, lora_rank, lora_alpha, max_seq_len,
// gradient_accumulation_steps, learning_rate, warmup_steps, weight_decay)
// plus what the built-in trainer needs to be fully specified.
type Config struct {
	// Task names the problems: a built-in task (task.Names), or, with
	// Data set, the dataset (its CID).
	Task string `json:"task"`
	// Data, when set, is the job's dataset (package dataset reads it):
	// training draws come from its rows and the held-out set is its
	// held-out rows. nil: the built-in task Task.
	Data *task.Data `json:"-"`
	// Reward scores completions (nil: reward.Default, the built-in
	// tasks' partial credit).
	Reward reward.Scorer `json:"-"`
	Seed   uint64        `json:"seed"` // job seed: data, sampling and adapter initialisation
	// Steps is the number of optimiser steps of a run (the schedule's
	// horizon is fixed by it only when CosineDecay is set).
	Steps int `json:"steps"`

	ImportanceSamplingLevel string  `json:"importance_sampling_level"` // "sequence" (GSPO) or "token" (GRPO)
	Beta                    float64 `json:"beta"`                      // KL weight
	EpsilonLow              float64 `json:"epsilon_low"`
	EpsilonHigh             float64 `json:"epsilon_high"`
	GroupSize               int     `json:"group_size"`       // completions per prompt (G)
	PromptsPerStep          int     `json:"prompts_per_step"` // prompts per optimiser step
	NumIterations           int     `json:"num_iterations"`   // optimiser passes over each batch (μ)
	// AggregateInterval is the number of local steps between ring syncs. A
	// single node never syncs; the ring worker reads it.
	AggregateInterval int  `json:"aggregate_interval"`
	Use4Bit           bool `json:"use_4bit"` // accepted; no effect on the Go engine (4-bit is the torch backend's)

	LoRARank    int      `json:"lora_rank"`
	LoRAAlpha   float64  `json:"lora_alpha"`
	LoRATargets []string `json:"lora_target_modules"` // transformers module names: q_proj … down_proj

	MaxSeqLen                 int     `json:"max_seq_len"`
	GradientAccumulationSteps int     `json:"gradient_accumulation_steps"`
	LearningRate              float64 `json:"learning_rate"`
	WarmupSteps               int     `json:"warmup_steps"`
	WeightDecay               float64 `json:"weight_decay"`
	// CosineDecay decays the rate to 10% by the end of step Steps. The
	// schedule (warmup included) counts optimiser updates: num_iterations
	// per step.
	CosineDecay bool `json:"cosine_decay"`
	// SGD replaces AdamW by plain SGD at the same rate (a screen setting
	// of gym bench quality-sim; jobs always train with AdamW).
	SGD bool `json:"sgd,omitempty"`

	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	EvalSize    int     `json:"eval_size"` // held-out problems
}

// DefaultConfig is the embedded default: GSPO on 2-digit addition with the
// paper's clipping and the seed's β, LoRA rank 8 on all seven projections
// (q_proj … down_proj: on the Llama built-in base, q_proj and v_proj alone
// climb to about 0.81 where all seven reach 0.92; docs/end-to-end.md). It is the
// built-in model's training profile, the one source of it: gym train runs
// it, and gym up's jobs carry it as their GSPO settings
// (jobconf.BuiltinGSPO). A job's own defaults, for real models, are
// jobspec's (jobspec.DefaultGSPO).
func DefaultConfig() Config {
	return Config{
		Task: "addition", Seed: 0, Steps: 100,
		ImportanceSamplingLevel: "sequence", Beta: 0.1, EpsilonLow: 3e-4, EpsilonHigh: 4e-4,
		GroupSize: 8, PromptsPerStep: 16, NumIterations: 2, AggregateInterval: 10,
		LoRARank: 8, LoRAAlpha: 16, LoRATargets: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
		MaxSeqLen: 12, GradientAccumulationSteps: 1,
		LearningRate: 2e-3, WarmupSteps: 0, WeightDecay: 0,
		Temperature: 1, TopK: 0, EvalSize: 500,
	}
}

// ErrConfig reports an invalid training configuration.
var ErrConfig = errors.New("trainer: invalid config")

// Validate reports whether c can train a model of shape mc whose
// tokenizer is tok: the settings, and every held-out problem of the task
// (prompt and answer, in tokens) within max_seq_len and the model's
// context.
func (c Config) Validate(mc llama.Config, tok *tokenizer.Tokenizer) error {
	if c.Data == nil {
		if _, err := task.Lookup(c.Task); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	} else if len(c.Data.Train) == 0 || len(c.Data.Eval) == 0 {
		return fmt.Errorf("%w: dataset %s has %d training and %d held-out problems", ErrConfig, c.Task, len(c.Data.Train), len(c.Data.Eval))
	}
	if _, err := c.objective(); err != nil {
		return err
	}
	if _, err := c.targets(); err != nil {
		return err
	}
	if c.LoRARank < 1 || c.LoRARank > 1<<16 || !(c.LoRAAlpha > 0) || math.IsInf(c.LoRAAlpha, 0) {
		return fmt.Errorf("%w: lora_rank %d must be in [1, 65536], lora_alpha %v positive and finite", ErrConfig, c.LoRARank, c.LoRAAlpha)
	}
	if err := c.optimizer().Validate(); err != nil {
		return err
	}
	if err := c.sampling().Validate(); err != nil {
		return err
	}
	switch {
	case c.Steps < 1:
		return fmt.Errorf("%w: steps %d < 1", ErrConfig, c.Steps)
	case c.GroupSize < 2:
		return fmt.Errorf("%w: group_size %d < 2 (advantages need a group)", ErrConfig, c.GroupSize)
	case c.PromptsPerStep < 1 || c.NumIterations < 1 || c.AggregateInterval < 1 || c.EvalSize < 1:
		return fmt.Errorf("%w: prompts_per_step %d, num_iterations %d, aggregate_interval %d, eval_size %d must be >= 1",
			ErrConfig, c.PromptsPerStep, c.NumIterations, c.AggregateInterval, c.EvalSize)
	case c.GradientAccumulationSteps < 1 || c.PromptsPerStep%c.GradientAccumulationSteps != 0:
		return fmt.Errorf("%w: gradient_accumulation_steps %d must divide prompts_per_step %d",
			ErrConfig, c.GradientAccumulationSteps, c.PromptsPerStep)
	case c.EvalSize > maxEvalSize:
		return fmt.Errorf("%w: eval_size %d > %d", ErrConfig, c.EvalSize, maxEvalSize)
	case tok == nil:
		return fmt.Errorf("%w: no tokenizer", ErrConfig)
	}
	split, _ := c.Split(c.EvalSize)
	need, err := Need(tok, split.Eval)
	if err != nil {
		return err
	}
	if c.MaxSeqLen < need {
		return fmt.Errorf("%w: max_seq_len %d < %d, the length of a %s sequence in tokens", ErrConfig, c.MaxSeqLen, need, c.Task)
	}
	if need > mc.MaxPositions {
		return fmt.Errorf("%w: task %s needs a context of %d, the model has %d", ErrConfig, c.Task, need, mc.MaxPositions)
	}
	return nil
}

// Need is the longest prompt plus answer of problems in tokens, or an
// error naming the first problem tok cannot tokenize.
func Need(tok *tokenizer.Tokenizer, problems []task.Problem) (int, error) {
	need := 0
	for _, p := range problems {
		pr, ans, err := task.Tokenize(tok, p)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		need = max(need, len(pr)+len(ans))
	}
	return need, nil
}

// Split returns the problems of c with a held-out set of n: the built-in
// task's split (task.NewSplit), or the dataset's (task.FromData).
func (c Config) Split(n int) (*task.Split, error) {
	if c.Data != nil {
		if len(c.Data.Train) == 0 {
			return nil, fmt.Errorf("%w: dataset %s has no training rows", ErrConfig, c.Task)
		}
		return task.FromData(c.Data, n), nil
	}
	t, err := task.Lookup(c.Task)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return task.NewSplit(t, n), nil
}

// Scorer is c's reward: Reward, or reward.Default.
func (c Config) Scorer() reward.Scorer {
	if c.Reward == nil {
		return reward.Default()
	}
	return c.Reward
}

// maxEvalSize bounds eval_size: the held-out set is drawn and tokenized
// to validate a config.
const maxEvalSize = 5000

// targets parses lora_target_modules (transformers names, each once).
func (c Config) targets() ([]llama.Module, error) {
	if len(c.LoRATargets) == 0 {
		return nil, fmt.Errorf("%w: no LoRA target modules", ErrConfig)
	}
	var ms []llama.Module
	for _, n := range c.LoRATargets {
		m, ok := llama.ParseModule(n)
		if !ok {
			return nil, fmt.Errorf("%w: LoRA target %q is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (or, on a MoE base, shared_expert.gate_proj, shared_expert.up_proj, shared_expert.down_proj, shared_expert_gate, gate.weight, experts.gate_up_proj, experts.down_proj)", ErrConfig, n)
		}
		if slices.Contains(ms, m) {
			return nil, fmt.Errorf("%w: LoRA target %q given twice", ErrConfig, n)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// Notes lists settings that were accepted but have no effect here.
func (c Config) Notes() []string {
	var n []string
	if c.Use4Bit {
		n = append(n, "use_4bit: no effect on the Go engine (4-bit NF4 is the torch backend's, on CUDA); ignored")
	}
	return n
}

func (c Config) objective() (gspo.Config, error) {
	lvl, err := gspo.ParseLevel(c.ImportanceSamplingLevel)
	if err != nil {
		return gspo.Config{}, err
	}
	g := gspo.Config{Level: lvl, EpsLow: c.EpsilonLow, EpsHigh: c.EpsilonHigh, Beta: c.Beta, AdvEps: 1e-4}
	return g, g.Validate()
}

func (c Config) optimizer() optim.Config {
	s := optim.Schedule{LR: c.LearningRate, Warmup: c.WarmupSteps}
	if c.CosineDecay {
		s.Total, s.MinLR = c.Steps*c.NumIterations, c.LearningRate/10
	}
	if math.IsNaN(c.WeightDecay) {
		c.WeightDecay = -1
	}
	return optim.Config{Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: c.WeightDecay, Schedule: s, SGD: c.SGD}
}

func (c Config) sampling() rollout.Config {
	return rollout.Config{Temperature: c.Temperature, TopK: c.TopK, Reward: c.Reward}
}
