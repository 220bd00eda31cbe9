package model

import (
	"fmt"
	"math"
)

// Model is a network ready to run: base weights, an optional adapter and the
// number of goroutines its matrix products may use.
type Model struct {
	W       *Weights
	A       *Adapter // nil: the base model alone
	Threads int      // <= 1: run on the calling goroutine
}

// linAct is what a linear layer keeps for its backward pass.
type linAct struct {
	in []float32 // input [N, in] (shared, not owned)
	u  []float32 // x·Aᵀ [N, rank] when the module has an adapter
}

type layerAct struct {
	x, r1, h1       []float32 // block input, its 1/rms, normed input
	q, k, v, p, att []float32 // projections, attention probabilities [B,H,T,T], attention output
	x2, r2, h2      []float32 // after attention residual, 1/rms, normed
	f, g, gt        []float32 // fc1 output (pre-GELU), GELU output, its tanh
	lin             [numModules]linAct
}

// Activations are the results of a forward pass over a batch of B sequences
// of length T, with what the backward pass needs.
type Activations struct {
	B, T   int
	tokens []int
	layers []layerAct
	xf, rf []float32 // final residual stream and its 1/rms
	hf     []float32 // normed final stream
	// Logits are [B·T, Vocab]: row b·T+t predicts token t+1 of sequence b.
	Logits []float32
}

// linear computes y = x·Wᵀ (+ s·(x·Aᵀ)·Bᵀ) for module m of layer l.
func (md *Model) linear(l int, m Module, x []float32, N int, act *linAct) []float32 {
	c := md.W.Cfg
	in, out := c.dims(m)
	y := make([]float32, N*out)
	matMulT(md.Threads, y, x, md.W.Layers[l].Lin[m], N, in, out)
	act.in = x
	if md.A != nil && md.A.A[l][m] != nil {
		r := md.A.Cfg.Rank
		u := make([]float32, N*r)
		matMulT(md.Threads, u, x, md.A.A[l][m], N, in, r)
		act.u = u
		lu := make([]float32, N*out)
		matMulT(md.Threads, lu, u, md.A.B[l][m], N, r, out)
		s := md.A.Scale()
		for i, v := range lu {
			y[i] += s * v
		}
	}
	return y
}

func (md *Model) check(tokens []int, B, T int) error {
	c := md.W.Cfg
	if md.A != nil && md.A.Model != c {
		return fmt.Errorf("%w: adapter is for model %+v, weights are %+v", ErrConfig, md.A.Model, c)
	}
	if B < 1 || T < 1 || T > c.Ctx || len(tokens) != B*T {
		return fmt.Errorf("model: batch %d×%d with %d tokens (context %d)", B, T, len(tokens), c.Ctx)
	}
	for _, t := range tokens {
		if t < 0 || t >= c.Vocab {
			return fmt.Errorf("model: token id %d outside vocabulary of %d", t, c.Vocab)
		}
	}
	return nil
}

// Forward runs the network over tokens, B sequences of length T laid out
// row by row, and returns the activations with the logits.
func (md *Model) Forward(tokens []int, B, T int) (*Activations, error) {
	if err := md.check(tokens, B, T); err != nil {
		return nil, err
	}
	c := md.W.Cfg
	D, N := c.Dim, B*T
	a := &Activations{B: B, T: T, tokens: tokens, layers: make([]layerAct, c.Layers)}
	x := make([]float32, N*D)
	for n, tok := range tokens {
		t := n % T
		xr := x[n*D : (n+1)*D]
		copy(xr, md.W.Tok[tok*D:(tok+1)*D])
		axpy(1, md.W.Pos[t*D:(t+1)*D], xr)
	}
	for l := range a.layers {
		la := &a.layers[l]
		L := &md.W.Layers[l]
		la.x = x
		la.r1, la.h1 = make([]float32, N), make([]float32, N*D)
		rmsNorm(la.h1, la.r1, x, L.Norm1, N, D)
		la.q = md.linear(l, Q, la.h1, N, &la.lin[Q])
		la.k = md.linear(l, K, la.h1, N, &la.lin[K])
		la.v = md.linear(l, V, la.h1, N, &la.lin[V])
		la.p, la.att = md.attention(la.q, la.k, la.v, B, T)
		o := md.linear(l, O, la.att, N, &la.lin[O])
		la.x2 = make([]float32, N*D)
		for i := range o {
			la.x2[i] = x[i] + o[i]
		}
		la.r2, la.h2 = make([]float32, N), make([]float32, N*D)
		rmsNorm(la.h2, la.r2, la.x2, L.Norm2, N, D)
		la.f = md.linear(l, FC1, la.h2, N, &la.lin[FC1])
		la.g, la.gt = make([]float32, len(la.f)), make([]float32, len(la.f))
		geluForward(md.Threads, la.g, la.gt, la.f)
		m := md.linear(l, FC2, la.g, N, &la.lin[FC2])
		x = make([]float32, N*D)
		for i := range m {
			x[i] = la.x2[i] + m[i]
		}
	}
	a.xf, a.rf, a.hf = x, make([]float32, N), make([]float32, N*D)
	rmsNorm(a.hf, a.rf, x, md.W.NormF, N, D)
	a.Logits = make([]float32, N*c.Vocab)
	matMulT(md.Threads, a.Logits, a.hf, md.W.Head, N, D, c.Vocab)
	return a, nil
}

// attention is causal multi-head attention over B sequences of length T.
// It returns the probabilities [B,H,T,T] and the output [B·T, Dim].
func (md *Model) attention(q, k, v []float32, B, T int) (p, out []float32) {
	c := md.W.Cfg
	D, H := c.Dim, c.Heads
	hd := D / H
	scale := float32(1 / math.Sqrt(float64(hd)))
	p = make([]float32, B*H*T*T)
	out = make([]float32, B*T*D)
	parallelFor(md.Threads, B, B*H*T*T*hd*2, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			for h := 0; h < H; h++ {
				for i := 0; i < T; i++ {
					row := p[((b*H+h)*T+i)*T : ((b*H+h)*T+i+1)*T]
					qi := q[(b*T+i)*D+h*hd : (b*T+i)*D+(h+1)*hd]
					for j := 0; j <= i; j++ {
						row[j] = scale * dot(qi, k[(b*T+j)*D+h*hd:(b*T+j)*D+(h+1)*hd])
					}
					softmaxInPlace(row[:i+1])
					oi := out[(b*T+i)*D+h*hd : (b*T+i)*D+(h+1)*hd]
					for j := 0; j <= i; j++ {
						axpy(row[j], v[(b*T+j)*D+h*hd:(b*T+j)*D+(h+1)*hd], oi)
					}
				}
			}
		}
	})
	return p, out
}

func softmaxInPlace(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var s float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		s += e
	}
	inv := 1 / s
	for i := range x {
		x[i] *= inv
	}
}
