package llama

import (
	"math"
	"sync"
)

// fma32 is a·b + c rounded once to float32, as a fused multiply-add
// instruction computes it. a·b is exact in float64; the sum is rounded to
// float64 with round-to-odd (the nearest float64, moved one unit toward
// the exact sum when it is inexact and even), and rounding that to float32
// is then the correctly rounded result, since float64 has more than 24+1
// extra bits (Boldo and Melquiond, "Emulation of FMA and correctly rounded
// sums: proved algorithms using rounding to odd", 2008).
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	// Rounding s to float32 can differ from rounding the exact sum only when
	// s is exactly halfway between two float32 values (rounding to float64
	// is monotonic and every such midpoint is a float64). In the float32
	// normal range a midpoint has its 29 low mantissa bits equal to 1<<28;
	// outside it (subnormal, overflow, not finite) take the slow path too.
	bits := math.Float64bits(s)
	if e := bits >> 52 & 0x7ff; e > 1023-126 && e < 1023+127 && bits&(1<<29-1) != 1<<28 {
		return float32(s)
	}
	return fma32Slow(p, float64(c), s)
}

// fma32Slow rounds s = p + c (p exact) to float32 through round-to-odd.
func fma32Slow(p, c, s float64) float32 {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	// The exact error of the sum (Knuth's TwoSum); s is zero only when the
	// sum is exactly zero.
	bv := s - p
	e := (p - (s - bv)) + (c - bv)
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 {
		if (e > 0) == (s > 0) {
			bits++ // away from zero
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// Kernels. Every output element is a sum over its inputs in a documented
// order (see "Summation orders" below), computed by one goroutine, so
// whichever tile, remainder loop or goroutine computes an element, its bits
// are the same. Work is split into items whose boundaries depend only on
// the problem size; threads take contiguous runs of items.
//
// The multiply-adds of the matrix kernels are fused: acc = a·b + acc
// rounded once (fma32), which the AVX-512 kernels compute with
// VFMADD231PS and the Go kernels compute exactly in float64. Elsewhere a
// product that is added is rounded explicitly (float32(a*b)), because Go
// fuses x*y+z on arm64 (and on amd64 with GOAMD64=v3) unless the product
// is converted; fusing there would make results depend on the machine.

// parallel runs body(i) for i in [0, items) on up to threads goroutines.
// work is the approximate number of multiply-adds in total; small jobs
// stay on the calling goroutine.
func parallel(threads, items int, work int, body func(lo, hi int)) {
	if threads > items {
		threads = items
	}
	if threads <= 1 || work < 1<<15 {
		body(0, items)
		return
	}
	var wg sync.WaitGroup
	for t := range threads {
		lo, hi := t*items/threads, (t+1)*items/threads
		wg.Go(func() { body(lo, hi) })
	}
	wg.Wait()
}

// Tile sizes of matMulT and matMulNN: an item is rowBlock rows of x
// against colPanel rows (matMulT) or columns (matMulNN) of w, so a panel of
// w stays in cache while the rows stream past.
const (
	rowBlock = 64
	colPanel = 64
)

// useSIMD selects the assembly kernels where the processor has them; tests
// turn it off to check that the Go kernels give the same bits.
var useSIMD = haveSIMD

// lanes is the width of the dot products' partial sums.
const lanes = 16

// Summation orders. Each step below is one fma32 (acc = a·b + acc
// rounded once), except the tree additions. matMulT's dot product of two
// rows of length n (dotL) keeps 16 running sums: lane l adds a[i]·b[i] for
// i ≡ l (mod 16), i <
// 16·⌊n/16⌋, in increasing i; the lanes are then added as a tree
// (reduceLanes: l + l+8, then l + l+4, l + l+2, l + l+1), and the
// remaining n mod 16 products are added to that in order. matMulNN and
// axpy add the products of each output element one after the other in
// index order, starting from zero (or from y). The AVX-512 kernels compute
// exactly these sums with one vector lane per running sum; the Go kernels
// compute them with scalars.

// reduceLanes adds 16 partial sums in the tree order of the AVX-512
// horizontal reduction.
func reduceLanes(acc *[lanes]float32) float32 {
	var t8 [8]float32
	for l := range t8 {
		t8[l] = acc[l] + acc[l+8]
	}
	var t4 [4]float32
	for l := range t4 {
		t4[l] = t8[l] + t8[l+4]
	}
	return (t4[0] + t4[2]) + (t4[1] + t4[3])
}

// dotChunksGo is dotChunks: the lane sums of the first 16·chunks products
// of a and b, reduced.
func dotChunksGo(a, b []float32, chunks int) float32 {
	var acc [lanes]float32
	a, b = a[:chunks*lanes], b[:chunks*lanes]
	for c := range chunks {
		a16, b16 := a[c*lanes:(c+1)*lanes], b[c*lanes:(c+1)*lanes]
		for l := range lanes {
			acc[l] = fma32(a16[l], b16[l], acc[l])
		}
	}
	return reduceLanes(&acc)
}

// dotL is the dot product of a and b in the lane order described above.
func dotL(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	ch := n / lanes
	var s float32
	if useSIMD && ch > 0 {
		s = dotChunks(&a[0], &b[0], ch)
	} else {
		s = dotChunksGo(a, b, ch)
	}
	for i := ch * lanes; i < n; i++ {
		s = fma32(a[i], b[i], s)
	}
	return s
}

// tn4x4Go is tn4x4: y[r·ldy+c] = the reduced lane sums of rows x+r·ldx
// and w+c·ldw over 16·chunks elements, for r, c < 4.
func tn4x4Go(x []float32, ldx int, w []float32, ldw int, chunks int, y []float32, ldy int) {
	for r := range 4 {
		for c := range 4 {
			y[r*ldy+c] = dotChunksGo(x[r*ldx:], w[c*ldw:], chunks)
		}
	}
}

// matMulT sets y[n,o] = Σ_i x[n,i]·w[o,i] (+ bias[o]) for x [N,in],
// w [out,in], y [N,out], each sum taken in dotL's lane order. bias may be
// nil.
func matMulT(threads int, y, x, w, bias []float32, N, in, out int) {
	_, _, _ = x[:N*in], w[:out*in], y[:N*out] // the kernels index without checks
	rb := (N + rowBlock - 1) / rowBlock
	cp := (out + colPanel - 1) / colPanel
	parallel(threads, rb*cp, N*in*out, func(lo, hi int) {
		for it := lo; it < hi; it++ {
			// Panels outermost: consecutive items share a panel of w.
			p, r := it/rb, it%rb
			n0, n1 := r*rowBlock, min((r+1)*rowBlock, N)
			o0, o1 := p*colPanel, min((p+1)*colPanel, out)
			matTile(y, x, w, in, out, n0, n1, o0, o1)
		}
	})
	addBias(y, bias, N, out)
}

// addBias adds bias[o] to y[n,o] for y [N,out]; bias may be nil.
func addBias(y, bias []float32, N, out int) {
	if bias == nil {
		return
	}
	for n := range N {
		yr := y[n*out : (n+1)*out]
		for o, b := range bias[:out] {
			yr[o] += b
		}
	}
}

// matTile computes y[n,o] for n in [n0,n1), o in [o0,o1): tiles of 4 rows
// × 4 columns, then single rows against 4 columns, then single dot
// products.
func matTile(y, x, w []float32, in, out, n0, n1, o0, o1 int) {
	ch := in / lanes
	tail := ch * lanes
	n := n0
	for ; n+4 <= n1; n += 4 {
		o := o0
		for ; o+4 <= o1; o += 4 {
			if useSIMD {
				tn4x4(&x[n*in], in, &w[o*in], in, ch, &y[n*out+o], out)
			} else {
				tn4x4Go(x[n*in:], in, w[o*in:], in, ch, y[n*out+o:], out)
			}
			if tail < in {
				for r := range 4 {
					for c := range 4 {
						y[(n+r)*out+o+c] = dotTail(y[(n+r)*out+o+c], x[(n+r)*in:(n+r+1)*in], w[(o+c)*in:(o+c+1)*in], tail)
					}
				}
			}
		}
		for ; o < o1; o++ {
			for r := range 4 {
				y[(n+r)*out+o] = dotL(x[(n+r)*in:(n+r+1)*in], w[o*in:(o+1)*in])
			}
		}
	}
	for ; n < n1; n++ {
		xr := x[n*in : (n+1)*in]
		o := o0
		if useSIMD {
			for ; o+4 <= o1; o += 4 {
				tn1x4(&xr[0], &w[o*in], in, ch, &y[n*out+o])
				for c := range 4 {
					y[n*out+o+c] = dotTail(y[n*out+o+c], xr, w[(o+c)*in:(o+c+1)*in], tail)
				}
			}
		}
		for ; o < o1; o++ {
			y[n*out+o] = dotL(xr, w[o*in:(o+1)*in])
		}
	}
}

// dotTail continues the sum s with the products a[i]·b[i], i ≥ from.
func dotTail(s float32, a, b []float32, from int) float32 {
	b = b[:len(a)]
	for i := from; i < len(a); i++ {
		s = fma32(a[i], b[i], s)
	}
	return s
}

// kBlock is the depth of the pieces matMulNN cuts its sums into, so that
// kBlock rows of a panel of w stay in cache across the row tiles; each
// running sum is carried through y from one piece to the next, so the
// order of the additions is unchanged.
const kBlock = 256

// matMulNN sets y[n,m] = Σ_k x[n,k]·w[k,m] for x [N,K], w [K,M], y [N,M],
// adding the products of each element in increasing k. It is the product
// with w untransposed: the backward pass's products with a weight matrix,
// the output head's ([V, D]) among them, without transposing it.
func matMulNN(threads int, y, x, w []float32, N, K, M int) {
	_, _, _ = x[:N*K], w[:K*M], y[:N*M]
	rb := (N + rowBlock - 1) / rowBlock
	cp := (M + colPanel - 1) / colPanel
	parallel(threads, rb*cp, N*K*M, func(lo, hi int) {
		for it := lo; it < hi; it++ {
			p, r := it/rb, it%rb
			n0, n1 := r*rowBlock, min((r+1)*rowBlock, N)
			m0, m1 := p*colPanel, min((p+1)*colPanel, M)
			for n := n0; n < n1; n++ {
				clear(y[n*M+m0 : n*M+m1])
			}
			for k0 := 0; k0 < K; k0 += kBlock {
				nnTile(y, x, w[k0*M+m0:], M, K, M, n0, n1, m0, m1, k0, min(k0+kBlock, K))
			}
		}
	})
}

// nnTile adds Σ_{k0≤k<k1} x[n,k]·w[k,m] to y[n,m] for n in [n0,n1), m in
// [m0,m1), k in increasing order, where element (k, m) of w is
// wb[(k-k0)·ldw + m-m0]: wb starts at element (k0, m0).
func nnTile(y, x, wb []float32, ldw, K, M, n0, n1, m0, m1, k0, k1 int) {
	kn := k1 - k0
	if useSIMD && m1-m0 == colPanel {
		n := n0
		for ; n+4 <= n1; n += 4 {
			nn4x64(&x[n*K+k0], K, &wb[0], ldw, kn, &y[n*M+m0], M)
		}
		for ; n < n1; n++ {
			nn1x64(&x[n*K+k0], &wb[0], ldw, kn, &y[n*M+m0])
		}
		return
	}
	for n := n0; n < n1; n++ {
		nnRowGo(y[n*M+m0:n*M+m1], x[n*K+k0:n*K+k1], wb, ldw)
	}
}

// nnRowGo adds Σ_k x[k]·w[k·ldw+m] to y[m] for k in increasing order: the
// Go form of nn1x64 and nn4x64 (one row at a time: rows are independent).
func nnRowGo(y, x, w []float32, ldw int) {
	for k, xv := range x {
		wr := w[k*ldw : k*ldw+len(y)]
		for m, wv := range wr {
			y[m] = fma32(xv, wv, y[m])
		}
	}
}

// nnRow adds Σ_k x[k]·w[k·ldw+m] to y[m] (k in increasing order) for a
// single row, such as attention's probabilities times the values.
func nnRow(y, x, w []float32, ldw int) {
	if len(x) == 0 {
		return
	}
	_ = w[(len(x)-1)*ldw+len(y)-1]
	m := 0
	if useSIMD {
		for ; m+colPanel <= len(y); m += colPanel {
			nn1x64(&x[0], &w[m], ldw, len(x), &y[m])
		}
		for ; m+lanes <= len(y); m += lanes {
			nn1x16(&x[0], &w[m], ldw, len(x), &y[m])
		}
	}
	if m < len(y) {
		nnRowGo(y[m:], x, w[m:], ldw)
	}
}

// axpy is y += alpha·x, each element fma32(alpha, x[i], y[i]).
func axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	i := 0
	if ch := len(x) / lanes; useSIMD && ch > 0 {
		axpyChunks(alpha, &x[0], &y[0], ch)
		i = ch * lanes
	}
	for ; i < len(x); i++ {
		y[i] = fma32(alpha, x[i], y[i])
	}
}

// rmsNorm sets y[n] = g ⊙ (x[n]·r[n]) with r[n] = 1/sqrt(mean(x[n]²)+eps)
// for N rows of width D, as transformers' LlamaRMSNorm computes it in
// float32; r may be nil. The mean of squares is summed in float64.
func rmsNorm(y, r, x, g []float32, N, D int, eps float64) {
	for n := range N {
		xr, yr := x[n*D:(n+1)*D], y[n*D:(n+1)*D]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		rr := float32(1 / math.Sqrt(ss/float64(D)+eps))
		if r != nil {
			r[n] = rr
		}
		for i, v := range xr {
			yr[i] = g[i] * float32(v*rr)
		}
	}
}

// silu is x·sigmoid(x).
func silu(x float32) float32 {
	return float32(float64(x) / (1 + math.Exp(-float64(x))))
}

// softmaxRow replaces s with softmax(s) and returns the log-sum-exp.
func softmaxRow(s []float32) float32 {
	mx := s[0]
	for _, v := range s[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range s {
		e := float32(math.Exp(float64(v - mx)))
		s[i] = e
		sum += e
	}
	for i := range s {
		s[i] /= sum
	}
	return mx + float32(math.Log(float64(sum)))
}
