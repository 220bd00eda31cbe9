// Package heldout evaluates a checkpoint (base weights plus an optional
// LoRA adapter) on a task's held-out problems, the set task.NewSplit draws
// and the trainer never trains on: exact-match accuracy and partial-credit
// reward under greedy decoding, and the teacher-forced loss of the
// reference answers. `gym eval` and the orchestrator's delta scoring use it.
package heldout

import (
	"errors"
	"fmt"

	"github.com/zooai/gym/model"
	"github.com/zooai/gym/rollout"
	"github.com/zooai/gym/task"
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
	Accuracy float64 `json:"accuracy"` // fraction of exact answers, greedy decoding
	Reward   float64 `json:"reward"`   // mean partial-credit reward, greedy decoding
	Loss     float64 `json:"loss"`     // mean per-token NLL of the reference answers, teacher-forced (nats)
}

// Evaluate scores base with adapter a (nil: the base alone) on the first n
// held-out problems of the named task (task.NewSplit(t, n).Eval, the set the
// trainer evaluates on when its eval_size is n). threads only changes the
// speed: the result is the same for any value.
func Evaluate(base *model.Weights, a *model.Adapter, taskName string, n int, threads int) (Result, error) {
	t, err := task.Lookup(taskName)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if n < 1 || n > MaxN {
		return Result{}, fmt.Errorf("%w: %d problems, want 1 to %d", ErrInput, n, MaxN)
	}
	if base == nil {
		return Result{}, fmt.Errorf("%w: no base weights", ErrInput)
	}
	if a != nil && a.Model != base.Cfg {
		return Result{}, fmt.Errorf("%w: the adapter is for a model of shape %+v, the base is %+v", ErrInput, a.Model, base.Cfg)
	}
	if need := t.PromptLen() + t.AnswerLen() - 1; need > base.Cfg.Ctx {
		return Result{}, fmt.Errorf("%w: task %s needs a context of %d, the model has %d", ErrInput, taskName, need, base.Cfg.Ctx)
	}
	problems := task.NewSplit(t, n).Eval
	md := &model.Model{W: base, A: a, Threads: threads}
	sc, err := rollout.Evaluate(md, problems)
	if err != nil {
		return Result{}, err
	}
	loss, err := Loss(md, problems)
	if err != nil {
		return Result{}, err
	}
	return Result{Task: taskName, N: n, Accuracy: sc.Accuracy, Reward: sc.Reward, Loss: loss}, nil
}

// Loss is the mean negative log-likelihood per answer token of the
// reference answers given their prompts, teacher-forced: each sequence is
// the prompt followed by the answer minus its last token, and answer token
// i is scored by the logits at position len(prompt)+i-1. It runs forward
// passes over batches of problems of equal shape and sums in float64 in
// problem order, so the result is the same on every run and thread count.
func Loss(md *model.Model, problems []task.Problem) (float64, error) {
	if md == nil || md.W == nil {
		return 0, fmt.Errorf("%w: no model", ErrInput)
	}
	var sum float64
	var tokens int
	V := md.W.Cfg.Vocab
	lp := make([]float32, V)
	for lo := 0; lo < len(problems); {
		pl, al := len(problems[lo].Prompt), len(problems[lo].Answer)
		if pl < 1 || al < 1 {
			return 0, fmt.Errorf("%w: problem %d has a %d-token prompt and a %d-token answer", ErrInput, lo, pl, al)
		}
		hi := lo + 1
		for hi < len(problems) && hi-lo < lossBatch && len(problems[hi].Prompt) == pl && len(problems[hi].Answer) == al {
			hi++
		}
		B, T := hi-lo, pl+al-1
		seq := make([]int, 0, B*T)
		for _, p := range problems[lo:hi] {
			seq = append(append(seq, p.Prompt...), p.Answer[:al-1]...)
		}
		act, err := md.Forward(seq, B, T)
		if err != nil {
			return 0, fmt.Errorf("heldout: problems %d to %d: %w", lo, hi-1, err)
		}
		for b, p := range problems[lo:hi] {
			for i, want := range p.Answer {
				row := act.Logits[(b*T+pl-1+i)*V : (b*T+pl+i)*V]
				if want < 0 || want >= V {
					return 0, fmt.Errorf("%w: problem %d: answer token %d outside vocabulary of %d", ErrInput, lo+b, want, V)
				}
				model.LogSoftmax(lp, row)
				sum -= float64(lp[want])
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
