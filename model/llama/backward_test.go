package llama

import (
	"fmt"
	"math"
	"testing"

	"github.com/zooai/gym/model/prng"
)

// weightedLoss is Σ w[n]·log p(targets[n]) of the model on ids, in float64.
func weightedLoss(t testing.TB, md *Model, ids, targets []int, w []float32, B, T int) float64 {
	t.Helper()
	logits, err := md.Logits(ids, B, T)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := TokenLogProbs(md.Threads, logits, md.W.Cfg.Vocab, targets)
	if err != nil {
		t.Fatal(err)
	}
	var s float64
	for i, v := range lp {
		s += float64(w[i]) * float64(v)
	}
	return s
}

// weightedGrad returns the adapter gradient of weightedLoss.
func weightedGrad(t testing.TB, md *Model, ids, targets []int, w []float32, B, T int) *Adapter {
	t.Helper()
	a, err := md.Forward(ids, B, T)
	if err != nil {
		t.Fatal(err)
	}
	dl, err := TokenLogProbsBackward(md.Threads, a.Logits, md.W.Cfg.Vocab, targets, w)
	if err != nil {
		t.Fatal(err)
	}
	g := md.A.Zeroed()
	if err := md.Backward(a, dl, g); err != nil {
		t.Fatal(err)
	}
	return g
}

func randomWeightsVec(seed uint64, n int) []float32 {
	r := prng.New(seed, 0x77)
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(r.Norm())
	}
	return w
}

// TestBackwardFiniteDifferences: on tiny models of each architecture, the
// adapter gradient agrees with central differences of the loss on the
// largest coordinates of every LoRA matrix of both layers.
func TestBackwardFiniteDifferences(t *testing.T) {
	cases := []struct {
		arch    Arch
		targets []Module
		rs      bool
	}{
		{Llama, []Module{QProj, KProj, VProj, OProj, GateProj, UpProj, DownProj}, false},
		{Qwen2, []Module{QProj, KProj, VProj, OProj, GateProj, UpProj, DownProj}, false},
		{Qwen3, []Module{QProj, KProj, VProj, OProj, GateProj, UpProj, DownProj}, true},
		{Mistral, []Module{KProj, OProj, UpProj}, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-%d-modules", tc.arch, len(tc.targets)), func(t *testing.T) {
			c := testConfig(tc.arch)
			a, err := NewAdapter(c, 3, 6, tc.targets)
			if err != nil {
				t.Fatal(err)
			}
			a.RSLoRA = tc.rs
			r := prng.New(11, 0x6c6f7261)
			for _, ts := range a.Tensors(c) {
				for i := range ts.Data {
					ts.Data[i] = float32(0.2 * r.Norm())
				}
			}
			md, err := New(randomWeights(t, c, 10), a, 2)
			if err != nil {
				t.Fatal(err)
			}
			B, T := 2, 7
			ids := randomTokens(12, B*T, c.Vocab)
			targets := randomTokens(13, B*T, c.Vocab)
			targets[3] = -1 // a position without a target
			w := randomWeightsVec(14, B*T)
			g := weightedGrad(t, md, ids, targets, w, B, T)
			const eps = 5e-3
			checked, worst := 0, 0.0
			for ti, gt := range g.Tensors(c) {
				p := a.Tensors(c)[ti].Data
				// The largest coordinate, and one in the middle.
				big := 0
				for i, v := range gt.Data {
					if math.Abs(float64(v)) > math.Abs(float64(gt.Data[big])) {
						big = i
					}
				}
				for _, i := range []int{big, len(p) / 2} {
					// Central differences at steps h and 2h, combined
					// (Richardson) to cancel the O(h²) error: attention
					// and the q/k norms are strongly curved.
					fd := func(h float32) float64 {
						old := p[i]
						p[i] = old + h
						up := float64(p[i])
						lp := weightedLoss(t, md, ids, targets, w, B, T)
						p[i] = old - h
						down := float64(p[i])
						lm := weightedLoss(t, md, ids, targets, w, B, T)
						p[i] = old
						return (lp - lm) / (up - down)
					}
					f1, f2 := fd(eps), fd(2*eps)
					est := (4*f1 - f2) / 3
					got := float64(gt.Data[i])
					d := math.Abs(est - got)
					worst = max(worst, d/max(1, math.Abs(est)))
					if d > 5e-3*max(1, math.Abs(est)) {
						t.Errorf("%s[%d]: gradient %.6g, finite differences %.6g (h) %.6g (2h) → %.6g", gt.Name, i, got, f1, f2, est)
					}
					checked++
				}
				if gt.Data[big] == 0 {
					t.Errorf("%s: gradient is zero", gt.Name)
				}
			}
			t.Logf("%d coordinates checked, worst |Δ|/max(1,|fd|) = %.2g", checked, worst)
		})
	}
}

// TestBackwardThreads: gradients are bitwise identical for 1, 2, 3 and 7
// threads, and Backward adds to what the gradient adapter holds.
func TestBackwardThreads(t *testing.T) {
	for _, arch := range []Arch{Llama, Qwen2, Qwen3, Mistral} {
		t.Run(string(arch), func(t *testing.T) {
			c := testConfig(arch)
			md, err := New(randomWeights(t, c, 7), randomAdapter(t, c, 8), 1)
			if err != nil {
				t.Fatal(err)
			}
			B, T := 4, 23
			ids := randomTokens(9, B*T, c.Vocab)
			targets := randomTokens(10, B*T, c.Vocab)
			w := randomWeightsVec(11, B*T)
			ref := weightedGrad(t, md, ids, targets, w, B, T)
			for _, th := range []int{2, 3, 7} {
				md.Threads = th
				got := weightedGrad(t, md, ids, targets, w, B, T)
				for i, gt := range got.Tensors(c) {
					if want := ref.Tensors(c)[i]; !sameBits(gt.Data, want.Data) {
						t.Fatalf("%d threads: %s differs from 1 thread (max |Δ| %g)", th, gt.Name, maxAbsDiff(gt.Data, want.Data))
					}
				}
			}
			// A second Backward into the same adapter doubles the gradient.
			a, _ := md.Forward(ids, B, T)
			dl, _ := TokenLogProbsBackward(md.Threads, a.Logits, c.Vocab, targets, w)
			g := md.A.Zeroed()
			for range 2 {
				if err := md.Backward(a, dl, g); err != nil {
					t.Fatal(err)
				}
			}
			for i, gt := range g.Tensors(c) {
				want := ref.Tensors(c)[i].Data
				for j, v := range gt.Data {
					if v != 2*want[j] {
						t.Fatalf("%s: accumulated %g, want %g", gt.Name, v, 2*want[j])
					}
				}
			}
		})
	}
}

// TestBackwardRefuses: mismatched inputs are errors, not panics.
func TestBackwardRefuses(t *testing.T) {
	c := testConfig(Llama)
	w := randomWeights(t, c, 1)
	md, _ := New(w, randomAdapter(t, c, 2), 1)
	ids := randomTokens(3, 6, c.Vocab)
	a, err := md.Forward(ids, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	dl := make([]float32, len(a.Logits))
	other, _ := NewAdapter(c, 3, 6, []Module{QProj})
	base, _ := New(w, nil, 1)
	la, _ := base.Forward(ids, 2, 3)
	noKeep := &Activations{B: 2, T: 3, Logits: a.Logits}
	for name, f := range map[string]func() error{
		"short dLogits":   func() error { return md.Backward(a, dl[1:], md.A.Zeroed()) },
		"nil gradient":    func() error { return md.Backward(a, dl, nil) },
		"other targets":   func() error { return md.Backward(a, dl, other) },
		"no adapter":      func() error { return base.Backward(la, dl, md.A.Zeroed()) },
		"no activations":  func() error { return md.Backward(noKeep, dl, md.A.Zeroed()) },
		"bad target":      func() error { _, err := TokenLogProbs(1, a.Logits, c.Vocab, []int{0, 1, 2, 3, 4, c.Vocab}); return err },
		"short logits":    func() error { _, err := TokenLogProbs(1, a.Logits[1:], c.Vocab, ids); return err },
		"short dLogP":     func() error { _, err := TokenLogProbsBackward(1, a.Logits, c.Vocab, ids, []float32{1}); return err },
		"zero vocabulary": func() error { _, err := TokenLogProbs(1, nil, 0, nil); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestBackwardBatch: the gradient of a batch of 13 sequences (299 rows, so
// the head's backward takes several runs of rows) is the sum of the
// gradients of its sequences taken one at a time.
func TestBackwardBatch(t *testing.T) {
	c := testConfig(Qwen3)
	md, err := New(randomWeights(t, c, 3), randomAdapter(t, c, 4), 2)
	if err != nil {
		t.Fatal(err)
	}
	B, T := 13, 23
	if B*T <= headRows {
		t.Fatalf("%d rows do not exceed one run of %d", B*T, headRows)
	}
	ids := randomTokens(5, B*T, c.Vocab)
	targets := randomTokens(6, B*T, c.Vocab)
	w := randomWeightsVec(7, B*T)
	all := weightedGrad(t, md, ids, targets, w, B, T)
	sum := md.A.Zeroed()
	for b := range B {
		g := weightedGrad(t, md, ids[b*T:(b+1)*T], targets[b*T:(b+1)*T], w[b*T:(b+1)*T], 1, T)
		for i, gt := range g.Tensors(c) {
			add(sum.Tensors(c)[i].Data, gt.Data)
		}
	}
	for i, gt := range all.Tensors(c) {
		want := sum.Tensors(c)[i].Data
		var scale float64
		for _, v := range want {
			scale = max(scale, math.Abs(float64(v)))
		}
		if d := maxAbsDiff(gt.Data, want); d > 1e-5*max(1, scale) {
			t.Errorf("%s: batch and per-sequence gradients differ by %g (scale %g)", gt.Name, d, scale)
		}
	}
}

// fullGrad returns the full-parameter gradient of weightedLoss.
func fullGrad(t testing.TB, md *Model, ids, targets []int, w []float32, B, T int) *Weights {
	t.Helper()
	a, err := md.Forward(ids, B, T)
	if err != nil {
		t.Fatal(err)
	}
	dl, err := TokenLogProbsBackward(md.Threads, a.Logits, md.W.Cfg.Vocab, targets, w)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewWeights(md.W.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := md.BackwardFull(a, dl, g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestBackwardFullThreads: full-parameter gradients are bitwise identical
// for 1, 2, 3 and 7 threads (on a batch large enough to split the head's
// rows), with and without an adapter in the forward pass; BackwardFull
// adds to what g holds; a mismatched g is refused.
func TestBackwardFullThreads(t *testing.T) {
	for _, arch := range []Arch{Llama, Qwen2, Qwen3, Mistral} {
		t.Run(string(arch), func(t *testing.T) {
			c := testConfig(arch)
			var ad *Adapter
			if arch == Mistral {
				ad = randomAdapter(t, c, 8)
			}
			md, err := New(randomWeights(t, c, 7), ad, 1)
			if err != nil {
				t.Fatal(err)
			}
			B, T := 13, 23
			ids := randomTokens(9, B*T, c.Vocab)
			targets := randomTokens(10, B*T, c.Vocab)
			w := randomWeightsVec(11, B*T)
			ref := fullGrad(t, md, ids, targets, w, B, T)
			for _, s := range c.specs(ref) {
				nz := false
				for _, v := range s.f32() {
					nz = nz || v != 0
				}
				if !nz {
					t.Errorf("%s: gradient is zero", s.name)
				}
			}
			for _, th := range []int{2, 3, 7} {
				md.Threads = th
				got := fullGrad(t, md, ids, targets, w, B, T)
				gs := c.specs(got)
				for i, s := range c.specs(ref) {
					if !sameBits(gs[i].f32(), s.f32()) {
						t.Fatalf("%d threads: %s differs from 1 thread (max |Δ| %g)", th, s.name, maxAbsDiff(gs[i].f32(), s.f32()))
					}
				}
			}
			a, _ := md.Forward(ids, B, T)
			dl, _ := TokenLogProbsBackward(md.Threads, a.Logits, c.Vocab, targets, w)
			g, _ := NewWeights(c)
			for range 2 {
				if err := md.BackwardFull(a, dl, g); err != nil {
					t.Fatal(err)
				}
			}
			gs := c.specs(g)
			for i, s := range c.specs(ref) {
				for j, v := range gs[i].f32() {
					if v != 2*s.f32()[j] {
						t.Fatalf("%s: accumulated %g, want %g", s.name, v, 2*s.f32()[j])
					}
				}
			}
			bad, _ := NewWeights(c)
			bad.Layers[1].W[UpProj].F32 = bad.Layers[1].W[UpProj].F32[1:]
			if err := md.BackwardFull(a, dl, bad); err == nil {
				t.Error("short gradient tensor accepted")
			}
			if err := md.BackwardFull(a, dl, nil); err == nil {
				t.Error("nil gradient accepted")
			}
			if c.Tied {
				untied, _ := NewWeights(c)
				untied.Head = Mat{F32: make([]float32, untied.Embed.Len())}
				if err := md.BackwardFull(a, dl, untied); err == nil {
					t.Error("untied gradient head accepted for tied embeddings")
				}
			}
		})
	}
}

// TestBackwardFullFiniteDifferences: on a tiny Qwen3 model (q/k norms),
// a few coordinates of every tensor's gradient agree with central
// differences of the loss.
func TestBackwardFullFiniteDifferences(t *testing.T) {
	for _, arch := range []Arch{Llama, Qwen3} {
		t.Run(string(arch), func(t *testing.T) {
			c := testConfig(arch)
			md, err := New(randomWeights(t, c, 21), nil, 2)
			if err != nil {
				t.Fatal(err)
			}
			B, T := 2, 7
			ids := randomTokens(22, B*T, c.Vocab)
			targets := randomTokens(23, B*T, c.Vocab)
			w := randomWeightsVec(24, B*T)
			g := fullGrad(t, md, ids, targets, w, B, T)
			gs := c.specs(g)
			for ti, s := range c.specs(md.W) {
				p, gd := s.f32(), gs[ti].f32()
				big := 0
				for i, v := range gd {
					if math.Abs(float64(v)) > math.Abs(float64(gd[big])) {
						big = i
					}
				}
				i := big
				fd := func(h float32) float64 {
					old := p[i]
					p[i] = old + h
					up := float64(p[i])
					lp := weightedLoss(t, md, ids, targets, w, B, T)
					p[i] = old - h
					down := float64(p[i])
					lm := weightedLoss(t, md, ids, targets, w, B, T)
					p[i] = old
					return (lp - lm) / (up - down)
				}
				const eps = 5e-3
				est := (4*fd(eps) - fd(2*eps)) / 3
				if d := math.Abs(est - float64(gd[i])); d > 5e-3*max(1, math.Abs(est)) {
					t.Errorf("%s[%d]: gradient %.6g, finite differences %.6g", s.name, i, gd[i], est)
				}
			}
		})
	}
}
