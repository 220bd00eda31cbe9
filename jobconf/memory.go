package jobconf

import (
	"errors"
	"fmt"

	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/llama"
)

// ErrMemory reports a job whose estimated memory exceeds what a worker
// allows.
var ErrMemory = errors.New("jobconf: the job does not fit this worker's memory")

// Memory is the estimated peak memory of training a job on a worker of
// the go backend, in bytes, computed from config.json and the job's
// settings before anything is loaded.
type Memory struct {
	Params  int64 // parameters of the base model
	Weights int64 // the base weights as the engine holds them: Params × 4 (float32, whatever config.json's dtype)
	// Adapter is the LoRA adapter and what training keeps of its size: the
	// adapter, its gradient, AdamW's two moments, the sync's start and the
	// contribution (6 × 4 bytes per LoRA parameter).
	Adapter    int64
	LoRAParams int64
	// Activations: one micro-batch's forward state kept for the backward
	// pass (per token and layer the projections' inputs and outputs, the
	// MLP's three intermediate vectors and a log-sum-exp per head: the
	// engine recomputes attention probabilities in the backward pass; per
	// token the logits and their gradient) and the KV cache of sampling
	// prompts_per_step × group_size sequences.
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

func (m Memory) String() string {
	return fmt.Sprintf("about %s: weights %s (%d parameters × 4 bytes), LoRA and optimiser %s (%d parameters × 24 bytes), activations and KV cache %s",
		MiB(m.Total), MiB(m.Weights), m.Params, MiB(m.Adapter), m.LoRAParams, MiB(m.Activations))
}

// EstimateMemory estimates the memory training job spec s takes on a base
// of shape mc (llama.ParseConfig of its config.json). It errs when the
// spec's LoRA targets are not valid.
func EstimateMemory(s jobspec.Spec, mc llama.Config) (Memory, error) {
	c := trainerConfig(s)
	if err := mc.Validate(); err != nil {
		return Memory{}, err
	}
	f := func(v int) float64 { return float64(v) }
	hidden, inter, layers := f(mc.Hidden), f(mc.Intermediate), f(mc.Layers)
	q, kv := f(mc.Heads*mc.HeadDim), f(mc.KVHeads*mc.HeadDim)
	var lora float64
	for _, t := range c.LoRATargets {
		var in, out float64
		switch t {
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
			return Memory{}, fmt.Errorf("%w: LoRA target %q", ErrJob, t)
		}
		lora += layers * f(c.LoRARank) * (in + out)
	}
	seq := f(c.MaxSeqLen)
	gas := max(c.GradientAccumulationSteps, 1)
	micro := f(max(c.PromptsPerStep/gas, 1) * c.GroupSize)
	tokens := micro * seq
	perTokenLayer := 4*hidden + 2*q + 2*kv + 3*inter + f(mc.Heads)
	acts := tokens*(layers*perTokenLayer+2*f(mc.Vocab)) +
		f(c.PromptsPerStep*c.GroupSize)*seq*layers*2*kv
	m := Memory{
		Params:      mc.NumParams(),
		LoRAParams:  int64(lora),
		Activations: int64(4 * acts),
	}
	m.Weights = 4 * m.Params
	m.Adapter = 24 * m.LoRAParams
	m.Total = m.Weights + m.Adapter + m.Activations
	return m, nil
}

// CheckMemory refuses m when it exceeds limit bytes (limit ≤ 0: no limit),
// with a message naming both.
func CheckMemory(m Memory, limit int64, what string) error {
	if limit > 0 && m.Total > limit {
		return fmt.Errorf("%w: the job needs %s, %s is %s", ErrMemory, m, what, MiB(limit))
	}
	return nil
}
