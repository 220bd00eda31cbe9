// Package checkpkg is a delegated trace check's inputs as a directory: what
// hanzod hands a validator (docs/validators.md) and what both of them
// check a delta from. Write lays it out; Read loads it back and verifies
// everything that can be verified without hanzod's word — the delta's
// signature by the checked node, its slot, that it names the last trace
// bundle and the start it was given, every bundle against its CID —; Run
// checks the delta (tracecheck.CheckSync within its backend's tolerances).
//
// Layout:
//
//	check.json               the check (Info)
//	delta.bin                the node's signed delta file
//	traces/CID.jsonl         the trace bundle of each sync 1..k (Info.Traces)
//	starts/N/                the adapter sync N+1 started from (PEFT layout)
package checkpkg

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/trace"
	"github.com/zooai/gym/protocol/tracecheck"
	"golang.org/x/crypto/sha3"
)

// Info is check.json: the checked delta's slot and file digest, its sync
// k within the epoch, and the CIDs of the node's trace bundles of syncs
// 1..k.
type Info struct {
	Format string   `json:"format"` // "zoo-gym-check"
	Job    string   `json:"job"`
	Epoch  int      `json:"epoch"`
	Step   uint64   `json:"step"`
	Node   string   `json:"node"`
	Sync   int      `json:"sync"`
	Digest string   `json:"digest"`
	Traces []string `json:"traces"`
}

// Format names the layout.
const Format = "zoo-gym-check"

// ErrPackage is wrapped by every refusal of a package: it was built wrong
// (or by someone else than hanzod), not the node's fault.
var ErrPackage = errors.New("checkpkg: invalid check package")

// Inputs are a check's contents.
type Inputs struct {
	Info    Info
	Delta   []byte   // the signed delta file
	Bundles [][]byte // trace bundles of syncs 1..k, as stored
	Starts  []*llama.Adapter
	Card    peft.Card // written with every start (names the base)
}

// Write lays in out as the directory dir (made; it must not hold a
// package already).
func Write(dir string, in Inputs) error {
	k := in.Info.Sync
	if k < 1 || len(in.Starts) != k || len(in.Bundles) != k || len(in.Info.Traces) != k {
		return fmt.Errorf("%w: sync %d with %d starts, %d bundles, %d trace CIDs", ErrPackage, k, len(in.Starts), len(in.Bundles), len(in.Info.Traces))
	}
	in.Info.Format = Format
	if err := os.MkdirAll(filepath.Join(dir, "traces"), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(in.Info, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "check.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "delta.bin"), in.Delta, 0o644); err != nil {
		return err
	}
	for i, c := range in.Info.Traces {
		if err := os.WriteFile(filepath.Join(dir, "traces", c+".jsonl"), in.Bundles[i], 0o644); err != nil {
			return err
		}
		if err := peft.Write(filepath.Join(dir, "starts", strconv.Itoa(i)), in.Starts[i], in.Card); err != nil {
			return err
		}
	}
	return nil
}

// Loaded is a package read back and verified.
type Loaded struct {
	Info    Info
	Meta    delta.MetadataFields
	Backend string
	DType   string // jobconf.DTypeOf: the tolerances depend on it
	Delta   *llama.Adapter
	Traces  [][]*trace.Set
	Starts  []*llama.Adapter
}

// FileDigest is a delta file's signature digest (hex SHA3-256 of what its
// signature covers): the digest slots and verdicts name.
func FileDigest(file []byte) string {
	n := max(len(file)-delta.SignatureSize-delta.PublicKeySize, 0)
	d := sha3.Sum256(file[:n])
	return hex.EncodeToString(d[:])
}

// Read loads the package in dir for a base model of shape mc and verifies
// it: the delta's signature is the checked node's, its metadata names the
// slot, the last bundle and the start it was given; each bundle is its
// CID; the starts are adapters of the base's shape.
func Read(ctx context.Context, dir string, mc llama.Config) (*Loaded, error) {
	var l Loaded
	b, err := os.ReadFile(filepath.Join(dir, "check.json"))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l.Info); err != nil || l.Info.Format != Format {
		return nil, fmt.Errorf("%w: check.json: %v (format %q)", ErrPackage, err, l.Info.Format)
	}
	in := l.Info
	if in.Sync < 1 || in.Sync > 1<<16 || len(in.Traces) != in.Sync {
		return nil, fmt.Errorf("%w: sync %d with %d trace CIDs", ErrPackage, in.Sync, len(in.Traces))
	}
	file, err := os.ReadFile(filepath.Join(dir, "delta.bin"))
	if err != nil {
		return nil, err
	}
	if got := FileDigest(file); got != in.Digest {
		return nil, fmt.Errorf("%w: delta.bin's digest is %s, the check names %s", ErrPackage, got, in.Digest)
	}
	d, err := delta.Read(ctx, bytes.NewReader(file), delta.DefaultLimits())
	if err != nil {
		return nil, fmt.Errorf("%w: delta.bin: %v", ErrPackage, err)
	}
	if hex.EncodeToString(d.Info.PublicKey) != in.Node {
		return nil, fmt.Errorf("%w: delta.bin is signed by %x, not the checked node %s", ErrPackage, []byte(d.Info.PublicKey), in.Node)
	}
	if l.Meta, err = d.Info.Metadata.Fields(); err != nil {
		return nil, fmt.Errorf("%w: delta.bin: %v", ErrPackage, err)
	}
	if l.Meta.Job != in.Job || l.Meta.Epoch != uint64(in.Epoch) || l.Meta.Step != in.Step || l.Meta.Node != in.Node {
		return nil, fmt.Errorf("%w: delta.bin is %s/%d/%d/%s, the check names %s/%d/%d/%s", ErrPackage,
			l.Meta.Job, l.Meta.Epoch, l.Meta.Step, l.Meta.Node, in.Job, in.Epoch, in.Step, in.Node)
	}
	if l.Backend, err = jobconf.BackendOf(d.Info.Metadata); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPackage, err)
	}
	if l.DType, err = jobconf.DTypeOf(d.Info.Metadata); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPackage, err)
	}
	named, err := jobconf.TracesOf(d.Info.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPackage, err)
	}
	if named != in.Traces[in.Sync-1] {
		return nil, fmt.Errorf("%w: the delta names traces %q, the check's last bundle is %s", ErrPackage, named, in.Traces[in.Sync-1])
	}
	for i, c := range in.Traces {
		sd, _, err := peft.Read(filepath.Join(dir, "starts", strconv.Itoa(i)), mc)
		if err != nil {
			return nil, fmt.Errorf("%w: start %d: %v", ErrPackage, i, err)
		}
		l.Starts = append(l.Starts, sd)
		if c == "" {
			return nil, fmt.Errorf("%w: sync %d has no traces", ErrPackage, i+1)
		}
		bb, err := os.ReadFile(filepath.Join(dir, "traces", filepath.Base(c)+".jsonl"))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPackage, err)
		}
		sets, err := jobconf.ReadTraces(ctx, bb, c)
		if err != nil {
			return nil, fmt.Errorf("%w: traces of sync %d: %v", ErrPackage, i+1, err)
		}
		l.Traces = append(l.Traces, sets)
	}
	if got := jobconf.Digest(l.Starts[in.Sync-1]); got != l.Meta.BaseCheckpoint {
		return nil, fmt.Errorf("%w: the delta says its sync started from %s, the package's start is %s", ErrPackage, l.Meta.BaseCheckpoint, got)
	}
	if l.Delta, err = jobconf.Decode(l.Starts[0].Zeroed(), d.Tensors); err != nil {
		return nil, fmt.Errorf("%w: delta.bin: %v", ErrPackage, err)
	}
	return &l, nil
}

// Run checks the loaded delta from its traces with plan's base (the job's
// plan) within the tolerances of its backend and dtype.
func Run(ctx context.Context, plan jobconf.Plan, l *Loaded, threads int) (tracecheck.SyncReport, error) {
	r, err := Sync(ctx, plan, SyncArgs{Node: l.Info.Node, Epoch: l.Info.Epoch, Starts: l.Starts, Traces: l.Traces, Delta: l.Delta,
		ClaimedLoss: l.Meta.ClaimedLoss, Backend: l.Backend, DType: l.DType}, threads)
	if errors.Is(err, errTolerance) {
		err = fmt.Errorf("%w: %v", ErrPackage, err)
	}
	return r, err
}

// SyncArgs are a node's sync k = len(Starts) of an epoch to check.
type SyncArgs struct {
	Node           string
	Epoch          int
	Starts         []*llama.Adapter
	Traces         [][]*trace.Set
	Delta          *llama.Adapter
	ClaimedLoss    float64
	Backend, DType string
}

var errTolerance = errors.New("checkpkg: no tolerances")

// Sync is the one trace check hanzod and validators run: tracecheck.CheckSync
// of the node's sync on plan's base within the tolerances of the delta's
// backend and dtype. A node id that is not a key fails the shape check.
func Sync(ctx context.Context, plan jobconf.Plan, a SyncArgs, threads int) (tracecheck.SyncReport, error) {
	worker, err := jobconf.Worker(a.Node)
	if err != nil {
		return tracecheck.SyncReport{Failed: tracecheck.CheckShape, Detail: err.Error()}, nil
	}
	tol, err := tracecheck.Tolerances(a.Backend, a.DType)
	if err != nil {
		return tracecheck.SyncReport{}, fmt.Errorf("%w: %v", errTolerance, err)
	}
	in := tracecheck.SyncInput{Weights: plan.Base.Weights, Tokenizer: plan.Base.Tokenizer, Config: plan.Trainer, Worker: worker,
		FirstStep: plan.FirstStep(a.Epoch), Interval: plan.Interval, Starts: a.Starts, Traces: a.Traces, Delta: a.Delta,
		ClipNorm: plan.ClipNorm(a.Delta.NumParams()), ClaimedLoss: a.ClaimedLoss, Threads: threads}
	return tracecheck.CheckSync(ctx, in, tol)
}

// Figures are the measured differences of a check, as a verdict carries
// them (JSON) and the merge report shows them; −1 stands for a value that
// is not a finite number (JSON cannot hold it).
type Figures struct {
	Steps      int     `json:"steps"`
	Tokens     int     `json:"tokens"`
	LogProbMax float64 `json:"logprob_max"`
	RelL2      float64 `json:"update_rel_l2"`
	Cosine     float64 `json:"update_cosine"`
	LossDiff   float64 `json:"loss_diff"`
	// Scale is the delta's length along the recomputed update
	// (tracecheck.SyncReport.Scale); absent from validators before it.
	Scale float64 `json:"update_scale,omitempty"`
}

// FiguresOf are r's figures.
func FiguresOf(r tracecheck.SyncReport) Figures {
	return Figures{Steps: r.Steps, Tokens: r.Tokens, LogProbMax: finite(r.LogProbMax), RelL2: finite(r.RelL2), Cosine: finite(r.Cosine), LossDiff: finite(r.LossDiff),
		Scale: finite(r.Scale)}
}

func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return -1
	}
	return x
}
