package jobspec

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Whole describes a whole-number setting: the values a job file may give
// (Min..Max inclusive), the default and a hint for messages. On the wire
// (Spec) some settings also take 0 for "the default" or, spot_check_bp,
// -1 for "none"; Spec.Normalise says which.
type Whole struct {
	Key      string
	Min, Max int64
	Default  int64 // 0 where the default is derived (max_nodes: min_nodes; steps_per_epoch: gspo.aggregate_interval) or none
	Hint     string
}

// Contains reports whether v lies in Min..Max.
func (w Whole) Contains(v int64) bool { return v >= w.Min && v <= w.Max }

// Real describes a real-valued setting: finite, at least Min (above Min
// when MinOpen) and at most Max (+Inf: no upper bound).
type Real struct {
	Key      string
	Min, Max float64
	MinOpen  bool
	Default  float64
	Hint     string
}

// Contains reports whether v is finite and in range.
func (r Real) Contains(v float64) bool {
	if !finite(v) || v > r.Max {
		return false
	}
	if r.MinOpen {
		return v > r.Min
	}
	return v >= r.Min
}

// Range writes the allowed values: "≥ 0", "> 0", "[0, 1]" or "(0, 1]".
func (r Real) Range() string {
	open := "["
	if r.MinOpen {
		open = "("
	}
	switch {
	case math.IsInf(r.Max, 1) && r.MinOpen:
		return fmt.Sprintf("> %v", r.Min)
	case math.IsInf(r.Max, 1):
		return fmt.Sprintf("≥ %v", r.Min)
	}
	return fmt.Sprintf("%s%v, %v]", open, r.Min, r.Max)
}

// rule is Range as hanzod's refusals have always phrased it.
func (r Real) rule() string {
	switch {
	case math.IsInf(r.Max, 1) && r.MinOpen:
		return fmt.Sprintf("be a finite number > %v", r.Min)
	case math.IsInf(r.Max, 1):
		return fmt.Sprintf("be a finite number >= %v", r.Min)
	}
	return "lie in " + r.Range()
}

// Choice describes a setting that takes one of a few words.
type Choice struct {
	Key     string
	Values  []string
	Default string
	Hint    string
}

// Contains reports whether v is one of Values.
func (c Choice) Contains(v string) bool { return slices.Contains(c.Values, v) }

// Modules describes a set of LoRA target modules: a non-empty subset of
// Values, or All for every one of them (PEFT's "all-linear"). Its canonical
// form, as a job spec stores it, is the names joined by commas in Values
// order, so two specs naming the same set are equal.
type Modules struct {
	Key     string
	Values  []string
	All     string
	Default string // canonical form
	Hint    string
}

// Canonical returns the canonical form of names (each a module name, or
// All alone), or an error naming the first name that is not allowed or
// given twice.
func (m Modules) Canonical(names []string) (string, error) {
	if len(names) == 1 && names[0] == m.All {
		return strings.Join(m.Values, ","), nil
	}
	if len(names) == 0 {
		return "", fmt.Errorf("%s is empty; give %s", m.Key, m.Hint)
	}
	seen := make([]bool, len(m.Values))
	for _, n := range names {
		i := slices.Index(m.Values, n)
		switch {
		case i < 0:
			return "", fmt.Errorf("%s: %q is not one of %s (or %s)", m.Key, n, strings.Join(m.Values, ", "), m.All)
		case seen[i]:
			return "", fmt.Errorf("%s: %q is given twice", m.Key, n)
		}
		seen[i] = true
	}
	var out []string
	for i, v := range m.Values {
		if seen[i] {
			out = append(out, v)
		}
	}
	return strings.Join(out, ","), nil
}

// Text describes a free-form string setting of at most MaxLen bytes.
type Text struct {
	Key    string
	MaxLen int
	Hint   string
}

// Flag describes a true/false setting.
type Flag struct {
	Key     string
	Default bool
	Hint    string
}

// maxNodes bounds min_nodes, max_nodes and through them byzantine.
const maxNodes = 4096

// Fields is the one table of a job's settings: their keys (the job file's
// and the JSON encoding's; GSPO settings prefixed "gspo."), ranges,
// defaults and hints. hanzod's validation (Spec.Normalise), the job-file
// parser (ParseFile) and the defaults (DefaultGSPO, SpotCheckShare) all
// read it; docs/job-file.md lists the same (a test compares them).
var Fields = struct {
	Model, Dataset, Submitter                       Text
	Epochs, MinNodes, MaxNodes, MinVRAMMiB, Utility Whole
	Aggregation                                     Choice
	StepsPerEpoch, PromptsPerStep, Byzantine        Whole
	// SpotCheckBP is the job file's meaning: 0 is none. On the wire
	// (Spec.SpotCheckBP) 0 is the default and -1 none.
	SpotCheckBP Whole
	Validators  Whole

	ImportanceSamplingLevel                                                      Choice
	Beta, LoRAAlpha, LearningRate, WeightDecay                                   Real
	OuterLR, OuterMomentum                                                       Real
	InnerOptimizer, OuterOptimizer                                               Choice
	MaxGradNorm                                                                  Real
	GroupSize, AggregateInterval, LoRARank, MaxSeqLen, GradientAccumulationSteps Whole
	WarmupSteps, NumIterations                                                   Whole
	Use4Bit                                                                      Flag
	LoRATargetModules                                                            Modules
	Backend                                                                      Choice
	DType                                                                        Choice
}{
	Model:          Text{"model", 256, "the base model to post-train, e.g. Qwen/Qwen3-0.6B"},
	Dataset:        Text{"dataset", 256, "the training data, e.g. openai/gsm8k"},
	Submitter:      Text{"submitter", 128, "a ledger account, usually a node id"},
	Epochs:         Whole{"epochs", 1, 100_000, 0, "a job trains at least one epoch"},
	MinNodes:       Whole{"min_nodes", 3, maxNodes, 0, "a ring continues only with at least 3 nodes"},
	MaxNodes:       Whole{"max_nodes", 3, maxNodes, 0, "leave it out to use exactly min_nodes"},
	MinVRAMMiB:     Whole{"min_vram_mib", 0, 1 << 24, 0, "MiB of GPU memory a node needs; 24 GiB is 24576"},
	Utility:        Whole{"utility", 1, 1_000_000, 1, "the priority weight; leave it out for 1"},
	Aggregation:    Choice{"aggregation", []string{"mean", "median", "trimmed-mean"}, "mean", "how an epoch's deltas are merged"},
	StepsPerEpoch:  Whole{"steps_per_epoch", 1, 1_000_000, 0, "training steps per epoch, a multiple of gspo.aggregate_interval"},
	PromptsPerStep: Whole{"prompts_per_step", 1, 1 << 16, 16, "prompts each worker samples per step, each with gspo.group_size completions"},
	Byzantine:      Whole{"byzantine", 0, (maxNodes - 1) / 3, 0, "Byzantine workers to tolerate; 0 trusts every worker"},
	SpotCheckBP:    Whole{"spot_check_bp", 0, 10_000, 1000, "basis points of deltas replayed: 1000 is 10%, 0 none"},
	Validators:     Whole{"validators", 0, 5, 0, "verdicts per trace check from staked validators: 0 (hanzod checks, or 2 where its model work runs on validators) or 2 to 5"},

	ImportanceSamplingLevel: Choice{"gspo.importance_sampling_level", []string{"sequence", "token"}, "sequence", "sequence for GSPO or token for GRPO"},
	Beta:                    Real{"gspo.beta", 0, math.Inf(1), false, 0.1, "the KL weight; 0 for none, 0.1 by default"},
	LoRAAlpha:               Real{"gspo.lora_alpha", 0, math.Inf(1), true, 32, "LoRA scaling, often twice lora_rank"},
	LearningRate:            Real{"gspo.learning_rate", 0, 1, true, 2e-5, "LoRA rates are small, e.g. 2e-5"},
	WeightDecay:             Real{"gspo.weight_decay", 0, 1, false, 0.01, "AdamW decay, e.g. 0.01"},
	OuterLR: Real{"gspo.outer_learning_rate", 0, 10, false, 0,
		"the outer optimiser's rate on each sync's averaged update; 0 is the plain average"},
	OuterMomentum: Real{"gspo.outer_momentum", 0, 0.99, false, 0,
		"the outer optimiser's Nesterov momentum, [0, 0.99]; needs outer_learning_rate > 0"},
	InnerOptimizer: Choice{"gspo.inner_optimizer", []string{"adamw", "sgd"}, "adamw",
		"the workers' optimiser: adamw, or sgd under outer_optimizer adam (synchronous data parallelism)"},
	MaxGradNorm: Real{"gspo.max_grad_norm", 0, 1e6, false, 0,
		"under inner_optimizer sgd, the bound G on a sync's mean gradient norm: contributions are clipped to lr·updates·G; 0: √params"},
	OuterOptimizer: Choice{"gspo.outer_optimizer", []string{"sgd", "adam"}, "sgd",
		"the rule stepping each sync's averaged update: sgd (Nesterov, DiLoCo) or adam"},
	GroupSize:                 Whole{"gspo.group_size", 2, 1024, 8, "advantages need a group of at least 2 completions per prompt"},
	AggregateInterval:         Whole{"gspo.aggregate_interval", 1, 1_000_000, 50, "local steps between ring syncs"},
	LoRARank:                  Whole{"gspo.lora_rank", 1, 4096, 16, "the LoRA adapter rank, e.g. 16"},
	MaxSeqLen:                 Whole{"gspo.max_seq_len", 1, 1 << 20, 8192, "tokens per prompt plus completion"},
	GradientAccumulationSteps: Whole{"gspo.gradient_accumulation_steps", 1, 65536, 4, "micro-batches per optimiser step"},
	WarmupSteps:               Whole{"gspo.warmup_steps", 0, 1_000_000_000, 100, "steps of linear learning-rate warm-up"},
	NumIterations: Whole{"gspo.num_iterations", 1, 64, 2,
		"optimiser updates per batch (TRL's num_iterations); 1 is on-policy"},
	Use4Bit: Flag{"gspo.use_4bit", true, "QLoRA: keep the base weights in 4 bits"},
	LoRATargetModules: Modules{"gspo.lora_target_modules",
		[]string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}, "all-linear",
		"q_proj,v_proj", "transformers' projection names, e.g. [q_proj, v_proj], or all-linear"},
	Backend: Choice{"backend", []string{"go", "torch", "any"}, "go",
		"the workers' training backend: go (replayable bit for bit), torch or any"},
	DType: Choice{"dtype", []string{"any", "float32", "bfloat16", "float16"}, "any",
		"the type workers train in: any (each node's), float32 (the go engine's only), bfloat16 or float16 (torch)"},
}
