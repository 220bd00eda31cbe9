// Package rollout generates completions from the model with the KV cache:
// G samples per prompt with temperature and top-k, recording at generation
// time the log-probability of every sampled token (π_old for GSPO), and
// greedy decoding for evaluation.
package rollout

import (
	"errors"
	"fmt"
	"math"

	"github.com/zooai/gym/model"
	"github.com/zooai/gym/prng"
	"github.com/zooai/gym/task"
)

// Config controls sampling.
type Config struct {
	Temperature float64 // > 0; 1 samples from the model's distribution
	TopK        int     // 0: whole vocabulary; otherwise only the K most likely tokens
}

// ErrConfig reports invalid sampling settings.
var ErrConfig = errors.New("rollout: invalid config")

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if !(c.Temperature > 0) || math.IsInf(c.Temperature, 0) {
		return fmt.Errorf("%w: temperature %v must be positive and finite", ErrConfig, c.Temperature)
	}
	if c.TopK < 0 {
		return fmt.Errorf("%w: top_k %d < 0", ErrConfig, c.TopK)
	}
	return nil
}

// Rollouts are G completions for each of P problems. Sequence i = p·G + g is
// the g-th completion of problem p.
type Rollouts struct {
	Problems []task.Problem
	G        int
	// Tokens holds every sequence, prompt then completion, row by row
	// ([P·G, PromptLen+AnswerLen]).
	Tokens               []int
	PromptLen, AnswerLen int
	// OldLogP [P·G, AnswerLen] is log softmax(logits/T) of each sampled token
	// under the policy that sampled it, over the whole vocabulary: the same
	// function the trainer computes for π_θ, so ratios start at 1. Top-k
	// restricts which tokens can be drawn, not this log-probability.
	OldLogP []float32
	Rewards []float64 // [P·G], partial credit in [0, 1]
	Exact   []bool    // [P·G]
}

// N is the number of sequences.
func (r *Rollouts) N() int { return len(r.Problems) * r.G }

// Completion returns the answer tokens of sequence i.
func (r *Rollouts) Completion(i int) []int {
	T := r.PromptLen + r.AnswerLen
	return r.Tokens[i*T+r.PromptLen : (i+1)*T]
}

// Generate samples G completions of AnswerLen tokens for each problem. All
// prompts must have the same length and all answers the same length.
func Generate(md *model.Model, problems []task.Problem, G int, c Config, rng *prng.Source) (*Rollouts, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(problems) == 0 || G < 1 {
		return nil, fmt.Errorf("rollout: %d problems, G=%d", len(problems), G)
	}
	pl, al := len(problems[0].Prompt), len(problems[0].Answer)
	for _, p := range problems {
		if len(p.Prompt) != pl || len(p.Answer) != al {
			return nil, errors.New("rollout: problems of different lengths in one batch")
		}
	}
	N, T, Vo := len(problems)*G, pl+al, md.W.Cfg.Vocab
	if T > md.W.Cfg.Ctx+1 {
		return nil, fmt.Errorf("rollout: sequences of %d tokens exceed the model context %d", T, md.W.Cfg.Ctx)
	}
	ro := &Rollouts{Problems: problems, G: G, Tokens: make([]int, N*T), PromptLen: pl, AnswerLen: al,
		OldLogP: make([]float32, N*al), Rewards: make([]float64, N), Exact: make([]bool, N)}
	for i := 0; i < N; i++ {
		copy(ro.Tokens[i*T:], problems[i/G].Prompt)
	}
	ch := md.NewCache(N)
	step := make([]int, N)
	var logits []float32
	var err error
	for pos := 0; pos < pl; pos++ {
		for i := range step {
			step[i] = ro.Tokens[i*T+pos]
		}
		if logits, err = md.Step(ch, step); err != nil {
			return nil, err
		}
	}
	lp := make([]float32, Vo)
	scaled := make([]float32, Vo)
	inv := float32(1 / c.Temperature)
	for a := 0; a < al; a++ {
		for i := 0; i < N; i++ {
			row := logits[i*Vo : (i+1)*Vo]
			for j, v := range row {
				scaled[j] = v * inv
			}
			model.LogSoftmax(lp, scaled)
			tok := sample(lp, c.TopK, rng)
			ro.Tokens[i*T+pl+a] = tok
			ro.OldLogP[i*al+a] = lp[tok]
			step[i] = tok
		}
		if a+1 < al {
			if logits, err = md.Step(ch, step); err != nil {
				return nil, err
			}
		}
	}
	for i := 0; i < N; i++ {
		comp := ro.Completion(i)
		ro.Rewards[i] = task.Reward(problems[i/G], comp)
		ro.Exact[i] = task.Exact(problems[i/G], comp)
	}
	return ro, nil
}

// sample draws a token from log-probabilities lp restricted to the topK most
// likely tokens (ties broken towards the lower id), with one uniform draw.
func sample(lp []float32, topK int, rng *prng.Source) int {
	allowed := func(int) bool { return true }
	if topK > 0 && topK < len(lp) {
		// The k-th largest value is the threshold; ties at it are admitted
		// in id order until k tokens are in.
		sorted := make([]float32, len(lp))
		copy(sorted, lp)
		for i := 0; i < topK; i++ { // partial selection sort, K is small
			m := i
			for j := i + 1; j < len(sorted); j++ {
				if sorted[j] > sorted[m] {
					m = j
				}
			}
			sorted[i], sorted[m] = sorted[m], sorted[i]
		}
		thr := sorted[topK-1]
		above := 0
		for _, v := range lp {
			if v > thr {
				above++
			}
		}
		keep := make([]bool, len(lp))
		ties := topK - above
		for j, v := range lp {
			if v > thr {
				keep[j] = true
			} else if v == thr && ties > 0 {
				keep[j] = true
				ties--
			}
		}
		allowed = func(j int) bool { return keep[j] }
	}
	var total float64
	for j, v := range lp {
		if allowed(j) {
			total += math.Exp(float64(v))
		}
	}
	u := rng.Float64() * total
	last := 0
	for j, v := range lp {
		if !allowed(j) {
			continue
		}
		last = j
		u -= math.Exp(float64(v))
		if u < 0 {
			return j
		}
	}
	return last
}

// Greedy decodes AnswerLen tokens for each problem by always taking the most
// likely token, in batches of at most batch sequences. It returns the
// completions.
func Greedy(md *model.Model, problems []task.Problem, batch int) ([][]int, error) {
	if batch < 1 {
		batch = len(problems)
	}
	out := make([][]int, 0, len(problems))
	Vo := md.W.Cfg.Vocab
	for lo := 0; lo < len(problems); lo += batch {
		ps := problems[lo:min(lo+batch, len(problems))]
		pl, al := len(ps[0].Prompt), len(ps[0].Answer)
		ch := md.NewCache(len(ps))
		step := make([]int, len(ps))
		var logits []float32
		var err error
		for pos := 0; pos < pl; pos++ {
			for i, p := range ps {
				if len(p.Prompt) != pl || len(p.Answer) != al {
					return nil, errors.New("rollout: problems of different lengths in one batch")
				}
				step[i] = p.Prompt[pos]
			}
			if logits, err = md.Step(ch, step); err != nil {
				return nil, err
			}
		}
		comps := make([][]int, len(ps))
		for a := 0; a < al; a++ {
			for i := range ps {
				row := logits[i*Vo : (i+1)*Vo]
				best := 0
				for j, v := range row {
					if v > row[best] {
						best = j
					}
				}
				comps[i] = append(comps[i], best)
				step[i] = best
			}
			if a+1 < al {
				if logits, err = md.Step(ch, step); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, comps...)
	}
	return out, nil
}

// Score is held-out performance under greedy decoding.
type Score struct {
	Accuracy float64 `json:"accuracy"` // fraction of exact answers
	Reward   float64 `json:"reward"`   // mean partial-credit reward
}

// Evaluate decodes every problem greedily and scores the answers.
func Evaluate(md *model.Model, problems []task.Problem) (Score, error) {
	comps, err := Greedy(md, problems, 500)
	if err != nil {
		return Score{}, err
	}
	var s Score
	for i, p := range problems {
		s.Reward += task.Reward(p, comps[i])
		if task.Exact(p, comps[i]) {
			s.Accuracy++
		}
	}
	n := float64(len(problems))
	return Score{Accuracy: s.Accuracy / n, Reward: s.Reward / n}, nil
}
