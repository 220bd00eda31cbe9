package attack_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zooai/gym/protocol/attack"
	"github.com/zooai/gym/protocol/attack/attacktest"
	"github.com/zooai/gym/protocol/merge"
)

// ALIE's z for the configurations the table measures and two more, against
// Φ⁻¹((n − s)/n) with s = ⌊n/2 + 1⌋ − f worked out by hand (the quantiles
// from Python's statistics.NormalDist().inv_cdf).
func TestALIEZ(t *testing.T) {
	for _, c := range []struct {
		n, f int
		z    float64
	}{
		{4, 1, 0},                   // s = 2, Φ⁻¹(2/4)
		{7, 2, 0.5659488219328631},  // s = 2, Φ⁻¹(5/7)
		{10, 3, 0.5244005127080407}, // s = 3, Φ⁻¹(7/10)
		{5, 1, 0.2533471031357998},  // s = 2, Φ⁻¹(3/5)
	} {
		z, err := attack.ALIEZ(c.n, c.f)
		if err != nil || math.Abs(z-c.z) > 1e-12 {
			t.Errorf("ALIEZ(%d, %d) = %v, %v; want %v", c.n, c.f, z, err, c.z)
		}
	}
	for _, c := range [][2]int{{4, 0}, {1, 1}, {3, 3}, {3, 2}} { // s = 0 for n = 3, f = 2: quantile 1
		if _, err := attack.ALIEZ(c[0], c[1]); !errors.Is(err, attack.ErrInput) {
			t.Errorf("ALIEZ(%d, %d): %v, want ErrInput", c[0], c[1], err)
		}
	}
}

// Three honest vectors with per-coordinate mean (3, 6, 0) and unbiased
// standard deviation (2, 4, 0).
var honest = [][]float32{{1, 2, 0}, {3, 6, 0}, {5, 10, 0}}

func TestALIE(t *testing.T) {
	got, err := attack.ALIE(honest, 0.5)
	if err != nil || !slices.Equal(got, []float32{2, 4, 0}) {
		t.Fatalf("ALIE z = 0.5: %v, %v; want [2 4 0]", got, err)
	}
	got, _ = attack.ALIE(honest, 0)
	if !slices.Equal(got, []float32{3, 6, 0}) {
		t.Fatalf("ALIE z = 0: %v, want the mean", got)
	}
	// One honest vector has no spread: ALIE sends it.
	got, _ = attack.ALIE(honest[:1], 1)
	if !slices.Equal(got, honest[0]) {
		t.Fatalf("ALIE of one vector: %v", got)
	}
	if _, err := attack.ALIE(nil, 1); !errors.Is(err, attack.ErrInput) {
		t.Fatalf("ALIE of nothing: %v", err)
	}
	if _, err := attack.ALIE([][]float32{{1}, {1, 2}}, 1); !errors.Is(err, attack.ErrInput) {
		t.Fatalf("ALIE of ragged vectors: %v", err)
	}
}

func TestIPM(t *testing.T) {
	got, err := attack.IPM(honest, 0.5)
	if err != nil || !slices.Equal(got, []float32{-1.5, -3, 0}) {
		t.Fatalf("IPM ε = 0.5: %v, %v; want [-1.5 -3 0]", got, err)
	}
	got, _ = attack.IPM(honest, attack.DefaultIPMEpsilon)
	if want := []float32{-6, -12, 0}; !slices.Equal(got, want) {
		t.Fatalf("IPM at the default ε: %v, want %v (ε = 2)", got, want)
	}
}

func TestMimic(t *testing.T) {
	got, err := attack.Mimic(honest)
	if err != nil || !slices.Equal(got, honest[0]) {
		t.Fatalf("Mimic: %v, %v", got, err)
	}
	got[0] = 99
	if honest[0][0] != 1 {
		t.Fatal("Mimic aliases the honest vector")
	}
	if _, err := attack.Mimic(nil); !errors.Is(err, attack.ErrInput) {
		t.Fatalf("Mimic of nothing: %v", err)
	}
}

func TestNoiseAndClip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	v := attack.Noise(r, 4096, 1.25)
	if n := norm(v); math.Abs(n-1.25) > 1e-5 {
		t.Fatalf("noise norm %v, want 1.25", n)
	}
	// Gaussian: mean near 0, about 68% of the values within one σ = 1.25/64.
	var in int
	for _, x := range v {
		if math.Abs(float64(x)) < 1.25/64 {
			in++
		}
	}
	if frac := float64(in) / 4096; frac < 0.64 || frac > 0.72 {
		t.Fatalf("%.3f of the values within one σ, want ≈ 0.683", frac)
	}
	if f := attack.Clip(v, 0.5); math.Abs(norm(v)-0.5) > 1e-5 || f >= 1 {
		t.Fatalf("clipped to 0.5: norm %v, factor %v", norm(v), f)
	}
	if f := attack.Clip(v, 2); f != 1 {
		t.Fatalf("clip above the norm changed it: factor %v", f)
	}
	if n := norm(attack.Noise(r, 8, 0)); n != 0 {
		t.Fatalf("noise of norm 0 has norm %v", n)
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// The defaults are the literature's: ε = 2 for IPM, z = 1.5 for ALIE
// wherever the paper's formula gives less — which is every configuration
// with 3f < n (below Φ⁻¹(5/6)) — and the formula beyond.
func TestDefaults(t *testing.T) {
	if attack.DefaultIPMEpsilon != 2 || attack.LiteratureALIEZ != 1.5 || attack.DefaultMimicNoise != 0.6 {
		t.Fatalf("defaults ε %v, z %v, noise %v; want 2, 1.5, 0.6", attack.DefaultIPMEpsilon, attack.LiteratureALIEZ, attack.DefaultMimicNoise)
	}
	for _, c := range [][2]int{{4, 1}, {7, 2}, {10, 3}, {64, 21}, {4, 0}, {1, 1}} {
		if z := attack.DefaultALIEZ(c[0], c[1]); z != 1.5 {
			t.Errorf("DefaultALIEZ(%d, %d) = %v, want 1.5", c[0], c[1], z)
		}
	}
	// The paper's own setting, n = 50, f = 24: s = 2, Φ⁻¹(48/50).
	if z := attack.DefaultALIEZ(50, 24); math.Abs(z-1.7506860712521692) > 1e-12 {
		t.Errorf("DefaultALIEZ(50, 24) = %v, want Φ⁻¹(0.96) = 1.75069", z)
	}
	zmax := math.Sqrt2 * math.Erfinv(2*5.0/6-1)
	for n := 4; n <= 64; n++ {
		for f := 1; 3*f < n; f++ {
			if z, err := attack.ALIEZ(n, f); err != nil || z >= zmax {
				t.Fatalf("ALIEZ(%d, %d) = %v, %v; want below Φ⁻¹(5/6) = %v", n, f, z, err, zmax)
			}
		}
	}
}

func TestTypicalDistance(t *testing.T) {
	// Pairwise √20, √80, √20: the median √20.
	if d, err := attack.TypicalDistance(honest); err != nil || math.Abs(d-math.Sqrt(20)) > 1e-12 {
		t.Fatalf("TypicalDistance = %v, %v; want √20", d, err)
	}
	// Four vectors on a line at 0, 1, 3, 7: distances 1 2 3 4 6 7, median 3.5.
	four := [][]float32{{0}, {1}, {3}, {7}}
	if d, _ := attack.TypicalDistance(four); d != 3.5 {
		t.Fatalf("TypicalDistance of four = %v, want 3.5", d)
	}
	if d, err := attack.TypicalDistance(honest[:1]); d != 0 || err != nil {
		t.Fatalf("TypicalDistance of one = %v, %v", d, err)
	}
	if _, err := attack.TypicalDistance(nil); !errors.Is(err, attack.ErrInput) {
		t.Fatalf("TypicalDistance of none: %v", err)
	}
}

// flagged runs the judge's outlier tests (merge.Outliers, default bounds)
// over the honest vectors and f copies of v and returns why a copy of v
// is an outlier ("" when none is).
func flagged(t *testing.T, honest [][]float32, v []float32, f int) string {
	t.Helper()
	var in []merge.Input
	for i, h := range honest {
		in = append(in, merge.Input{Node: fmt.Sprintf("h%d", i), Vec: h})
	}
	for i := range f {
		in = append(in, merge.Input{Node: fmt.Sprintf("x%d", i), Vec: v})
	}
	out, err := merge.Outliers(merge.OutlierConfig{}, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if strings.HasPrefix(o.Node, "x") {
			return o.Reason
		}
	}
	return ""
}

// The noisy mimic is its model plus noise of exactly scale × the typical
// distance, fresh for every draw; the plain mimic is a near-copy to the
// outlier tests, the noisy one at the default scale is not.
func TestNoisyMimic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 10 {
		hs := attacktest.Batch(r, 3, 1024, 0.5+r.Float64())
		typ, _ := attack.TypicalDistance(hs)
		for _, scale := range []float64{0.3, attack.DefaultMimicNoise, 2} {
			v, err := attack.NoisyMimic(r, hs, scale)
			if err != nil {
				t.Fatal(err)
			}
			if d := dist(v, hs[0]); math.Abs(d-scale*typ) > 1e-4*typ {
				t.Fatalf("trial %d scale %v: %v from the copied update, want %v", trial, scale, d, scale*typ)
			}
		}
		a, _ := attack.NoisyMimic(r, hs, attack.DefaultMimicNoise)
		b, _ := attack.NoisyMimic(r, hs, attack.DefaultMimicNoise)
		if slices.Equal(a, b) {
			t.Fatal("two draws of the noisy mimic are equal")
		}
		plain, _ := attack.Mimic(hs)
		if why := flagged(t, hs, plain, 1); !strings.Contains(why, "near-copy") {
			t.Fatalf("trial %d: the plain mimic is %q, want a near-copy", trial, why)
		}
		if why := flagged(t, hs, a, 1); why != "" {
			t.Fatalf("trial %d: the noisy mimic is flagged: %s", trial, why)
		}
	}
	if v, err := attack.NoisyMimic(r, honest[:1], 1); err != nil || !slices.Equal(v, honest[0]) {
		t.Fatalf("noisy mimic of one vector: %v, %v; want the copy", v, err)
	}
	for _, s := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := attack.NoisyMimic(r, honest, s); !errors.Is(err, attack.ErrInput) {
			t.Fatalf("scale %v: %v, want ErrInput", s, err)
		}
	}
	if _, err := attack.NoisyMimic(r, nil, 1); !errors.Is(err, attack.ErrInput) {
		t.Fatalf("noisy mimic of nothing: %v", err)
	}
}

// Adaptive ALIE against the judge's own outlier tests: the vector it
// returns is not flagged, ALIE at a z AdaptiveTol larger is; and the
// fixed z of the paper and of the literature, for comparison, logged.
func TestAdaptiveALIEAgainstOutliers(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, nf := range [][2]int{{4, 1}, {7, 1}, {10, 1}} {
		n, f := nf[0], nf[1]
		for trial := range 5 {
			hs := attacktest.Batch(r, n-f, 1024, 0.5+r.Float64())
			clip := 2 * norm(hs[0])
			hidden := func(v []float32) (bool, error) { return flagged(t, hs, v, f) == "", nil }
			v, z, err := attack.AdaptiveALIE(hs, clip, hidden)
			if err != nil {
				t.Fatalf("n=%d trial %d: %v", n, trial, err)
			}
			if why := flagged(t, hs, v, f); why != "" {
				t.Fatalf("n=%d trial %d: z = %v flagged: %s", n, trial, z, why)
			}
			want, _ := attack.ALIE(hs, z)
			attack.Clip(want, clip)
			if !slices.Equal(v, want) {
				t.Fatalf("n=%d trial %d: the vector is not ALIE's at z = %v", n, trial, z)
			}
			if z >= attack.MaxAdaptiveZ {
				t.Fatalf("n=%d trial %d: nothing flagged up to z = %v: the test cannot tell a larger z is", n, trial, z)
			}
			above, _ := attack.ALIE(hs, z+attack.AdaptiveTol)
			attack.Clip(above, clip)
			why := flagged(t, hs, above, f)
			if why == "" {
				t.Fatalf("n=%d trial %d: z = %v + %v is not flagged either", n, trial, z, attack.AdaptiveTol)
			}
			paper, _ := attack.ALIEZ(n, f)
			t.Logf("n=%d f=%d: adaptive z = %.3f (z + %v: %s); paper's z = %.3f, default %.3f", n, f, z, attack.AdaptiveTol, why, paper, attack.DefaultALIEZ(n, f))
		}
	}
}

// The search itself, against tests whose answer is known: coordinate 0
// of the honest vectors has mean 0 and standard deviation 1, so ALIE's
// value there is −z.
func TestAdaptiveALIESearch(t *testing.T) {
	hs := [][]float32{{-1, 5}, {0, 5}, {1, 5}}
	band := func(lo, hi float64) func(v []float32) (bool, error) {
		return func(v []float32) (bool, error) { z := -float64(v[0]); return z >= lo && z <= hi, nil }
	}
	for _, c := range []struct{ lo, hi float64 }{{0, 2.3}, {0.6, 2.3}, {1.2, 1.3}, {0, 0.1}, {7.7, 7.9}} {
		v, z, err := attack.AdaptiveALIE(hs, 0, band(c.lo, c.hi))
		if err != nil || z > c.hi+1e-9 || z < c.hi-attack.AdaptiveTol || v[1] != 5 {
			t.Errorf("accepted [%v, %v]: z = %v, v = %v, %v; want z within %v below %v", c.lo, c.hi, z, v, err, attack.AdaptiveTol, c.hi)
		}
	}
	if _, z, err := attack.AdaptiveALIE(hs, 0, band(0, 100)); err != nil || z != attack.MaxAdaptiveZ {
		t.Errorf("everything accepted: z = %v, %v; want the cap %v", z, err, attack.MaxAdaptiveZ)
	}
	if _, _, err := attack.AdaptiveALIE(hs, 0, band(0.3, 0.4)); !errors.Is(err, attack.ErrNoHiding) {
		t.Errorf("accepted only between grid points: %v, want ErrNoHiding", err)
	}
	boom := errors.New("boom")
	if _, _, err := attack.AdaptiveALIE(hs, 0, func([]float32) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("the test's error: %v", err)
	}
	// Clipped as it will be sent: norm at most the bound.
	v, _, err := attack.AdaptiveALIE(hs, 1, band(0, 3))
	if err != nil || norm(v) > 1+1e-6 {
		t.Errorf("clipped to 1: norm %v, %v", norm(v), err)
	}
	if _, _, err := attack.AdaptiveALIE(nil, 0, band(0, 1)); !errors.Is(err, attack.ErrInput) {
		t.Errorf("no honest vectors: %v", err)
	}
}

func dist(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}
