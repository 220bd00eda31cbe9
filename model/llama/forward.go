package llama

import (
	"fmt"
	"math"
)

// Model is a network ready to run: base weights, an optional LoRA adapter
// and the number of goroutines its kernels may use.
type Model struct {
	W       *Weights
	A       *Adapter // nil: the base model alone
	Threads int      // <= 1: run on the calling goroutine

	inv []float32 // rotary inverse frequencies
}

// New returns a model over w with adapter a (nil for none).
func New(w *Weights, a *Adapter, threads int) (*Model, error) {
	if a != nil {
		if err := a.check(w.Cfg); err != nil {
			return nil, err
		}
	}
	return &Model{W: w, A: a, Threads: threads, inv: invFreq(w.Cfg)}, nil
}

// linAct is what a linear layer keeps for its backward pass.
type linAct struct {
	in []float32 // input [N, in] (shared, not owned)
	u  []float32 // A·x [N, rank] when the module has an adapter
}

// layerAct holds one layer's activations, everything a backward pass needs.
type layerAct struct {
	x, r1, h1  []float32 // layer input [N,Hidden], its 1/rms [N], the normed input
	qPre, kPre []float32 // Qwen3: q and k before q_norm/k_norm [N, heads·HeadDim]
	qr, kr     []float32 // Qwen3: their per-head 1/rms [N·heads]
	q, k, v    []float32 // after norm and rotary embedding [N, heads·HeadDim]
	lse        []float32 // attention log-sum-exp per query [B, Heads, T]
	att        []float32 // attention output [N, Heads·HeadDim] (o_proj input)
	x2, r2, h2 []float32 // after the attention residual, its 1/rms, normed
	gate, up   []float32 // gate_proj and up_proj outputs [N, Intermediate]
	act        []float32 // silu(gate)·up (down_proj input)
	lin        [NumModules]linAct
	moe        *moeAct // a sparse layer's block; nil in a dense layer
}

// Activations are the results of a forward pass over B sequences of T
// tokens, with every layer's activations for a backward pass.
type Activations struct {
	B, T   int
	Tokens []int
	layers []layerAct
	xf, rf []float32 // final residual stream and its 1/rms
	hf     []float32 // normed final stream (lm_head input)
	// Logits are [B·T, Vocab]: row b·T+t predicts token t+1 of sequence b.
	Logits []float32
}

// Cache holds the keys and values of the positions a batch of B sequences
// has seen, so each decoding step costs one position.
type Cache struct {
	B, Cap int // sequences, positions it can hold
	Len    int // positions filled (the same for every sequence)
	k, v   [][]float32
}

// NewCache returns an empty cache for B sequences of up to capacity
// positions (at most max_position_embeddings).
func (md *Model) NewCache(B, capacity int) (*Cache, error) {
	c := md.W.Cfg
	if B < 1 || capacity < 1 || capacity > c.MaxPositions {
		return nil, fmt.Errorf("llama: cache of %d sequences × %d positions (context %d)", B, capacity, c.MaxPositions)
	}
	kvw := c.KVHeads * c.HeadDim
	ch := &Cache{B: B, Cap: capacity, k: make([][]float32, c.Layers), v: make([][]float32, c.Layers)}
	for l := range ch.k {
		ch.k[l] = make([]float32, B*capacity*kvw)
		ch.v[l] = make([]float32, B*capacity*kvw)
	}
	return ch, nil
}

// Repeat returns a cache of ch.B·n sequences in which sequence b of ch
// becomes sequences b·n … b·n+n-1: a prompt prefilled once, then sampled n
// ways. Decoding from it gives the same logits as prefilling the copies.
func (ch *Cache) Repeat(n int) (*Cache, error) {
	if n < 1 || ch.B*n > 1<<20 {
		return nil, fmt.Errorf("llama: cannot repeat %d sequences %d times", ch.B, n)
	}
	out := &Cache{B: ch.B * n, Cap: ch.Cap, Len: ch.Len, k: make([][]float32, len(ch.k)), v: make([][]float32, len(ch.v))}
	for l := range ch.k {
		per := len(ch.k[l]) / ch.B
		out.k[l] = make([]float32, out.B*per)
		out.v[l] = make([]float32, out.B*per)
		for b := range out.B {
			src := b / n
			copy(out.k[l][b*per:(b+1)*per], ch.k[l][src*per:(src+1)*per])
			copy(out.v[l][b*per:(b+1)*per], ch.v[l][src*per:(src+1)*per])
		}
	}
	return out, nil
}

func (md *Model) checkTokens(tokens []int, B, T, p0 int) error {
	c := md.W.Cfg
	if B < 1 || T < 1 || len(tokens) != B*T || p0+T > c.MaxPositions {
		return fmt.Errorf("llama: batch %d×%d at position %d with %d tokens (context %d)", B, T, p0, len(tokens), c.MaxPositions)
	}
	for _, t := range tokens {
		if t < 0 || t >= c.Vocab {
			return fmt.Errorf("llama: token id %d outside the vocabulary of %d", t, c.Vocab)
		}
	}
	return nil
}

// Forward runs the network over B sequences of T tokens (tokens laid out
// row by row, positions 0 … T-1) and returns the logits with every layer's
// activations.
func (md *Model) Forward(tokens []int, B, T int) (*Activations, error) {
	if err := md.checkTokens(tokens, B, T, 0); err != nil {
		return nil, err
	}
	return md.run(tokens, B, T, nil, true, false), nil
}

// Logits is Forward without keeping activations: [B·T, Vocab].
func (md *Model) Logits(tokens []int, B, T int) ([]float32, error) {
	if err := md.checkTokens(tokens, B, T, 0); err != nil {
		return nil, err
	}
	return md.run(tokens, B, T, nil, false, false).Logits, nil
}

// Prefill feeds T tokens per sequence (ch.B·T, row by row) at positions
// ch.Len … ch.Len+T-1, appends their keys and values to the cache and
// returns their logits [ch.B·T, Vocab]. Step is Prefill with T = 1. The
// logits equal those of Forward over the whole prefix, bit for bit.
func (md *Model) Prefill(ch *Cache, tokens []int, T int) ([]float32, error) {
	return md.prefill(ch, tokens, T, false)
}

// PrefillLast is Prefill returning only the logits of each sequence's last
// new position, [ch.B, Vocab] (what sampling needs), which saves the output
// head on the other positions.
func (md *Model) PrefillLast(ch *Cache, tokens []int, T int) ([]float32, error) {
	return md.prefill(ch, tokens, T, true)
}

func (md *Model) prefill(ch *Cache, tokens []int, T int, lastOnly bool) ([]float32, error) {
	if err := md.checkTokens(tokens, ch.B, T, ch.Len); err != nil {
		return nil, err
	}
	if ch.Len+T > ch.Cap {
		return nil, fmt.Errorf("llama: cache of %d positions holds %d, cannot take %d more", ch.Cap, ch.Len, T)
	}
	if len(ch.k) != md.W.Cfg.Layers {
		return nil, fmt.Errorf("llama: cache is for another model")
	}
	a := md.run(tokens, ch.B, T, ch, false, lastOnly)
	ch.Len += T
	return a.Logits, nil
}

// Step feeds one token per sequence and returns the next-token logits
// [ch.B, Vocab].
func (md *Model) Step(ch *Cache, tokens []int) ([]float32, error) {
	return md.Prefill(ch, tokens, 1)
}

// linear computes y = x·Wᵀ + bias (+ scale·(x·Aᵀ)·Bᵀ) for module m of layer l.
func (md *Model) linear(l int, m Module, x []float32, N int, act *linAct) []float32 {
	c := md.W.Cfg
	in, out := c.Dims(m)
	L := &md.W.Layers[l]
	y := make([]float32, N*out)
	matMulTW(md.Threads, y, x, L.W[m], L.Bias[m], N, in, out)
	act.in = x
	if md.A != nil && md.A.A[l][m] != nil {
		r := md.A.RankAt(l, m)
		u := make([]float32, N*r)
		matMulT(md.Threads, u, x, md.A.A[l][m], nil, N, in, r)
		act.u = u
		lu := make([]float32, N*out)
		matMulT(md.Threads, lu, u, md.A.B[l][m], nil, N, r, out)
		s := md.A.ScaleAt(l, m)
		for i, v := range lu {
			y[i] += float32(v * s)
		}
	}
	return y
}

// headNorm applies RMSNorm with gain g over each head_dim slice of x (rows
// of N·heads heads), keeping a copy of the input and the 1/rms values when
// keep is set.
func (md *Model) headNorm(x, g []float32, rows int, keep bool) (pre, r []float32) {
	c := md.W.Cfg
	if keep {
		pre = append([]float32(nil), x...)
		r = make([]float32, rows)
	}
	rmsNorm(x, r, x, g, rows, c.HeadDim, c.NormEps)
	return pre, r
}

// run is the forward pass over B sequences of T new tokens at positions
// p0 … p0+T-1, p0 = ch.Len (0 without a cache). With a cache the new keys
// and values are written into it and attention reads the whole prefix from
// it; without one it reads the batch's own keys and values.
//
// With lastOnly the logits are only those of each sequence's last
// position, [B, Vocab].
func (md *Model) run(tokens []int, B, T int, ch *Cache, keep, lastOnly bool) *Activations {
	c := md.W.Cfg
	D, N := c.Hidden, B*T
	H, KV, hd := c.Heads, c.KVHeads, c.HeadDim
	p0 := 0
	if ch != nil {
		p0 = ch.Len
	}
	rope := newRopeTable(md.inv, p0, T)
	a := &Activations{B: B, T: T, Tokens: tokens}
	if keep {
		a.layers = make([]layerAct, c.Layers)
	}
	x := make([]float32, N*D)
	for n, tok := range tokens {
		md.W.Embed.widenAt(x[n*D:(n+1)*D], tok*D)
	}
	for l := range c.Layers {
		var la layerAct
		L := &md.W.Layers[l]
		la.x = x
		la.r1, la.h1 = make([]float32, N), make([]float32, N*D)
		rmsNorm(la.h1, la.r1, x, L.InputNorm, N, D, c.NormEps)
		la.q = md.linear(l, QProj, la.h1, N, &la.lin[QProj])
		la.k = md.linear(l, KProj, la.h1, N, &la.lin[KProj])
		la.v = md.linear(l, VProj, la.h1, N, &la.lin[VProj])
		if c.QKNorm {
			la.qPre, la.qr = md.headNorm(la.q, L.QNorm, N*H, keep)
			la.kPre, la.kr = md.headNorm(la.k, L.KNorm, N*KV, keep)
		}
		for n := range N {
			t := n % T
			rope.rotate(la.q[n*H*hd:(n+1)*H*hd], H, t)
			rope.rotate(la.k[n*KV*hd:(n+1)*KV*hd], KV, t)
		}
		// Keys and values to attend over: the cache's [B, Cap] rows or the
		// batch's own [B, T] rows.
		keys, vals, stride := la.k, la.v, T
		if ch != nil {
			kvw := KV * hd
			for n := range N {
				b, t := n/T, n%T
				row := (b*ch.Cap + p0 + t) * kvw
				copy(ch.k[l][row:row+kvw], la.k[n*kvw:(n+1)*kvw])
				copy(ch.v[l][row:row+kvw], la.v[n*kvw:(n+1)*kvw])
			}
			keys, vals, stride = ch.k[l], ch.v[l], ch.Cap
		}
		la.att, la.lse = md.attention(la.q, keys, vals, B, T, p0, stride)
		o := md.linear(l, OProj, la.att, N, &la.lin[OProj])
		la.x2 = make([]float32, N*D)
		for i := range o {
			la.x2[i] = x[i] + o[i]
		}
		la.r2, la.h2 = make([]float32, N), make([]float32, N*D)
		rmsNorm(la.h2, la.r2, la.x2, L.PostNorm, N, D, c.NormEps)
		var m []float32
		if c.Sparse(l) {
			la.moe = &moeAct{}
			m = md.moe(l, la.h2, N, la.moe)
		} else {
			la.gate = md.linear(l, GateProj, la.h2, N, &la.lin[GateProj])
			la.up = md.linear(l, UpProj, la.h2, N, &la.lin[UpProj])
			la.act = make([]float32, len(la.gate))
			parallel(md.Threads, len(la.gate), 16*len(la.gate), func(lo, hi int) {
				for i := lo; i < hi; i++ {
					la.act[i] = float32(silu(la.gate[i]) * la.up[i])
				}
			})
			m = md.linear(l, DownProj, la.act, N, &la.lin[DownProj])
		}
		x = make([]float32, N*D)
		for i := range m {
			x[i] = la.x2[i] + m[i]
		}
		if keep {
			a.layers[l] = la
		}
	}
	a.xf, a.rf, a.hf = x, make([]float32, N), make([]float32, N*D)
	rmsNorm(a.hf, a.rf, x, md.W.Norm, N, D, c.NormEps)
	if lastOnly {
		h := make([]float32, B*D)
		for b := range B {
			copy(h[b*D:(b+1)*D], a.hf[(b*T+T-1)*D:(b*T+T)*D])
		}
		a.Logits = make([]float32, B*c.Vocab)
		matMulTW(md.Threads, a.Logits, h, md.W.Head, nil, B, D, c.Vocab)
	} else {
		a.Logits = make([]float32, N*c.Vocab)
		matMulTW(md.Threads, a.Logits, a.hf, md.W.Head, nil, N, D, c.Vocab)
	}
	if !keep {
		a.xf, a.rf, a.hf = nil, nil, nil
	}
	return a
}

// attention is causal grouped-query attention. q holds B·T query rows at
// positions p0 … p0+T-1; keys and vals hold, for sequence b, rows
// b·stride … b·stride+p0+T-1 (position j at row b·stride+j). Query head h
// reads key/value head h/(Heads/KVHeads). It returns the output [B·T,
// Heads·HeadDim] and the log-sum-exp of each softmax row [B, Heads, T].
func (md *Model) attention(q, keys, vals []float32, B, T, p0, stride int) (out, lse []float32) {
	c := md.W.Cfg
	H, KV, hd := c.Heads, c.KVHeads, c.HeadDim
	group := H / KV
	qw, kvw := H*hd, KV*hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	out = make([]float32, B*T*qw)
	lse = make([]float32, B*H*T)
	parallel(md.Threads, B*H, B*H*T*(p0+T)*hd*2, func(lo, hi int) {
		s := make([]float32, p0+T)
		for it := lo; it < hi; it++ {
			b, h := it/H, it%H
			kh := h / group
			kb := keys[b*stride*kvw+kh*hd:] // key j at kb[j·kvw:]
			vb := vals[b*stride*kvw+kh*hd:]
			for t := range T {
				n := p0 + t + 1 // keys 0 … p0+t
				qi := q[(b*T+t)*qw+h*hd : (b*T+t)*qw+(h+1)*hd]
				row := s[:n]
				scores(row, qi, kb, kvw, scale)
				lse[(b*H+h)*T+t] = softmaxRow(row)
				oi := out[(b*T+t)*qw+h*hd : (b*T+t)*qw+(h+1)*hd]
				nnRow(oi, row, vb, kvw)
			}
		}
	})
	return out, lse
}

// scores sets row[j] = dotL(q, k_j)·scale for the keys k_j = kb[j·ld :
// j·ld+len(q)], four keys at a time where the SIMD kernels are available.
func scores(row, q, kb []float32, ld int, scale float32) {
	hd := len(q)
	n := len(row)
	if n == 0 {
		return
	}
	_ = kb[(n-1)*ld+hd-1]
	j := 0
	if useSIMD {
		ch := hd / lanes
		var s4 [4]float32
		for ; j+4 <= n; j += 4 {
			tn1x4(&q[0], &kb[j*ld], ld, ch, &s4[0])
			for c := range 4 {
				v := dotTail(s4[c], q, kb[(j+c)*ld:(j+c)*ld+hd], ch*lanes)
				row[j+c] = float32(v * scale)
			}
		}
	}
	for ; j < n; j++ {
		row[j] = float32(dotL(q, kb[j*ld:j*ld+hd]) * scale)
	}
}
