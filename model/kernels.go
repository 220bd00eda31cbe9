package model

import (
	"math"
	"sync"
)

// parallelFor runs body over [0, n) split into at most threads contiguous
// chunks. Callers make each index's work independent of the split, which is
// what keeps results identical for every thread count.
func parallelFor(threads, n, work int, body func(lo, hi int)) {
	// Below ~32k multiply-adds a goroutine costs more than it saves.
	if threads > n {
		threads = n
	}
	if threads <= 1 || work < 1<<15 {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	for t := range threads {
		lo, hi := t*n/threads, (t+1)*n/threads
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(lo, hi)
		}()
	}
	wg.Wait()
}

// dot is Σ a[i]·b[i] in a fixed order (four interleaved partial sums).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy is y += alpha·x.
func axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// matMulT sets y[n,o] = Σ_i x[n,i]·w[o,i] for x [N,in], w [out,in], y [N,out].
// Four outputs are computed together (one pass over the x row); each output
// still has one fixed summation order.
func matMulT(threads int, y, x, w []float32, N, in, out int) {
	parallelFor(threads, N, N*in*out, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			xr, yr := x[n*in:(n+1)*in], y[n*out:(n+1)*out]
			o := 0
			for ; o+4 <= out; o += 4 {
				yr[o], yr[o+1], yr[o+2], yr[o+3] = dot4(xr, w[o*in:(o+1)*in], w[(o+1)*in:(o+2)*in], w[(o+2)*in:(o+3)*in], w[(o+3)*in:(o+4)*in])
			}
			for ; o < out; o++ {
				yr[o] = dot(xr, w[o*in:(o+1)*in])
			}
		}
	})
}

// dot4 returns the dot products of x with a, b, c and d, each summed in
// index order.
func dot4(x, a, b, c, d []float32) (sa, sb, sc, sd float32) {
	a, b, c, d = a[:len(x)], b[:len(x)], c[:len(x)], d[:len(x)]
	for i, v := range x {
		sa += v * a[i]
		sb += v * b[i]
		sc += v * c[i]
		sd += v * d[i]
	}
	return
}

// matMulAcc adds dy·w to dx: dx[n,i] += Σ_o dy[n,o]·w[o,i] for dy [N,out],
// w [out,in], dx [N,in]. Rows of w are taken four at a time.
func matMulAcc(threads int, dx, dy, w []float32, N, out, in int) {
	parallelFor(threads, N, N*in*out, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			dxr, dyr := dx[n*in:(n+1)*in], dy[n*out:(n+1)*out]
			o := 0
			for ; o+4 <= out; o += 4 {
				g0, g1, g2, g3 := dyr[o], dyr[o+1], dyr[o+2], dyr[o+3]
				if g0 == 0 && g1 == 0 && g2 == 0 && g3 == 0 {
					continue
				}
				axpy4(g0, g1, g2, g3, w[o*in:(o+1)*in], w[(o+1)*in:(o+2)*in], w[(o+2)*in:(o+3)*in], w[(o+3)*in:(o+4)*in], dxr)
			}
			for ; o < out; o++ {
				if g := dyr[o]; g != 0 {
					axpy(g, w[o*in:(o+1)*in], dxr)
				}
			}
		}
	})
}

// axpy4 is y += ga·a + gb·b + gc·c + gd·d, summed in that order.
func axpy4(ga, gb, gc, gd float32, a, b, c, d, y []float32) {
	a, b, c, d = a[:len(y)], b[:len(y)], c[:len(y)], d[:len(y)]
	for i := range y {
		y[i] += ga*a[i] + gb*b[i] + gc*c[i] + gd*d[i]
	}
}

// matTMulAcc adds scale·dyᵀ·x to dw: dw[o,i] += scale·Σ_n dy[n,o]·x[n,i] for
// dy [N,out], x [N,in], dw [out,in]. Rows of x are taken four at a time.
func matTMulAcc(threads int, dw, dy, x []float32, N, out, in int, scale float32) {
	parallelFor(threads, out, N*in*out, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			dwr := dw[o*in : (o+1)*in]
			n := 0
			for ; n+4 <= N; n += 4 {
				g0, g1, g2, g3 := dy[n*out+o], dy[(n+1)*out+o], dy[(n+2)*out+o], dy[(n+3)*out+o]
				if g0 == 0 && g1 == 0 && g2 == 0 && g3 == 0 {
					continue
				}
				axpy4(scale*g0, scale*g1, scale*g2, scale*g3, x[n*in:(n+1)*in], x[(n+1)*in:(n+2)*in], x[(n+2)*in:(n+3)*in], x[(n+3)*in:(n+4)*in], dwr)
			}
			for ; n < N; n++ {
				if g := dy[n*out+o]; g != 0 {
					axpy(scale*g, x[n*in:(n+1)*in], dwr)
				}
			}
		}
	})
}

const normEps = 1e-5

// rmsNorm sets y[n] = x[n]·r[n]·g with r[n] = 1/sqrt(mean(x[n]²)+eps).
func rmsNorm(y, r, x, g []float32, N, D int) {
	for n := 0; n < N; n++ {
		xr := x[n*D : (n+1)*D]
		rr := float32(1 / math.Sqrt(float64(dot(xr, xr))/float64(D)+normEps))
		r[n] = rr
		yr := y[n*D : (n+1)*D]
		for i, v := range xr {
			yr[i] = v * rr * g[i]
		}
	}
}

// rmsNormBack adds the gradient of rmsNorm to dx (from dy) and, when dg is
// not nil, to dg.
func rmsNormBack(dx, dg, dy, x, r, g []float32, N, D int) {
	for n := 0; n < N; n++ {
		xr, dyr, dxr := x[n*D:(n+1)*D], dy[n*D:(n+1)*D], dx[n*D:(n+1)*D]
		rr := r[n]
		var s float32
		for i := range xr {
			s += dyr[i] * g[i] * xr[i]
		}
		c := rr * rr * rr * s / float32(D)
		for i := range xr {
			dxr[i] += rr*dyr[i]*g[i] - c*xr[i]
		}
		if dg != nil {
			for i := range xr {
				dg[i] += dyr[i] * xr[i] * rr
			}
		}
	}
}

const geluC = 0.7978845608028654 // sqrt(2/π)

// geluForward sets g[i] = GELU(f[i]) (tanh approximation) and, when t is
// not nil, t[i] to the tanh it used, which geluBackward reuses.
func geluForward(threads int, g, t, f []float32) {
	parallelFor(threads, len(f), 16*len(f), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x := float64(f[i])
			th := math.Tanh(geluC * (x + 0.044715*x*x*x))
			g[i] = float32(0.5 * x * (1 + th))
			if t != nil {
				t[i] = float32(th)
			}
		}
	})
}

// geluBackward multiplies d[i] by GELU'(f[i]), given the tanh values t
// from geluForward.
func geluBackward(threads int, d, t, f []float32) {
	parallelFor(threads, len(f), 4*len(f), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x, th := float64(f[i]), float64(t[i])
			d[i] *= float32(0.5*(1+th) + 0.5*x*(1-th*th)*geluC*(1+3*0.044715*x*x))
		}
	})
}

// LogSoftmax writes log softmax(x) to dst and returns the log-sum-exp.
func LogSoftmax(dst, x []float32) float32 {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v - mx))
	}
	lse := mx + float32(math.Log(s))
	for i, v := range x {
		dst[i] = v - lse
	}
	return lse
}
