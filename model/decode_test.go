package model

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func storedOf(t *testing.T, a *Adapter) []Stored {
	t.Helper()
	var out []Stored
	for _, x := range a.Tensors() {
		out = append(out, Stored{Name: x.Name, DType: "F32", Shape: dims(x.Shape), Read: Bytes(Float32Bytes(x.Data))})
	}
	return out
}

func TestFill(t *testing.T) {
	lc := LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "fc1"}}
	src, err := InitAdapter(tinyCfg, lc, 7)
	if err != nil {
		t.Fatal(err)
	}
	for i := range src.Tensors() {
		for k := range src.Tensors()[i].Data {
			src.Tensors()[i].Data[k] = float32(i) + float32(k)/64 // B is zero after init; make every tensor distinct
		}
	}
	nan := func(s []Stored) []Stored {
		b := slices.Clone(Float32Bytes(src.Tensors()[1].Data))
		copy(b[4:], Float32Bytes([]float32{float32(math.NaN())}))
		s[1].Read = Bytes(b)
		return s
	}
	cases := []struct {
		name    string
		edit    func([]Stored) []Stored
		ordered bool
		want    error
	}{
		{"exact, ordered", func(s []Stored) []Stored { return s }, true, nil},
		{"exact, by name", func(s []Stored) []Stored { return s }, false, nil},
		{"reversed, by name", func(s []Stored) []Stored { slices.Reverse(s); return s }, false, nil},
		{"reversed, ordered", func(s []Stored) []Stored { slices.Reverse(s); return s }, true, ErrShape},
		{"missing", func(s []Stored) []Stored { return s[1:] }, false, ErrShape},
		{"extra", func(s []Stored) []Stored { return append(s, s[0]) }, false, ErrShape},
		{"renamed", func(s []Stored) []Stored { s[2].Name += "x"; return s }, false, ErrShape},
		{"twice", func(s []Stored) []Stored { s[2].Name = s[1].Name; return s }, false, ErrShape},
		{"dtype", func(s []Stored) []Stored { s[0].DType = "F16"; return s }, true, ErrShape},
		{"shape", func(s []Stored) []Stored { s[0].Shape = []uint64{s[0].Shape[1], s[0].Shape[0]}; return s }, true, ErrShape},
		{"short data", func(s []Stored) []Stored {
			b, _ := s[0].Read()
			s[0].Read = Bytes(b[:len(b)-4])
			return s
		}, true, ErrShape},
		{"NaN", nan, true, ErrNonFinite},
		{"Inf", func(s []Stored) []Stored {
			s[0].Read = Bytes(Float32Bytes(slices.Repeat([]float32{float32(math.Inf(-1))}, len(src.Tensors()[0].Data))))
			return s
		}, true, ErrNonFinite},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := src.ZeroLike()
			err := Fill(dst.Tensors(), SliceSource(tc.edit(storedOf(t, src)), tc.ordered))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Fill: %v, want %v", err, tc.want)
			}
			if tc.want == nil && Digest(dst.Tensors()) != Digest(src.Tensors()) {
				t.Fatal("filled adapter differs from the source")
			}
		})
	}
}

func TestInferLoRA(t *testing.T) {
	lc := LoRAConfig{Rank: 3, Alpha: 6, Targets: []string{"k", "o", "fc2"}}
	a, err := NewAdapter(tinyCfg, lc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var shapes [][]uint64
	for _, x := range a.Tensors() {
		names, shapes = append(names, x.Name), append(shapes, dims(x.Shape))
	}
	got, err := InferLoRA(names, shapes, 6)
	if err != nil || got.Rank != 3 || got.Alpha != 6 || !slices.Equal(got.Targets, lc.Targets) {
		t.Fatalf("InferLoRA = %+v, %v; want %+v", got, err, lc)
	}
	for _, bad := range []string{"lora.blocks.0.attn.z.A.weight", "blocks.0.attn.q.A.weight", "lora.blocks.0.attn.q.C.weight"} {
		if _, err := InferLoRA([]string{bad}, [][]uint64{{3, 4}}, 6); !errors.Is(err, ErrShape) {
			t.Errorf("InferLoRA(%q) = %v, want ErrShape", bad, err)
		}
	}
}
