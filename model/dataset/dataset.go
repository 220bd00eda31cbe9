// Package dataset reads a job's training data, a dataset published as an
// artifact and named by its CID, into the problems the trainer learns
// from: each row's prompt (a field, or a template over fields) and its
// reference answer, a training split and a held-out split.
//
// Files are JSON Lines (one object per line) or Parquet (read with
// github.com/parquet-go/parquet-go), laid out as Hugging Face `datasets`
// exports them: one file (the training split), or a directory holding
// SPLIT.jsonl, SPLIT.parquet or shards SPLIT-*.jsonl / SPLIT-*.parquet
// (e.g. train-00000-of-00001.parquet), directly or in one subdirectory
// (data/, main/). The held-out split is another split (test) or a seeded
// fraction of the training rows, a pure function of the row index.
//
// Everything is strict and bounded: a malformed line, a field of the wrong
// type, a missing field or a Parquet column of the wrong type is an error
// naming the file, the line or row and the field; sizes are checked
// against the limits before anything is allocated. docs/datasets.md
// describes the layout, the mapping and how a node's prompts are drawn.
package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/task"
)

// Config maps a dataset's rows onto problems.
type Config struct {
	// Prompt is the field holding the prompt; used when Template is
	// empty.
	Prompt string
	// Template builds the prompt from fields: "{question}" is replaced by
	// the row's field question; "{{" and "}}" are literal braces. Every
	// field it names must be in every row.
	Template string
	// Answer is the field holding the reference answer.
	Answer string
	// Extract, when "numeric", keeps only the answer's final number as
	// the reference (reward.ExtractNumber: after "####", in \boxed{}, or
	// the last number), as written: a GSM8K solution "... #### 46" gives
	// the answer "46".
	Extract string
	// Split is the training split (default "train").
	Split string
	// HeldOut is the held-out split (e.g. "test"); "" holds out
	// HoldOutBP of the training rows instead.
	HeldOut string
	// HoldOutBP is the share of training rows held out when HeldOut is
	// "", in basis points (1 to 5000).
	HoldOutBP int
}

// DefaultSplit is the training split when Config.Split is empty.
const DefaultSplit = "train"

// HeldOutSeed seeds the hold-out fraction: row i of the training split is
// held out when prng.New(HeldOutSeed, StreamHold, i).IntN(10000) <
// HoldOutBP. It is fixed, not the job's seed, so every job on a dataset
// evaluates on the same rows.
const HeldOutSeed = 1234

// StreamHold labels the hold-out draw ("hold").
const StreamHold = 0x686f6c64

// Fields returns the row fields c reads: the prompt's (the template's
// fields, or Prompt) and the answer's, each once.
func (c Config) Fields() ([]string, error) {
	var fs []string
	if c.Template != "" {
		t, err := ParseTemplate(c.Template)
		if err != nil {
			return nil, err
		}
		fs = t.Fields()
	} else {
		if c.Prompt == "" {
			return nil, fmt.Errorf("%w: give a prompt field or a template", ErrConfig)
		}
		fs = []string{c.Prompt}
	}
	if c.Answer == "" {
		return nil, fmt.Errorf("%w: no answer field", ErrConfig)
	}
	if !slices.Contains(fs, c.Answer) {
		fs = append(fs, c.Answer)
	}
	return fs, nil
}

// Validate reports whether c can be used, without reading data.
func (c Config) Validate() error {
	if _, err := c.Fields(); err != nil {
		return err
	}
	if c.Template != "" && c.Prompt != "" {
		return fmt.Errorf("%w: give a prompt field or a template, not both", ErrConfig)
	}
	if c.Extract != "" && c.Extract != "numeric" {
		return fmt.Errorf("%w: extract %q (want numeric or nothing)", ErrConfig, c.Extract)
	}
	for _, s := range []string{c.Split, c.HeldOut} {
		if s != "" && !validSplit(s) {
			return fmt.Errorf("%w: split %q (letters, digits and _ only)", ErrConfig, s)
		}
	}
	split := c.Split
	if split == "" {
		split = DefaultSplit
	}
	switch {
	case c.HeldOut == "" && (c.HoldOutBP < 1 || c.HoldOutBP > 5000):
		return fmt.Errorf("%w: without a held-out split, hold out 1 to 5000 basis points of %s (got %d)", ErrConfig, split, c.HoldOutBP)
	case c.HeldOut != "" && c.HoldOutBP != 0:
		return fmt.Errorf("%w: give a held-out split or a hold-out share, not both", ErrConfig)
	case c.HeldOut == split:
		return fmt.Errorf("%w: the held-out split is the training split %q", ErrConfig, split)
	}
	return nil
}

func validSplit(s string) bool {
	return len(s) <= 64 && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}

// Load reads the dataset at path (a file or a directory, see the package
// doc) into problems.
func Load(path string, c Config) (*task.Data, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	fields, _ := c.Fields()
	split := c.Split
	if split == "" {
		split = DefaultSplit
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var train, eval []Row
	if !st.IsDir() {
		if c.HeldOut != "" {
			return nil, fmt.Errorf("%w: %s is one file, a single split: hold out a share of it instead of split %q", ErrLayout, filepath.Base(path), c.HeldOut)
		}
		if train, err = readFiles([]string{path}, fields); err != nil {
			return nil, err
		}
	} else {
		splits, err := Splits(path)
		if err != nil {
			return nil, err
		}
		if train, err = readSplit(path, splits, split, fields); err != nil {
			return nil, err
		}
		if c.HeldOut != "" {
			if eval, err = readSplit(path, splits, c.HeldOut, fields); err != nil {
				return nil, err
			}
		}
	}
	if c.HeldOut == "" {
		var keep []Row
		for i, r := range train {
			if prng.New(HeldOutSeed, StreamHold, uint64(i)).IntN(10000) < c.HoldOutBP {
				eval = append(eval, r)
			} else {
				keep = append(keep, r)
			}
		}
		train = keep
	}
	if len(train) == 0 || len(eval) == 0 {
		return nil, fmt.Errorf("%w: %d training and %d held-out rows; both need at least one", ErrConfig, len(train), len(eval))
	}
	d := &task.Data{}
	if d.Train, err = c.problems(train, split); err != nil {
		return nil, err
	}
	name := c.HeldOut
	if name == "" {
		name = split + " (held out)"
	}
	if d.Eval, err = c.problems(eval, name); err != nil {
		return nil, err
	}
	return d, nil
}

// problems maps rows onto problems.
func (c Config) problems(rows []Row, split string) ([]task.Problem, error) {
	var t *Template
	if c.Template != "" {
		t, _ = ParseTemplate(c.Template)
	}
	out := make([]task.Problem, len(rows))
	fields, _ := c.Fields()
	for i, r := range rows {
		for _, f := range fields {
			if _, conv := r.Conversation(f); conv && (t != nil || f != c.Prompt) {
				return nil, fmt.Errorf("%w: split %s, row %d: field %q holds a conversation: only the prompt field may (as prompt: %s, not in a template or as the answer)", ErrFormat, split, i, f, f)
			}
		}
		p := task.Problem{Answer: r[c.Answer]}
		if t != nil {
			p.Prompt = t.Apply(r)
		} else if msgs, conv := r.Conversation(c.Prompt); conv {
			if err := lastNotAssistant(msgs); err != nil {
				return nil, fmt.Errorf("%w: split %s, row %d: field %q: %v", ErrFormat, split, i, c.Prompt, err)
			}
			p.Messages = msgs
		} else {
			p.Prompt = r[c.Prompt]
		}
		if c.Extract == "numeric" {
			n, ok := reward.ExtractNumber(p.Answer)
			if !ok {
				return nil, fmt.Errorf("%w: split %s, row %d: field %q: no number in %q", ErrFormat, split, i, c.Answer, clip(p.Answer))
			}
			p.Answer = n
		}
		switch {
		case p.Prompt == "" && p.Messages == "":
			return nil, fmt.Errorf("%w: split %s, row %d: empty prompt", ErrFormat, split, i)
		case p.Answer == "":
			return nil, fmt.Errorf("%w: split %s, row %d: field %q is empty", ErrFormat, split, i, c.Answer)
		}
		out[i] = p
	}
	return out, nil
}

// lastNotAssistant refuses a conversation that ends with the assistant's
// turn: the prompt is what the model answers, its reference is the answer
// field.
func lastNotAssistant(msgs string) error {
	var ms []struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal([]byte(msgs), &ms); err != nil {
		return err
	}
	if ms[len(ms)-1].Role == "assistant" {
		return errors.New("the conversation ends with the assistant's turn: the prompt is what the model answers (put the reference reply in the answer field)")
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Splits lists the data files of a directory by split, each split's files
// in name order: SPLIT.jsonl, SPLIT.parquet and shards SPLIT-*.jsonl,
// SPLIT-*.parquet, directly in dir or in one subdirectory of it. A split
// found in two directories is ErrLayout.
func Splits(dir string) (map[string][]string, error) {
	out := map[string][]string{}
	where := map[string]string{}
	add := func(d string) error {
		ents, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			split, ok := splitOf(e.Name())
			if !ok {
				continue
			}
			if w, seen := where[split]; seen && w != d {
				return fmt.Errorf("%w: split %q is in both %s and %s", ErrLayout, split, rel(dir, w), rel(dir, d))
			}
			where[split] = d
			if len(out[split]) == MaxFiles {
				return fmt.Errorf("%w: split %q has more than %d files", ErrLimit, split, MaxFiles)
			}
			out[split] = append(out[split], filepath.Join(d, e.Name()))
		}
		return nil
	}
	if err := add(dir); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			if err := add(filepath.Join(dir, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	for _, fs := range out {
		slices.Sort(fs)
	}
	return out, nil
}

func rel(root, d string) string {
	if r, err := filepath.Rel(root, d); err == nil {
		return r + "/"
	}
	return d
}

// splitOf returns the split a data file belongs to.
func splitOf(name string) (string, bool) {
	var stem string
	switch {
	case strings.HasSuffix(name, ".jsonl"):
		stem = strings.TrimSuffix(name, ".jsonl")
	case strings.HasSuffix(name, ".parquet"):
		stem = strings.TrimSuffix(name, ".parquet")
	default:
		return "", false
	}
	if i := strings.IndexByte(stem, '-'); i >= 0 {
		stem = stem[:i]
	}
	return stem, validSplit(stem) && stem != ""
}

func readSplit(dir string, splits map[string][]string, split string, fields []string) ([]Row, error) {
	files, ok := splits[split]
	if !ok {
		have := make([]string, 0, len(splits))
		for s := range splits {
			have = append(have, s)
		}
		slices.Sort(have)
		what := "no data files (SPLIT.jsonl, SPLIT.parquet or SPLIT-*.parquet)"
		if len(have) > 0 {
			what = "splits " + strings.Join(have, ", ")
		}
		return nil, fmt.Errorf("%w: %q in %s, which has %s", ErrLayout, split, filepath.Base(dir), what)
	}
	return readFiles(files, fields)
}

// readFiles reads files in order, at most MaxRows rows in all.
func readFiles(files []string, fields []string) ([]Row, error) {
	var rows []Row
	for _, p := range files {
		got, err := readFile(p, fields, MaxRows-len(rows))
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

func readFile(p string, fields []string, max int) ([]Row, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	name := filepath.Base(p)
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s: %d bytes, at most %d", ErrLimit, name, st.Size(), MaxFileBytes)
	}
	switch {
	case strings.HasSuffix(p, ".jsonl"):
		return ReadJSONL(name, f, fields, max)
	case strings.HasSuffix(p, ".parquet"):
		return ReadParquet(name, f, st.Size(), fields, max)
	}
	return nil, fmt.Errorf("%w: %s: not .jsonl or .parquet", ErrFormat, name)
}

// Stage returns the directory a dataset at path is published as: path
// itself when it is a directory holding at least one split, or, for a
// single .jsonl or .parquet file, a new directory under tmp holding a copy
// of it as the train split (train.jsonl or train.parquet) — the one
// split a single file is.
func Stage(path, tmp string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		splits, err := Splits(path)
		if err != nil {
			return "", err
		}
		if len(splits) == 0 {
			return "", fmt.Errorf("%w: %s holds no data files (SPLIT.jsonl, SPLIT.parquet or SPLIT-*.parquet, directly or in one subdirectory)", ErrLayout, path)
		}
		return path, nil
	}
	ext := filepath.Ext(path)
	if ext != ".jsonl" && ext != ".parquet" {
		return "", fmt.Errorf("%w: %s is not a .jsonl or .parquet file", ErrLayout, path)
	}
	if st.Size() > MaxFileBytes {
		return "", fmt.Errorf("%w: %s: %d bytes, at most %d", ErrLimit, path, st.Size(), MaxFileBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	parent, err := os.MkdirTemp(tmp, "dataset-")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(parent, strings.TrimSuffix(filepath.Base(path), ext))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, DefaultSplit+ext), b, 0o644); err != nil {
		return "", err
	}
	return dir, nil
}
