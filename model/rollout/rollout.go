// Package rollout generates completions from the model with the KV cache:
// G samples per prompt with temperature and top-k, recording at generation
// time the log-probability of every sampled token (π_old for GSPO), and
// greedy decoding for evaluation.
//
// Prompts are tokenized with the base model's tokenizer; prompts of the
// same length in tokens are prefilled together once (PrefillLast), the
// cache is repeated G ways and the G·P sequences are decoded step by step.
// A sequence stops at the model's end-of-sequence token (config.json's
// eos_token_id) when it samples one, or after the max-new-tokens limit;
// its completion is decoded to text for the task's reward. Everything is a
// pure function of the model, the problems and the random stream, and the
// same for any thread count.
package rollout

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
)

// Config controls sampling.
type Config struct {
	Temperature float64 // > 0; 1 samples from the model's distribution
	TopK        int     // 0: whole vocabulary; otherwise only the K most likely tokens
	// MaxNew is the most tokens a completion may have; 0: the longest
	// reference answer of the batch, in tokens (for the built-in tasks, the
	// fixed answer length).
	MaxNew int
	// Reward scores the completions (nil: reward.Default, the built-in
	// tasks' partial credit).
	Reward reward.Scorer
}

func (c Config) scorer() reward.Scorer {
	if c.Reward == nil {
		return reward.Default()
	}
	return c.Reward
}

// Failed says whether sc's reward of completion of p stood in for a failed
// call (reward.Failer; false for a scorer that cannot fail).
func Failed(sc reward.Scorer, p task.Problem, completion string) bool {
	f, ok := sc.(reward.Failer)
	return ok && f.Failed(reward.Sample{Prompt: p.Prompt, Answer: p.Answer, Completion: completion})
}

// Score is sc's reward and verdict for completion of p.
func score(sc reward.Scorer, p task.Problem, completion string) (float64, bool) {
	x := reward.Sample{Prompt: p.Prompt, Answer: p.Answer, Completion: completion}
	return sc.Score(x), sc.Correct(x)
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
	if c.MaxNew < 0 {
		return fmt.Errorf("%w: max new tokens %d < 0", ErrConfig, c.MaxNew)
	}
	return nil
}

// Rollouts are G completions for each of P problems. Sequence i = p·G + g is
// the g-th completion of problem p.
type Rollouts struct {
	Problems []task.Problem
	G        int
	Prompts  [][]int // [P] prompt token ids
	// Completions [P·G] are the sampled token ids, ending with the
	// end-of-sequence token when the sequence sampled one (what follows it
	// was never generated: it is masked out of training).
	Completions [][]int
	// OldLogP [P·G][len(Completions[i])] is log softmax(logits/T) of each
	// sampled token under the policy that sampled it, over the whole
	// vocabulary: the function the trainer computes for π_θ, so ratios
	// start at 1. Top-k restricts which tokens can be drawn, not this
	// log-probability.
	OldLogP [][]float32
	Texts   []string  // [P·G] decoded completions (end-of-sequence and special tokens left out)
	Rewards []float64 // [P·G], the reward (Config.Reward) of each completion
	Exact   []bool    // [P·G]
	// RewardFailed [P·G] marks the rewards that stand in for a failed call
	// to an environment server (reward.Failer); nil when none failed.
	RewardFailed []bool
	// Mask [P·G][len(Completions[i])], when not nil, marks the completion
	// tokens the model generated: an episode's completion holds the
	// environment's tokens too (FromEpisodes), which are context only and
	// not trained on (gspo.Batch.Mask). nil: every token is the model's.
	Mask [][]bool // Episodes [P·G], when not nil, are the episodes the rollouts lay out
	// (FromEpisodes): their turns, actions and observations, for traces.
	Episodes []*episode.Episode
}

// N is the number of sequences.
func (r *Rollouts) N() int { return len(r.Problems) * r.G }

// Tokens is the number of generated tokens (the model's, with a Mask).
func (r *Rollouts) Tokens() int {
	n := 0
	for i, c := range r.Completions {
		if r.Mask == nil {
			n += len(c)
			continue
		}
		for _, m := range r.Mask[i] {
			if m {
				n++
			}
		}
	}
	return n
}

// batch is the problems of a call tokenized, grouped by prompt length.
type batch struct {
	prompts [][]int
	groups  [][]int // indices into the problems, each group of equal prompt length, in order of first appearance
	maxNew  int
}

func prepare(tok *tokenizer.Tokenizer, problems []task.Problem, maxNew int) (*batch, error) {
	b := &batch{prompts: make([][]int, len(problems)), maxNew: maxNew}
	at := map[int]int{}
	for i, p := range problems {
		pr, ans, err := task.Tokenize(tok, p)
		if err != nil {
			return nil, err
		}
		b.prompts[i] = pr
		if maxNew == 0 {
			b.maxNew = max(b.maxNew, len(ans))
		}
		g, ok := at[len(pr)]
		if !ok {
			g = len(b.groups)
			at[len(pr)] = g
			b.groups = append(b.groups, nil)
		}
		b.groups[g] = append(b.groups[g], i)
	}
	return b, nil
}

// start prefills the prompts of one group and returns the cache repeated n
// ways with the next-token logits of each of its len(idx)·n sequences.
func (b *batch) start(md *llama.Model, idx []int, n int) (*llama.Cache, []float32, error) {
	pl := len(b.prompts[idx[0]])
	if pl+b.maxNew > md.W.Cfg.MaxPositions {
		return nil, nil, fmt.Errorf("rollout: %d prompt and %d new tokens exceed the model context %d", pl, b.maxNew, md.W.Cfg.MaxPositions)
	}
	ch, err := md.NewCache(len(idx), pl+b.maxNew)
	if err != nil {
		return nil, nil, err
	}
	tokens := make([]int, 0, len(idx)*pl)
	for _, i := range idx {
		tokens = append(tokens, b.prompts[i]...)
	}
	logits, err := md.PrefillLast(ch, tokens, pl)
	if err != nil || n == 1 {
		return ch, logits, err
	}
	if ch, err = ch.Repeat(n); err != nil {
		return nil, nil, err
	}
	V := md.W.Cfg.Vocab
	rep := make([]float32, 0, len(logits)*n)
	for s := range len(idx) {
		for range n {
			rep = append(rep, logits[s*V:(s+1)*V]...)
		}
	}
	return ch, rep, nil
}

// decode runs the sequences of a cache to the limit or their end: pick
// chooses each live sequence's next token from its logits, in sequence
// order. It returns each sequence's tokens (ending with the
// end-of-sequence token when one was picked).
func decode(md *llama.Model, ch *llama.Cache, logits []float32, maxNew int, pick func(s int, row []float32) int) ([][]int, error) {
	V, eos := md.W.Cfg.Vocab, md.W.Cfg.EOS
	out := make([][]int, ch.B)
	done := make([]bool, ch.B)
	step := make([]int, ch.B)
	for a := range maxNew {
		live := false
		for s := range ch.B {
			if done[s] {
				continue // fed its last token again below: its logits are ignored
			}
			t := pick(s, logits[s*V:(s+1)*V])
			out[s] = append(out[s], t)
			step[s] = t
			done[s] = slices.Contains(eos, t)
			live = live || !done[s]
		}
		if !live || a+1 == maxNew {
			break
		}
		var err error
		if logits, err = md.Step(ch, step); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CompletionText decodes a completion's ids without its end-of-sequence
// token: the text its reward is computed on.
func CompletionText(tok *tokenizer.Tokenizer, ids []int, eos []int) (string, error) {
	if n := len(ids); n > 0 && slices.Contains(eos, ids[n-1]) {
		ids = ids[:n-1]
	}
	return tok.Decode(ids, true)
}

// Generate samples G completions of up to c.MaxNew tokens for each problem.
func Generate(md *llama.Model, tok *tokenizer.Tokenizer, problems []task.Problem, G int, c Config, rng *prng.Source) (*Rollouts, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(problems) == 0 || G < 1 {
		return nil, fmt.Errorf("rollout: %d problems, G=%d", len(problems), G)
	}
	b, err := prepare(tok, problems, c.MaxNew)
	if err != nil {
		return nil, err
	}
	N, V := len(problems)*G, md.W.Cfg.Vocab
	ro := &Rollouts{Problems: problems, G: G, Prompts: b.prompts, Completions: make([][]int, N),
		OldLogP: make([][]float32, N), Texts: make([]string, N), Rewards: make([]float64, N), Exact: make([]bool, N)}
	lp := make([]float32, V)
	scaled := make([]float32, V)
	inv := float32(1 / c.Temperature)
	for _, idx := range b.groups {
		ch, logits, err := b.start(md, idx, G)
		if err != nil {
			return nil, err
		}
		comps, err := decode(md, ch, logits, b.maxNew, func(s int, row []float32) int {
			for j, v := range row {
				scaled[j] = v * inv
			}
			llama.LogSoftmax(lp, scaled)
			t := sample(lp, c.TopK, rng)
			i := idx[s/G]*G + s%G
			ro.OldLogP[i] = append(ro.OldLogP[i], lp[t])
			return t
		})
		if err != nil {
			return nil, err
		}
		for s, comp := range comps {
			ro.Completions[idx[s/G]*G+s%G] = comp
		}
	}
	sc := c.scorer()
	for i, comp := range ro.Completions {
		if ro.Texts[i], err = CompletionText(tok, comp, md.W.Cfg.EOS); err != nil {
			return nil, err
		}
		ro.Rewards[i], ro.Exact[i] = score(sc, problems[i/G], ro.Texts[i])
		if Failed(sc, problems[i/G], ro.Texts[i]) {
			if ro.RewardFailed == nil {
				ro.RewardFailed = make([]bool, len(ro.Completions))
			}
			ro.RewardFailed[i] = true
		}
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
		sorted := slices.Clone(lp)
		slices.SortFunc(sorted, func(a, b float32) int { return -cmpFloat(a, b) })
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

func cmpFloat(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Greedy decodes each problem by always taking the most likely token (the
// lowest id among equals), up to maxNew tokens (0: the longest answer of
// the problems, in tokens) or the end-of-sequence token, prefilling at most
// batch prompts at once. It returns the completions' text.
func Greedy(md *llama.Model, tok *tokenizer.Tokenizer, problems []task.Problem, maxNew, batchSize int) ([]string, error) {
	if batchSize < 1 {
		batchSize = len(problems)
	}
	b, err := prepare(tok, problems, maxNew)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(problems))
	for _, group := range b.groups {
		for lo := 0; lo < len(group); lo += batchSize {
			idx := group[lo:min(lo+batchSize, len(group))]
			ch, logits, err := b.start(md, idx, 1)
			if err != nil {
				return nil, err
			}
			comps, err := decode(md, ch, logits, b.maxNew, func(_ int, row []float32) int {
				best := 0
				for j, v := range row {
					if v > row[best] {
						best = j
					}
				}
				return best
			})
			if err != nil {
				return nil, err
			}
			for s, comp := range comps {
				if out[idx[s]], err = CompletionText(tok, comp, md.W.Cfg.EOS); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// Score is held-out performance under greedy decoding.
type Score struct {
	Accuracy float64 `json:"accuracy"` // fraction of correct answers (reward.Scorer's Correct)
	Reward   float64 `json:"reward"`   // mean reward
}

// Evaluate decodes every problem greedily (up to the longest answer's
// length in tokens) and scores the answers with sc (nil: reward.Default,
// partial credit, correct meaning exact).
func Evaluate(md *llama.Model, tok *tokenizer.Tokenizer, problems []task.Problem, sc reward.Scorer) (Score, error) {
	comps, err := Greedy(md, tok, problems, 0, 500)
	if err != nil {
		return Score{}, err
	}
	if sc == nil {
		sc = reward.Default()
	}
	var s Score
	for i, p := range problems {
		r, ok := score(sc, p, comps[i])
		s.Reward += r
		if ok {
			s.Accuracy++
		}
	}
	n := float64(len(problems))
	return Score{Accuracy: s.Accuracy / n, Reward: s.Reward / n}, nil
}
