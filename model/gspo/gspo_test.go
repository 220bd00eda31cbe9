package gspo

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestAdvantagesHandComputed(t *testing.T) {
	adv, err := Advantages([]float64{1, 0, 0.5, 0.5, 0.2, 0.6, 1, 0.6}, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Group 1: mean 0.5, sample std sqrt((.25+.25+0+0)/3) = 0.408248.
	s := math.Sqrt(0.5 / 3)
	want := []float64{0.5 / s, -0.5 / s, 0, 0}
	// Group 2: mean 0.6, deviations -0.4, 0, 0.4, 0; std sqrt(0.32/3).
	s2 := math.Sqrt(0.32 / 3)
	want = append(want, -0.4/s2, 0, 0.4/s2, 0)
	for i := range want {
		if !near(adv[i], want[i], 1e-12) {
			t.Fatalf("adv[%d] = %v, want %v", i, adv[i], want[i])
		}
	}
	zero, _ := Advantages([]float64{0.3, 0.3, 0.3, 1, 1, 1}, 3, 1e-4)
	for i, a := range zero {
		if a != 0 {
			t.Fatalf("zero-variance group: adv[%d] = %v", i, a)
		}
	}
	if _, err := Advantages([]float64{1, 2, 3}, 2, 0); !errors.Is(err, ErrInput) {
		t.Fatalf("ragged groups: %v", err)
	}
}

func rows(vals ...[]float64) [][]float64 { return vals }

// TestSequenceRatioHandComputed: a batch of one group of two where sequence 0
// has mean log-ratio 0.1 (s = e^0.1, far above the band) and sequence 1 has
// mean log-ratio −0.0001 (inside the band).
func TestSequenceRatioHandComputed(t *testing.T) {
	c := Config{Level: Sequence, EpsLow: 3e-4, EpsHigh: 4e-4, AdvEps: 0}
	b := Batch{G: 2, Rewards: []float64{1, 0},
		LogP:    rows([]float64{-1 + 0.2, -2 + 0}, []float64{-0.5 - 0.0002, -0.5, -0.5 - 0.0001}),
		OldLogP: rows([]float64{-1, -2}, []float64{-0.5, -0.5, -0.5}),
	}
	res, err := Compute(c, b)
	if err != nil {
		t.Fatal(err)
	}
	A := math.Sqrt(0.5) // 0.5 / sample std sqrt(0.5)
	s0, s1 := math.Exp(0.1), math.Exp(-0.0001)
	// Sequence 0: A > 0 and s0 > 1+ε_high → clipped value (1+ε_high)·A, no gradient.
	// Sequence 1: A < 0, s1 inside the band → s1·(−A), gradient flows.
	wantLoss := -0.5 * ((1+4e-4)*A + s1*(-A))
	if !near(res.Loss, wantLoss, 1e-12) {
		t.Fatalf("loss %v, want %v", res.Loss, wantLoss)
	}
	for _, g := range res.DLogP[0] {
		if g != 0 {
			t.Fatalf("clipped sequence has gradient %v", res.DLogP[0])
		}
	}
	for _, g := range res.DLogP[1] {
		if !near(g, -0.5*(-A)*s1/3, 1e-12) {
			t.Fatalf("gradient %v, want %v per token", g, -0.5*(-A)*s1/3)
		}
	}
	st := res.Stats
	if st.ClipFrac != 0.5 || st.ClipHighFrac != 0.5 || st.ClipLowFrac != 0 {
		t.Fatalf("clip fractions %+v", st)
	}
	if !near(st.RatioMax, s0, 1e-12) || !near(st.RatioMin, s1, 1e-12) || !near(st.RatioMean, (s0+s1)/2, 1e-12) {
		t.Fatalf("ratio stats %+v", st)
	}
	// Token ratios: e^0.2, 1, e^-0.0002, 1, e^-0.0001.
	tr := []float64{math.Exp(0.2), 1, math.Exp(-0.0002), 1, math.Exp(-0.0001)}
	var tm, tv float64
	for _, r := range tr {
		tm += r / 5
	}
	for _, r := range tr {
		tv += (r - tm) * (r - tm) / 5
	}
	if !near(st.TokenRatioStd, math.Sqrt(tv), 1e-9) {
		t.Fatalf("token ratio std %v, want %v", st.TokenRatioStd, math.Sqrt(tv))
	}
	if st.RewardMean != 0.5 || st.Tokens != 5 || st.Sequences != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSequenceRatioIsLengthNormalised: the same per-token log-ratio on a
// sequence twice as long gives the same ratio (a sum would square it).
func TestSequenceRatioIsLengthNormalised(t *testing.T) {
	c := Config{Level: Sequence, EpsLow: 0.2, EpsHigh: 0.2}
	mk := func(n int) Batch {
		lp, old := make([]float64, n), make([]float64, n)
		for i := range lp {
			lp[i], old[i] = -1+0.05, -1
		}
		return Batch{G: 2, Rewards: []float64{1, 0}, LogP: rows(lp, lp), OldLogP: rows(old, old)}
	}
	a, _ := Compute(c, mk(3))
	b, _ := Compute(c, mk(6))
	if !near(a.Stats.RatioMean, math.Exp(0.05), 1e-12) || !near(b.Stats.RatioMean, a.Stats.RatioMean, 1e-12) {
		t.Fatalf("ratios %v and %v, want e^0.05", a.Stats.RatioMean, b.Stats.RatioMean)
	}
}

func TestTokenLevelHandComputed(t *testing.T) {
	c := Config{Level: Token, EpsLow: 0.2, EpsHigh: 0.2}
	b := Batch{G: 2, Rewards: []float64{0, 1},
		LogP:    rows([]float64{math.Log(0.5), math.Log(0.1)}, []float64{math.Log(0.3), math.Log(0.3)}),
		OldLogP: rows([]float64{math.Log(0.25), math.Log(0.1)}, []float64{math.Log(0.3), math.Log(0.2)}),
	}
	res, err := Compute(c, b)
	if err != nil {
		t.Fatal(err)
	}
	A := math.Sqrt(0.5)
	// Seq 0 (Â = −A): ratios 2 (clip → 1.2; min(−2A, −1.2A) = −2A, unclipped) and 1.
	// Seq 1 (Â = +A): ratios 1 and 1.5 (min(A, 1.5A, 1.2A) = 1.2A, clipped).
	want := -0.5 * ((-2*A+(-A))/2 + (A+1.2*A)/2)
	if !near(res.Loss, want, 1e-12) {
		t.Fatalf("loss %v, want %v", res.Loss, want)
	}
	if res.Stats.ClipFrac != 0.25 || res.Stats.ClipHighFrac != 0.25 || res.Stats.RatiosMeasured != 4 {
		t.Fatalf("stats %+v", res.Stats)
	}
	if res.DLogP[1][1] != 0 || !near(res.DLogP[0][0], -0.5*(-A)*2/2, 1e-12) {
		t.Fatalf("gradients %v", res.DLogP)
	}
}

func TestKLk3HandComputed(t *testing.T) {
	c := Config{Level: Sequence, EpsLow: 0.2, EpsHigh: 0.2, Beta: 0.5}
	b := Batch{G: 2, Rewards: []float64{1, 1}, // zero variance: only KL is left
		LogP:    rows([]float64{-1, -2}, []float64{-3}),
		OldLogP: rows([]float64{-1, -2}, []float64{-3}),
		RefLogP: rows([]float64{-1.5, -2}, []float64{-2}),
	}
	res, err := Compute(c, b)
	if err != nil {
		t.Fatal(err)
	}
	k3 := func(x float64) float64 { return math.Exp(x) - x - 1 }
	kl := 0.5 * ((k3(-0.5)+k3(0))/2 + k3(1))
	if !near(res.Stats.KL, kl, 1e-12) || !near(res.Loss, 0.5*kl, 1e-12) || res.Stats.PolicyLoss != 0 {
		t.Fatalf("stats %+v, want KL %v", res.Stats, kl)
	}
	if res.Stats.ZeroVarGroups != 1 {
		t.Fatalf("zero-variance groups %d", res.Stats.ZeroVarGroups)
	}
	// KL to itself is zero with zero gradient.
	b.RefLogP = b.LogP
	res, _ = Compute(c, b)
	if res.Stats.KL != 0 || res.DLogP[0][0] != 0 {
		t.Fatalf("KL to itself %v, gradient %v", res.Stats.KL, res.DLogP)
	}
}

// TestZeroVarianceGroupContributesNothing: with β = 0 a group whose rewards
// are equal gets exactly zero gradient, whatever its ratios.
func TestZeroVarianceGroupContributesNothing(t *testing.T) {
	for _, lvl := range []Level{Sequence, Token} {
		c := Config{Level: lvl, EpsLow: 0.2, EpsHigh: 0.2, AdvEps: 1e-4}
		b := randomBatch(rand.New(rand.NewPCG(1, 2)), 4, 3, 5, 0.3)
		for i := 4; i < 8; i++ {
			b.Rewards[i] = 0.7
		}
		res, err := Compute(c, b)
		if err != nil {
			t.Fatal(err)
		}
		for i := 4; i < 8; i++ {
			for _, g := range res.DLogP[i] {
				if g != 0 {
					t.Fatalf("%v: zero-variance sequence %d has gradient %v", lvl, i, res.DLogP[i])
				}
			}
		}
		nonzero := false
		for _, g := range res.DLogP[0] {
			nonzero = nonzero || g != 0
		}
		if !nonzero && res.Stats.ClipFrac < 1 {
			t.Fatalf("%v: the other groups got no gradient", lvl)
		}
	}
}

func randomBatch(r *rand.Rand, G, groups, T int, spread float64) Batch {
	N := G * groups
	b := Batch{G: G, Rewards: make([]float64, N)}
	for i := 0; i < N; i++ {
		b.Rewards[i] = float64(r.IntN(4)) / 3
		n := 1 + r.IntN(T)
		lp, old, ref := make([]float64, n), make([]float64, n), make([]float64, n)
		for t := range lp {
			old[t] = -0.1 - 2*r.Float64()
			lp[t] = old[t] + spread*(r.Float64()-0.5)
			ref[t] = old[t] + spread*(r.Float64()-0.5)
		}
		b.LogP, b.OldLogP, b.RefLogP = append(b.LogP, lp), append(b.OldLogP, old), append(b.RefLogP, ref)
	}
	return b
}

// TestGradientMatchesFiniteDifferences checks ∂loss/∂log π_θ against central
// differences for both levels, with wide and with the paper's tight clip.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []Config{
		{Level: Sequence, EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.1, AdvEps: 1e-4},
		{Level: Sequence, EpsLow: 3e-4, EpsHigh: 4e-4, Beta: 0.04, AdvEps: 1e-4},
		{Level: Token, EpsLow: 0.2, EpsHigh: 0.2, Beta: 0.1, AdvEps: 1e-4},
		{Level: Token, EpsLow: 3e-4, EpsHigh: 4e-4, Beta: 0, AdvEps: 1e-4},
	} {
		for trial := 0; trial < 5; trial++ {
			spread := []float64{0.6, 0.001}[trial%2]
			b := randomBatch(r, 4, 3, 6, spread)
			res, err := Compute(c, b)
			if err != nil {
				t.Fatal(err)
			}
			for i := range b.LogP {
				for tk := range b.LogP[i] {
					const h = 1e-7
					old := b.LogP[i][tk]
					b.LogP[i][tk] = old + h
					p, _ := Compute(c, b)
					b.LogP[i][tk] = old - h
					m, _ := Compute(c, b)
					b.LogP[i][tk] = old
					fd := (p.Loss - m.Loss) / (2 * h)
					if !near(fd, res.DLogP[i][tk], 1e-6+1e-4*math.Abs(fd)) {
						// A clip boundary within h of the point makes the
						// difference quotient straddle a kink; skip those.
						if kink(c, b, i) {
							continue
						}
						t.Fatalf("%+v seq %d tok %d: analytic %v, finite difference %v", c, i, tk, res.DLogP[i][tk], fd)
					}
				}
			}
		}
	}
}

func kink(c Config, b Batch, i int) bool {
	near := func(r float64) bool {
		return math.Abs(r-(1-c.EpsLow)) < 1e-5 || math.Abs(r-(1+c.EpsHigh)) < 1e-5
	}
	var m float64
	for t := range b.LogP[i] {
		d := b.LogP[i][t] - b.OldLogP[i][t]
		m += d
		if c.Level == Token && near(math.Exp(d)) {
			return true
		}
	}
	return c.Level == Sequence && near(math.Exp(m/float64(len(b.LogP[i]))))
}

func TestValidation(t *testing.T) {
	if _, err := ParseLevel("word"); !errors.Is(err, ErrConfig) {
		t.Fatal(err)
	}
	if l, _ := ParseLevel("token"); l != Token {
		t.Fatal("token")
	}
	bad := DefaultConfig()
	bad.EpsLow = -1
	b := Batch{G: 2, Rewards: []float64{0, 1}, LogP: rows([]float64{-1}, []float64{-1}), OldLogP: rows([]float64{-1}, []float64{-1})}
	if _, err := Compute(bad, b); !errors.Is(err, ErrConfig) {
		t.Fatalf("negative eps: %v", err)
	}
	if _, err := Compute(DefaultConfig(), b); !errors.Is(err, ErrInput) {
		t.Fatalf("β > 0 without reference: %v", err)
	}
	b.OldLogP = rows([]float64{-1, -2}, []float64{-1})
	c := DefaultConfig()
	c.Beta = 0
	if _, err := Compute(c, b); !errors.Is(err, ErrInput) {
		t.Fatalf("mismatched rows: %v", err)
	}
}

// TestMaskIsRemoval: at both levels and with the KL term, a batch whose
// masked-out tokens are present gives the loss, statistics and gradient
// (zero on the masked-out tokens) of the batch without them; a sequence
// with no token left contributes only its reward to its group.
func TestMaskIsRemoval(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 3))
	const N, G = 8, 4
	full := Batch{G: G, Rewards: make([]float64, N), Mask: make([][]bool, N)}
	cut := Batch{G: G, Rewards: full.Rewards}
	for i := range N {
		full.Rewards[i] = float64(r.IntN(3))
		n := 3 + r.IntN(6)
		var lp, old, ref []float64
		var clp, cold, cref []float64
		mask := make([]bool, n)
		for k := range n {
			a, b, c := -r.Float64()*3, -r.Float64()*3, -r.Float64()*3
			lp, old, ref = append(lp, a), append(old, b), append(ref, c)
			mask[k] = r.IntN(3) > 0 || k == 0
			if mask[k] {
				clp, cold, cref = append(clp, a), append(cold, b), append(cref, c)
			}
		}
		full.LogP, full.OldLogP, full.RefLogP, full.Mask[i] = append(full.LogP, lp), append(full.OldLogP, old), append(full.RefLogP, ref), mask
		cut.LogP, cut.OldLogP, cut.RefLogP = append(cut.LogP, clp), append(cut.OldLogP, cold), append(cut.RefLogP, cref)
	}
	for _, lvl := range []Level{Sequence, Token} {
		c := DefaultConfig()
		c.Level, c.Beta = lvl, 0.05
		a, err := Compute(c, full)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Compute(c, cut)
		if err != nil {
			t.Fatal(err)
		}
		if a.Loss != b.Loss || a.Stats != b.Stats {
			t.Fatalf("%v: masked %+v\nremoved %+v", lvl, a.Stats, b.Stats)
		}
		for i := range N {
			k := 0
			for tkn, m := range full.Mask[i] {
				switch {
				case !m && a.DLogP[i][tkn] != 0:
					t.Fatalf("%v: masked-out token %d of sequence %d has gradient %v", lvl, tkn, i, a.DLogP[i][tkn])
				case m && a.DLogP[i][tkn] != b.DLogP[i][k]:
					t.Fatalf("%v: token %d of sequence %d: gradient %v, removed %v", lvl, tkn, i, a.DLogP[i][tkn], b.DLogP[i][k])
				}
				if m {
					k++
				}
			}
		}
	}
	// A sequence with nothing left, and a batch with nothing at all.
	none := full
	none.Mask = append([][]bool(nil), full.Mask...)
	none.Mask[0] = make([]bool, len(full.LogP[0]))
	res, err := Compute(DefaultConfig(), none)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.DLogP[0] {
		if d != 0 {
			t.Fatal("a sequence with no token has a gradient")
		}
	}
	for i := range none.Mask {
		none.Mask[i] = make([]bool, len(full.LogP[i]))
	}
	if _, err := Compute(DefaultConfig(), none); !errors.Is(err, ErrInput) {
		t.Fatalf("nothing to train on: %v", err)
	}
	bad := full
	bad.Mask = full.Mask[:3]
	if _, err := Compute(DefaultConfig(), bad); !errors.Is(err, ErrInput) {
		t.Fatalf("mask rows: %v", err)
	}
}
