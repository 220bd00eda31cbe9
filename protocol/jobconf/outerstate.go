package jobconf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/safetensors"
)

// OuterFile is the file of a checkpoint directory that holds the outer
// optimiser's state at the end of the checkpoint's epoch, for the jobs
// whose outer state carries across epochs (Plan.CarriesOuter). PEFT
// ignores it; the directory's CID covers it, so the state is bound to the
// checkpoint of record it continues.
const OuterFile = "outer_state.safetensors"

// outerFormat names the layout of OuterFile (its metadata "format").
const outerFormat = "zoo-gym/outer-adam/v1"

// maxOuterSteps bounds the step count OuterFile may declare: β1ᵗ and β2ᵗ
// are recomputed by t multiplications.
const maxOuterSteps = 1 << 24

// CarriesOuter reports whether the job's outer optimiser keeps its state
// from one epoch to the next: the outer Adam does (its state is published
// with every checkpoint of record, OuterFile), because a fresh Adam's
// first steps move every coordinate by about the full rate whatever its
// noise: restarting it every epoch cost 1.4 points in the data-parallel
// profile and 2.7 for one AdamW worker (docs/data-parallel.md, "What
// closed the rest of the gap"). The Nesterov rule
// starts every epoch from zero, as it always has: its restarts measured
// harmless.
func (p Plan) CarriesOuter() bool { return p.OuterLR > 0 && p.OuterAdam }

// ResumeOuter is the outer optimiser at the start of an epoch: the state
// of b, an OuterFile of the previous checkpoint of record, for a plan that
// carries it; a fresh one (NewOuter) for the first epoch (b nil) and for
// plans that do not. params is the adapter's size; b is validated
// (layout, sizes, finite moments, v ≥ 0), as it comes from the network.
func (p Plan) ResumeOuter(b []byte, params int) (*Outer, error) {
	o := p.NewOuter()
	if !p.CarriesOuter() {
		if b != nil {
			return nil, fmt.Errorf("%w: an outer state given for a job whose outer optimiser starts every epoch afresh", ErrJob)
		}
		return o, nil
	}
	if b == nil {
		return o, nil
	}
	m, v, t, err := parseOuter(b, params)
	if err != nil {
		return nil, err
	}
	o.b, o.v, o.pow1, o.pow2, o.t = m, v, 1, 1, t
	for range t {
		o.pow1 = float64(o.pow1 * outerBeta1)
		o.pow2 = float64(o.pow2 * outerBeta2)
	}
	return o, nil
}

// Steps is the number of updates o has taken (0 for nil, or before the
// first); Adam's only.
func (o *Outer) Steps() int {
	if o == nil || !o.Adam {
		return 0
	}
	return o.t
}

// MarshalState encodes o's Adam state as an OuterFile: the moments m and
// v as float32 tensors "m" and "v", the step count in the metadata. A
// state before its first step (or nil) has nothing to carry: nil.
func (o *Outer) MarshalState() ([]byte, error) {
	if o == nil || !o.Adam {
		return nil, fmt.Errorf("%w: only the outer Adam's state is carried", ErrJob)
	}
	t := o.Steps()
	if t == 0 {
		return nil, nil
	}
	n := uint64(len(o.b))
	ts := []safetensors.Tensor{
		{Name: "m", DType: "F32", Shape: []uint64{n}, Data: llama.Float32Bytes(o.b)},
		{Name: "v", DType: "F32", Shape: []uint64{n}, Data: llama.Float32Bytes(o.v)},
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"format": outerFormat, "steps": strconv.Itoa(t)}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parseOuter reads an OuterFile for an adapter of params values.
func parseOuter(b []byte, params int) (m, v []float32, steps int, err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: outer state: %s", ErrJob, fmt.Sprintf(format, a...))
	}
	f, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), safetensors.Limits{MaxHeaderBytes: 1 << 12, MaxTensors: 2, MaxRank: 1})
	if err != nil {
		return nil, nil, 0, bad("%v", err)
	}
	if f.Metadata["format"] != outerFormat {
		return nil, nil, 0, bad("format %q, want %q", f.Metadata["format"], outerFormat)
	}
	steps, err = strconv.Atoi(f.Metadata["steps"])
	if err != nil || steps < 1 || steps > maxOuterSteps {
		return nil, nil, 0, bad("steps %q, want 1..%d", f.Metadata["steps"], maxOuterSteps)
	}
	if len(f.Tensors) != 2 {
		return nil, nil, 0, bad("%d tensors, want m and v", len(f.Tensors))
	}
	read := func(name string, nonNeg bool) ([]float32, error) {
		ti, ok := f.Lookup(name)
		if !ok {
			return nil, bad("no tensor %q", name)
		}
		if ti.DType != "F32" || len(ti.Shape) != 1 || ti.Shape[0] != uint64(params) {
			return nil, bad("tensor %q is %s %v, want F32 [%d] (the adapter's size)", name, ti.DType, ti.Shape, params)
		}
		raw, err := f.ReadTensor(bytes.NewReader(b), ti)
		if err != nil {
			return nil, bad("%v", err)
		}
		x := make([]float32, params)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			if f := float64(x[i]); math.IsNaN(f) || math.IsInf(f, 0) || (nonNeg && f < 0) {
				return nil, bad("tensor %q holds %v at %d", name, x[i], i)
			}
		}
		return x, nil
	}
	if m, err = read("m", false); err != nil {
		return nil, nil, 0, err
	}
	if v, err = read("v", true); err != nil {
		return nil, nil, 0, err
	}
	return m, v, steps, nil
}

// SingleStep reports whether each contribution of the job is one
// optimiser step: a sync every step, one plain SGD update a batch
// (synchronous data parallelism, docs/data-parallel.md).
func (p Plan) SingleStep() bool {
	return p.Interval == 1 && p.Trainer.SGD && p.Trainer.NumIterations <= 1
}
