package hardware

import (
	"errors"
	"fmt"

	"github.com/zooai/gym/protocol/jobspec"
)

// Shape is what the memory estimate needs of a base model: config.json's
// dimensions (jobconf.ShapeOf reads them) and its parameter count. hanzod
// records it with a job whose base it could read, so it decides where the
// job fits before anything is loaded.
type Shape struct {
	Params       int64 `json:"params"`
	Hidden       int   `json:"hidden"`
	Intermediate int   `json:"intermediate"`
	Layers       int   `json:"layers"`
	Heads        int   `json:"heads"`
	KVHeads      int   `json:"kv_heads"`
	HeadDim      int   `json:"head_dim"`
	Vocab        int   `json:"vocab"`
}

// Bounds on a shape hanzod records (the engine's own are tighter).
const maxDim = 1 << 24

// Validate refuses a shape with a dimension outside 1..2²⁴ or a
// parameter count that is not positive.
func (s Shape) Validate() error {
	for _, d := range []struct {
		name string
		v    int
	}{{"hidden", s.Hidden}, {"intermediate", s.Intermediate}, {"layers", s.Layers}, {"heads", s.Heads},
		{"kv_heads", s.KVHeads}, {"head_dim", s.HeadDim}, {"vocab", s.Vocab}} {
		if d.v < 1 || d.v > maxDim {
			return fmt.Errorf("%w: %s %d outside 1..%d", ErrShape, d.name, d.v, maxDim)
		}
	}
	if s.Params < 1 {
		return fmt.Errorf("%w: %d parameters", ErrShape, s.Params)
	}
	return nil
}

// ErrShape reports a base shape the estimate cannot use.
var ErrShape = errors.New("hardware: invalid model shape")

// linearParams is the parameter count of the projections (attention and
// MLP) of every layer: what 4-bit quantisation stores in 4 bits.
func (s Shape) linearParams() int64 {
	h, q, kv, i := int64(s.Hidden), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.Intermediate)
	return int64(s.Layers) * (h*q + 2*h*kv + q*h + 3*h*i)
}

// Target is what a job is trained with on a node: the backend (go or
// torch), the floating-point type of its weights and activations, and
// whether the base's projections are 4-bit (torch only: the go engine
// ignores use_4bit).
type Target struct {
	Backend string
	DType   string
	Use4Bit bool
}

func (t Target) String() string {
	s := t.Backend + " " + t.DType
	if t.Use4Bit {
		s += " 4-bit"
	}
	return s
}

// GoTarget is the go engine's: float32 weights and activations.
var GoTarget = Target{Backend: BackendGo, DType: Float32}

// ErrTarget reports a target the estimate does not know.
var ErrTarget = errors.New("hardware: unknown training target")

// elemBytes is the size of one weight or activation element of dtype.
func elemBytes(dtype string) (int64, error) {
	switch dtype {
	case Float32:
		return 4, nil
	case BFloat16, Float16:
		return 2, nil
	}
	return 0, fmt.Errorf("%w: dtype %q (float32, bfloat16 or float16)", ErrTarget, dtype)
}

// Memory is the estimated peak memory, in bytes, of training a job on one
// device of a node, by term (docs/job-file.md, "Memory").
type Memory struct {
	Target Target
	Params int64 // parameters of the base model
	// Weights is the base as the backend holds it: Params × 4 bytes on
	// the go engine (float32, whatever the checkpoint's dtype); on torch
	// Params × the dtype's size, or with 4-bit the projections at 4.5 bits
	// (NF4 and its block constants) and the rest in the dtype.
	Weights int64
	// Adapter is the LoRA adapter and what training keeps of its size:
	// the adapter, its gradient, AdamW's two moments, the sync's start and
	// the contribution (6 × 4 bytes per LoRA parameter, float32 on every
	// backend).
	Adapter    int64
	LoRAParams int64
	// Activations: one micro-batch's forward state kept for the backward
	// pass (per token and layer the projections' inputs and outputs, the
	// MLP's three intermediate vectors and a log-sum-exp per head, in the
	// dtype; per token the logits and their gradient, in float32) and the
	// KV cache of sampling prompts_per_step × group_size sequences of
	// max_seq_len tokens, in the dtype.
	Activations int64
	Total       int64
}

// MiB formats a byte count in MiB (three significant digits below 100).
func MiB(b int64) string {
	v := float64(b) / (1 << 20)
	if v >= 100 {
		return fmt.Sprintf("%.0f MiB", v)
	}
	return fmt.Sprintf("%.3g MiB", v)
}

// TotalMiB is Total rounded up to whole MiB.
func (m Memory) TotalMiB() uint64 { return uint64((m.Total + 1<<20 - 1) >> 20) }

// Terms lists the estimate's terms in MiB.
func (m Memory) Terms() string {
	return fmt.Sprintf("weights %s, LoRA and optimiser %s, activations and KV cache %s", MiB(m.Weights), MiB(m.Adapter), MiB(m.Activations))
}

func (m Memory) String() string {
	w := fmt.Sprintf("%d parameters × 4 bytes", m.Params)
	if m.Target.Backend != BackendGo {
		w = fmt.Sprintf("%d parameters in %s", m.Params, m.Target.DType)
		if m.Target.Use4Bit {
			w += ", projections in 4 bits"
		}
	}
	return fmt.Sprintf("about %s: weights %s (%s), LoRA and optimiser %s (%d parameters × 24 bytes), activations and KV cache %s",
		MiB(m.Total), MiB(m.Weights), w, MiB(m.Adapter), m.LoRAParams, MiB(m.Activations))
}

// Estimate is the memory training job spec s (normalised) takes on a base
// of shape sh with target t. With P the parameters, L the projections'
// parameters, R the LoRA parameters, b the dtype's bytes (4 on the go
// engine), T = micro-batch sequences × max_seq_len tokens, where a
// micro-batch is max(prompts_per_step / gradient_accumulation_steps, 1) ×
// group_size sequences, and S = prompts_per_step × group_size sampled
// sequences:
//
//	weights     = b·P, or with 4-bit 0.5625·L + b·(P − L)
//	adapter     = 24·R
//	activations = b·T·layers·(4·hidden + 2·q + 2·kv + 3·intermediate + heads)
//	            + 4·T·2·vocab
//	            + b·S·max_seq_len·layers·2·kv
//
// q = heads × head_dim and kv = kv_heads × head_dim are the attention
// widths, and R = layers × rank × Σ (in + out) over the LoRA targets.
func Estimate(s jobspec.Spec, sh Shape, t Target) (Memory, error) {
	if err := sh.Validate(); err != nil {
		return Memory{}, err
	}
	var b int64
	switch t.Backend {
	case BackendGo:
		if t.DType != Float32 {
			return Memory{}, fmt.Errorf("%w: the go engine trains in float32, not %q", ErrTarget, t.DType)
		}
		t.Use4Bit = false
		b = 4
	case BackendTorch:
		var err error
		if b, err = elemBytes(t.DType); err != nil {
			return Memory{}, err
		}
	default:
		return Memory{}, fmt.Errorf("%w: backend %q (go or torch)", ErrTarget, t.Backend)
	}
	g := s.GSPO
	f := func(v int) float64 { return float64(v) }
	hidden, inter, layers := f(sh.Hidden), f(sh.Intermediate), f(sh.Layers)
	q, kv := f(sh.Heads*sh.HeadDim), f(sh.KVHeads*sh.HeadDim)
	var lora float64
	for _, name := range g.Targets() {
		var in, out float64
		switch name {
		case "q_proj":
			in, out = hidden, q
		case "k_proj", "v_proj":
			in, out = hidden, kv
		case "o_proj":
			in, out = q, hidden
		case "gate_proj", "up_proj":
			in, out = hidden, inter
		case "down_proj":
			in, out = inter, hidden
		default:
			return Memory{}, fmt.Errorf("%w: LoRA target %q", ErrTarget, name)
		}
		lora += layers * f(g.LoRARank) * (in + out)
	}
	prompts := s.PromptsPerStep
	if prompts == 0 {
		prompts = int(jobspec.Fields.PromptsPerStep.Default)
	}
	seq := f(g.MaxSeqLen)
	gas := max(g.GradientAccumulationSteps, 1)
	tokens := f(max(prompts/gas, 1)*g.GroupSize) * seq
	perTokenLayer := 4*hidden + 2*q + 2*kv + 3*inter + f(sh.Heads)
	bf := float64(b)
	acts := bf*tokens*layers*perTokenLayer + 4*tokens*2*f(sh.Vocab) +
		bf*f(prompts*g.GroupSize)*seq*layers*2*kv
	m := Memory{Target: t, Params: sh.Params, LoRAParams: int64(lora), Activations: int64(acts)}
	m.Weights = b * sh.Params
	if t.Use4Bit {
		l := min(sh.linearParams(), sh.Params)
		m.Weights = l*9/16 + b*(sh.Params-l)
	}
	m.Adapter = 24 * m.LoRAParams
	m.Total = m.Weights + m.Adapter + m.Activations
	return m, nil
}
