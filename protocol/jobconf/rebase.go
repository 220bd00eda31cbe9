package jobconf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/safetensors"
)

// nesterovFormat names the layout of a rebase state's OuterFile under the
// Nesterov rule: its momentum buffer as tensor "b".
const nesterovFormat = "zoo-gym/outer-nesterov/v1"

// MarshalRebase encodes the whole state of o for a rebase (docs/byzantine.md),
// where the members continue mid-epoch from the judge's state: Adam's as
// MarshalState does, the Nesterov rule's momentum buffer as tensor "b".
// nil (and no error) when there is nothing to carry: the plain average,
// or no step taken yet.
func (o *Outer) MarshalRebase() ([]byte, error) {
	if o == nil || o.b == nil {
		return nil, nil
	}
	if o.Adam {
		return o.MarshalState()
	}
	var buf bytes.Buffer
	ts := []safetensors.Tensor{{Name: "b", DType: "F32", Shape: []uint64{uint64(len(o.b))}, Data: llama.Float32Bytes(o.b)}}
	if err := safetensors.Write(&buf, ts, map[string]string{"format": nesterovFormat}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ResumeRebase is the outer optimiser a member continues from at a rebase:
// the state b holds (as MarshalRebase wrote it; nil: a fresh one), for an
// adapter of params values. b comes from the network and is validated.
func (p Plan) ResumeRebase(b []byte, params int) (*Outer, error) {
	o := p.NewOuter()
	switch {
	case b == nil:
		return o, nil
	case o == nil:
		return nil, fmt.Errorf("%w: an outer state given for a job without an outer optimiser", ErrJob)
	case o.Adam:
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
	f, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), safetensors.Limits{MaxHeaderBytes: 1 << 12, MaxTensors: 1, MaxRank: 1})
	if err != nil {
		return nil, fmt.Errorf("%w: outer state: %v", ErrJob, err)
	}
	if f.Metadata["format"] != nesterovFormat {
		return nil, fmt.Errorf("%w: outer state: format %q, want %q", ErrJob, f.Metadata["format"], nesterovFormat)
	}
	ti, ok := f.Lookup("b")
	if !ok || len(f.Tensors) != 1 || ti.DType != "F32" || len(ti.Shape) != 1 || ti.Shape[0] != uint64(params) {
		return nil, fmt.Errorf("%w: outer state: want one F32 tensor \"b\" of %d values", ErrJob, params)
	}
	raw, err := f.ReadTensor(bytes.NewReader(b), ti)
	if err != nil {
		return nil, fmt.Errorf("%w: outer state: %v", ErrJob, err)
	}
	o.b = make([]float32, params)
	for i := range o.b {
		o.b[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		if x := float64(o.b[i]); math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: outer state: tensor \"b\" holds %v at %d", ErrJob, o.b[i], i)
		}
	}
	return o, nil
}
