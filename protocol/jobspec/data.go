package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"

	"github.com/zooai/gym/model/dataset"
	"github.com/zooai/gym/model/reward"
)

// BuiltinDatasets are the dataset names of the built-in tasks (package
// task).
var BuiltinDatasets = []string{"addition", "sort"}

// ErrDataset reports a job's dataset field that names no data a worker
// can use: a built-in task or the CID of a dataset artifact.
var ErrDataset = errors.New("jobspec: dataset must be a built-in task (addition, sort) or the CID of a dataset artifact")

// DatasetCID returns the root CID a job's dataset names, or ok false for a
// built-in task. The CID must be the canonical string of a CIDv1 over
// sha2-256 whose codec is dag-pb: a directory, as `gym artifact publish
// --kind dataset PATH` makes (a single file is published as the train
// split of a directory).
func DatasetCID(name string) (c cid.Cid, ok bool, err error) {
	if slices.Contains(BuiltinDatasets, name) {
		return cid.Undef, false, nil
	}
	if len(name) > Fields.Dataset.MaxLen {
		return cid.Undef, false, fmt.Errorf("%w: %d bytes", ErrDataset, len(name))
	}
	c, err = cid.Decode(name)
	if err != nil {
		return cid.Undef, false, fmt.Errorf("%w: %q is neither (publish JSONL or Parquet files with gym artifact publish --kind dataset PATH and name the CID it prints)", ErrDataset, name)
	}
	p := c.Prefix()
	switch {
	case p.Version != 1 || p.Codec != cid.DagProtobuf || p.MhType != mh.SHA2_256 || p.MhLength != 32:
		return cid.Undef, false, fmt.Errorf("%w: %s is not a CIDv1 of a directory over sha2-256", ErrDataset, name)
	case c.String() != name:
		return cid.Undef, false, fmt.Errorf("%w: %q is not in canonical form (%s)", ErrDataset, name, c)
	}
	return c, true, nil
}

// Data maps the rows of a dataset named by CID onto problems
// (docs/datasets.md; dataset.Config): the prompt field or template, the
// answer field (and whether to keep only its final number), the training
// split, and the held-out split or share. It is zero for a built-in task.
type Data struct {
	Prompt    string `json:"prompt,omitempty"`
	Template  string `json:"template,omitempty"`
	Answer    string `json:"answer,omitempty"`
	Extract   string `json:"extract,omitempty"`
	Split     string `json:"split,omitempty"`
	HeldOut   string `json:"held_out,omitempty"`
	HoldOutBP int    `json:"hold_out_bp,omitempty"`
}

// Config is the mapping as package dataset takes it.
func (d Data) Config() dataset.Config {
	return dataset.Config{Prompt: d.Prompt, Template: d.Template, Answer: d.Answer, Extract: d.Extract,
		Split: d.Split, HeldOut: d.HeldOut, HoldOutBP: d.HoldOutBP}
}

// Rewards is a job's reward list in canonical JSON (reward.MarshalTerms),
// "" for the default (partial credit on a built-in task, exact match on a
// dataset). A string keeps Spec comparable; it encodes as the JSON list
// itself.
type Rewards string

// NewRewards checks terms and returns their canonical form.
func NewRewards(terms []reward.Term) (Rewards, error) {
	if len(terms) == 0 {
		return "", nil
	}
	if _, err := reward.New(terms); err != nil {
		return "", err
	}
	return Rewards(reward.MarshalTerms(terms)), nil
}

// Terms decodes the list (nil for the default).
func (r Rewards) Terms() ([]reward.Term, error) {
	if r == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(r)))
	dec.DisallowUnknownFields()
	var terms []reward.Term
	if err := dec.Decode(&terms); err != nil {
		return nil, fmt.Errorf("%w: %v", reward.ErrInvalid, err)
	}
	return terms, nil
}

// RewardSet is the job's reward, checked: the list, or the default for the
// dataset (reward.Default for a built-in task, reward.DatasetDefault for a
// dataset named by CID).
func (s Spec) RewardSet() (*reward.Set, error) {
	terms, err := s.Reward.Terms()
	if err != nil {
		return nil, err
	}
	if terms == nil {
		if _, byCID, _ := DatasetCID(s.Dataset); byCID {
			return reward.DatasetDefault(), nil
		}
		return reward.Default(), nil
	}
	return reward.New(terms)
}

// MarshalJSON writes the list as JSON.
func (r Rewards) MarshalJSON() ([]byte, error) {
	if r == "" {
		return []byte("null"), nil
	}
	return []byte(r), nil
}

// UnmarshalJSON reads a list (or null) into its canonical form; a key a
// verifier does not have is an error (a misspelt setting is not dropped),
// a list the reward package refuses is kept, for Normalise to refuse with
// the reason.
func (r *Rewards) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*r = ""
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var terms []reward.Term
	if err := dec.Decode(&terms); err != nil {
		return err
	}
	if len(terms) == 0 {
		*r = ""
		return nil
	}
	*r = Rewards(reward.MarshalTerms(terms))
	return nil
}

// checkData applies the dataset rules to a spec (Normalise's part).
func (s *Spec) checkData() error {
	_, byCID, err := DatasetCID(s.Dataset)
	switch {
	case byCID && s.Data == (Data{}):
		return invalidf("dataset %s needs a data mapping: the answer field and a prompt field or template, and a held-out split or hold_out_bp (docs/datasets.md)", s.Dataset)
	case byCID:
		if err := s.Data.Config().Validate(); err != nil {
			return invalidf("data: %s", trimPrefix(err, dataset.ErrConfig))
		}
	case s.Data != (Data{}) && err == nil:
		return invalidf("data: a mapping is for a dataset named by CID; %s is a built-in task", s.Dataset)
	case s.Data != (Data{}):
		return invalidf("data: %v", err)
	}
	if s.Reward != "" {
		terms, err := s.Reward.Terms()
		if err == nil {
			_, err = reward.New(terms)
		}
		if err != nil {
			return invalidf("reward: %s", trimPrefix(err, reward.ErrInvalid))
		}
	}
	return nil
}

// trimPrefix is err's text without the sentinel's "pkg: ...: " prefix.
func trimPrefix(err, sentinel error) string {
	msg, pre := err.Error(), sentinel.Error()+": "
	if len(msg) > len(pre) && msg[:len(pre)] == pre {
		return msg[len(pre):]
	}
	return msg
}
