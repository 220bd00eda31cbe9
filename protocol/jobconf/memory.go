package jobconf

import (
	"errors"
	"fmt"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobspec"
)

// ErrMemory reports a job whose estimated memory exceeds what a worker
// allows.
var ErrMemory = errors.New("jobconf: the job does not fit this worker's memory")

// Memory is the estimated peak memory of training a job on a worker, in
// bytes, by term, computed from config.json and the job's settings before
// anything is loaded (hardware.Memory; the formula is hardware.Estimate's,
// documented in docs/job-file.md, "Where a job runs").
type Memory = hardware.Memory

// MiB formats a byte count in MiB (three significant digits below 100).
func MiB(b int64) string { return hardware.MiB(b) }

// ShapeOf is what the memory estimate needs of a base: mc's dimensions and
// parameter count.
func ShapeOf(mc llama.Config) hardware.Shape {
	return hardware.Shape{Params: mc.NumParams(), Hidden: mc.Hidden, Intermediate: mc.Intermediate, Layers: mc.Layers,
		Heads: mc.Heads, KVHeads: mc.KVHeads, HeadDim: mc.HeadDim, Vocab: mc.Vocab}
}

// EstimateMemory estimates the memory training job spec s takes on the go
// backend (float32 weights, whatever config.json's dtype) on a base of
// shape mc (llama.ParseConfig of its config.json). It errs when the spec's
// LoRA targets are not valid.
func EstimateMemory(s jobspec.Spec, mc llama.Config) (Memory, error) {
	return EstimateMemoryFor(s, mc, hardware.GoTarget)
}

// EstimateMemoryFor is EstimateMemory for target t: the backend, the
// dtype it trains in and 4-bit quantisation (hardware.Estimate).
func EstimateMemoryFor(s jobspec.Spec, mc llama.Config, t hardware.Target) (Memory, error) {
	if err := mc.Validate(); err != nil {
		return Memory{}, err
	}
	m, err := hardware.Estimate(s, ShapeOf(mc), t)
	if err != nil {
		return Memory{}, fmt.Errorf("%w: %w", ErrJob, err)
	}
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

// ShapeFromConfig parses a base's config.json (llama.ParseConfig, which
// also gates the architectures the engine knows) into its Shape.
func ShapeFromConfig(configJSON []byte) (hardware.Shape, error) {
	mc, err := llama.ParseConfig(configJSON)
	if err != nil {
		return hardware.Shape{}, err
	}
	if err := mc.Validate(); err != nil {
		return hardware.Shape{}, err
	}
	return ShapeOf(mc), nil
}
