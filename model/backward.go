package model

import (
	"fmt"
	"math"
)

// Backward propagates dLogits (the gradient of a scalar loss with respect to
// a.Logits, same layout) through the network and adds the parameter
// gradients to gw (base weights) and ga (adapter). Either may be nil: a nil
// gw skips every base-weight gradient, which is what LoRA training needs.
func (md *Model) Backward(a *Activations, dLogits []float32, gw *Weights, ga *Adapter) error {
	c := md.W.Cfg
	D, N, Vo := c.Dim, a.B*a.T, c.Vocab
	if len(dLogits) != N*Vo {
		return fmt.Errorf("model: dLogits has %d values, want %d", len(dLogits), N*Vo)
	}
	if gw != nil && gw.Cfg != c {
		return fmt.Errorf("%w: gradient weights have shape %+v", ErrConfig, gw.Cfg)
	}
	if ga != nil && (md.A == nil || ga.Model != md.A.Model || ga.Cfg.Rank != md.A.Cfg.Rank || len(ga.Tensors()) != len(md.A.Tensors())) {
		return fmt.Errorf("%w: adapter gradient does not match the model's adapter", ErrConfig)
	}
	dh := make([]float32, N*D)
	matMulAcc(md.Threads, dh, dLogits, md.W.Head, N, Vo, D)
	if gw != nil {
		matTMulAcc(md.Threads, gw.Head, dLogits, a.hf, N, Vo, D, 1)
	}
	dx := make([]float32, N*D)
	rmsNormBack(dx, gradOf(gw, func(w *Weights) []float32 { return w.NormF }), dh, a.xf, a.rf, md.W.NormF, N, D)

	for l := c.Layers - 1; l >= 0; l-- {
		la := &a.layers[l]
		L := &md.W.Layers[l]
		var gL *Layer
		if gw != nil {
			gL = &gw.Layers[l]
		}
		// x = x2 + fc2(gelu(fc1(norm2(x2))))
		dg := md.linearBack(l, FC2, la.lin[FC2], dx, N, gL, ga)
		geluBackward(md.Threads, dg, la.gt, la.f)
		dh2 := md.linearBack(l, FC1, la.lin[FC1], dg, N, gL, ga)
		dx2 := dx // residual path
		var dn2 []float32
		if gL != nil {
			dn2 = gL.Norm2
		}
		rmsNormBack(dx2, dn2, dh2, la.x2, la.r2, L.Norm2, N, D)
		// x2 = x + o(attention(norm1(x)))
		datt := md.linearBack(l, O, la.lin[O], dx2, N, gL, ga)
		dq, dk, dv := md.attentionBack(la, datt, a.B, a.T)
		dh1 := md.linearBack(l, Q, la.lin[Q], dq, N, gL, ga)
		add(dh1, md.linearBack(l, K, la.lin[K], dk, N, gL, ga))
		add(dh1, md.linearBack(l, V, la.lin[V], dv, N, gL, ga))
		var dn1 []float32
		if gL != nil {
			dn1 = gL.Norm1
		}
		rmsNormBack(dx2, dn1, dh1, la.x, la.r1, L.Norm1, N, D)
		dx = dx2
	}
	if gw != nil {
		T := a.T
		for n, tok := range a.tokens {
			t := n % T
			axpy(1, dx[n*D:(n+1)*D], gw.Tok[tok*D:(tok+1)*D])
			axpy(1, dx[n*D:(n+1)*D], gw.Pos[t*D:(t+1)*D])
		}
	}
	return nil
}

func gradOf(gw *Weights, f func(*Weights) []float32) []float32 {
	if gw == nil {
		return nil
	}
	return f(gw)
}

func add(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}

// linearBack returns the gradient with respect to the module's input and adds
// the weight gradients to gL and ga (when not nil).
func (md *Model) linearBack(l int, m Module, act linAct, dy []float32, N int, gL *Layer, ga *Adapter) []float32 {
	c := md.W.Cfg
	in, out := c.dims(m)
	dx := make([]float32, N*in)
	matMulAcc(md.Threads, dx, dy, md.W.Layers[l].Lin[m], N, out, in)
	if gL != nil {
		matTMulAcc(md.Threads, gL.Lin[m], dy, act.in, N, out, in, 1)
	}
	if act.u != nil {
		r, s := md.A.Cfg.Rank, md.A.Scale()
		dyB := make([]float32, N*r) // dy·B
		matMulAcc(md.Threads, dyB, dy, md.A.B[l][m], N, out, r)
		if ga != nil {
			matTMulAcc(md.Threads, ga.B[l][m], dy, act.u, N, out, r, s)
			matTMulAcc(md.Threads, ga.A[l][m], dyB, act.in, N, r, in, s)
		}
		for i := range dyB {
			dyB[i] *= s
		}
		matMulAcc(md.Threads, dx, dyB, md.A.A[l][m], N, r, in)
	}
	return dx
}

// attentionBack returns the gradients with respect to q, k and v.
func (md *Model) attentionBack(la *layerAct, dout []float32, B, T int) (dq, dk, dv []float32) {
	c := md.W.Cfg
	D, H := c.Dim, c.Heads
	hd := D / H
	scale := float32(1 / math.Sqrt(float64(hd)))
	dq, dk, dv = make([]float32, B*T*D), make([]float32, B*T*D), make([]float32, B*T*D)
	q, k, v, p := la.q, la.k, la.v, la.p
	parallelFor(md.Threads, B, B*H*T*T*hd*4, func(lo, hi int) {
		dp := make([]float32, T)
		for b := lo; b < hi; b++ {
			for h := 0; h < H; h++ {
				for i := 0; i < T; i++ {
					row := p[((b*H+h)*T+i)*T : ((b*H+h)*T+i+1)*T]
					doi := dout[(b*T+i)*D+h*hd : (b*T+i)*D+(h+1)*hd]
					var s float32
					for j := 0; j <= i; j++ {
						vj := (b*T+j)*D + h*hd
						dp[j] = dot(doi, v[vj:vj+hd])
						axpy(row[j], doi, dv[vj:vj+hd])
						s += dp[j] * row[j]
					}
					qi := (b*T+i)*D + h*hd
					for j := 0; j <= i; j++ {
						ds := row[j] * (dp[j] - s) * scale
						kj := (b*T+j)*D + h*hd
						axpy(ds, k[kj:kj+hd], dq[qi:qi+hd])
						axpy(ds, q[qi:qi+hd], dk[kj:kj+hd])
					}
				}
			}
		}
	})
	return dq, dk, dv
}
