// Package heldout evaluates a checkpoint (base weights plus an optional
// LoRA adapter) on a task's held-out problems, the set task.NewSplit draws
// and the trainer never trains on: exact-match accuracy and partial-credit
// reward under greedy decoding, and the teacher-forced loss of the
// reference answers. `gym eval` and the orchestrator's delta scoring use it.
package heldout

import (
	"errors"
	"fmt"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
)

// MaxN is the largest held-out set Evaluate draws: task.NewSplit draws
// distinct problems and would not end for a size beyond a task's problem
// space.
const MaxN = 5000

// lossBatch is the number of sequences per forward pass in Loss.
const lossBatch = 128

// ErrInput reports arguments Evaluate or Loss cannot work with.
var ErrInput = errors.New("heldout: invalid input")

// Result is a checkpoint's held-out performance.
type Result struct {
	Task     string  `json:"task"`
	N        int     `json:"n"`
	Accuracy float64 `json:"accuracy"` // fraction of correct answers (exact for a built-in task), greedy decoding
	Reward   float64 `json:"reward"`   // mean reward (partial credit for a built-in task), greedy decoding
	Loss     float64 `json:"loss"`     // mean per-token NLL of the reference answers, teacher-forced (nats)
}

// Evaluate scores base (whose tokenizer is tok) with adapter a (nil: the
// base alone) on the first n held-out problems of the named task
// (task.NewSplit(t, n).Eval, the set the trainer evaluates on when its
// eval_size is n). threads only changes the speed: the result is the same
// for any value.
func Evaluate(base *llama.Weights, tok *tokenizer.Tokenizer, a *llama.Adapter, taskName string, n int, threads int) (Result, error) {
	t, err := task.Lookup(taskName)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if n < 1 || n > MaxN {
		return Result{}, fmt.Errorf("%w: %d problems, want 1 to %d", ErrInput, n, MaxN)
	}
	if base == nil || tok == nil {
		return Result{}, fmt.Errorf("%w: no base weights or tokenizer", ErrInput)
	}
	md, err := llama.New(base, a, threads)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInput, err)
	}
	return evaluate(md, tok, taskName, task.NewSplit(t, n).Eval, nil)
}

// EvaluateOn scores base with adapter a (nil: the base alone) on problems,
// the held-out set of the job's data named name (a built-in task or a
// dataset: trainer.Config.Split gives it), with the job's reward sc (nil:
// reward.Default). A built-in task's first n held-out problems with a nil
// scorer give exactly Evaluate's result.
func EvaluateOn(base *llama.Weights, tok *tokenizer.Tokenizer, a *llama.Adapter, name string, problems []task.Problem, sc reward.Scorer, threads int) (Result, error) {
	if len(problems) < 1 || len(problems) > MaxN {
		return Result{}, fmt.Errorf("%w: %d problems, want 1 to %d", ErrInput, len(problems), MaxN)
	}
	if base == nil || tok == nil {
		return Result{}, fmt.Errorf("%w: no base weights or tokenizer", ErrInput)
	}
	md, err := llama.New(base, a, threads)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInput, err)
	}
	return evaluate(md, tok, name, problems, sc)
}

func evaluate(md *llama.Model, tok *tokenizer.Tokenizer, name string, problems []task.Problem, scorer reward.Scorer) (Result, error) {
	sc, err := rollout.Evaluate(md, tok, problems, scorer)
	if err != nil {
		return Result{}, err
	}
	loss, err := Loss(md, tok, problems)
	if err != nil {
		return Result{}, err
	}
	return Result{Task: name, N: len(problems), Accuracy: sc.Accuracy, Reward: sc.Reward, Loss: loss}, nil
}

// Loss is the mean negative log-likelihood per answer token of the
// reference answers given their prompts, teacher-forced: each sequence is
// the prompt followed by the answer minus its last token (tokenized with
// tok), and answer token i is scored by the logits at position
// len(prompt)+i-1. It runs forward passes over runs of problems of equal
// token lengths and sums in float64 in problem order, so the result is the
// same on every run and thread count.
func Loss(md *llama.Model, tok *tokenizer.Tokenizer, problems []task.Problem) (float64, error) {
	if md == nil || md.W == nil || tok == nil {
		return 0, fmt.Errorf("%w: no model", ErrInput)
	}
	type seq struct{ prompt, answer []int }
	seqs := make([]seq, len(problems))
	for i, p := range problems {
		pr, ans, err := task.Tokenize(tok, p)
		if err != nil {
			return 0, fmt.Errorf("%w: problem %d: %w", ErrInput, i, err)
		}
		seqs[i] = seq{pr, ans}
	}
	var sum float64
	var tokens int
	V := md.W.Cfg.Vocab
	for lo := 0; lo < len(seqs); {
		pl, al := len(seqs[lo].prompt), len(seqs[lo].answer)
		hi := lo + 1
		for hi < len(seqs) && hi-lo < lossBatch && len(seqs[hi].prompt) == pl && len(seqs[hi].answer) == al {
			hi++
		}
		B, T := hi-lo, pl+al-1
		in := make([]int, 0, B*T)
		targets := make([]int, B*T)
		for b, s := range seqs[lo:hi] {
			in = append(append(in, s.prompt...), s.answer[:al-1]...)
			for i := range T {
				targets[b*T+i] = -1
			}
			copy(targets[b*T+pl-1:], s.answer)
		}
		logits, err := md.Logits(in, B, T)
		if err != nil {
			return 0, fmt.Errorf("heldout: problems %d to %d: %w", lo, hi-1, err)
		}
		lp, err := llama.TokenLogProbs(md.Threads, logits, V, targets)
		if err != nil {
			return 0, fmt.Errorf("%w: problems %d to %d: %w", ErrInput, lo, hi-1, err)
		}
		for b := range B {
			for i := range al {
				sum -= float64(lp[b*T+pl-1+i])
			}
		}
		tokens += B * al
		lo = hi
	}
	if tokens == 0 {
		return 0, fmt.Errorf("%w: no problems", ErrInput)
	}
	return sum / float64(tokens), nil
}
