// Package backend is the seam between a gym worker and the engine that
// trains for it. The worker keeps identity, keys, the ring, delta files,
// artifacts and everything said to hanzod; a backend only computes: it
// samples, scores (with the job's task), runs GSPO steps and holds the
// adapter. Two backends exist: "go", the built-in engine (package trainer,
// bit-for-bit replayable), and "torch", a supervised Python process
// (package node/backend/torch, docs/backends.md).
package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/trace"
)

// Names of the backends.
const (
	Go    = "go"
	Torch = "torch"
)

// The floating-point types a backend trains in (DType), as delta metadata
// names them (jobconf.KeyDType).
const (
	Float32  = "float32"
	BFloat16 = "bfloat16"
)

// Parse checks a backend name ("go" or "torch").
func Parse(s string) (string, error) {
	switch s {
	case Go, Torch:
		return s, nil
	}
	return "", fmt.Errorf("backend: %q is not a backend (want go or torch)", s)
}

// ParseList parses a comma-separated list of backend names ("go,go,torch").
func ParseList(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		b, err := Parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Trainer is one worker's training state in a backend: what the worker's
// epoch loop calls.
type Trainer interface {
	// Step runs one training step (sample, score, GSPO updates).
	Step(ctx context.Context) (trainer.StepStats, error)
	// Adapter is the current adapter. The worker may read it until the
	// next call; it must not change it.
	Adapter() *llama.Adapter
	// SetAdapter continues from a (the ring's average), keeping the
	// optimiser's moments and update count.
	SetAdapter(ctx context.Context, a *llama.Adapter) error
	// Traces are the rollout traces the last Step trained on (nil before
	// the first): the header's policy, step, sampler and vocabulary
	// filled in; the worker adds the model, dataset, job, node and epoch.
	Traces() *trace.Set
	// Close releases what the trainer holds (not the backend process).
	Close() error
}

// ErrUnservable reports a job the backend can never train on this
// machine (settings it refuses, hardware it lacks): the worker refuses the
// job instead of retrying it.
var ErrUnservable = errors.New("backend: the job cannot be trained by this backend here")

// Job is what a backend needs to start training.
type Job struct {
	Base *basemodel.Base
	// BaseDir is Base's Hugging Face directory when it came from one (a
	// base fetched by CID, verified in the worker's cache); empty for the
	// backend's own base. The go backend uses Base; a backend that loads
	// the model itself (torch) loads this directory.
	BaseDir   string
	Config    trainer.Config
	Worker    uint64 // the worker's index in the job: which problems and samples are its own
	Threads   int
	FirstStep int            // steps already taken (the state's step count)
	Adapter   *llama.Adapter // the adapter to start from
	// DType is the type the job asks for (jobspec's dtype; "" any).
	DType string
}

// TrainDType is the type a job trains in on a backend whose own type is
// set ("" when it follows each job: the torch backend without
// --torch-dtype): set when not empty (a worker whose type differs from the
// job's refuses it: jobconf.Plan.ServesDType); else the job's type when it
// names one; else the base's stored type where deltas may claim it —
// bfloat16 for a bfloat16 checkpoint, so the process holds the weights at
// their file size — and float32 otherwise (a float16 checkpoint widened
// exactly, a float32 one as it is).
func TrainDType(set, job string, mc llama.Config) string {
	switch {
	case set != "":
		return set
	case job != "":
		return job
	case mc.DType == BFloat16:
		return BFloat16
	}
	return Float32
}

// Backend starts trainers.
type Backend interface {
	// Name is Go or Torch.
	Name() string
	// DType is the floating-point type the backend trains in, Float32 or
	// BFloat16, or "" when it follows each job (TrainDType): the worker
	// signs the trainer's type into every delta, and the judge checks
	// the delta within that type's tolerances.
	DType() string
	Start(ctx context.Context, j Job) (Trainer, error)
	// Close stops what the backend runs (a supervised process).
	Close() error
}

// DirLoader is implemented by a Backend that loads the base model from
// its directory itself (Job.BaseDir, or its own) and reads only the
// config and tokenizer of Job.Base: the worker gives it a base opened with
// basemodel.OpenConfig and never decodes the weights in its own process.
type DirLoader interface {
	LoadsBaseDir() bool
}

// DecodesWeights reports whether b trains on the base's weights decoded in
// the worker's process (the go backend), rather than loading the base's
// directory itself (a DirLoader: torch).
func DecodesWeights(b Backend) bool {
	d, ok := b.(DirLoader)
	return !ok || !d.LoadsBaseDir()
}

// GoBackend is the built-in engine.
type GoBackend struct{}

// Name is Go.
func (GoBackend) Name() string { return Go }

// DType is Float32: the Go engine trains in nothing else.
func (GoBackend) DType() string { return Float32 }

// Close does nothing.
func (GoBackend) Close() error { return nil }

// Start resumes package trainer from j.
func (GoBackend) Start(_ context.Context, j Job) (Trainer, error) {
	if j.Base.ConfigOnly {
		return nil, fmt.Errorf("backend: the go engine trains on the base's weights: %w (base %s); open it with basemodel.Open", basemodel.ErrConfigOnly, j.Base.Name)
	}
	g := &goTrainer{j: j}
	tr, err := trainer.Resume(j.Base.Weights, j.Base.Tokenizer, j.Config, j.Worker, j.Threads, trainer.State{Step: j.FirstStep, Adapter: j.Adapter})
	if err != nil {
		return nil, err
	}
	g.tr = tr
	return g, nil
}

type goTrainer struct {
	j      Job
	tr     *trainer.Trainer
	policy string // digest of the adapter the last step sampled with
}

func (g *goTrainer) Step(ctx context.Context) (trainer.StepStats, error) {
	policy := fmt.Sprintf("%x", llama.Digest(g.tr.Adapter().Views()))
	st, err := g.tr.Step(ctx)
	if err == nil {
		g.policy = policy
	}
	return st, err
}

// Traces are the rollouts of the last step: sampled from
// prng.New(seed, task.StreamSample, worker, step), as trainer.Step does.
func (g *goTrainer) Traces() *trace.Set {
	ro := g.tr.Rollouts()
	if ro == nil {
		return nil
	}
	c, k := g.j.Config, g.tr.StepCount()
	return trace.FromRollouts(trace.Header{Policy: g.policy, Step: k, Seed: c.Seed, Stream: []uint64{task.StreamSample, g.j.Worker, uint64(k)},
		Temperature: c.Temperature, TopK: c.TopK, Vocab: g.j.Base.Weights.Cfg.Vocab}, ro)
}
func (g *goTrainer) Adapter() *llama.Adapter { return g.tr.Adapter() }
func (g *goTrainer) Close() error            { return nil }

// SetAdapter resumes from the trainer's state with a in place of its
// adapter, as the worker did before the seam existed.
func (g *goTrainer) SetAdapter(_ context.Context, a *llama.Adapter) error {
	tr, err := g.tr.Rebase(a)
	if err != nil {
		return err
	}
	g.tr = tr
	return nil
}

// Trainer returns the underlying trainer of a go backend's Trainer (nil
// for another backend's).
func Underlying(t Trainer) *trainer.Trainer {
	if g, ok := t.(*goTrainer); ok {
		return g.tr
	}
	return nil
}
