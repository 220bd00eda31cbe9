// Package evalpkg is an epoch's held-out evaluation as a directory: what a
// hanzod that never loads a base model hands validators so that they
// measure what the merge's scores and the checkpoint's accuracy need
// (docs/validators.md, "Evaluations").
//
// The merge itself needs no model: hanzod rebuilds the ring's trajectory
// from the signed deltas and merges each sync with the robust rule. What
// needs the model is the held-out loss of each scored sync's start and of
// that start plus each node's update (the quality score, which pays the
// rewards), the loss of the start and of the merged checkpoint, and the
// checkpoint's held-out accuracy. A Request names those adapters; Measure
// computes the Results with the Go engine, bit for bit on every machine and
// thread count (docs/models.md, "Determinism"), so two honest validators
// return the same Results and the same Digest, and one that returns other
// figures is outvoted and slashed as a false report.
//
// Layout:
//
//	eval.json                the request (Info)
//	start/                   the checkpoint the epoch started from (PEFT layout)
//	syncs/I/before/          the I-th scored sync's start on hanzod's trajectory
//	syncs/I/deltas/J/        the J-th node's update of that sync (Info.Syncs[I].Nodes[J])
//	final/                   the merged checkpoint
//
// Every adapter's tensor digest (jobconf.Digest) is in eval.json, and Read
// refuses a package whose files do not match it.
package evalpkg

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/heldout"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/protocol/jobconf"
	"golang.org/x/crypto/sha3"
)

// Format names the layout.
const Format = "zoo-gym-eval"

// MaxValues bounds the figures of one evaluation (two, plus one per scored
// sync and one per delta scored): its Results fit in a verdict's figures
// (MaxFiguresBytes). The merge scores fewer syncs when a job's would
// exceed it.
const MaxValues = 600

// MaxFiguresBytes is the most a verdict's figures may hold: MaxValues
// losses in JSON with room to spare.
const MaxFiguresBytes = 32 << 10

// ErrPackage is wrapped by every refusal of a package (hanzod built it
// wrong, or someone else did).
var ErrPackage = errors.New("evalpkg: invalid evaluation package")

// Info is eval.json.
type Info struct {
	Format    string `json:"format"`
	Job       string `json:"job"`
	Epoch     int    `json:"epoch"`
	ShardSize int    `json:"shard_size"` // held-out problems each loss is measured on
	EvalSize  int    `json:"eval_size"`  // held-out problems the accuracy is measured on
	// StartAccuracy asks for the start's held-out accuracy too (the
	// first epoch's: the base's own, which a summary reports as before).
	StartAccuracy bool   `json:"start_accuracy,omitempty"`
	Start         string `json:"start"` // digests of the adapters (jobconf.Digest)
	Final         string `json:"final"`
	Syncs         []Sync `json:"syncs"`
}

// Sync is one scored sync: the start it is scored from and the nodes'
// updates, in node order.
type Sync struct {
	Sync   int      `json:"sync"`
	Before string   `json:"before"`
	Nodes  []string `json:"nodes"`
	Deltas []string `json:"deltas"`
}

// Request is what an evaluation measures.
type Request struct {
	Info    Info
	Start   *llama.Adapter
	Befores []*llama.Adapter   // per scored sync
	Deltas  [][]*llama.Adapter // per scored sync, per node (Info.Syncs[i].Nodes)
	Final   *llama.Adapter
}

// Values is how many figures the request's Results hold.
func (r *Request) Values() int {
	if r.Info.StartAccuracy {
		return Values(r.Info.Syncs) + 1
	}
	return Values(r.Info.Syncs)
}

// Values is how many figures an evaluation of syncs holds.
func Values(syncs []Sync) int {
	n := 3 // the start's loss, the final loss and accuracy
	for _, s := range syncs {
		n += 1 + len(s.Nodes)
	}
	return n
}

// Seal fills in the adapters' digests and the format: call it once the
// adapters are set.
func (r *Request) Seal() {
	r.Info.Format = Format
	r.Info.Start, r.Info.Final = jobconf.Digest(r.Start), jobconf.Digest(r.Final)
	for i := range r.Info.Syncs {
		s := &r.Info.Syncs[i]
		s.Before = jobconf.Digest(r.Befores[i])
		s.Deltas = make([]string, len(r.Deltas[i]))
		for j, d := range r.Deltas[i] {
			s.Deltas[j] = jobconf.Digest(d)
		}
	}
}

// Digest identifies a sealed request: the hex SHA3-256 of its eval.json
// (which names every adapter by its digest). The evaluation's check is
// keyed by it.
func (r *Request) Digest() string { return InfoDigest(r.Info) }

// InfoDigest is Request.Digest of a request with info i.
func InfoDigest(i Info) string {
	b, _ := json.Marshal(i) // plain types: never fails
	d := sha3.Sum256(b)
	return hex.EncodeToString(d[:])
}

// Write lays r out as the directory dir; card names the base in each
// adapter's PEFT files.
func Write(dir string, r *Request, card peft.Card) error {
	if err := r.check(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r.Info, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "eval.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := peft.Write(filepath.Join(dir, "start"), r.Start, card); err != nil {
		return err
	}
	if err := peft.Write(filepath.Join(dir, "final"), r.Final, card); err != nil {
		return err
	}
	for i := range r.Info.Syncs {
		sd := filepath.Join(dir, "syncs", strconv.Itoa(i))
		if err := peft.Write(filepath.Join(sd, "before"), r.Befores[i], card); err != nil {
			return err
		}
		for j, d := range r.Deltas[i] {
			if err := peft.Write(filepath.Join(sd, "deltas", strconv.Itoa(j)), d, card); err != nil {
				return err
			}
		}
	}
	return nil
}

// check verifies a request's info and that its adapters match it.
func (r *Request) check() error {
	in := r.Info
	if err := in.validate(); err != nil {
		return err
	}
	if v := r.Values(); v > MaxValues {
		return fmt.Errorf("%w: %d figures to measure, at most %d", ErrPackage, v, MaxValues)
	}
	if r.Start == nil || r.Final == nil || len(r.Befores) != len(in.Syncs) || len(r.Deltas) != len(in.Syncs) {
		return fmt.Errorf("%w: %d syncs with %d starts and %d delta lists", ErrPackage, len(in.Syncs), len(r.Befores), len(r.Deltas))
	}
	for i, s := range in.Syncs {
		if len(s.Nodes) != len(r.Deltas[i]) {
			return fmt.Errorf("%w: sync %d names %d nodes and has %d deltas", ErrPackage, s.Sync, len(s.Nodes), len(r.Deltas[i]))
		}
	}
	return nil
}

// validate checks an info's format and bounds (a package is input from
// the network): the sizes, the figures it asks for, a digest per node.
func (in Info) validate() error {
	if in.Format != Format {
		return fmt.Errorf("%w: format %q, want %q", ErrPackage, in.Format, Format)
	}
	if in.ShardSize < 1 || in.EvalSize < 1 || in.ShardSize > 1<<20 || in.EvalSize > 1<<20 {
		return fmt.Errorf("%w: shard size %d, eval size %d", ErrPackage, in.ShardSize, in.EvalSize)
	}
	if len(in.Syncs) > MaxValues || Values(in.Syncs) > MaxValues {
		return fmt.Errorf("%w: more than %d figures to measure", ErrPackage, MaxValues)
	}
	for _, s := range in.Syncs {
		if len(s.Nodes) == 0 || len(s.Deltas) != len(s.Nodes) {
			return fmt.Errorf("%w: sync %d names %d nodes and %d digests", ErrPackage, s.Sync, len(s.Nodes), len(s.Deltas))
		}
	}
	return nil
}

// Read loads the package in dir for a base model of shape mc and verifies
// it: eval.json is well formed and bounded, every adapter is of the base's
// shape and has the digest eval.json names.
func Read(dir string, mc llama.Config) (*Request, error) {
	b, err := os.ReadFile(filepath.Join(dir, "eval.json"))
	if err != nil {
		return nil, err
	}
	info, err := ParseInfo(b)
	if err != nil {
		return nil, err
	}
	r := &Request{Info: *info}
	load := func(sub, want string) (*llama.Adapter, error) {
		a, _, err := peft.Read(filepath.Join(dir, sub), mc)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrPackage, sub, err)
		}
		if got := jobconf.Digest(a); got != want {
			return nil, fmt.Errorf("%w: %s has digest %s, eval.json names %s", ErrPackage, sub, got, want)
		}
		return a, nil
	}
	if r.Start, err = load("start", info.Start); err != nil {
		return nil, err
	}
	if r.Final, err = load("final", info.Final); err != nil {
		return nil, err
	}
	for i, s := range info.Syncs {
		sd := filepath.Join("syncs", strconv.Itoa(i))
		a, err := load(filepath.Join(sd, "before"), s.Before)
		if err != nil {
			return nil, err
		}
		r.Befores = append(r.Befores, a)
		var ds []*llama.Adapter
		for j, dg := range s.Deltas {
			d, err := load(filepath.Join(sd, "deltas", strconv.Itoa(j)), dg)
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		r.Deltas = append(r.Deltas, ds)
	}
	return r, r.check()
}

// ParseInfo reads eval.json strictly: no unknown fields, and the checks
// of validate.
func ParseInfo(b []byte) (*Info, error) {
	if len(b) > 4<<20 {
		return nil, fmt.Errorf("%w: eval.json is %d bytes", ErrPackage, len(b))
	}
	var in Info
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("%w: eval.json: %v", ErrPackage, err)
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	return &in, nil
}

// Results are what an evaluation measured.
type Results struct {
	LossStart float64      `json:"loss_start"` // held-out loss of the epoch's start
	Syncs     []SyncResult `json:"syncs"`
	LossFinal float64      `json:"loss_final"` // of the merged checkpoint
	Accuracy  float64      `json:"accuracy"`   // of the merged checkpoint
	// AccuracyStart is the start's accuracy, when the request asks for it
	// (Info.StartAccuracy; 0 otherwise).
	AccuracyStart float64 `json:"accuracy_start,omitempty"`
}

// SyncResult is one scored sync's losses: of its start, and of its start
// plus each node's update (in the request's node order).
type SyncResult struct {
	Sync   int       `json:"sync"`
	Before float64   `json:"before"`
	After  []float64 `json:"after"`
}

// Digest identifies the figures: the hex SHA-256 of their JSON (Go's
// encoding of float64 is the shortest that reads back exactly, so equal
// figures have equal digests).
func (r Results) Digest() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("evalpkg: results: %w", err)
	}
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:]), nil
}

// ParseResults reads a verdict's figures as Results, and checks that they
// answer the request with info i (the same syncs, a loss per node, every
// figure finite and the accuracy a fraction).
func ParseResults(figures string, i Info) (Results, error) {
	var r Results
	dec := json.NewDecoder(bytes.NewReader([]byte(figures)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("evalpkg: results: %w", err)
	}
	return r, r.Fits(i)
}

// Fits reports whether r answers the request with info i.
func (r Results) Fits(i Info) error {
	if len(r.Syncs) != len(i.Syncs) {
		return fmt.Errorf("evalpkg: results of %d syncs for a request of %d", len(r.Syncs), len(i.Syncs))
	}
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if !i.StartAccuracy && r.AccuracyStart != 0 {
		return fmt.Errorf("evalpkg: results: a start accuracy the request did not ask for")
	}
	if !fin(r.LossStart) || !fin(r.LossFinal) || !(r.Accuracy >= 0 && r.Accuracy <= 1) || !(r.AccuracyStart >= 0 && r.AccuracyStart <= 1) {
		return fmt.Errorf("evalpkg: results: loss %v → %v, accuracy %v", r.LossStart, r.LossFinal, r.Accuracy)
	}
	for k, s := range r.Syncs {
		if s.Sync != i.Syncs[k].Sync || len(s.After) != len(i.Syncs[k].Nodes) || !fin(s.Before) {
			return fmt.Errorf("evalpkg: results of sync %d do not answer sync %d of %d nodes", s.Sync, i.Syncs[k].Sync, len(i.Syncs[k].Nodes))
		}
		for _, a := range s.After {
			if !fin(a) {
				return fmt.Errorf("evalpkg: results of sync %d: loss %v", s.Sync, a)
			}
		}
	}
	return nil
}

// Meter measures held-out figures on a base model: the one implementation
// of the held-out loss and accuracy, used by a validator (Measure) and by a
// hanzod that has the base at hand (package epoch).
type Meter struct {
	plan    jobconf.Plan
	base    *basemodel.Base
	shard   []task.Problem
	evalN   int
	threads int
}

// NewMeter returns a meter of plan's task on base: losses on the first
// shardSize held-out problems, accuracy on the first evalSize.
func NewMeter(plan jobconf.Plan, base *basemodel.Base, shardSize, evalSize, threads int) (*Meter, error) {
	if base == nil || base.ConfigOnly || base.Weights == nil {
		return nil, fmt.Errorf("evalpkg: %w", basemodel.ErrConfigOnly)
	}
	split, err := plan.Trainer.Split(shardSize)
	if err != nil {
		return nil, err
	}
	return &Meter{plan: plan, base: base, shard: split.Eval, evalN: evalSize, threads: threads}, nil
}

// Loss is a's held-out loss on the meter's shard.
func (m *Meter) Loss(a *llama.Adapter) (float64, error) {
	md, err := llama.New(m.base.Weights, a, m.threads)
	if err != nil {
		return 0, err
	}
	return heldout.Loss(md, m.base.Tokenizer, m.shard)
}

// Accuracy is a's held-out accuracy on the first evalSize problems.
func (m *Meter) Accuracy(a *llama.Adapter) (float64, error) {
	split, err := m.plan.Trainer.Split(m.evalN)
	if err != nil {
		return 0, err
	}
	ev, err := heldout.EvaluateOn(m.base.Weights, m.base.Tokenizer, a, m.plan.Trainer.Task, split.Eval, m.plan.Trainer.Reward, m.threads)
	if err != nil {
		return 0, err
	}
	return ev.Accuracy, nil
}

// Measure computes the results of r on base (a validator's work).
func Measure(plan jobconf.Plan, base *basemodel.Base, r *Request, threads int) (Results, error) {
	if err := r.check(); err != nil {
		return Results{}, err
	}
	m, err := NewMeter(plan, base, r.Info.ShardSize, r.Info.EvalSize, threads)
	if err != nil {
		return Results{}, err
	}
	var out Results
	if out.LossStart, err = m.Loss(r.Start); err != nil {
		return out, err
	}
	for i, s := range r.Info.Syncs {
		sr := SyncResult{Sync: s.Sync}
		if sr.Before, err = m.Loss(r.Befores[i]); err != nil {
			return out, err
		}
		for _, d := range r.Deltas[i] {
			after := AfterUpdate(r.Befores[i], d)
			l, err := m.Loss(after)
			if err != nil {
				return out, err
			}
			sr.After = append(sr.After, l)
		}
		out.Syncs = append(out.Syncs, sr)
	}
	if out.LossFinal, err = m.Loss(r.Final); err != nil {
		return out, err
	}
	if out.Accuracy, err = m.Accuracy(r.Final); err != nil {
		return out, err
	}
	if r.Info.StartAccuracy {
		if out.AccuracyStart, err = m.Accuracy(r.Start); err != nil {
			return out, err
		}
	}
	return out, nil
}

// AfterUpdate is before plus the update d, as the quality score measures
// it (the same float32 additions wherever it is computed).
func AfterUpdate(before, d *llama.Adapter) *llama.Adapter {
	after := before.Clone()
	_ = jobconf.AddFlat(after, jobconf.Flatten(d)) // same shape: Read and Seal checked
	return after
}
