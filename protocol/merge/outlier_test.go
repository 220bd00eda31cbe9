package merge

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zooai/gym/protocol/attack"
	"github.com/zooai/gym/protocol/attack/attacktest"
)

// inBound builds the f attackers' vectors of one kind from the honest ones.
func inBound(t *testing.T, r *rand.Rand, kind string, honest [][]float32, n, f int) [][]float32 {
	t.Helper()
	var v []float32
	var err error
	switch kind {
	case "alie":
		var z float64
		if z, err = attack.ALIEZ(n, f); err == nil {
			v, err = attack.ALIE(honest, z)
		}
	case "ipm":
		v, err = attack.IPM(honest, attack.DefaultIPMEpsilon)
	case "mimic":
		v, err = attack.Mimic(honest)
	case "noise": // each attacker its own honest-looking update plus noise, clipped to 2 × its norm
		out := make([][]float32, f)
		for i := range out {
			h := attacktest.Batch(r, 1, len(honest[0]), 1)[0]
			nz := attack.Noise(r, len(h), 3*Norm(h))
			for j := range h {
				h[j] += nz[j]
			}
			attack.Clip(h, 2*Norm(honest[0]))
			out[i] = h
		}
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, f)
	for i := range out {
		out[i] = slices.Clone(v) // colluders send the same vector
	}
	return out
}

var inBoundKinds = []string{"alie", "ipm", "mimic", "noise"}

// TestRobustRulesUnderInBoundAttacks: with f < n/3 colluders mounting
// ALIE, IPM, mimic or in-bound noise, the median and the trimmed mean stay
// within the honest values' range in every coordinate, so the merged
// update is within R = √Σ_j max_i (h_ij − μ_j)² of the honest mean μ — the
// bound the attack cannot break, however it is built. (How far inside R
// it lands is what the attack gains; the outlier replays of package epoch
// are what take it away.)
func TestRobustRulesUnderInBoundAttacks(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const dim = 256
	for _, nf := range [][2]int{{4, 1}, {7, 2}, {10, 3}} {
		n, f := nf[0], nf[1]
		for _, kind := range inBoundKinds {
			for _, rule := range []Rule{Median, TrimmedMean} {
				for range 10 {
					honest := attacktest.Batch(r, n-f, dim, 1.5)
					var in []Input
					for i, h := range honest {
						in = append(in, Input{Node: fmt.Sprintf("h%d", i), Vec: h, Quality: 1})
					}
					for i, a := range inBound(t, r, kind, honest, n, f) {
						in = append(in, Input{Node: fmt.Sprintf("x%d", i), Vec: a, Quality: 1})
					}
					got, rep, err := Merge(Config{Rule: rule, Byzantine: f}, in)
					if err != nil {
						t.Fatal(err)
					}
					for _, ct := range rep.Contributions {
						if ct.Node[0] == 'h' && ct.Scale != 1 {
							t.Fatalf("an honest update was clipped (scale %v): the test's premise fails", ct.Scale)
						}
					}
					mu, _, _ := attack.Moments(honest)
					var r2, d2 float64
					for j := range dim {
						lo, hi, dev := math.Inf(1), math.Inf(-1), 0.0
						for _, h := range honest {
							x := float64(h[j])
							lo, hi, dev = min(lo, x), max(hi, x), max(dev, math.Abs(x-mu[j]))
						}
						if float64(got[j]) < lo || float64(got[j]) > hi {
							t.Fatalf("%s n=%d f=%d %s: [%d] = %v outside the honest range [%v, %v]", kind, n, f, rule, j, got[j], lo, hi)
						}
						r2 += dev * dev
						d := float64(got[j]) - mu[j]
						d2 += d * d
					}
					if math.Sqrt(d2) > math.Sqrt(r2) {
						t.Fatalf("%s n=%d f=%d %s: merged %v from the honest mean, bound %v", kind, n, f, rule, math.Sqrt(d2), math.Sqrt(r2))
					}
				}
			}
		}
	}
}

// TestOutliers: every attacker of each in-bound kind is an outlier of its
// batch, and no honest update is, except the one a mimic copies (its
// twin: replayed, it passes). An all-honest batch has no outlier.
func TestOutliers(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const dim = 1024
	for _, nf := range [][2]int{{4, 1}, {7, 2}, {10, 3}} {
		n, f := nf[0], nf[1]
		for trial := range 20 {
			honest := attacktest.Batch(r, n, dim, 0.5+r.Float64())
			var in []Input
			for i, h := range honest {
				in = append(in, Input{Node: fmt.Sprintf("h%d", i), Vec: h})
			}
			if out, err := Outliers(OutlierConfig{}, in); err != nil || len(out) != 0 {
				t.Fatalf("n=%d trial %d: honest outliers %+v, %v", n, trial, out, err)
			}
			for _, kind := range inBoundKinds {
				in = in[:n-f]
				for i, a := range inBound(t, r, kind, honest[:n-f], n, f) {
					in = append(in, Input{Node: fmt.Sprintf("x%d", i), Vec: a})
				}
				out, err := Outliers(OutlierConfig{}, in)
				if err != nil {
					t.Fatal(err)
				}
				named := map[string]string{}
				for _, o := range out {
					named[o.Node] = o.Reason
				}
				for i := range f {
					if named[fmt.Sprintf("x%d", i)] == "" {
						t.Errorf("%s n=%d f=%d trial %d: attacker %d not an outlier (outliers %+v)", kind, n, f, trial, i, out)
					}
				}
				for node := range named {
					if node[0] == 'h' && !(kind == "mimic" && node == "h0") {
						t.Errorf("%s n=%d f=%d trial %d: honest %s is an outlier: %s", kind, n, f, trial, node, named[node])
					}
				}
			}
		}
	}
}

// Outliers is a pure function of the set: any order gives the same
// answer; fewer than 3 contributions give none; a switched-off test
// names nothing.
func TestOutliersOrderAndEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	honest := attacktest.Batch(r, 4, 64, 1)
	in := []Input{{Node: "a", Vec: honest[0]}, {Node: "b", Vec: honest[1]}, {Node: "c", Vec: honest[2]}, {Node: "d", Vec: slices.Clone(honest[0])}}
	want, err := Outliers(OutlierConfig{}, in)
	if err != nil || len(want) != 2 || want[0].Node != "a" || want[1].Node != "d" {
		t.Fatalf("outliers %+v, %v; want the twins a and d", want, err)
	}
	for range 10 {
		p := slices.Clone(in)
		r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		if got, _ := Outliers(OutlierConfig{}, p); !slices.Equal(got, want) {
			t.Fatalf("order changed the outliers: %+v, want %+v", got, want)
		}
	}
	if got, _ := Outliers(OutlierConfig{Twin: -1}, in); len(got) != 0 {
		t.Fatalf("twin test off: %+v", got)
	}
	if got, _ := Outliers(OutlierConfig{}, in[:2]); got != nil {
		t.Fatalf("two contributions: %+v", got)
	}
	if _, err := Outliers(OutlierConfig{}, append(in, Input{Node: "e", Vec: []float32{1}})); err == nil {
		t.Fatal("ragged vectors accepted")
	}
}

// Single-step jobs take SingleStepOutliers where the operator set
// nothing; an operator's bound wins; other jobs keep the defaults.
func TestBoundsFor(t *testing.T) {
	if got := BoundsFor(false, OutlierConfig{}); got != (OutlierConfig{}) {
		t.Fatalf("local steps: %+v, want the defaults (zero)", got)
	}
	if got := BoundsFor(true, OutlierConfig{}); got != SingleStepOutliers {
		t.Fatalf("single steps: %+v, want %+v", got, SingleStepOutliers)
	}
	got := BoundsFor(true, OutlierConfig{Far: 3, Small: 0.1})
	if want := (OutlierConfig{Far: 3, Near: -1, Twin: 0.1, Small: 0.1, Large: 6}); got != want {
		t.Fatalf("single steps with the operator's far and small: %+v, want %+v", got, want)
	}
	// Random directions of one norm: the centre is near zero, and a
	// delta f× the others' norm is about f× the median distance from it.
	// 4× is an outlier by default, not among single steps; 8× is one for
	// both.
	in := func(f float64) []Input {
		r := rand.New(rand.NewPCG(3, 4))
		var out []Input
		for i := range 5 {
			x := make([]float32, 400)
			for j := range x {
				x[j] = float32(r.NormFloat64())
				if i == 4 {
					x[j] *= float32(f)
				}
			}
			out = append(out, Input{Node: string(rune('a' + i)), Vec: x})
		}
		return out
	}
	for _, c := range []struct {
		f        float64
		single   bool
		wantFlag bool
	}{{4, false, true}, {4, true, false}, {8, true, true}} {
		o, err := Outliers(BoundsFor(c.single, OutlierConfig{}), in(c.f))
		if err != nil {
			t.Fatal(err)
		}
		flagged := slices.ContainsFunc(o, func(x Outlier) bool { return x.Node == "e" })
		if flagged != c.wantFlag || len(o) > 1 {
			t.Errorf("×%v, single steps %v: %+v, want the scaled delta flagged %v and no other", c.f, c.single, o, c.wantFlag)
		}
	}
}
