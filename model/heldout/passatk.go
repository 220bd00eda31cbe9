package heldout

import (
	"fmt"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
)

// MaxK bounds the samples per problem of PassAtK.
const MaxK = 256

// passBatch is how many problems PassAtK samples together.
const passBatch = 16

// PassAtK samples k completions of every problem at temperature 1 under
// base plus a (nil: the base alone), batch by batch from
// prng.New(seed, batch), and returns the share of problems with at least
// one completion sc counts correct: pass@k estimated from exactly k
// samples a problem. progress (may be nil) is told after every batch how
// many problems are done. The result is the same for any threads.
func PassAtK(base *llama.Weights, tok *tokenizer.Tokenizer, a *llama.Adapter, problems []task.Problem, k int, sc reward.Scorer, seed uint64, threads int,
	progress func(done, total int)) (float64, error) {
	switch {
	case len(problems) < 1 || len(problems) > MaxN:
		return 0, fmt.Errorf("%w: %d problems, want 1 to %d", ErrInput, len(problems), MaxN)
	case k < 1 || k > MaxK:
		return 0, fmt.Errorf("%w: k %d, want 1 to %d", ErrInput, k, MaxK)
	case base == nil || tok == nil:
		return 0, fmt.Errorf("%w: no base weights or tokenizer", ErrInput)
	}
	md, err := llama.New(base, a, threads)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInput, err)
	}
	pass := 0
	for lo := 0; lo < len(problems); lo += passBatch {
		ps := problems[lo:min(lo+passBatch, len(problems))]
		ro, err := rollout.Generate(md, tok, ps, k, rollout.Config{Temperature: 1, Reward: sc}, prng.New(seed, uint64(lo/passBatch)))
		if err != nil {
			return 0, err
		}
		for p := range ps {
			for g := range k {
				if ro.Exact[p*k+g] {
					pass++
					break
				}
			}
		}
		if progress != nil {
			progress(lo+len(ps), len(problems))
		}
	}
	return float64(pass) / float64(len(problems)), nil
}
