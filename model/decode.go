package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/zooai/gym/safetensors"
)

// Decoding tensors into weights or adapters happens here and nowhere else:
// a safetensors file (ReadWeights, ReadAdapter, the PEFT layout), a delta
// file's verified tensors (the judge, `gym eval` on a delta) all describe
// what they hold as a Source, and Fill checks it against what the model
// expects and copies it in.

var (
	// ErrShape reports stored tensors that are not the ones expected:
	// missing, extra, misnamed, out of order, of another dtype or shape.
	ErrShape = errors.New("model: tensors do not match the adapter")
	// ErrNonFinite reports a NaN or infinite value.
	ErrNonFinite = errors.New("model: non-finite value")
)

// Stored is one tensor as a file holds it: the name it is stored under,
// its safetensors dtype name ("F32", …), shape and a way to read its
// little-endian bytes, called only once the dtype and shape are known to
// match.
type Stored struct {
	Name  string
	DType string
	Shape []uint64
	Read  func() ([]byte, error)
}

// Source is a set of stored tensors. Len is how many it holds; At returns
// the one the i-th expected tensor, named name, comes from, or an error
// wrapping ErrShape when there is none.
type Source interface {
	Len() int
	At(i int, name string) (Stored, error)
}

// Fill copies src into ts, strictly: src holds exactly len(ts) tensors,
// each F32, with the shape of its destination, every value finite.
// Errors wrap ErrShape or ErrNonFinite and name the tensor. ts is
// partly written when Fill fails.
func Fill(ts []Tensor, src Source) error {
	if n := src.Len(); n != len(ts) {
		return fmt.Errorf("%w: %d tensors, want %d", ErrShape, n, len(ts))
	}
	for i, t := range ts {
		st, err := src.At(i, t.Name)
		if err != nil {
			return err
		}
		if st.DType != "F32" || !slices.Equal(st.Shape, dims(t.Shape)) {
			return fmt.Errorf("%w: tensor %q is %s%v, want F32%v", ErrShape, st.Name, st.DType, st.Shape, dims(t.Shape))
		}
		raw, err := st.Read()
		if err != nil {
			return err
		}
		if len(raw) != 4*len(t.Data) {
			return fmt.Errorf("%w: tensor %q has %d bytes, want %d", ErrShape, st.Name, len(raw), 4*len(t.Data))
		}
		for k := range t.Data {
			v := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: tensor %q[%d] is %v", ErrNonFinite, st.Name, k, v)
			}
			t.Data[k] = v
		}
	}
	return nil
}

func dims(shape []int) []uint64 {
	out := make([]uint64, len(shape))
	for i, d := range shape {
		out[i] = uint64(d)
	}
	return out
}

// FileSource is a parsed safetensors file read from r. Rename maps an
// expected tensor's name to the name it is stored under (nil: the same).
func FileSource(f *safetensors.File, r io.ReaderAt, rename func(string) string) Source {
	return fileSource{f, r, rename}
}

type fileSource struct {
	f      *safetensors.File
	r      io.ReaderAt
	rename func(string) string
}

func (s fileSource) Len() int { return len(s.f.Tensors) }

func (s fileSource) At(_ int, name string) (Stored, error) {
	if s.rename != nil {
		name = s.rename(name)
	}
	info, ok := s.f.Lookup(name)
	if !ok {
		return Stored{}, fmt.Errorf("%w: tensor %q missing", ErrShape, name)
	}
	return Stored{Name: name, DType: info.DType, Shape: info.Shape, Read: func() ([]byte, error) { return s.f.ReadTensor(s.r, info) }}, nil
}

// SliceSource is a list of stored tensors. With ordered true the i-th
// expected tensor must be the i-th stored one (a delta file's order is
// part of what was signed); otherwise they are matched by name.
func SliceSource(ts []Stored, ordered bool) Source {
	if ordered {
		return orderedSource(ts)
	}
	return namedSource(ts)
}

type orderedSource []Stored

func (s orderedSource) Len() int { return len(s) }

func (s orderedSource) At(i int, name string) (Stored, error) {
	if s[i].Name != name {
		return Stored{}, fmt.Errorf("%w: tensor %d is %q, want %q", ErrShape, i, s[i].Name, name)
	}
	return s[i], nil
}

type namedSource []Stored

func (s namedSource) Len() int { return len(s) }

func (s namedSource) At(_ int, name string) (Stored, error) {
	i := slices.IndexFunc(s, func(t Stored) bool { return t.Name == name })
	if i < 0 {
		return Stored{}, fmt.Errorf("%w: tensor %q missing", ErrShape, name)
	}
	if slices.ContainsFunc(s[i+1:], func(t Stored) bool { return t.Name == name }) {
		return Stored{}, fmt.Errorf("%w: tensor %q given twice", ErrShape, name)
	}
	return s[i], nil
}

// Bytes is a Read function for tensor bytes already in memory.
func Bytes(b []byte) func() ([]byte, error) { return func() ([]byte, error) { return b, nil } }

// InferLoRA reads the LoRA rank and target modules of an adapter from the
// names and shapes of its tensors, as Adapter.Tensors names them
// (lora.blocks.<layer>.<attn|mlp>.<module>.<A|B>.weight, A of shape
// [rank, in]). Alpha is not in the tensors; the caller supplies it. The
// result is only a claim: Fill against an adapter built from it checks
// every tensor.
func InferLoRA(names []string, shapes [][]uint64, alpha float64) (LoRAConfig, error) {
	targets := map[Module]bool{}
	rank := 0
	for i, name := range names {
		parts := strings.Split(name, ".")
		if len(parts) != 7 || parts[0] != "lora" || parts[1] != "blocks" || parts[6] != "weight" || (parts[5] != "A" && parts[5] != "B") {
			return LoRAConfig{}, fmt.Errorf("%w: tensor %q is not a LoRA matrix (lora.blocks.<layer>.<attn|mlp>.<module>.<A|B>.weight)", ErrShape, name)
		}
		m, err := ParseModule(parts[4])
		if err != nil {
			return LoRAConfig{}, fmt.Errorf("%w: tensor %q: %w", ErrShape, name, err)
		}
		targets[m] = true
		if parts[5] == "A" && len(shapes[i]) == 2 && rank == 0 {
			rank = int(min(shapes[i][0], 1<<20))
		}
	}
	lc := LoRAConfig{Rank: rank, Alpha: alpha}
	for m := range Module(numModules) {
		if targets[m] {
			lc.Targets = append(lc.Targets, m.String())
		}
	}
	return lc, nil
}
