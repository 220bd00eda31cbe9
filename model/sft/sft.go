// Package sft is supervised pre-training of the built-in base model from
// scratch: a Llama-architecture network (package llama) initialised as
// transformers initialises one, trained with AdamW on next-token
// cross-entropy over the answers of task problems, written as text and
// tokenized by the base's tokenizer, where a chosen fraction of the targets
// carry each task's typical mistake. A base trained to its plateau on such
// a mixture holds both behaviours, and GSPO then selects the correct one
// (see docs/gspo.md). The run is a pure function of its Config and the
// tokenizer: same inputs, same weights, bit for bit, for any thread count.
package sft

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/optim"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
)

// Model is the shape of the model a run trains: a LlamaForCausalLM with
// untied embeddings, no biases and plain RoPE, in config.json's terms. (A
// struct of its own, not llama.Config, so that a recipe's JSON and hash do
// not change when llama.Config grows a field.)
type Model struct {
	Vocab        int     `json:"vocab_size"`
	Hidden       int     `json:"hidden_size"`
	Intermediate int     `json:"intermediate_size"`
	Layers       int     `json:"num_hidden_layers"`
	Heads        int     `json:"num_attention_heads"`
	KVHeads      int     `json:"num_key_value_heads"`
	HeadDim      int     `json:"head_dim"`
	MaxPositions int     `json:"max_position_embeddings"`
	NormEps      float64 `json:"rms_norm_eps"`
	RopeTheta    float64 `json:"rope_theta"`
	EOS          int     `json:"eos_token_id"` // -1: none
}

// Config returns m as a llama.Config.
func (m Model) Config() llama.Config {
	c := llama.Config{Arch: llama.Llama, Vocab: m.Vocab, Hidden: m.Hidden, Intermediate: m.Intermediate,
		Layers: m.Layers, Heads: m.Heads, KVHeads: m.KVHeads, HeadDim: m.HeadDim, MaxPositions: m.MaxPositions,
		NormEps: m.NormEps, RopeTheta: m.RopeTheta, BOS: -1, PAD: -1}
	if m.EOS >= 0 {
		c.EOS = []int{m.EOS}
	}
	return c
}

// Config describes a pre-training run.
type Config struct {
	Model       Model    `json:"model"`
	InitStd     float64  `json:"initializer_range"` // std of the normal initialisation of matrices and embeddings
	Tasks       []string `json:"tasks"`
	BugFrac     float64  `json:"bug_frac"` // fraction of targets replaced by the buggy answer
	Steps       int      `json:"steps"`
	Batch       int      `json:"batch"` // problems per task per step
	LR          float64  `json:"learning_rate"`
	Warmup      int      `json:"warmup_steps"`
	WeightDecay float64  `json:"weight_decay"`
	Seed        uint64   `json:"seed"`
}

// ErrConfig reports an invalid pre-training config.
var ErrConfig = errors.New("sft: invalid config")

// Validate reports whether c describes a run that can start.
func (c Config) Validate() error {
	if err := c.Model.Config().Validate(); err != nil {
		return err
	}
	if c.Model.EOS >= c.Model.Vocab {
		return fmt.Errorf("%w: eos_token_id %d outside the vocabulary of %d", ErrConfig, c.Model.EOS, c.Model.Vocab)
	}
	if len(c.Tasks) == 0 || c.Steps < 1 || c.Batch < 1 || c.Batch > 1<<16 || !(c.BugFrac >= 0 && c.BugFrac <= 1) ||
		!(c.InitStd > 0 && c.InitStd < 10) {
		return fmt.Errorf("%w: tasks %v, steps %d, batch %d, bug_frac %v, initializer_range %v",
			ErrConfig, c.Tasks, c.Steps, c.Batch, c.BugFrac, c.InitStd)
	}
	for _, n := range c.Tasks {
		t, err := task.Lookup(n)
		if err != nil {
			return err
		}
		pl, al := lengths(t)
		if need := pl + al - 1; need > c.Model.MaxPositions {
			return fmt.Errorf("%w: task %s needs %d positions, the model has %d", ErrConfig, n, need, c.Model.MaxPositions)
		}
	}
	return nil
}

// Init returns weights of shape c initialised as transformers'
// _init_weights does for a Llama model: every projection, the embeddings
// and the output head drawn from normal(0, std), biases zero, every
// RMSNorm gain one. Draws come from package prng, one stream per tensor
// (seed, "init", tensor index in checkpoint order), so the result depends
// only on the arguments.
func Init(c llama.Config, std float64, seed uint64) (*llama.Weights, error) {
	w, err := llama.NewWeights(c)
	if err != nil {
		return nil, err
	}
	for i, t := range w.Tensors() {
		switch {
		case len(t.Shape) == 2:
			r := prng.New(seed, 0x696e6974, uint64(i)) // "init"
			for j := range t.Data {
				t.Data[j] = float32(std * r.Norm())
			}
		case isNorm(t.Name):
			for j := range t.Data {
				t.Data[j] = 1
			}
		}
	}
	return w, nil
}

// isNorm reports whether a one-dimensional tensor is an RMSNorm gain
// (every 1-D tensor that is not a bias).
func isNorm(name string) bool {
	return len(name) < 5 || name[len(name)-5:] != ".bias"
}

// Progress is reported after every step.
type Progress struct {
	Step int
	Loss float64 // mean cross-entropy over answer tokens, averaged over tasks
	// Weights are the weights after the step; valid only during the
	// callback, which must not modify them.
	Weights *llama.Weights
}

// Run trains a model from scratch and returns its weights. Problems are
// tokenized by tok, whose vocabulary must be the model's and which must
// give one token per character (the built-in tokenizer does). threads only changes the speed. progress, when not nil,
// is called after every step; ctx cancels between steps.
func Run(ctx context.Context, c Config, tok *tokenizer.Tokenizer, threads int, progress func(Progress)) (*llama.Weights, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if tok == nil || tok.VocabSize() != c.Model.Vocab {
		return nil, fmt.Errorf("%w: the tokenizer's vocabulary does not match the model's %d", ErrConfig, c.Model.Vocab)
	}
	w, err := Init(c.Model.Config(), c.InitStd, c.Seed)
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
	md, err := llama.New(w, nil, threads)
	if err != nil {
		return nil, err
	}
	for step := 1; step <= c.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g, _ := llama.NewWeights(w.Cfg)
		var loss float64
		for ti, s := range splits {
			r := prng.New(c.Seed, 0x736674, uint64(ti), uint64(step)) // "sft"
			l, err := batchGrad(md, tok, s, c, r, g, 1/float32(len(splits)))
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

// lengths are the prompt and answer lengths of a built-in task's problems
// in characters (the same for every problem of the task), read from one
// problem drawn from a stream of its own.
func lengths(t task.Task) (prompt, answer int) {
	p := t.Generate(prng.New(0, 0x6c656e)) // "len"
	return len(p.Prompt), len(p.Answer)
}

// Encode returns the token ids of problem p with answer ans, tokenized by
// tok, checking that every character is one token (so the answer's
// positions are known).
func Encode(tok *tokenizer.Tokenizer, p task.Problem, ans string) ([]int, error) {
	text := p.Prompt + ans
	ids, err := tok.Encode(text, false)
	if err != nil {
		return nil, err
	}
	if len(ids) != len(text) {
		return nil, fmt.Errorf("%w: the tokenizer makes %d tokens of the %d characters of %q", ErrConfig, len(ids), len(text), text)
	}
	return ids, nil
}

// batchGrad adds weight·∇(mean answer cross-entropy) of one batch to g and
// returns the loss.
func batchGrad(md *llama.Model, tok *tokenizer.Tokenizer, s *task.Split, c Config, r *prng.Source, g *llama.Weights, weight float32) (float64, error) {
	t := s.Task
	pl, al := lengths(t)
	T := pl + al - 1 // inputs: the last answer token is only a target
	tokens := make([]int, c.Batch*T)
	targets := make([]int, c.Batch*T)
	for b := range c.Batch {
		p := s.Train(r)
		ans := p.Answer
		if r.Float64() < c.BugFrac {
			ans = t.Buggy(p)
		}
		ids, err := Encode(tok, p, ans)
		if err != nil {
			return 0, err
		}
		copy(tokens[b*T:], ids[:T])
		for i := range T {
			targets[b*T+i] = -1
			if i >= pl-1 {
				targets[b*T+i] = ids[i+1]
			}
		}
	}
	act, err := md.Forward(tokens, c.Batch, T)
	if err != nil {
		return 0, err
	}
	V := c.Model.Vocab
	lp, err := llama.TokenLogProbs(md.Threads, act.Logits, V, targets)
	if err != nil {
		return 0, err
	}
	n := float64(c.Batch * al)
	var loss float64
	dlp := make([]float32, len(targets))
	scale := -weight / float32(n)
	for i, tg := range targets {
		if tg >= 0 {
			loss -= float64(lp[i])
			dlp[i] = scale
		}
	}
	dl, err := llama.TokenLogProbsBackward(md.Threads, act.Logits, V, targets, dlp)
	if err != nil {
		return 0, err
	}
	if err := md.BackwardFull(act, dl, g); err != nil {
		return 0, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return 0, fmt.Errorf("sft: loss is %v", loss)
	}
	return loss / n, nil
}
