// Package trace is the rollout trace format: the sampled completions of a
// batch of prompts with everything needed to check them later — the prompt
// and completion token ids, the log-probability of every sampled token
// under the policy that sampled it, the reward each completion got, and the
// sampler's settings and seed.
//
// It is what `gym rollout` writes (synthetic data, offline analysis) and
// what a worker's delta will reference for verification across hardware
// (SPEC.md, "Verification that survives different hardware"): from a trace
// file a checker recomputes the rewards exactly, the log-probabilities
// teacher-forced, and the GSPO update.
//
// A file is JSON Lines (docs/traces.md): one header object, then one object
// per sequence in order, sequence i = p·G + g being completion g of prompt
// p. Read is strict (unknown fields, a sequence out of order or missing, a
// token id outside the vocabulary, a log-probability that is not a finite
// number ≤ 0, a non-finite reward are refused, naming the line) and bounded
// (line length, sequences, tokens), so it can read a file from anyone.
package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
)

// Format and Version identify the file.
const (
	Format  = "zoo-gym-traces"
	Version = 1
)

// Header describes a trace file: what sampled it and how.
type Header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Model is the base model: its CID, or "builtin".
	Model string `json:"model"`
	// Policy names the adapter that sampled: the SHA3 digest of its tensors
	// (llama.Digest, hex), empty for the base model alone.
	Policy string `json:"policy,omitempty"`
	// Dataset is where the prompts came from: a built-in task's name or a
	// dataset's CID.
	Dataset string `json:"dataset"`
	// Where in a job the batch was sampled, when it was (all zero otherwise).
	Job   string `json:"job,omitempty"`
	Node  string `json:"node,omitempty"`
	Epoch int    `json:"epoch,omitempty"`
	Step  int    `json:"step,omitempty"`
	// The sampler: the prng seed and stream words that drew the tokens, and
	// its settings (rollout.Config). With Batch > 0 the prompts were sampled
	// Batch at a time, batch b (prompts [b·Batch, (b+1)·Batch)) from
	// prng.New(Seed, Stream..., b); with 0, all together from
	// prng.New(Seed, Stream...).
	Seed        uint64   `json:"seed"`
	Stream      []uint64 `json:"stream,omitempty"`
	Batch       int      `json:"batch,omitempty"`
	Temperature float64  `json:"temperature"`
	TopK        int      `json:"top_k"`
	MaxNew      int      `json:"max_new_tokens"`
	// OptimizerReset says the trainer's optimiser state (AdamW's moments
	// and update count) was reset before this step, as at an epoch's
	// start: a backend process restarted mid-epoch (docs/backends.md). A
	// checker recomputing the update resets it there too.
	OptimizerReset bool `json:"optimizer_reset,omitempty"`
	// Prompts × GroupSize sequences follow.
	Prompts   int `json:"prompts"`
	GroupSize int `json:"group_size"`
	// Vocab is the tokenizer's vocabulary size: every id is below it.
	Vocab int `json:"vocab"`
}

// Sequence is one sampled completion.
type Sequence struct {
	Prompt     int    `json:"prompt"` // p
	Sample     int    `json:"sample"` // g
	PromptText string `json:"prompt_text"`
	Answer     string `json:"answer,omitempty"`
	PromptIDs  []int  `json:"prompt_ids"`
	Completion string `json:"completion"`
	// CompletionIDs are the sampled ids, ending with the end-of-sequence
	// token when one was sampled.
	CompletionIDs []int `json:"completion_ids"`
	// LogProbs[i] is log softmax(logits/T) of CompletionIDs[i] under the
	// sampling policy.
	LogProbs []float32 `json:"logprobs"`
	Reward   float64   `json:"reward"`
	// RewardFailed says the reward stands in for a failed call to the
	// job's environment server (its env terms counted 0).
	RewardFailed bool `json:"reward_failed,omitempty"`
	// Mask, when present, marks the completion ids the model generated:
	// an episode's completion holds the environment's turns too, context
	// that is not trained on (their log-probabilities are 0).
	Mask []bool `json:"mask,omitempty"`
	// Episode, when present, is the multi-turn episode the sequence is
	// (package episode): every turn's reply, tool calls, actions,
	// observations and rewards, so a checker replays it without the
	// environment. Its tokens are PromptIDs then CompletionIDs, its mask
	// Mask, its reward Reward (0 in a group left out of the update because
	// the environment failed one of its episodes).
	Episode *episode.Episode `json:"episode,omitempty"`
}

// Set is a whole trace file.
type Set struct {
	Header Header
	Seqs   []Sequence
}

// Limits bound what Read accepts.
type Limits struct {
	MaxLine      int // bytes in one line
	MaxSequences int
	MaxTokens    int // prompt or completion ids in one sequence
}

// DefaultLimits fit any batch a job can ask for.
func DefaultLimits() Limits {
	return Limits{MaxLine: 16 << 20, MaxSequences: 1 << 20, MaxTokens: 1 << 17}
}

// ErrFormat reports a malformed trace file.
var ErrFormat = errors.New("trace: malformed trace file")

// FromRollouts makes a set of r with header h (Prompts and GroupSize are
// filled in from r; Format and Version too).
func FromRollouts(h Header, r *rollout.Rollouts) *Set {
	h.Format, h.Version, h.Prompts, h.GroupSize = Format, Version, len(r.Problems), r.G
	s := &Set{Header: h, Seqs: make([]Sequence, r.N())}
	for i := range s.Seqs {
		p := i / r.G
		s.Seqs[i] = Sequence{Prompt: p, Sample: i % r.G, PromptText: r.Problems[p].Prompt, Answer: r.Problems[p].Answer,
			PromptIDs: r.Prompts[p], Completion: r.Texts[i], CompletionIDs: r.Completions[i], LogProbs: r.OldLogP[i],
			Reward: r.Rewards[i], RewardFailed: r.RewardFailed != nil && r.RewardFailed[i]}
		if r.Mask != nil {
			s.Seqs[i].Mask = r.Mask[i]
		}
		if r.Episodes != nil {
			s.Seqs[i].Episode = r.Episodes[i]
		}
	}
	return s
}

// Rollouts turns s back into the rollouts a trainer trains on (rewards as
// recorded; Exact left nil). It is FromRollouts' inverse.
func (s *Set) Rollouts() *rollout.Rollouts {
	G := s.Header.GroupSize
	r := &rollout.Rollouts{G: G, Problems: make([]task.Problem, s.Header.Prompts), Prompts: make([][]int, s.Header.Prompts),
		Completions: make([][]int, len(s.Seqs)), OldLogP: make([][]float32, len(s.Seqs)), Texts: make([]string, len(s.Seqs)),
		Rewards: make([]float64, len(s.Seqs))}
	for i := range s.Seqs {
		q := &s.Seqs[i]
		if i%G == 0 {
			r.Problems[i/G] = task.Problem{Prompt: q.PromptText, Answer: q.Answer}
			r.Prompts[i/G] = q.PromptIDs
		}
		r.Completions[i], r.OldLogP[i], r.Texts[i], r.Rewards[i] = q.CompletionIDs, q.LogProbs, q.Completion, q.Reward
		if q.RewardFailed {
			if r.RewardFailed == nil {
				r.RewardFailed = make([]bool, len(s.Seqs))
			}
			r.RewardFailed[i] = true
		}
		if q.Mask != nil {
			if r.Mask == nil {
				r.Mask = make([][]bool, len(s.Seqs))
			}
			r.Mask[i] = q.Mask
		}
		if q.Episode != nil {
			if r.Episodes == nil {
				r.Episodes = make([]*episode.Episode, len(s.Seqs))
			}
			r.Episodes[i] = q.Episode
		}
	}
	return r
}

// Write writes s as JSON Lines. It checks s as Read would.
func Write(w io.Writer, s *Set) error {
	if err := s.check(DefaultLimits()); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s.Header); err != nil {
		return err
	}
	for i := range s.Seqs {
		if err := enc.Encode(&s.Seqs[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Read reads a trace file within lim.
func Read(r io.Reader, lim Limits) (*Set, error) {
	lr := newLineReader(r, lim)
	s, err := lr.set()
	if err != nil {
		return nil, err
	}
	if b, err := lr.next(); err != io.EOF {
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil, fmt.Errorf("%w: line %d is empty", ErrFormat, lr.line)
		}
		return nil, fmt.Errorf("%w: line %d: more than the header's %d × %d sequences", ErrFormat, lr.line, s.Header.Prompts, s.Header.GroupSize)
	}
	return s, nil
}

// MaxBundleSets bounds the sets in a bundle: the local steps of one sync.
const MaxBundleSets = 1024

// ReadBundle reads a bundle within lim: one or more trace sets one after
// another in one file, each a header line and its sequences (a worker's
// traces of one sync, a set per local step). The limits apply to each set;
// at most MaxBundleSets sets.
func ReadBundle(r io.Reader, lim Limits) ([]*Set, error) {
	lr := newLineReader(r, lim)
	var sets []*Set
	for {
		s, err := lr.set()
		if err == io.EOF && len(sets) > 0 {
			return sets, nil
		}
		if err != nil {
			return nil, err
		}
		if len(sets) == MaxBundleSets {
			return nil, fmt.Errorf("%w: more than %d sets in a bundle", ErrFormat, MaxBundleSets)
		}
		sets = append(sets, s)
	}
}

// WriteBundle writes sets one after another (ReadBundle reads them).
func WriteBundle(w io.Writer, sets []*Set) error {
	if len(sets) == 0 || len(sets) > MaxBundleSets {
		return fmt.Errorf("%w: %d sets in a bundle (want 1 to %d)", ErrFormat, len(sets), MaxBundleSets)
	}
	for _, s := range sets {
		if err := Write(w, s); err != nil {
			return err
		}
	}
	return nil
}

// lineReader reads a trace file's lines within the limits.
type lineReader struct {
	br   *bufio.Reader
	lim  Limits
	line int
}

func newLineReader(r io.Reader, lim Limits) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), lim: lim}
}

// next returns the next line without its end, or io.EOF.
func (lr *lineReader) next() ([]byte, error) {
	var buf []byte
	for {
		frag, err := lr.br.ReadSlice('\n')
		if len(buf)+len(frag) > lr.lim.MaxLine {
			return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrFormat, lr.line+1, lr.lim.MaxLine)
		}
		buf = append(buf, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(buf) > 0 {
			err = nil
		}
		if err != nil {
			return nil, err
		}
		lr.line++
		return bytes.TrimRight(buf, "\r\n"), nil
	}
}

// decode reads one JSON value, strictly, from line b.
func (lr *lineReader) decode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: line %d: %v", ErrFormat, lr.line, err)
	}
	if d.More() {
		return fmt.Errorf("%w: line %d: more than one JSON value", ErrFormat, lr.line)
	}
	return nil
}

// set reads a header and exactly its sequences. It returns io.EOF when
// the input ends before a header, and an error naming an empty file when
// it ends before the first.
func (lr *lineReader) set() (*Set, error) {
	b, err := lr.next()
	if err == io.EOF {
		if lr.line == 0 {
			return nil, fmt.Errorf("%w: empty file (want a header line)", ErrFormat)
		}
		return nil, io.EOF
	}
	if err != nil {
		return nil, err
	}
	s := &Set{}
	if err := lr.decode(b, &s.Header); err != nil {
		return nil, err
	}
	if err := s.Header.check(lr.lim); err != nil {
		return nil, err
	}
	n := s.Header.Prompts * s.Header.GroupSize
	s.Seqs = make([]Sequence, 0, min(n, 4096))
	for len(s.Seqs) < n {
		b, err := lr.next()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: %d sequences, the header says %d × %d", ErrFormat, len(s.Seqs), s.Header.Prompts, s.Header.GroupSize)
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil, fmt.Errorf("%w: line %d is empty", ErrFormat, lr.line)
		}
		var q Sequence
		if err := lr.decode(b, &q); err != nil {
			return nil, err
		}
		if err := s.Header.checkSeq(len(s.Seqs), &q, lr.lim); err != nil {
			return nil, fmt.Errorf("line %d: %w", lr.line, err)
		}
		s.Seqs = append(s.Seqs, q)
	}
	if err := s.episodeRewards(); err != nil {
		return nil, err
	}
	if err := s.sameGroupPrompts(); err != nil {
		return nil, err
	}
	return s, nil
}

func (h *Header) check(lim Limits) error {
	switch {
	case h.Format != Format:
		return fmt.Errorf("%w: format %q, want %q", ErrFormat, h.Format, Format)
	case h.Version != Version:
		return fmt.Errorf("%w: version %d, this reader knows %d", ErrFormat, h.Version, Version)
	case h.Model == "" || h.Dataset == "":
		return fmt.Errorf("%w: the header names no model or dataset", ErrFormat)
	case h.Prompts < 1 || h.GroupSize < 1 || h.Prompts > lim.MaxSequences || h.GroupSize > lim.MaxSequences ||
		h.Prompts*h.GroupSize > lim.MaxSequences:
		return fmt.Errorf("%w: %d prompts × %d: want 1 to %d sequences", ErrFormat, h.Prompts, h.GroupSize, lim.MaxSequences)
	case h.Vocab < 1:
		return fmt.Errorf("%w: vocab %d", ErrFormat, h.Vocab)
	case !(h.Temperature > 0) || math.IsInf(h.Temperature, 0):
		return fmt.Errorf("%w: temperature %v", ErrFormat, h.Temperature)
	case h.TopK < 0 || h.MaxNew < 0 || h.Epoch < 0 || h.Step < 0 || h.Batch < 0:
		return fmt.Errorf("%w: negative top_k, max_new_tokens, batch, epoch or step", ErrFormat)
	case len(h.Stream) > 8:
		return fmt.Errorf("%w: %d stream words (at most 8)", ErrFormat, len(h.Stream))
	}
	return nil
}

func (h *Header) checkSeq(i int, q *Sequence, lim Limits) error {
	p, g := i/h.GroupSize, i%h.GroupSize
	switch {
	case q.Prompt != p || q.Sample != g:
		return fmt.Errorf("%w: sequence %d is prompt %d sample %d, want prompt %d sample %d", ErrFormat, i, q.Prompt, q.Sample, p, g)
	case len(q.PromptIDs) == 0 || len(q.PromptIDs) > lim.MaxTokens || len(q.CompletionIDs) > lim.MaxTokens:
		return fmt.Errorf("%w: sequence %d has %d prompt and %d completion ids (want 1 to %d)", ErrFormat, i, len(q.PromptIDs), len(q.CompletionIDs), lim.MaxTokens)
	case h.MaxNew > 0 && len(q.CompletionIDs) > h.MaxNew:
		return fmt.Errorf("%w: sequence %d has %d completion ids, more than max_new_tokens %d", ErrFormat, i, len(q.CompletionIDs), h.MaxNew)
	case len(q.LogProbs) != len(q.CompletionIDs):
		return fmt.Errorf("%w: sequence %d has %d log-probabilities for %d completion ids", ErrFormat, i, len(q.LogProbs), len(q.CompletionIDs))
	case math.IsNaN(q.Reward) || math.IsInf(q.Reward, 0):
		return fmt.Errorf("%w: sequence %d: reward %v is not finite", ErrFormat, i, q.Reward)
	}
	for _, ids := range [][]int{q.PromptIDs, q.CompletionIDs} {
		for _, id := range ids {
			if id < 0 || id >= h.Vocab {
				return fmt.Errorf("%w: sequence %d: token id %d outside the vocabulary [0, %d)", ErrFormat, i, id, h.Vocab)
			}
		}
	}
	for k, lp := range q.LogProbs {
		if !(lp <= 0) || math.IsInf(float64(lp), 0) {
			return fmt.Errorf("%w: sequence %d token %d: log-probability %v is not a finite number ≤ 0", ErrFormat, i, k, lp)
		}
	}
	if q.Mask != nil && len(q.Mask) != len(q.CompletionIDs) {
		return fmt.Errorf("%w: sequence %d has %d mask entries for %d completion ids", ErrFormat, i, len(q.Mask), len(q.CompletionIDs))
	}
	if e := q.Episode; e != nil {
		if err := e.Check(); err != nil {
			return fmt.Errorf("%w: sequence %d: %v", ErrFormat, i, err)
		}
		if q.Mask == nil {
			return fmt.Errorf("%w: sequence %d is an episode without a mask", ErrFormat, i)
		}
		if len(e.Turns) > 0 {
			n := len(q.PromptIDs)
			if !slices.Equal(e.Tokens, slices.Concat(q.PromptIDs, q.CompletionIDs)) || !slices.Equal(e.Model[n:], q.Mask) ||
				!slices.Equal(e.LogP[n:], q.LogProbs) || slices.Contains(e.Model[:n], true) {
				return fmt.Errorf("%w: sequence %d's ids, mask or log-probabilities are not its episode's", ErrFormat, i)
			}
		} else if slices.Contains(q.Mask, true) {
			return fmt.Errorf("%w: sequence %d is an episode that never started, with tokens of the model", ErrFormat, i)
		}
	}
	return nil
}

// episodeRewards checks each episode's reward: its own, or 0 in a group
// where the environment failed one of its episodes (left out of the
// update).
func (s *Set) episodeRewards() error {
	G := s.Header.GroupSize
	for i := range s.Seqs {
		e := s.Seqs[i].Episode
		if e == nil || s.Seqs[i].Reward == e.Reward {
			continue
		}
		out := false
		for k := i - i%G; k < i-i%G+G; k++ {
			if x := s.Seqs[k].Episode; x != nil && x.EnvFault() {
				out = true
			}
		}
		if !out || s.Seqs[i].Reward != 0 {
			return fmt.Errorf("%w: sequence %d's reward %v is not its episode's %v", ErrFormat, i, s.Seqs[i].Reward, e.Reward)
		}
	}
	return nil
}

// check validates a set about to be written.
func (s *Set) check(lim Limits) error {
	if err := s.Header.check(lim); err != nil {
		return err
	}
	if n := s.Header.Prompts * s.Header.GroupSize; len(s.Seqs) != n {
		return fmt.Errorf("%w: %d sequences, the header says %d × %d", ErrFormat, len(s.Seqs), s.Header.Prompts, s.Header.GroupSize)
	}
	for i := range s.Seqs {
		if err := s.Header.checkSeq(i, &s.Seqs[i], lim); err != nil {
			return err
		}
	}
	if err := s.episodeRewards(); err != nil {
		return err
	}
	return s.sameGroupPrompts()
}

// sameGroupPrompts checks every sample of a group carries its prompt's ids.
func (s *Set) sameGroupPrompts() error {
	g := s.Header.GroupSize
	for i := range s.Seqs {
		if i%g == 0 {
			continue
		}
		a, b := s.Seqs[i-i%g].PromptIDs, s.Seqs[i].PromptIDs
		if len(a) != len(b) {
			return fmt.Errorf("%w: sequence %d's prompt ids differ from its group's first", ErrFormat, i)
		}
		for k := range a {
			if a[k] != b[k] {
				return fmt.Errorf("%w: sequence %d's prompt ids differ from its group's first", ErrFormat, i)
			}
		}
	}
	return nil
}

// Tokens is the number of completion tokens in s.
func (s *Set) Tokens() int {
	n := 0
	for i := range s.Seqs {
		n += len(s.Seqs[i].CompletionIDs)
	}
	return n
}

// MeanReward is the mean reward over s's sequences.
func (s *Set) MeanReward() float64 {
	if len(s.Seqs) == 0 {
		return 0
	}
	var sum float64
	for i := range s.Seqs {
		sum += s.Seqs[i].Reward
	}
	return sum / float64(len(s.Seqs))
}
