// Package probe measures what a base model does on a task's held-out
// problems under greedy decoding with package llama: how often its answer
// is exact, how often it is the task's typical mistake, and its mean
// partial-credit reward. It is how the built-in base's recipe is tuned and
// checked (mkbase, basemodel's tests); package heldout is the evaluation
// the trainer and hanzod use.
package probe

import (
	"fmt"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
)

// Result is a model's greedy behaviour on n held-out problems of a task.
type Result struct {
	Task   string
	N      int
	Exact  float64 // fraction of exact answers
	Buggy  float64 // among problems whose buggy answer differs from the right one, the fraction answered with the buggy answer
	Reward float64 // mean partial-credit reward
}

func (r Result) String() string {
	return fmt.Sprintf("%s exact %.3f buggy %.3f reward %.3f", r.Task, r.Exact, r.Buggy, r.Reward)
}

// Greedy returns the greedy answers (answerLen tokens each) of md to the
// problems, tokenized by tok, which share one prompt length, decoding in
// batches with a KV cache; ties go to the lowest id.
func Greedy(md *llama.Model, tok *tokenizer.Tokenizer, problems []task.Problem, answerLen int) ([][]int, error) {
	const batch = 250
	out := make([][]int, 0, len(problems))
	V := md.W.Cfg.Vocab
	for b0 := 0; b0 < len(problems); b0 += batch {
		ps := problems[b0:min(b0+batch, len(problems))]
		B := len(ps)
		var tokens []int
		pl := 0
		for i, p := range ps {
			ids, _, err := task.Tokenize(tok, p)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				pl = len(ids)
			}
			if len(ids) != pl {
				return nil, fmt.Errorf("probe: prompts of lengths %d and %d", pl, len(ids))
			}
			tokens = append(tokens, ids...)
		}
		ch, err := md.NewCache(B, pl+answerLen)
		if err != nil {
			return nil, err
		}
		logits, err := md.PrefillLast(ch, tokens, pl)
		if err != nil {
			return nil, err
		}
		ans := make([][]int, B)
		for i := range answerLen {
			next := make([]int, B)
			for b := range B {
				row := logits[b*V : (b+1)*V]
				best := 0
				for v, x := range row {
					if x > row[best] {
						best = v
					}
				}
				next[b] = best
				ans[b] = append(ans[b], best)
			}
			if i+1 < answerLen {
				if logits, err = md.Step(ch, next); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, ans...)
	}
	return out, nil
}

// Measure runs Greedy on the first n held-out problems of the named task
// (task.NewSplit(t, n).Eval), tokenized by tok.
func Measure(w *llama.Weights, tok *tokenizer.Tokenizer, taskName string, n, threads int) (Result, error) {
	t, err := task.Lookup(taskName)
	if err != nil {
		return Result{}, err
	}
	md, err := llama.New(w, nil, threads)
	if err != nil {
		return Result{}, err
	}
	problems := task.NewSplit(t, n).Eval
	_, ans, err := task.Tokenize(tok, problems[0])
	if err != nil {
		return Result{}, err
	}
	ids, err := Greedy(md, tok, problems, len(ans))
	if err != nil {
		return Result{}, err
	}
	r := Result{Task: taskName, N: n}
	differ := 0
	for i, p := range problems {
		comp, err := tok.Decode(ids[i], true)
		if err != nil {
			return Result{}, err
		}
		r.Reward += task.Reward(p, comp)
		if task.Exact(p, comp) {
			r.Exact++
		}
		if bug := t.Buggy(p); !task.Exact(p, bug) {
			differ++
			if bug == comp {
				r.Buggy++
			}
		}
	}
	r.Exact /= float64(n)
	r.Reward /= float64(n)
	if differ > 0 {
		r.Buggy /= float64(differ)
	}
	return r, nil
}
