package llama

import (
	"crypto/sha3"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zooai/gym/model/prng"
)

// What the trainer, the delta encoding and the orchestrator do with
// adapters beyond running them: initialise, copy, name, digest, and fill
// from tensors stored elsewhere (a signed delta file).

var (
	// ErrShape reports stored tensors that are not the ones expected:
	// missing, extra, misnamed, out of order, of another dtype or shape.
	ErrShape = errors.New("llama: tensors do not match the adapter")
	// ErrNonFinite reports a NaN or infinite value.
	ErrNonFinite = errors.New("llama: non-finite value")
)

// InitAdapter returns an adapter with every lora_A drawn from
// normal(0, 1/in) and every lora_B zero (the adapted model starts equal to
// the base), from a seeded stream: the same arguments give the same bits.
func InitAdapter(c Config, rank int, alpha float64, targets []Module, seed uint64) (*Adapter, error) {
	a, err := NewAdapter(c, rank, alpha, targets)
	if err != nil {
		return nil, err
	}
	r := prng.New(seed, 0x6c6f7261) // "lora"
	for l := range a.A {
		for m := range NumModules {
			if a.A[l][m] == nil {
				continue
			}
			in, _ := c.Dims(m)
			std := 1 / math.Sqrt(float64(in))
			for i := range a.A[l][m] {
				a.A[l][m][i] = float32(r.Norm() * std)
			}
		}
	}
	return a, nil
}

// Views returns the adapter's matrices as Tensors(c) does for the model it
// fits (names, order, shapes), the sizes read from the matrices themselves.
func (a *Adapter) Views() []AdapterTensor {
	var ts []AdapterTensor
	for l := range a.A {
		for m := range NumModules {
			if a.A[l][m] == nil {
				continue
			}
			p := "base_model.model." + a.loraPath(l, m)
			r := a.RankAt(l, m)
			if m.Expert() {
				r *= a.Experts
			}
			ts = append(ts,
				AdapterTensor{p + ".lora_A.weight", []int{r, len(a.A[l][m]) / r}, a.A[l][m]},
				AdapterTensor{p + ".lora_B.weight", []int{len(a.B[l][m]) / r, r}, a.B[l][m]})
		}
	}
	return ts
}

// Clone returns a deep copy of a.
func (a *Adapter) Clone() *Adapter {
	c := a.Zeroed()
	for l := range a.A {
		for m := range NumModules {
			copy(c.A[l][m], a.A[l][m])
			copy(c.B[l][m], a.B[l][m])
		}
	}
	return c
}

// NumParams is the number of scalars in a.
func (a *Adapter) NumParams() int {
	n := 0
	for _, t := range a.Views() {
		n += len(t.Data)
	}
	return n
}

// SameShape reports whether a and b have the same rank, alpha, scaling,
// targets and matrix sizes.
func (a *Adapter) SameShape(b *Adapter) bool {
	if a.Rank != b.Rank || a.Alpha != b.Alpha || a.RSLoRA != b.RSLoRA || !slices.Equal(a.Targets, b.Targets) || len(a.A) != len(b.A) ||
		a.Experts != b.Experts {
		return false
	}
	for l := range a.A {
		for m := range NumModules {
			if len(a.A[l][m]) != len(b.A[l][m]) || len(a.B[l][m]) != len(b.B[l][m]) ||
				a.RankAt(l, m) != b.RankAt(l, m) || a.ScaleAt(l, m) != b.ScaleAt(l, m) {
				return false
			}
		}
	}
	return true
}

// Float32Bytes returns the little-endian bytes of x.
func Float32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// Digest is the SHA3-256 of tensors in order, each encoded as: name length
// (u32 LE) · name · rank (u8) · dims (u64 LE each) · data (float32 LE). It
// depends on nothing but the tensors (no key, no clock, no file layout).
func Digest(ts []AdapterTensor) [32]byte {
	h := sha3.New256()
	var b [8]byte
	for _, t := range ts {
		binary.LittleEndian.PutUint32(b[:4], uint32(len(t.Name)))
		h.Write(b[:4])
		h.Write([]byte(t.Name))
		h.Write([]byte{byte(len(t.Shape))})
		for _, d := range t.Shape {
			binary.LittleEndian.PutUint64(b[:], uint64(d))
			h.Write(b[:])
		}
		h.Write(Float32Bytes(t.Data))
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

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

// Bytes is a Read function for tensor bytes already in memory.
func Bytes(b []byte) func() ([]byte, error) { return func() ([]byte, error) { return b, nil } }

// Fill copies stored tensors into ts, strictly: exactly len(ts) tensors,
// each F32 with the shape of its destination and every value finite. With
// ordered, the i-th stored tensor must be the i-th expected one (a signed
// delta file's order is part of what was signed); otherwise they are
// matched by name, each name once. Errors wrap ErrShape or ErrNonFinite and
// name the tensor; ts is partly written when Fill fails.
func Fill(ts []AdapterTensor, src []Stored, ordered bool) error {
	if len(src) != len(ts) {
		return fmt.Errorf("%w: %d tensors, want %d", ErrShape, len(src), len(ts))
	}
	for i, t := range ts {
		var st Stored
		if ordered {
			if st = src[i]; st.Name != t.Name {
				return fmt.Errorf("%w: tensor %d is %q, want %q", ErrShape, i, st.Name, t.Name)
			}
		} else {
			j := slices.IndexFunc(src, func(s Stored) bool { return s.Name == t.Name })
			if j < 0 {
				return fmt.Errorf("%w: tensor %q missing", ErrShape, t.Name)
			}
			if slices.ContainsFunc(src[j+1:], func(s Stored) bool { return s.Name == t.Name }) {
				return fmt.Errorf("%w: tensor %q given twice", ErrShape, t.Name)
			}
			st = src[j]
		}
		want := make([]uint64, len(t.Shape))
		for d, v := range t.Shape {
			want[d] = uint64(v)
		}
		if st.DType != "F32" || !slices.Equal(st.Shape, want) {
			return fmt.Errorf("%w: tensor %q is %s%v, want F32%v", ErrShape, st.Name, st.DType, st.Shape, want)
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

// InferAdapter reads the rank and target modules of an adapter from the
// names and shapes of its tensors, named as PEFT names them
// (base_model.model.model.layers.<l>.<self_attn|mlp>.<module>.lora_<A|B>.weight,
// lora_A of shape [rank, in]). The result is only a claim: Fill against
// an adapter built from it checks every tensor.
func InferAdapter(names []string, shapes [][]uint64) (rank int, targets []Module, err error) {
	seen := map[Module]bool{}
	for i, name := range names {
		parts := strings.Split(name, ".")
		ok := len(parts) == 9 && parts[0] == "base_model" && parts[1] == "model" && parts[2] == "model" &&
			parts[3] == "layers" && parts[8] == "weight" && (parts[7] == "lora_A" || parts[7] == "lora_B")
		var m Module
		if ok {
			_, perr := strconv.ParseUint(parts[4], 10, 16)
			m, ok = ParseModule(parts[6])
			ok = ok && perr == nil && (parts[5] == "mlp") == (m >= GateProj) && (parts[5] == "mlp" || parts[5] == "self_attn")
		}
		if !ok {
			return 0, nil, fmt.Errorf("%w: tensor %q is not a LoRA matrix (base_model.model.model.layers.<l>.<self_attn|mlp>.<module>.lora_<A|B>.weight)", ErrShape, name)
		}
		seen[m] = true
		if parts[7] == "lora_A" && len(shapes[i]) == 2 && rank == 0 {
			rank = int(min(shapes[i][0], 1<<16))
		}
	}
	for m := range NumModules {
		if seen[m] {
			targets = append(targets, m)
		}
	}
	return rank, targets, nil
}

// LogSoftmax writes log_softmax(row) into dst, as TokenLogProbs computes
// each entry (log-sum-exp in float64), and returns the log-sum-exp.
func LogSoftmax(dst, row []float32) float64 {
	lse := rowLSE(row)
	for i, v := range row {
		dst[i] = float32(float64(v) - lse)
	}
	return lse
}
