package llama

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/zooai/gym/model/prng"
)

func randVec(r *prng.Source, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.Norm())
	}
	return v
}

// withSIMD runs f with the assembly kernels on and then off (when this
// machine has them) and returns both results.
func withSIMD(t *testing.T, f func() []float32) (simd, portable []float32) {
	t.Helper()
	defer func(u bool) { useSIMD = u }(useSIMD)
	useSIMD = false
	portable = f()
	if !haveSIMD {
		t.Log("no SIMD kernels on this machine: comparing the Go kernels with themselves")
		return portable, portable
	}
	useSIMD = true
	return f(), portable
}

// refDotL is dotL's order written out directly.
func refDotL(a, b []float32) float32 {
	var acc [lanes]float32
	ch := len(a) / lanes
	for i := range ch * lanes {
		acc[i%lanes] = fma32(a[i], b[i], acc[i%lanes])
	}
	var t8 [8]float32
	for l := range 8 {
		t8[l] = acc[l] + acc[l+8]
	}
	t4 := [4]float32{t8[0] + t8[4], t8[1] + t8[5], t8[2] + t8[6], t8[3] + t8[7]}
	s := (t4[0] + t4[2]) + (t4[1] + t4[3])
	for i := ch * lanes; i < len(a); i++ {
		s = fma32(a[i], b[i], s)
	}
	return s
}

// TestKernelsBitExact: the AVX-512 kernels and the Go kernels give the
// same bits, equal to the documented summation orders written out
// naively, on shapes with remainders in every dimension and for several
// thread counts.
func TestKernelsBitExact(t *testing.T) {
	r := prng.New(11, 3)
	shapes := []struct{ N, in, out int }{{1, 8, 5}, {4, 16, 4}, {5, 37, 7}, {9, 64, 130}, {70, 576, 67}, {3, 1000, 9}, {130, 300, 192}}
	for _, s := range shapes {
		x, w := randVec(r, s.N*s.in), randVec(r, s.out*s.in)
		want := make([]float32, s.N*s.out)
		for n := range s.N {
			for o := range s.out {
				want[n*s.out+o] = refDotL(x[n*s.in:(n+1)*s.in], w[o*s.in:(o+1)*s.in])
			}
		}
		for _, th := range []int{1, 3} {
			name := fmt.Sprintf("T/%dx%dx%d/threads=%d", s.N, s.in, s.out, th)
			a, b := withSIMD(t, func() []float32 {
				y := make([]float32, s.N*s.out)
				matMulT(th, y, x, w, nil, s.N, s.in, s.out)
				return y
			})
			if !sameBits(a, want) || !sameBits(b, want) {
				t.Errorf("%s: SIMD Δ %g, Go Δ %g from the reference", name, maxAbsDiff(a, want), maxAbsDiff(b, want))
			}
		}
		// matMulNN with x [N, in] and w [in, out]: sequential sums.
		wn := randVec(r, s.in*s.out)
		wantNN := make([]float32, s.N*s.out)
		for n := range s.N {
			for m := range s.out {
				var v float32
				for k := range s.in {
					v = fma32(x[n*s.in+k], wn[k*s.out+m], v)
				}
				wantNN[n*s.out+m] = v
			}
		}
		for _, th := range []int{1, 2, 7} {
			name := fmt.Sprintf("NN/%dx%dx%d/threads=%d", s.N, s.in, s.out, th)
			a, b := withSIMD(t, func() []float32 {
				y := randVec(r, s.N*s.out) // overwritten, not added to
				matMulNN(th, y, x, wn, s.N, s.in, s.out)
				return y
			})
			if !sameBits(a, wantNN) || !sameBits(b, wantNN) {
				t.Errorf("%s: SIMD Δ %g, Go Δ %g from the reference", name, maxAbsDiff(a, wantNN), maxAbsDiff(b, wantNN))
			}
		}
	}
	for _, n := range []int{0, 1, 15, 16, 17, 64, 100, 1000} {
		a, b := randVec(r, n), randVec(r, n)
		s1, s2 := withSIMD(t, func() []float32 { return []float32{dotL(a, b)} })
		if want := refDotL(a, b); !sameBits(s1, []float32{want}) || !sameBits(s2, []float32{want}) {
			t.Errorf("dotL n=%d: %v %v, want %v", n, s1, s2, want)
		}
		y0 := randVec(r, n)
		y1, y2 := withSIMD(t, func() []float32 {
			y := append([]float32(nil), y0...)
			axpy(0.37, a, y)
			return y
		})
		want := append([]float32(nil), y0...)
		for i := range want {
			want[i] = fma32(0.37, a[i], want[i])
		}
		if !sameBits(y1, want) || !sameBits(y2, want) {
			t.Errorf("axpy n=%d differs", n)
		}
	}
	// Attention's scores and nnRow on strided keys and values.
	for _, hd := range []int{16, 20, 48, 64, 100, 128} {
		const n, ld = 11, 200
		q, kb := randVec(r, hd), randVec(r, n*ld)
		a, b := withSIMD(t, func() []float32 {
			row := make([]float32, n)
			scores(row, q, kb, ld, 0.125)
			y := randVec(prng.New(1, 1), hd)
			nnRow(y, row, kb, ld)
			return append(row, y...)
		})
		if !sameBits(a, b) {
			t.Errorf("scores/nnRow hd=%d: SIMD and Go differ by %g", hd, maxAbsDiff(a, b))
		}
	}
}

// TestModelSIMDMatchesGo: a forward and backward pass on a small model
// gives the same bits with the assembly kernels and without them.
func TestModelSIMDMatchesGo(t *testing.T) {
	c := testConfig(Qwen3)
	w := randomWeights(t, c, 21)
	a := randomAdapter(t, c, 22)
	B, T := 2, 19
	ids := randomTokens(23, B*T, c.Vocab)
	targets := randomTokens(24, B*T, c.Vocab)
	run := func() []float32 {
		md, err := New(w, a, 2)
		if err != nil {
			t.Fatal(err)
		}
		act, err := md.Forward(ids, B, T)
		if err != nil {
			t.Fatal(err)
		}
		dLogP := make([]float32, B*T)
		for i := range dLogP {
			dLogP[i] = 1 / float32(i+1)
		}
		dl, err := TokenLogProbsBackward(2, act.Logits, c.Vocab, targets, dLogP)
		if err != nil {
			t.Fatal(err)
		}
		g := a.Zeroed()
		if err := md.Backward(act, dl, g); err != nil {
			t.Fatal(err)
		}
		out := append([]float32(nil), act.Logits...)
		for _, ts := range g.Tensors(c) {
			out = append(out, ts.Data...)
		}
		return out
	}
	s, p := withSIMD(t, run)
	if !sameBits(s, p) {
		t.Fatalf("SIMD and Go kernels differ by %g", maxAbsDiff(s, p))
	}
}

// TestFMA32: fma32 is the correctly rounded a·b + c (computed exactly with
// math/big) and equals the processor's fused multiply-add (through the
// AVX-512 axpy) on random operands chosen to hit hard cases: cancellation,
// sums near a rounding boundary, subnormal and huge values.
func TestFMA32(t *testing.T) {
	r := prng.New(99, 1)
	rf := func() float32 {
		m := float32(r.Norm())
		switch r.Uint64() % 8 {
		case 0:
			return m * 0x1p-130 // subnormal range
		case 1:
			return m * 0x1p100
		case 2:
			return m * 0x1p-60
		case 3:
			return float32(int(m * 1000)) // small integers: exact ties
		}
		return m
	}
	const n = 1 << 16
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range n {
		a[i], b[i], c[i] = rf(), rf(), rf()
		switch r.Uint64() % 4 {
		case 0: // c cancels most of a·b
			c[i] = -float32(float64(a[i]) * float64(b[i]))
		case 1: // c makes the exact sum fall near a float32 tie
			c[i] = float32(float64(a[i])*float64(b[i])) * 0x1p24
		}
	}
	for i := range n {
		want := exactFMA32(a[i], b[i], c[i])
		if got := fma32(a[i], b[i], c[i]); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a[i], b[i], c[i], got, want)
		}
	}
	if !haveSIMD {
		return
	}
	// The hardware: axpy with one alpha per call of 16 elements.
	for i := 0; i < n; i += lanes {
		y := append([]float32(nil), c[i:i+lanes]...)
		axpyChunks(a[i], &b[i], &y[0], 1)
		for l := range lanes {
			if want := fma32(a[i], b[i+l], c[i+l]); math.Float32bits(y[l]) != math.Float32bits(want) {
				t.Fatalf("VFMADD231PS(%g, %g, %g) = %g, fma32 %g", a[i], b[i+l], c[i+l], y[l], want)
			}
		}
	}
}

// exactFMA32 rounds the exact a·b + c to float32 with math/big.
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(400).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	if x.Sign() == 0 {
		return float32(float64(a)*float64(b) + float64(c)) // the sign of an exact zero
	}
	f, _ := x.Float32()
	return f
}
