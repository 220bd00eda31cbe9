package llama

import (
	"fmt"
	"math"
	"slices"
)

// Zeroed returns an adapter of a's shape (rank, alpha, targets) whose
// matrices are all zero: the accumulator Backward adds gradients to.
func (a *Adapter) Zeroed() *Adapter {
	g := &Adapter{Rank: a.Rank, Alpha: a.Alpha, RSLoRA: a.RSLoRA, Targets: append([]Module(nil), a.Targets...),
		A: make([][NumModules][]float32, len(a.A)), B: make([][NumModules][]float32, len(a.B)), Experts: a.Experts,
		Ranks: slices.Clone(a.Ranks), Alphas: slices.Clone(a.Alphas)}
	for l := range a.A {
		for m := range NumModules {
			if a.A[l][m] != nil {
				g.A[l][m] = make([]float32, len(a.A[l][m]))
				g.B[l][m] = make([]float32, len(a.B[l][m]))
			}
		}
	}
	return g
}

// Backward propagates dLogits, the gradient of a scalar loss with respect
// to a.Logits ([B·T, Vocab], as Forward returned them), through the frozen
// base model into the LoRA adapter, and adds the gradient of every lora_A
// and lora_B matrix to the matching matrix of g (an adapter of md.A's
// shape, such as md.A.Zeroed()). Base weights, biases, norms and
// embeddings are frozen: no gradient is computed for them.
//
// The result is bitwise the same for any md.Threads: as in the forward
// pass, every output element is computed by one goroutine as a sum in a
// fixed order, with products rounded explicitly.
func (md *Model) Backward(a *Activations, dLogits []float32, g *Adapter) error {
	c := md.W.Cfg
	switch {
	case md.A == nil:
		return fmt.Errorf("llama: backward of a model without an adapter")
	case g == nil || !g.SameShape(md.A) || g.check(c) != nil:
		return fmt.Errorf("%w: gradient adapter does not match the model's adapter", ErrAdapter)
	}
	for l := range g.A {
		for m := range NumModules {
			if (g.A[l][m] == nil) != (md.A.A[l][m] == nil) {
				return fmt.Errorf("%w: gradient adapter does not target %s as the model's does", ErrAdapter, m.Path(l))
			}
		}
	}
	return md.backward(a, dLogits, g, nil)
}

// BackwardFull propagates dLogits as Backward does and adds the gradient of
// every base parameter to the matching slice of g (weights of md.W's shape,
// such as NewWeights(md.W.Cfg) returns): embeddings, every norm's gain,
// every projection's weight and bias, Qwen3's q_norm and k_norm, the final
// norm and the output head. With tied embeddings g.Head must be g.Embed
// (as NewWeights makes it), so the head's gradient and the embedding's add
// up in one tensor, as in PyTorch. An adapter on md, if any, is applied in
// the forward pass but receives no gradient. Bitwise the same for any
// md.Threads.
func (md *Model) BackwardFull(a *Activations, dLogits []float32, g *Weights) error {
	c := md.W.Cfg
	if c.Arch.MoE() {
		return errMoEFull
	}
	if g == nil || g.Cfg.Vocab != c.Vocab || len(g.Layers) != c.Layers {
		return fmt.Errorf("llama: gradient weights do not match the model's shape")
	}
	want, got := c.specs(md.W), c.specs(g)
	for i, s := range want {
		if gi := got[i]; len(gi.f32()) != s.len() {
			return fmt.Errorf("llama: gradient tensor %s has %d float32 values, want %d", s.name, len(gi.f32()), s.len())
		}
	}
	if len(g.Head.F32) != md.W.Head.Len() || (c.Tied && len(g.Head.F32) > 0 && &g.Head.F32[0] != &g.Embed.F32[0]) {
		return fmt.Errorf("llama: gradient head must be the gradient embedding when embeddings are tied")
	}
	return md.backward(a, dLogits, nil, g)
}

// backward is the backward pass of Backward and BackwardFull: it computes
// the gradient with respect to the residual stream layer by layer, adds
// LoRA gradients to ga when ga is not nil and base-parameter gradients to
// gw when gw is not nil.
func (md *Model) backward(a *Activations, dLogits []float32, ga *Adapter, gw *Weights) error {
	c := md.W.Cfg
	D, N, V := c.Hidden, a.B*a.T, c.Vocab
	switch {
	case a.layers == nil || len(a.layers) != c.Layers || len(a.Logits) != N*V:
		return fmt.Errorf("llama: backward needs the activations of Forward on this model")
	case len(dLogits) != N*V:
		return fmt.Errorf("llama: dLogits has %d values, want %d", len(dLogits), N*V)
	}
	H, KV, hd := c.Heads, c.KVHeads, c.HeadDim
	th := md.Threads

	// logits = hf·Headᵀ, hf = RMSNorm(xf).
	// Rows are independent: take them in runs of headRows so that the
	// flushed copy of dLogits stays small.
	dh := make([]float32, N*D)
	var dlT []float32 // flushed dLogitsᵀ [V, N], for the head's gradient
	if gw != nil {
		dlT = make([]float32, V*N)
	}
	for n0 := 0; n0 < N; n0 += headRows {
		n1 := min(n0+headRows, N)
		fl := flushTiny(th, dLogits[n0*V:n1*V])
		matMulNNW(th, dh[n0*D:n1*D], fl, md.W.Head, n1-n0, V, D)
		if gw != nil {
			for v := range V {
				for n := n0; n < n1; n++ {
					dlT[v*N+n] = fl[(n-n0)*V+v]
				}
			}
		}
	}
	var gh []float32
	if gw != nil {
		// ∂Head [V, D] = dLogitsᵀ·hf.
		gh = make([]float32, V*D)
		matMulNN(th, gh, dlT, a.hf, V, N, D)
		if !c.Tied {
			add(gw.Head.F32, gh)
			gh = make([]float32, V*D)
		}
	}
	dx := make([]float32, N*D)
	rmsNormBack(dx, dh, a.xf, a.rf, md.W.Norm, gradOf(gw, func(w *Weights) []float32 { return w.Norm }), N, D)
	rope := newRopeTable(md.inv, 0, a.T)

	for l := c.Layers - 1; l >= 0; l-- {
		la := &a.layers[l]
		L := &md.W.Layers[l]
		var gL *Layer
		if gw != nil {
			gL = &gw.Layers[l]
		}
		lg := func(f func(*Layer) []float32) []float32 {
			if gL == nil {
				return nil
			}
			return f(gL)
		}
		// x_out = x2 + down(silu(gate(h2))·up(h2)), h2 = RMSNorm(x2); or
		// x_out = x2 + moe(h2) in a sparse layer.
		var dh2 []float32
		if la.moe != nil {
			dh2 = md.moeBack(l, la.moe, dx, N, ga)
		} else {
			dAct := md.linearBack(l, DownProj, &la.lin[DownProj], dx, N, ga, gL, true)
			dGate, dUp := make([]float32, len(dAct)), make([]float32, len(dAct))
			parallel(th, len(dAct), 16*len(dAct), func(lo, hi int) {
				for i := lo; i < hi; i++ {
					gt := la.gate[i]
					dUp[i] = float32(dAct[i] * silu(gt))
					dGate[i] = float32(float32(dAct[i]*la.up[i]) * siluGrad(gt))
				}
			})
			dh2 = md.linearBack(l, GateProj, &la.lin[GateProj], dGate, N, ga, gL, true)
			add(dh2, md.linearBack(l, UpProj, &la.lin[UpProj], dUp, N, ga, gL, true))
		}
		dx2 := dx // the residual path; the norm's gradient is added to it
		rmsNormBack(dx2, dh2, la.x2, la.r2, L.PostNorm, lg(func(L *Layer) []float32 { return L.PostNorm }), N, D)

		// x2 = x + o(attention(rope(norm(q(h1))), rope(norm(k(h1))), v(h1))), h1 = RMSNorm(x).
		dAtt := md.linearBack(l, OProj, &la.lin[OProj], dx2, N, ga, gL, true)
		dq, dk, dv := md.attentionBack(la, dAtt, a.B, a.T)
		for n := range N {
			t := n % a.T
			rope.unrotate(dq[n*H*hd:(n+1)*H*hd], H, t)
			rope.unrotate(dk[n*KV*hd:(n+1)*KV*hd], KV, t)
		}
		if c.QKNorm {
			dqp, dkp := make([]float32, len(dq)), make([]float32, len(dk))
			rmsNormBack(dqp, dq, la.qPre, la.qr, L.QNorm, lg(func(L *Layer) []float32 { return L.QNorm }), N*H, hd)
			rmsNormBack(dkp, dk, la.kPre, la.kr, L.KNorm, lg(func(L *Layer) []float32 { return L.KNorm }), N*KV, hd)
			dq, dk = dqp, dkp
		}
		// The first layer's input is the embedding: only its gradient and
		// the first input norm's need the gradient with respect to it.
		need := l > 0 || gw != nil
		dh1 := md.linearBack(l, QProj, &la.lin[QProj], dq, N, ga, gL, need)
		dhk := md.linearBack(l, KProj, &la.lin[KProj], dk, N, ga, gL, need)
		dhv := md.linearBack(l, VProj, &la.lin[VProj], dv, N, ga, gL, need)
		if need {
			add(dh1, dhk)
			add(dh1, dhv)
			rmsNormBack(dx2, dh1, la.x, la.r1, L.InputNorm, lg(func(L *Layer) []float32 { return L.InputNorm }), N, D)
		}
		dx = dx2
	}
	if gw != nil {
		// The embedding lookup: row tok of ∂Embed gathers the gradients of
		// the positions holding tok, added in position order (to the head's
		// gradient when tied), then added to g in one go.
		for n, tok := range a.Tokens {
			add(gh[tok*D:(tok+1)*D], dx[n*D:(n+1)*D])
		}
		add(gw.Embed.F32, gh)
	}
	return nil
}

// gradOf returns f(g), or nil when g is nil.
func gradOf(g *Weights, f func(*Weights) []float32) []float32 {
	if g == nil {
		return nil
	}
	return f(g)
}

// tiny is the magnitude below which Backward treats a softmax-derived
// gradient (dLogits, attention probabilities) as zero. Such values cannot
// change a float32 gradient (2⁻⁶⁴ times the vocabulary is far below the
// float32 resolution of the sums they join), but their products are
// subnormal numbers, which x86 processors compute about a hundred times
// slower: far-off tokens of a peaked softmax made the output head's
// backward product ten times slower than the forward one.
const tiny = 0x1p-64

// flushTiny returns a copy of x with values of magnitude below tiny set to
// zero.
func flushTiny(threads int, x []float32) []float32 {
	y := make([]float32, len(x))
	parallel(threads, len(x), len(x), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if v := x[i]; v >= tiny || v <= -tiny {
				y[i] = v
			}
		}
	})
	return y
}

// headRows is the number of rows of dLogits the head's backward product
// takes at a time (a multiple of rowBlock), so that the flushed copy of
// dLogits stays small.
const headRows = 4 * rowBlock

// transposeInto sets y [cols, rows] to the transpose of x [rows, cols],
// in square blocks, writing runs of y contiguously.
func transposeInto(threads int, y, x []float32, rows, cols int) {
	const blk = 32
	cb := (cols + blk - 1) / blk
	parallel(threads, cb, rows*cols/4, func(lo, hi int) {
		for bi := lo; bi < hi; bi++ {
			c0, c1 := bi*blk, min((bi+1)*blk, cols)
			for r0 := 0; r0 < rows; r0 += blk {
				r1 := min(r0+blk, rows)
				for c := c0; c < c1; c++ {
					yr := y[c*rows+r0 : c*rows+r1]
					for i := range yr {
						yr[i] = x[(r0+i)*cols+c]
					}
				}
			}
		}
	})
}

func transposed(threads int, x []float32, rows, cols int) []float32 {
	y := make([]float32, rows*cols)
	transposeInto(threads, y, x, rows, cols)
	return y
}

// add sets dst += src.
func add(dst, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] += v
	}
}

// linearBack is the backward pass of module m of layer l (y = x·Wᵀ + b +
// s·(x·Aᵀ)·Bᵀ): it adds the gradients of the module's LoRA matrices to ga
// (when not nil), those of its weight and bias to gL (when not nil) and,
// when needDx is set, returns the gradient with respect to x.
func (md *Model) linearBack(l int, m Module, act *linAct, dy []float32, N int, ga *Adapter, gL *Layer, needDx bool) []float32 {
	c := md.W.Cfg
	th := md.Threads
	in, out := c.Dims(m)
	var dx []float32
	if needDx {
		dx = make([]float32, N*in)
		matMulNNW(th, dx, dy, md.W.Layers[l].W[m], N, out, in)
	}
	if gL != nil {
		// ∂W [out, in] = dyᵀ·x; ∂b [out] = Σ_n dy[n].
		gw := make([]float32, out*in)
		matMulNN(th, gw, transposed(th, dy, N, out), act.in, out, N, in)
		add(gL.W[m].F32, gw)
		if gb := gL.Bias[m]; gb != nil {
			s := make([]float64, out)
			for n := range N {
				for o, v := range dy[n*out : (n+1)*out] {
					s[o] += float64(v)
				}
			}
			for o, v := range s {
				gb[o] += float32(v)
			}
		}
	}
	if act.u == nil {
		return dx
	}
	r, s := md.A.RankAt(l, m), md.A.ScaleAt(l, m)
	// lu = u·Bᵀ, y += s·lu: the gradient of lu is s·dy.
	dlu := make([]float32, N*out)
	for i, v := range dy {
		dlu[i] = float32(v * s)
	}
	// ∂u [N, r] = dlu·B (and ∂B below), as products with transposed
	// operands: their r columns are too few for matMulNN's panels.
	du := make([]float32, N*r)
	matMulT(th, du, dlu, transposed(th, md.A.B[l][m], out, r), nil, N, out, r)
	if ga != nil {
		// ∂B [out, r] = dluᵀ·u.
		gb := make([]float32, out*r)
		matMulT(th, gb, transposed(th, dlu, N, out), transposed(th, act.u, N, r), nil, out, N, r)
		add(ga.B[l][m], gb)
		// ∂A [r, in] = ∂uᵀ·x.
		gA := make([]float32, r*in)
		matMulNN(th, gA, transposed(th, du, N, r), act.in, r, N, in)
		add(ga.A[l][m], gA)
	}
	if needDx {
		// ∂x += ∂u·A.
		dxa := make([]float32, N*in)
		matMulNN(th, dxa, du, md.A.A[l][m], N, r, in)
		add(dx, dxa)
	}
	return dx
}

// rmsNormBack adds to dx the gradient of y = g ⊙ (x·r), r = 1/sqrt(mean(x²)
// + eps), for N rows of width D, given dy, the input x and the 1/rms values
// r the forward pass kept:
// dx = r·(g⊙dy) − r³·(Σ g⊙dy⊙x)/D · x.
// When gg is not nil it also adds the gain's gradient Σ_n dy[n]⊙(x[n]·r[n])
// to gg, summed over rows in order in float64.
func rmsNormBack(dx, dy, x, r, g, gg []float32, N, D int) {
	for n := range N {
		xr, dyr, dxr := x[n*D:(n+1)*D], dy[n*D:(n+1)*D], dx[n*D:(n+1)*D]
		rr := r[n]
		var s float64
		for i, v := range xr {
			s += float64(float32(dyr[i]*g[i])) * float64(v)
		}
		k := float32(float64(rr) * float64(rr) * float64(rr) * s / float64(D))
		for i, v := range xr {
			dxr[i] += float32(float32(dyr[i]*g[i])*rr) - float32(k*v)
		}
	}
	if gg == nil {
		return
	}
	acc := make([]float64, D)
	for n := range N {
		xr, dyr, rr := x[n*D:(n+1)*D], dy[n*D:(n+1)*D], r[n]
		for i, v := range xr {
			acc[i] += float64(dyr[i]) * float64(float32(v*rr))
		}
	}
	for i, v := range acc {
		gg[i] += float32(v)
	}
}

// siluGrad is the derivative of silu: σ(x)·(1 + x·(1−σ(x))).
func siluGrad(x float32) float32 {
	s := 1 / (1 + math.Exp(-float64(x)))
	return float32(s * (1 + float64(x)*(1-s)))
}

// unrotate is the transpose of rotate (a rotation by −θ), which carries a
// gradient back through the rotary embedding.
func (t ropeTable) unrotate(x []float32, heads, p int) {
	half := t.half
	cs, sn := t.cos[p*half:(p+1)*half], t.sin[p*half:(p+1)*half]
	for h := range heads {
		v := x[h*2*half : (h+1)*2*half]
		x1, x2 := v[:half], v[half:]
		for i := range half {
			a, b := x1[i], x2[i]
			x1[i] = float32(a*cs[i]) + float32(b*sn[i])
			x2[i] = float32(b*cs[i]) - float32(a*sn[i])
		}
	}
}

// attentionBack returns the gradients with respect to the attention's q,
// k and v (after the rotary embedding) given dout, the gradient of its
// output. Probabilities are recomputed from the scores and the stored
// log-sum-exp. Work is split by (sequence, KV head): one goroutine owns the
// key and value gradients of a KV head and sums over the query heads of
// its group in order.
func (md *Model) attentionBack(la *layerAct, dout []float32, B, T int) (dq, dk, dv []float32) {
	c := md.W.Cfg
	H, KV, hd := c.Heads, c.KVHeads, c.HeadDim
	group := H / KV
	qw, kvw := H*hd, KV*hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	q, k, v := la.q, la.k, la.v
	dq, dk, dv = make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
	parallel(md.Threads, B*KV, B*H*T*T*hd*2, func(lo, hi int) {
		p, dp := make([]float32, T), make([]float32, T)
		for it := lo; it < hi; it++ {
			b, kh := it/KV, it%KV
			for h := kh * group; h < (kh+1)*group; h++ {
				for t := range T {
					n := t + 1
					q0 := (b*T+t)*qw + h*hd
					qi, doi, dqi := q[q0:q0+hd], dout[q0:q0+hd], dq[q0:q0+hd]
					lse := la.lse[(b*H+h)*T+t]
					// The scores exactly as the forward pass computed them.
					sc := p[:n]
					scores(sc, qi, k[b*T*kvw+kh*hd:], kvw, scale)
					scores(dp[:n], doi, v[b*T*kvw+kh*hd:], kvw, 1) // dp[j] = doi·v_j
					var sum float32
					for j := range n {
						k0 := (b*T+j)*kvw + kh*hd
						p[j] = float32(math.Exp(float64(sc[j] - lse)))
						if p[j] < tiny {
							p[j] = 0
						}
						axpy(p[j], doi, dv[k0:k0+hd])
						sum += float32(p[j] * dp[j])
					}
					for j := range n {
						k0 := (b*T+j)*kvw + kh*hd
						ds := float32(float32(p[j]*(dp[j]-sum)) * scale)
						if ds > -tiny && ds < tiny {
							continue
						}
						axpy(ds, k[k0:k0+hd], dqi)
						axpy(ds, qi, dk[k0:k0+hd])
					}
				}
			}
		}
	})
	return dq, dk, dv
}
