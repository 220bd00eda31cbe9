// Package sft is supervised pre-training of the built-in model from scratch:
// next-token cross-entropy on the answers of task problems, where a chosen
// fraction of the targets carry each task's typical mistake. A base trained
// to its plateau on such a mixture holds both behaviours, and GSPO then
// selects the correct one (see docs/gspo.md). The run is a pure function of
// its Config: same config, same weights, bit for bit.
package sft

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/zooai/gym/model"
	"github.com/zooai/gym/optim"
	"github.com/zooai/gym/prng"
	"github.com/zooai/gym/task"
)

// Config describes a pre-training run.
type Config struct {
	Model       model.Config `json:"model"`
	Tasks       []string     `json:"tasks"`
	BugFrac     float64      `json:"bug_frac"` // fraction of targets replaced by the buggy answer
	Steps       int          `json:"steps"`
	Batch       int          `json:"batch"` // problems per task per step
	LR          float64      `json:"learning_rate"`
	Warmup      int          `json:"warmup_steps"`
	WeightDecay float64      `json:"weight_decay"`
	Seed        uint64       `json:"seed"`
}

// ErrConfig reports an invalid pre-training config.
var ErrConfig = errors.New("sft: invalid config")

// Validate reports whether c describes a run that can start.
func (c Config) Validate() error {
	if err := c.Model.Validate(); err != nil {
		return err
	}
	if len(c.Tasks) == 0 || c.Steps < 1 || c.Batch < 1 || !(c.BugFrac >= 0 && c.BugFrac <= 1) {
		return fmt.Errorf("%w: tasks %v, steps %d, batch %d, bug_frac %v", ErrConfig, c.Tasks, c.Steps, c.Batch, c.BugFrac)
	}
	for _, n := range c.Tasks {
		t, err := task.Lookup(n)
		if err != nil {
			return err
		}
		if t.PromptLen()+t.AnswerLen()-1 > c.Model.Ctx {
			return fmt.Errorf("%w: task %s needs context %d, model has %d", ErrConfig, n, t.PromptLen()+t.AnswerLen()-1, c.Model.Ctx)
		}
	}
	return nil
}

// Progress is reported after every step.
type Progress struct {
	Step int
	Loss float64 // mean cross-entropy over answer tokens, averaged over tasks
	// Weights are the weights after the step; valid only during the
	// callback, which must not modify them.
	Weights *model.Weights
}

// Run trains a model from scratch and returns its weights. threads only
// changes the speed. progress, when not nil, is called after every step;
// ctx cancels between steps.
func Run(ctx context.Context, c Config, threads int, progress func(Progress)) (*model.Weights, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w, err := model.Init(c.Model, c.Seed)
	if err != nil {
		return nil, err
	}
	splits := make([]*task.Split, len(c.Tasks))
	for i, n := range c.Tasks {
		t, _ := task.Lookup(n)
		splits[i] = task.NewSplit(t, EvalSize)
	}
	params := w.Tensors()
	sizes := make([]int, len(params))
	pdata := make([][]float32, len(params))
	for i, p := range params {
		sizes[i], pdata[i] = len(p.Data), p.Data
	}
	opt, err := optim.New(optim.Config{Beta1: 0.9, Beta2: 0.98, Eps: 1e-8, WeightDecay: c.WeightDecay,
		Schedule: optim.Schedule{LR: c.LR, Warmup: c.Warmup}}, sizes)
	if err != nil {
		return nil, err
	}
	md := &model.Model{W: w, Threads: threads}
	for step := 1; step <= c.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g, _ := model.NewWeights(c.Model)
		var loss float64
		for ti, s := range splits {
			r := prng.New(c.Seed, 0x736674, uint64(ti), uint64(step)) // "sft"
			l, err := batchGrad(md, s, c, r, g, 1/float32(len(splits)))
			if err != nil {
				return nil, err
			}
			loss += l / float64(len(splits))
		}
		gt := g.Tensors()
		gdata := make([][]float32, len(gt))
		for i, t := range gt {
			gdata[i] = t.Data
		}
		if _, err := opt.Update(pdata, gdata); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(Progress{Step: step, Loss: loss, Weights: w})
		}
	}
	return w, nil
}

// EvalSize is the size of each task's held-out set.
const EvalSize = 500

// batchGrad adds weight·∇(mean answer cross-entropy) of one batch to g and
// returns the loss.
func batchGrad(md *model.Model, s *task.Split, c Config, r *prng.Source, g *model.Weights, weight float32) (float64, error) {
	t := s.Task
	pl, al := t.PromptLen(), t.AnswerLen()
	T := pl + al - 1 // inputs: the last answer token is only a target
	tokens := make([]int, c.Batch*T)
	targets := make([]int, c.Batch*al)
	for b := 0; b < c.Batch; b++ {
		p := s.Train(r)
		ans := p.Answer
		if r.Float64() < c.BugFrac {
			ans = t.Buggy(p)
		}
		seq := append(append([]int{}, p.Prompt...), ans...)
		copy(tokens[b*T:], seq[:T])
		copy(targets[b*al:], ans)
	}
	act, err := md.Forward(tokens, c.Batch, T)
	if err != nil {
		return 0, err
	}
	Vo := c.Model.Vocab
	dl := make([]float32, len(act.Logits))
	lp := make([]float32, Vo)
	var loss float64
	scale := weight / float32(c.Batch*al)
	for b := 0; b < c.Batch; b++ {
		for a := 0; a < al; a++ {
			row := (b*T + pl - 1 + a) * Vo
			model.LogSoftmax(lp, act.Logits[row:row+Vo])
			tgt := targets[b*al+a]
			loss -= float64(lp[tgt])
			for j := range lp {
				dl[row+j] = scale * float32(math.Exp(float64(lp[j])))
			}
			dl[row+tgt] -= scale
		}
	}
	if err := md.Backward(act, dl, g, nil); err != nil {
		return 0, err
	}
	return loss / float64(c.Batch*al), nil
}
