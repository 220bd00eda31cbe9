package merge

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestQualityHandValues(t *testing.T) {
	d := DefaultWeights()
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name                        string
		w                           Weights
		before, after, norm, mn, cs float64
		want                        Score
	}{
		// ΔL = (2−1.5)/2 = 0.25; S = exp(0) = 1; C = 0.5.
		// q = 0.5·0.25 + 0.3·1 + 0.2·0.5 = 0.525.
		{"typical", d, 2, 1.5, 3, 3, 0.5, Score{Q: 0.525, DeltaL: 0.25, S: 1, C: 0.5}},
		// Loss went up: ΔL = 0. Norm twice the mean: S = exp(−2).
		// Opposed to the last merge: C = 0.
		{"worse", d, 1, 2, 6, 3, -0.7, Score{Q: 0.3 * math.Exp(-2), S: math.Exp(-2)}},
		// Half the mean norm: S = exp(−1). Loss to 0: ΔL = 1.
		{"half norm", d, 4, 0, 1, 2, 1, Score{Q: 0.5 + 0.3*math.Exp(-1) + 0.2, DeltaL: 1, S: math.Exp(-1), C: 1}},
		// No loss to improve on, no running mean yet: both terms 0.
		{"no reference", d, 0, -1, 5, 0, 0.25, Score{Q: 0.05, C: 0.25}},
		{"negative loss before", d, -1, -2, 5, -3, 0, Score{}},
		// A loss that turns negative counts as a full drop, not more.
		{"negative after", d, 1, -3, 2, 2, 0, Score{Q: 0.5 + 0.3, DeltaL: 1, S: 1}},
		// Rounding may give a cosine a hair above 1.
		{"cos above one", Weights{Gamma: 1}, 1, 1, 1, 1, 1 + 1e-15, Score{Q: 1, S: 1, C: 1}},
		{"nan everywhere", d, nan, nan, nan, nan, nan, Score{}},
		{"inf", d, inf, 1, inf, 1, inf, Score{}},
		{"custom weights", Weights{Alpha: 1, Beta: 2, Gamma: 3}, 10, 5, 1, 1, 0.5, Score{Q: 0.5 + 2 + 1.5, DeltaL: 0.5, S: 1, C: 0.5}},
	} {
		got := Quality(tc.w, tc.before, tc.after, tc.norm, tc.mn, tc.cs)
		if math.Abs(got.Q-tc.want.Q) > 1e-15 || got.DeltaL != tc.want.DeltaL || got.S != tc.want.S || got.C != tc.want.C {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestQualityWithinBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	val := func() float64 {
		switch r.IntN(8) {
		case 0:
			return 0
		case 1:
			return math.NaN()
		case 2:
			return math.Inf(1 - 2*r.IntN(2))
		case 3:
			return -r.Float64()
		}
		return r.ExpFloat64() * math.Pow(10, r.Float64()*20-10)
	}
	for trial := range 20000 {
		w := DefaultWeights()
		if trial%2 == 1 {
			w = Weights{r.Float64() * 3, r.Float64() * 3, r.Float64() * 3}
		}
		s := Quality(w, val(), val(), val(), val(), 2*r.Float64()-1+val()*float64(r.IntN(2)))
		top := w.Alpha + w.Beta + w.Gamma
		if !(s.Q >= 0 && s.Q <= top*(1+1e-15)) {
			t.Fatalf("trial %d: q = %v outside [0, %v]: %+v", trial, s.Q, top, s)
		}
		for _, v := range []float64{s.DeltaL, s.S, s.C} {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("trial %d: a term outside [0, 1]: %+v", trial, s)
			}
		}
	}
}

func TestWeightsValidate(t *testing.T) {
	if err := DefaultWeights().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []Weights{{-1, 0, 0}, {0, math.NaN(), 0}, {0, 0, math.Inf(1)}} {
		if err := w.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", w, err)
		}
	}
}

func TestNormAndCosine(t *testing.T) {
	if got := Norm(vec(3, 4)); got != 5 {
		t.Fatalf("Norm(3,4) = %v", got)
	}
	if got := Norm(nil); got != 0 {
		t.Fatalf("Norm(nil) = %v", got)
	}
	// Beyond float32 range as a sum of squares: accumulated in float64.
	if got := Norm(vec(3e30, 4e30)); math.Abs(got-5e30)/5e30 > 1e-7 {
		t.Fatalf("Norm(3e30, 4e30) = %v", got)
	}
	for _, tc := range []struct {
		a, b []float32
		want float64
	}{
		{vec(1, 0), vec(0, 1), 0},
		{vec(1, 0), vec(2, 0), 1},
		{vec(1, 0), vec(-3, 0), -1},
		{vec(1, 1), vec(1, 0), 1 / math.Sqrt2},
		{vec(0, 0), vec(1, 0), 0},
		{vec(1, 2), vec(0, 0), 0},
		{nil, nil, 0},
	} {
		if got := Cosine(tc.a, tc.b); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("Cosine(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Cosine of different lengths did not panic")
		}
	}()
	Cosine(vec(1), vec(1, 2))
}
