// Package task defines the built-in tasks with verifiable rewards that the
// trainer learns: problems drawn from a seeded generator, a reward with
// partial credit computed by checking the answer, a fixed held-out
// evaluation set that training never draws from, and the batch of problems
// for any (job seed, worker, step), a pure function so a step can be
// replayed exactly.
//
// All tasks share one character vocabulary (Vocab) and have fixed-length
// prompts and answers, so there is no end-of-sequence token and no way to
// game the reward through length.
package task

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zooai/gym/prng"
)

// Vocab is the shared character vocabulary; a token id is an index into it.
// '^' starts every prompt.
const Vocab = "^0123456789+=:"

// VocabSize is the number of token ids.
const VocabSize = len(Vocab)

// Encode maps characters of Vocab to token ids.
func Encode(s string) ([]int, error) {
	out := make([]int, len(s))
	for i := range len(s) {
		j := strings.IndexByte(Vocab, s[i])
		if j < 0 {
			return nil, fmt.Errorf("task: character %q is not in the vocabulary", s[i])
		}
		out[i] = j
	}
	return out, nil
}

// Decode maps token ids back to characters ('?' for an unknown id).
func Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 0 && id < VocabSize {
			b.WriteByte(Vocab[id])
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

// Problem is one prompt and its reference answer, as token ids.
type Problem struct {
	Prompt, Answer []int
}

// Task is a problem family with a verifiable reward.
type Task interface {
	Name() string
	PromptLen() int
	AnswerLen() int
	// Generate draws a problem uniformly from the task's whole space
	// (held-out problems included).
	Generate(r *prng.Source) Problem
	// Buggy is the answer with the task's typical mistake (used to build a
	// base model that holds both behaviours).
	Buggy(p Problem) []int
}

// Reward is the fraction of answer positions the completion gets right, in
// [0, 1]; 1 only for an exact match.
func Reward(p Problem, completion []int) float64 {
	if len(p.Answer) == 0 {
		return 0
	}
	ok := 0
	for i, a := range p.Answer {
		if i < len(completion) && completion[i] == a {
			ok++
		}
	}
	return float64(ok) / float64(len(p.Answer))
}

// Exact reports whether the completion is exactly the answer.
func Exact(p Problem, completion []int) bool {
	return len(completion) == len(p.Answer) && slices.Equal(p.Answer, completion)
}

// Names lists the built-in tasks.
func Names() []string { return []string{"addition", "sort"} }

// Lookup returns a built-in task by name.
func Lookup(name string) (Task, error) {
	switch name {
	case "addition":
		return Addition{Digits: 2}, nil
	case "sort":
		return Sort{Len: 5}, nil
	}
	return nil, fmt.Errorf("task: unknown task %q (built-in: %s)", name, strings.Join(Names(), ", "))
}

// Split holds a task's held-out evaluation set; training draws exclude it.
type Split struct {
	Task    Task
	Eval    []Problem
	heldOut map[string]bool
}

// HeldOutSeed is the seed of every task's evaluation set.
const HeldOutSeed = 1234

// NewSplit draws n distinct evaluation problems from HeldOutSeed.
func NewSplit(t Task, n int) *Split {
	s := &Split{Task: t, heldOut: map[string]bool{}}
	r := prng.New(HeldOutSeed, 0x6576616c) // "eval"
	for len(s.Eval) < n {
		p := t.Generate(r)
		k := key(p.Prompt)
		if !s.heldOut[k] {
			s.heldOut[k] = true
			s.Eval = append(s.Eval, p)
		}
	}
	return s
}

func key(prompt []int) string { return Decode(prompt) }

// Train draws a training problem: never one of the held-out set.
func (s *Split) Train(r *prng.Source) Problem {
	for {
		p := s.Task.Generate(r)
		if !s.heldOut[key(p.Prompt)] {
			return p
		}
	}
}

// Stream labels keep the random streams of different uses independent.
const (
	StreamData   = 0x64617461 // "data": which problems
	StreamSample = 0x73616d70 // "samp": which completions
)

// Batch returns the n training problems of (job seed, worker, step): a pure
// function of its arguments, which is what makes a step replayable.
func (s *Split) Batch(seed, worker, step uint64, n int) []Problem {
	r := prng.New(seed, StreamData, worker, step)
	out := make([]Problem, n)
	for i := range out {
		out[i] = s.Train(r)
	}
	return out
}
