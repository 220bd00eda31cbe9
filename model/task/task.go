// Package task defines the built-in tasks with verifiable rewards that the
// trainer learns: problems drawn from a seeded generator, a reward with
// partial credit computed by checking the answer, a fixed held-out
// evaluation set that training never draws from, and the batch of problems
// for any (job seed, worker, step), a pure function so a step can be
// replayed exactly.
//
// Tasks speak text: a problem is a prompt and a reference answer as
// strings, the reward compares the decoded completion with the answer
// character by character, and the base model's tokenizer maps text to
// token ids (Tokenize). The built-in tasks write over the characters
// "^0123456789+=:" and have fixed-length prompts and answers.
package task

import (
	"fmt"
	"strings"

	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/tokenizer"
)

// Vocab are the characters the built-in tasks write with; '^' starts every
// prompt. The built-in base model's tokenizer gives character i the id i
// (package basemodel).
const Vocab = "^0123456789+=:"

// VocabSize is the number of characters in Vocab.
const VocabSize = len(Vocab)

// Problem is one prompt and its reference answer.
type Problem struct {
	Prompt, Answer string
	// Messages, when not empty, is the prompt as a conversation: the JSON
	// list of messages a dataset row held. Prompt is then its rendering by
	// the model's chat template with a generation prompt (Data.RenderChat),
	// which already holds the model's special tokens: Tokenize encodes it
	// without adding more, as apply_chat_template does.
	Messages string
}

// Task is a problem family with a verifiable reward.
type Task interface {
	Name() string
	// Generate draws a problem uniformly from the task's whole space
	// (held-out problems included).
	Generate(r *prng.Source) Problem
	// Buggy is the answer with the task's typical mistake (used to build a
	// base model that holds both behaviours).
	Buggy(p Problem) string
}

// Reward is the fraction of the answer's characters the completion has at
// the same position, in [0, 1]; 1 only for an exact match (a completion
// longer than the answer loses the extra characters' share): the partial
// verifier of package reward, the built-in tasks' reward.
func Reward(p Problem, completion string) float64 {
	return reward.PartialCredit(p.Answer, completion)
}

// Exact reports whether the completion is exactly the answer.
func Exact(p Problem, completion string) bool { return completion == p.Answer }

// Tokenize returns the token ids of a problem's prompt (with the
// tokenizer's special tokens, as a model sees a prompt) and answer
// (without).
func Tokenize(tok *tokenizer.Tokenizer, p Problem) (prompt, answer []int, err error) {
	if p.Messages != "" && p.Prompt == "" {
		return nil, nil, fmt.Errorf("task: a conversation prompt not rendered with the model's chat template: %.80s", p.Messages)
	}
	if prompt, err = tok.Encode(p.Prompt, p.Messages == ""); err != nil {
		return nil, nil, fmt.Errorf("task: prompt %q: %w", p.Prompt, err)
	}
	if answer, err = tok.Encode(p.Answer, false); err != nil {
		return nil, nil, fmt.Errorf("task: answer %q: %w", p.Answer, err)
	}
	if len(prompt) == 0 || len(answer) == 0 {
		return nil, nil, fmt.Errorf("task: problem %q → %q tokenizes to %d and %d tokens", p.Prompt, p.Answer, len(prompt), len(answer))
	}
	return prompt, answer, nil
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
// A dataset's split (FromData) draws its training problems from the
// dataset's training rows instead; Task is nil then.
type Split struct {
	Task    Task
	Eval    []Problem
	heldOut map[string]bool
	train   []Problem // a dataset's training rows
}

// Data is a dataset's problems: the training rows and the held-out rows
// (package dataset reads them).
type Data struct {
	Train, Eval []Problem
}

// Chat reports whether any row's prompt is a conversation (Messages).
func (d *Data) Chat() bool {
	for _, ps := range [][]Problem{d.Train, d.Eval} {
		for _, p := range ps {
			if p.Messages != "" {
				return true
			}
		}
	}
	return false
}

// RenderChat sets the Prompt of every conversation row to render(its
// Messages): the model's chat template with a generation prompt. An error
// names the row.
func (d *Data) RenderChat(render func(messages string) (string, error)) error {
	for k, ps := range [][]Problem{d.Train, d.Eval} {
		name := []string{"training", "held-out"}[k]
		for i := range ps {
			if ps[i].Messages == "" {
				continue
			}
			text, err := render(ps[i].Messages)
			if err != nil {
				return fmt.Errorf("task: %s row %d: %w", name, i, err)
			}
			ps[i].Prompt = text
		}
	}
	return nil
}

// FromData returns the split of a dataset: training draws are uniform over
// d.Train (one IntN per problem), Eval is the first n of d.Eval (all of
// them when there are fewer). d must hold at least one training row.
func FromData(d *Data, n int) *Split {
	return &Split{Eval: d.Eval[:min(n, len(d.Eval))], train: d.Train}
}

// HeldOutSeed is the seed of every task's evaluation set.
const HeldOutSeed = 1234

// NewSplit draws n distinct evaluation problems from HeldOutSeed.
func NewSplit(t Task, n int) *Split {
	s := &Split{Task: t, heldOut: map[string]bool{}}
	r := prng.New(HeldOutSeed, 0x6576616c) // "eval"
	for len(s.Eval) < n {
		p := t.Generate(r)
		if !s.heldOut[p.Prompt] {
			s.heldOut[p.Prompt] = true
			s.Eval = append(s.Eval, p)
		}
	}
	return s
}

// Train draws a training problem: never one of the held-out set.
func (s *Split) Train(r *prng.Source) Problem {
	if s.Task == nil {
		return s.train[r.IntN(len(s.train))]
	}
	for {
		p := s.Task.Generate(r)
		if !s.heldOut[p.Prompt] {
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
