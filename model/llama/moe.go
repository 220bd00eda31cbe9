package llama

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// The sparse block of a Mixture-of-Experts layer (Qwen3-MoE, Qwen2-MoE,
// Mixtral), as transformers 5 computes it (docs/moe.md):
//
//	p      = softmax(h·Routerᵀ)                       float32, over all experts
//	top    = the TopK largest p (ties: the lower index)
//	w      = p[top], divided by their sum when norm_topk_prob (Mixtral: always)
//	out[n] = Σ_{e ∈ top(n), ascending e} w·down_e(silu(gate_e(h))·up_e(h))
//	       + sigmoid(h·shared_expert_gateᵀ)·shared_expert(h)   (Qwen2-MoE)
//
// Each expert runs on the tokens routed to it, gathered in token order;
// its contributions are added to a token's output in ascending expert
// order (transformers' index_add_ over the experts it hits). Every sum has
// a fixed order, so results are bitwise the same for any thread count.
// The backward pass carries the gradient through the experts, the routing
// weights and the router's softmax (the top-k choice itself has no
// gradient) into the LoRA pairs of every adapted module and into h.

// moeAct is what a sparse layer keeps for its backward pass.
type moeAct struct {
	router  linAct    // the router's input (h) and LoRA A·h
	probs   []float32 // softmax of the router logits [N, E]
	idx     []int32   // the chosen experts [N, K], largest probability first
	wts     []float32 // their routing weights [N, K]
	experts []expertAct

	// Qwen2-MoE's shared expert.
	sGate, sUp, sAct, sOut []float32 // [N, Shared] ×3, [N, Hidden]
	sg                     []float32 // sigmoid of the shared expert's gate [N]
	sLin                   [4]linAct // SharedGateProj … SharedExpertGate
}

// expertAct is one expert's activations over the tokens routed to it.
type expertAct struct {
	tok, slot []int32   // the rows n routed to it, ascending, and the slot j with idx[n·K+j] = e
	x         []float32 // their inputs [n, Hidden]
	gate, up  []float32 // [n, I]
	act       []float32 // silu(gate)·up
	y         []float32 // the down projection's output before weighting [n, Hidden]
	uGU, uD   []float32 // LoRA A·x of gate_up and A·act of down; nil without
}

// Routes returns the experts chosen for every token of layer l, [B·T,
// TopK] row by row, largest routing probability first: nil for a dense
// layer or Activations of a pass that kept none.
func (a *Activations) Routes(l int) []int {
	if l < 0 || l >= len(a.layers) || a.layers[l].moe == nil {
		return nil
	}
	out := make([]int, len(a.layers[l].moe.idx))
	for i, e := range a.layers[l].moe.idx {
		out[i] = int(e)
	}
	return out
}

// RouterProbs returns the router's softmax of layer l, [B·T, Experts]:
// nil as Routes is.
func (a *Activations) RouterProbs(l int) []float32 {
	if l < 0 || l >= len(a.layers) || a.layers[l].moe == nil {
		return nil
	}
	return a.layers[l].moe.probs
}

// expertPair returns expert e's LoRA pair of expert module m in layer l:
// A_e [r, in] (a view) and B_e [out, r] (gathered from PEFT's
// [out, r·Experts] layout, in which column k of expert e is k·Experts+e).
func (md *Model) expertPair(l int, m Module, e int) (A, B []float32, r int, s float32) {
	if md.A == nil || md.A.A[l][m] == nil {
		return nil, nil, 0, 0
	}
	c := md.W.Cfg
	in, out := c.Dims(m)
	E := c.MoE.Experts
	r, s = md.A.RankAt(l, m), md.A.ScaleAt(l, m)
	A = md.A.A[l][m][e*r*in : (e+1)*r*in]
	B = make([]float32, out*r)
	src := md.A.B[l][m]
	for o := range out {
		for k := range r {
			B[o*r+k] = src[o*r*E+k*E+e]
		}
	}
	return A, B, r, s
}

// loraAdd adds s·(x·Aᵀ)·Bᵀ to y [N, out] and returns u = x·Aᵀ [N, r], as
// Model.linear computes a module's LoRA term.
func loraAdd(th int, y, x, A, B []float32, N, in, out, r int, s float32) []float32 {
	u := make([]float32, N*r)
	matMulT(th, u, x, A, nil, N, in, r)
	lu := make([]float32, N*out)
	matMulT(th, lu, u, B, nil, N, r, out)
	for i, v := range lu {
		y[i] += float32(v * s)
	}
	return u
}

// loraBack is the backward pass of loraAdd given dy: it adds the
// gradients of A and B to gA and gB (when not nil) and, when dx is not
// nil, adds ∂x to it; the arithmetic is Model.linearBack's.
func loraBack(th int, dy, x, u, A, B []float32, N, in, out, r int, s float32, gA, gB, dx []float32) {
	dlu := make([]float32, N*out)
	for i, v := range dy {
		dlu[i] = float32(v * s)
	}
	du := make([]float32, N*r)
	matMulT(th, du, dlu, transposed(th, B, out, r), nil, N, out, r)
	if gA != nil {
		g := make([]float32, out*r)
		matMulT(th, g, transposed(th, dlu, N, out), transposed(th, u, N, r), nil, out, N, r)
		add(gB, g)
		ga := make([]float32, r*in)
		matMulNN(th, ga, transposed(th, du, N, r), x, r, N, in)
		add(gA, ga)
	}
	if dx != nil {
		dxa := make([]float32, N*in)
		matMulNN(th, dxa, du, A, N, r, in)
		add(dx, dxa)
	}
}

// route computes the router's softmax, the top-k experts of every row and
// their routing weights.
func (md *Model) route(logits []float32, N int) (probs []float32, idx []int32, wts []float32) {
	c := md.W.Cfg
	E, K := c.MoE.Experts, c.MoE.TopK
	probs = append([]float32(nil), logits...)
	idx = make([]int32, N*K)
	wts = make([]float32, N*K)
	parallel(md.Threads, N, N*E*16, func(lo, hi int) {
		order := make([]int32, E)
		for n := lo; n < hi; n++ {
			p := probs[n*E : (n+1)*E]
			softmaxRow(p)
			for i := range order {
				order[i] = int32(i)
			}
			slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(p[b], p[a]) })
			var sum float32
			for j := range K {
				e := order[j]
				idx[n*K+j], wts[n*K+j] = e, p[e]
				sum += p[e]
			}
			if c.MoE.NormTopK {
				for j := range K {
					wts[n*K+j] /= sum
				}
			}
		}
	})
	return probs, idx, wts
}

// moe is the forward pass of sparse layer l on h [N, Hidden] (the
// post-attention norm's output); it returns the block's output [N, Hidden]
// and fills ma.
func (md *Model) moe(l int, h []float32, N int, ma *moeAct) []float32 {
	c := md.W.Cfg
	D, E, K, I := c.Hidden, c.MoE.Experts, c.MoE.TopK, c.MoE.Intermediate
	L := &md.W.Layers[l]
	th := md.Threads
	logits := md.linear(l, Router, h, N, &ma.router)
	ma.probs, ma.idx, ma.wts = md.route(logits, N)
	out := make([]float32, N*D)
	ma.experts = make([]expertAct, E)
	for e := range E {
		ea := &ma.experts[e]
		for n := range N {
			for j := range K {
				if ma.idx[n*K+j] == int32(e) {
					ea.tok, ea.slot = append(ea.tok, int32(n)), append(ea.slot, int32(j))
				}
			}
		}
		n := len(ea.tok)
		if n == 0 {
			continue
		}
		ea.x = make([]float32, n*D)
		for i, t := range ea.tok {
			copy(ea.x[i*D:(i+1)*D], h[int(t)*D:(int(t)+1)*D])
		}
		X := &L.Experts[e]
		ea.gate, ea.up = make([]float32, n*I), make([]float32, n*I)
		matMulTW(th, ea.gate, ea.x, X.Gate, nil, n, D, I)
		matMulTW(th, ea.up, ea.x, X.Up, nil, n, D, I)
		if A, B, r, s := md.expertPair(l, ExpertsGateUp, e); A != nil {
			lu := make([]float32, n*2*I)
			ea.uGU = loraAdd(th, lu, ea.x, A, B, n, D, 2*I, r, 1)
			for i := range n {
				for o := range I {
					ea.gate[i*I+o] += float32(lu[i*2*I+o] * s)
					ea.up[i*I+o] += float32(lu[i*2*I+I+o] * s)
				}
			}
		}
		ea.act = make([]float32, n*I)
		for i := range ea.act {
			ea.act[i] = float32(silu(ea.gate[i]) * ea.up[i])
		}
		ea.y = make([]float32, n*D)
		matMulTW(th, ea.y, ea.act, X.Down, nil, n, I, D)
		if A, B, r, s := md.expertPair(l, ExpertsDown, e); A != nil {
			ea.uD = loraAdd(th, ea.y, ea.act, A, B, n, I, D, r, s)
		}
		for i, t := range ea.tok {
			w := ma.wts[int(t)*K+int(ea.slot[i])]
			o, y := out[int(t)*D:(int(t)+1)*D], ea.y[i*D:(i+1)*D]
			for d := range D {
				o[d] += float32(y[d] * w)
			}
		}
	}
	if c.MoE.Shared > 0 {
		S := c.MoE.Shared
		ma.sGate = md.linear(l, SharedGateProj, h, N, &ma.sLin[0])
		ma.sUp = md.linear(l, SharedUpProj, h, N, &ma.sLin[1])
		ma.sAct = make([]float32, N*S)
		for i := range ma.sAct {
			ma.sAct[i] = float32(silu(ma.sGate[i]) * ma.sUp[i])
		}
		ma.sOut = md.linear(l, SharedDownProj, ma.sAct, N, &ma.sLin[2])
		z := md.linear(l, SharedExpertGate, h, N, &ma.sLin[3])
		ma.sg = make([]float32, N)
		for n := range N {
			g := float32(1 / (1 + math.Exp(-float64(z[n]))))
			ma.sg[n] = g
			o, so := out[n*D:(n+1)*D], ma.sOut[n*D:(n+1)*D]
			for d := range D {
				o[d] += float32(g * so[d])
			}
		}
	}
	return out
}

// moeBack is the backward pass of sparse layer l: given dOut, the
// gradient of its output [N, Hidden], it adds the LoRA gradients of its
// modules to ga (when not nil) and returns the gradient with respect to
// its input h.
func (md *Model) moeBack(l int, ma *moeAct, dOut []float32, N int, ga *Adapter) []float32 {
	c := md.W.Cfg
	D, E, K, I := c.Hidden, c.MoE.Experts, c.MoE.TopK, c.MoE.Intermediate
	L := &md.W.Layers[l]
	th := md.Threads
	dh := make([]float32, N*D)
	if c.MoE.Shared > 0 {
		S := c.MoE.Shared
		dS := make([]float32, N*D)
		dz := make([]float32, N)
		for n := range N {
			g := ma.sg[n]
			var s float64
			for d := range D {
				dS[n*D+d] = float32(g * dOut[n*D+d])
				s += float64(dOut[n*D+d]) * float64(ma.sOut[n*D+d])
			}
			dz[n] = float32(s * float64(g) * float64(1-g))
		}
		dAct := md.linearBack(l, SharedDownProj, &ma.sLin[2], dS, N, ga, nil, true)
		dGate, dUp := make([]float32, N*S), make([]float32, N*S)
		for i := range dAct {
			gt := ma.sGate[i]
			dUp[i] = float32(dAct[i] * silu(gt))
			dGate[i] = float32(float32(dAct[i]*ma.sUp[i]) * siluGrad(gt))
		}
		add(dh, md.linearBack(l, SharedGateProj, &ma.sLin[0], dGate, N, ga, nil, true))
		add(dh, md.linearBack(l, SharedUpProj, &ma.sLin[1], dUp, N, ga, nil, true))
		add(dh, md.linearBack(l, SharedExpertGate, &ma.sLin[3], dz, N, ga, nil, true))
	}
	dw := make([]float32, N*K)
	for e := range E {
		ea := &ma.experts[e]
		n := len(ea.tok)
		if n == 0 {
			continue
		}
		X := &L.Experts[e]
		dy := make([]float32, n*D)
		for i, t := range ea.tok {
			row := int(t)*K + int(ea.slot[i])
			w := ma.wts[row]
			var s float64
			for d := range D {
				g := dOut[int(t)*D+d]
				dy[i*D+d] = float32(w * g)
				s += float64(g) * float64(ea.y[i*D+d])
			}
			dw[row] = float32(s)
		}
		dAct := make([]float32, n*I)
		matMulNNW(th, dAct, dy, X.Down, n, D, I)
		if A, B, r, s := md.expertPair(l, ExpertsDown, e); A != nil {
			gA, gB := expertGrads(ga, l, ExpertsDown, e, r, D, I)
			loraBack(th, dy, ea.act, ea.uD, A, B, n, I, D, r, s, gA, gB, dAct)
			scatterB(ga, l, ExpertsDown, e, r, D, gB, c)
		}
		dGate, dUp := make([]float32, n*I), make([]float32, n*I)
		for i := range dAct {
			gt := ea.gate[i]
			dUp[i] = float32(dAct[i] * silu(gt))
			dGate[i] = float32(float32(dAct[i]*ea.up[i]) * siluGrad(gt))
		}
		dx := make([]float32, n*D)
		matMulNNW(th, dx, dGate, X.Gate, n, I, D)
		dxu := make([]float32, n*D)
		matMulNNW(th, dxu, dUp, X.Up, n, I, D)
		add(dx, dxu)
		if A, B, r, s := md.expertPair(l, ExpertsGateUp, e); A != nil {
			dgu := make([]float32, n*2*I)
			for i := range n {
				copy(dgu[i*2*I:i*2*I+I], dGate[i*I:(i+1)*I])
				copy(dgu[i*2*I+I:(i+1)*2*I], dUp[i*I:(i+1)*I])
			}
			gA, gB := expertGrads(ga, l, ExpertsGateUp, e, r, 2*I, D)
			loraBack(th, dgu, ea.x, ea.uGU, A, B, n, D, 2*I, r, s, gA, gB, dx)
			scatterB(ga, l, ExpertsGateUp, e, r, 2*I, gB, c)
		}
		for i, t := range ea.tok {
			add(dh[int(t)*D:(int(t)+1)*D], dx[i*D:(i+1)*D])
		}
	}
	// Routing weights → probabilities → router logits.
	dl := make([]float32, N*E)
	for n := range N {
		p := ma.probs[n*E : (n+1)*E]
		dp := make([]float64, K)
		if c.MoE.NormTopK {
			// w_j = p_j / S: ∂p_j = (∂w_j − Σ_k ∂w_k·w_k) / S.
			var S, dot float64
			for j := range K {
				S += float64(p[ma.idx[n*K+j]])
				dot += float64(dw[n*K+j]) * float64(ma.wts[n*K+j])
			}
			for j := range K {
				dp[j] = (float64(dw[n*K+j]) - dot) / S
			}
		} else {
			for j := range K {
				dp[j] = float64(dw[n*K+j])
			}
		}
		// Softmax: ∂ℓ_i = p_i·(∂p_i − Σ_j p_j·∂p_j), ∂p zero off the top k.
		var dot float64
		for j := range K {
			dot += float64(p[ma.idx[n*K+j]]) * dp[j]
		}
		for i := range E {
			dl[n*E+i] = float32(float64(p[i]) * -dot)
		}
		for j := range K {
			e := ma.idx[n*K+j]
			dl[n*E+int(e)] = float32(float64(p[e]) * (dp[j] - dot))
		}
	}
	add(dh, md.linearBack(l, Router, &ma.router, dl, N, ga, nil, true))
	return dh
}

// expertGrads returns zeroed buffers for expert e's LoRA gradients of
// module m ([r, in] and [out, r]), or nils when ga is nil; the A gradient
// is a view of ga's matrix (its rows are contiguous), the B gradient a
// buffer scatterB adds into ga.
func expertGrads(ga *Adapter, l int, m Module, e, r, out, in int) (gA, gB []float32) {
	if ga == nil {
		return nil, nil
	}
	return ga.A[l][m][e*r*in : (e+1)*r*in], make([]float32, out*r)
}

// scatterB adds expert e's B gradient gB [out, r] into ga's [out,
// r·Experts] matrix of module m.
func scatterB(ga *Adapter, l int, m Module, e, r, out int, gB []float32, c Config) {
	if ga == nil {
		return
	}
	E := c.MoE.Experts
	dst := ga.B[l][m]
	for o := range out {
		for k := range r {
			dst[o*r*E+k*E+e] += gB[o*r+k]
		}
	}
}

// errMoEFull is BackwardFull's refusal on a MoE model.
var errMoEFull = fmt.Errorf("llama: full-parameter gradients of a Mixture-of-Experts model are not implemented (LoRA gradients are)")
