package ring_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zooai/gym/protocol/ring"
)

// wideInputs returns n vectors whose elements range over twelve orders of
// magnitude with random signs, so the order of float32 additions shows in
// the result.
func wideInputs(n, length int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 11))
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, length)
		for j := range out[i] {
			out[i][j] = float32(r.NormFloat64() * math.Pow(10, 12*r.Float64()-6))
		}
	}
	return out
}

func sameBits(a, b []float32) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return 0, true
}

func TestReferenceMatchesAllReduce(t *testing.T) {
	for n := 2; n <= 6; n++ {
		// Odd lengths, lengths below n (some chunks empty), and lengths
		// long enough for several segments per chunk (16 elements each).
		lengths := []int{1, n - 1, 3, 5, 37, 101, 1001}
		slices.Sort(lengths)
		for _, length := range slices.Compact(lengths) {
			t.Run(fmt.Sprintf("n%d/len%d", n, length), func(t *testing.T) {
				cl := newCluster(t, n, nil)
				call := 0
				for _, wire := range []ring.Wire{ring.FP32, ring.BF16} {
					for _, op := range []ring.Op{ring.Sum, ring.Mean} {
						call++
						in := wideInputs(n, length, uint64(1000*n+10*length+call))
						want, err := ring.ReferenceWire(in, op, wire)
						if err != nil {
							t.Fatal(err)
						}
						if wire == ring.FP32 {
							ref, err := ring.Reference(in, op)
							if _, ok := sameBits(ref, want); err != nil || !ok {
								t.Fatalf("Reference and ReferenceWire(FP32) differ: %v", err)
							}
						}
						bufs := clone(in)
						for i, err := range cl.run(t.Context(), all(n), bufs, op, ring.Call{Step: uint64(call)}.WithWire(wire)) {
							if err != nil {
								t.Fatalf("%s %s node %d: %v", wire, op, i, err)
							}
							if j, ok := sameBits(bufs[i], want); !ok {
								t.Fatalf("%s %s node %d [%d]: ring %x (%v), reference %x (%v)", wire, op, i, j,
									math.Float32bits(bufs[i][j]), bufs[i][j], math.Float32bits(want[j]), want[j])
							}
						}
					}
				}
			})
		}
	}
}

// The comparison above can fail: a left-to-right sum (or a chunk started
// at the wrong member) gives different bits for these inputs.
func TestReferenceOrderMatters(t *testing.T) {
	const n, length = 5, 101
	in := wideInputs(n, length, 42)
	ref, err := ring.Reference(in, ring.Sum)
	if err != nil {
		t.Fatal(err)
	}
	naive := make([]float32, length)
	for _, v := range in {
		for j := range naive {
			naive[j] += v[j]
		}
	}
	if _, ok := sameBits(ref, naive); ok {
		t.Fatal("the naive left-to-right sum equals the ring's order: the test proves nothing")
	}
	// Rotating the members moves where each chunk's sum starts, so the
	// order of the members matters too.
	rot := append(slices.Clone(in[1:]), in[0])
	other, err := ring.Reference(rot, ring.Sum)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sameBits(ref, other); ok {
		t.Fatal("rotating the members does not change the result: the test proves nothing")
	}
}

func TestReferenceEdgeCases(t *testing.T) {
	one := []float32{1.5, -2, 3}
	for _, op := range []ring.Op{ring.Sum, ring.Mean} {
		got, err := ring.ReferenceWire([][]float32{one}, op, ring.BF16)
		if err != nil || !slices.Equal(got, one) {
			t.Fatalf("one member, %s: %v %v, want its input unchanged", op, got, err)
		}
	}
	got, err := ring.Reference([][]float32{{}, {}, {}}, ring.Mean)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty vectors: %v %v", got, err)
	}
	for name, f := range map[string]func() error{
		"no inputs": func() error { _, err := ring.Reference(nil, ring.Sum); return err },
		"lengths":   func() error { _, err := ring.Reference([][]float32{{1, 2}, {1}}, ring.Sum); return err },
		"op":        func() error { _, err := ring.Reference([][]float32{{1}, {2}}, ring.Op(7)); return err },
		"wire":      func() error { _, err := ring.ReferenceWire([][]float32{{1}, {2}}, ring.Sum, ring.Wire(9)); return err },
	} {
		if err := f(); !errors.Is(err, ring.ErrReference) {
			t.Errorf("%s: %v, want ErrReference", name, err)
		}
	}
}
