package attack_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zooai/gym/attack"
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
	want := []float32{float32(-0.1 * 3), float32(-0.1 * 6), 0}
	if !slices.Equal(got, want) {
		t.Fatalf("IPM ε = 0.1: %v, want %v", got, want)
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
