package llama

import (
	"math"
	"sync"
)

// Kernels. Every output element is a sum over its inputs in index order
// with a single accumulator, and every product is rounded explicitly
// (float32(a*b)), so no code path may fuse a multiply-add: whichever tile,
// remainder loop or goroutine computes an element, its bits are the same.
// Work is split into items whose boundaries depend only on the problem
// size; threads take contiguous runs of items.

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

// Tile sizes of matMulT: an item is rowBlock rows of x against colPanel
// rows of w (a panel of w stays in cache while the rows stream past).
const (
	rowBlock = 64
	colPanel = 64
)

// matMulT sets y[n,o] = Σ_i x[n,i]·w[o,i] (+ bias[o]) for x [N,in],
// w [out,in], y [N,out]. bias may be nil.
func matMulT(threads int, y, x, w, bias []float32, N, in, out int) {
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
	if bias != nil {
		for n := range N {
			yr := y[n*out : (n+1)*out]
			for o, b := range bias[:out] {
				yr[o] += b
			}
		}
	}
}

// matTile computes y[n,o] for n in [n0,n1), o in [o0,o1).
func matTile(y, x, w []float32, in, out, n0, n1, o0, o1 int) {
	n := n0
	for ; n+4 <= n1; n += 4 {
		x0, x1, x2, x3 := x[n*in:(n+1)*in], x[(n+1)*in:(n+2)*in], x[(n+2)*in:(n+3)*in], x[(n+3)*in:(n+4)*in]
		o := o0
		for ; o+2 <= o1; o += 2 {
			a, b := w[o*in:(o+1)*in], w[(o+1)*in:(o+2)*in]
			s := dot4x2(x0, x1, x2, x3, a, b)
			y[n*out+o], y[n*out+o+1] = s[0], s[1]
			y[(n+1)*out+o], y[(n+1)*out+o+1] = s[2], s[3]
			y[(n+2)*out+o], y[(n+2)*out+o+1] = s[4], s[5]
			y[(n+3)*out+o], y[(n+3)*out+o+1] = s[6], s[7]
		}
		for ; o < o1; o++ {
			a := w[o*in : (o+1)*in]
			y[n*out+o] = dot(x0, a)
			y[(n+1)*out+o] = dot(x1, a)
			y[(n+2)*out+o] = dot(x2, a)
			y[(n+3)*out+o] = dot(x3, a)
		}
	}
	for ; n < n1; n++ {
		xr := x[n*in : (n+1)*in]
		o := o0
		for ; o+4 <= o1; o += 4 {
			y[n*out+o], y[n*out+o+1], y[n*out+o+2], y[n*out+o+3] = dot1x4(xr, w[o*in:(o+1)*in], w[(o+1)*in:(o+2)*in], w[(o+2)*in:(o+3)*in], w[(o+3)*in:(o+4)*in])
		}
		for ; o < o1; o++ {
			y[n*out+o] = dot(xr, w[o*in:(o+1)*in])
		}
	}
}

// dot4x2 returns the dot products of rows x0…x3 with a and b, in the
// order x0·a, x0·b, x1·a, x1·b, ….
func dot4x2(x0, x1, x2, x3, a, b []float32) (s [8]float32) {
	n := len(a)
	x0, x1, x2, x3, b = x0[:n], x1[:n], x2[:n], x3[:n], b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for i := range n {
		av, bv := a[i], b[i]
		v := x0[i]
		s0 += float32(v * av)
		s1 += float32(v * bv)
		v = x1[i]
		s2 += float32(v * av)
		s3 += float32(v * bv)
		v = x2[i]
		s4 += float32(v * av)
		s5 += float32(v * bv)
		v = x3[i]
		s6 += float32(v * av)
		s7 += float32(v * bv)
	}
	return [8]float32{s0, s1, s2, s3, s4, s5, s6, s7}
}

// dot1x4 returns the dot products of x with a, b, c and d.
func dot1x4(x, a, b, c, d []float32) (sa, sb, sc, sd float32) {
	n := len(x)
	a, b, c, d = a[:n], b[:n], c[:n], d[:n]
	for i, v := range x {
		sa += float32(v * a[i])
		sb += float32(v * b[i])
		sc += float32(v * c[i])
		sd += float32(v * d[i])
	}
	return
}

// dot is Σ a[i]·b[i] in index order.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	for i, v := range a {
		s += float32(v * b[i])
	}
	return s
}

// axpy is y += alpha·x.
func axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += float32(alpha * v)
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
