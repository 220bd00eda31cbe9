package merge

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, s := range []string{"mean", "median", "trimmed-mean"} {
		if r, err := ParseRule(s); err != nil || string(r) != s {
			t.Errorf("ParseRule(%q) = %q, %v", s, r, err)
		}
	}
	for _, s := range []string{"", "Mean", "trimmed_mean", "krum"} {
		if _, err := ParseRule(s); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseRule(%q): %v, want ErrConfig", s, err)
		}
	}
}

func TestCheckDefensible(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		n, f int
		ok   bool
		hint string // part of the message
	}{
		{Mean, 3, 0, true, ""},
		{Mean, 100, 1, false, "set byzantine to 0"},
		{Median, 3, 0, true, ""},
		{Median, 4, 1, true, ""},
		{Median, 3, 1, false, "raise min_nodes to 4 or lower byzantine to 0"},
		{Median, 6, 2, false, "raise min_nodes to 7 or lower byzantine to 1"},
		{Median, 7, 2, true, ""},
		{TrimmedMean, 10, 3, true, ""},
		{TrimmedMean, 9, 3, false, "raise min_nodes to 10"},
		{TrimmedMean, 5, -1, false, "negative"},
		{Mean, 0, 0, false, "0 contributors"},
		{"krum", 10, 1, false, "aggregation"},
	} {
		err := CheckDefensible(tc.rule, tc.n, tc.f)
		if tc.ok != (err == nil) {
			t.Errorf("%s n=%d f=%d: %v, want ok=%v", tc.rule, tc.n, tc.f, err, tc.ok)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), tc.hint) {
			t.Errorf("%s n=%d f=%d: %q does not say %q", tc.rule, tc.n, tc.f, err, tc.hint)
		}
		if err != nil && !errors.Is(err, ErrIndefensible) && !errors.Is(err, ErrConfig) {
			t.Errorf("%s n=%d f=%d: %v wraps no sentinel", tc.rule, tc.n, tc.f, err)
		}
	}
}

func vec(v ...float32) []float32 { return v }

func TestMergeHandExamples(t *testing.T) {
	off := -1.0
	for _, tc := range []struct {
		name string
		c    Config
		in   []Input
		want []float32
		clip float64
		w    []float64 // weights by sorted node, nil: all 0
		s    []float64 // scales by sorted node, nil: all 1
	}{
		{
			// Equal quality, no clipping: plain mean.
			name: "mean", c: Config{Rule: Mean, ClipFactor: off},
			in:   []Input{{"b", vec(3, 0), 1}, {"a", vec(1, 2), 1}, {"c", vec(2, 4), 1}},
			want: vec(2, 2), w: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3},
		},
		{
			// q = 1, 3 → weights 1/4, 3/4; cap 1 (n = 2).
			name: "weighted", c: Config{Rule: Mean, ClipFactor: off},
			in:   []Input{{"a", vec(4, 0), 1}, {"b", vec(0, 8), 3}},
			want: vec(1, 6), w: []float64{0.25, 0.75},
		},
		{
			// Quality 0 everywhere: equal weights.
			name: "zero quality", c: Config{Rule: Mean, ClipFactor: off},
			in:   []Input{{"a", vec(4), 0}, {"b", vec(8), 0}},
			want: vec(6), w: []float64{0.5, 0.5},
		},
		{
			// q = 8, 1, 1, cap 0.5: a capped at 0.5, b and c share 0.5.
			name: "capped", c: Config{Rule: Mean, ClipFactor: off, MaxWeight: 0.5},
			in:   []Input{{"a", vec(2), 8}, {"b", vec(4), 1}, {"c", vec(8), 1}},
			want: vec(1 + 1 + 2), w: []float64{0.5, 0.25, 0.25},
		},
		{
			// Norms 4, 3, 100 (median 4, bound 8): c is scaled by 8/100.
			name: "clipped mean", c: Config{Rule: Mean},
			in:   []Input{{"a", vec(4), 1}, {"b", vec(-3), 1}, {"c", vec(100), 1}},
			want: vec(3), clip: 8, w: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, s: []float64{1, 1, 0.08},
		},
		{
			name: "median odd", c: Config{Rule: Median, ClipFactor: off},
			in:   []Input{{"a", vec(1, 9, -1), 0}, {"b", vec(5, 1, -2), 0}, {"c", vec(3, 5, -3), 0}},
			want: vec(3, 5, -2),
		},
		{
			name: "median even", c: Config{Rule: Median, ClipFactor: off},
			in:   []Input{{"a", vec(1), 0}, {"b", vec(2), 0}, {"c", vec(4), 0}, {"d", vec(100), 0}},
			want: vec(3),
		},
		{
			// Norms 1, 2, 3, 4 (median 2.5, factor 1): c, d clipped to ∓2.5.
			name: "median clipped", c: Config{Rule: Median, ClipFactor: 1},
			in:   []Input{{"a", vec(1), 0}, {"b", vec(2), 0}, {"c", vec(-3), 0}, {"d", vec(4), 0}},
			want: vec(1.5), clip: 2.5, s: []float64{1, 1, 2.5 / 3, 2.5 / 4},
		},
		{
			// k = max(f, 1) = 1 of 5: drop 1 and 100, mean of 2, 3, 4.
			name: "trimmed default", c: Config{Rule: TrimmedMean, ClipFactor: off},
			in:   []Input{{"a", vec(100), 0}, {"b", vec(2), 0}, {"c", vec(3), 0}, {"d", vec(1), 0}, {"e", vec(4), 0}},
			want: vec(3),
		},
		{
			// k = max(1, ⌊0.4·6⌋ = 2) = 2 of 6: mean of the middle two.
			name: "trimmed fraction", c: Config{Rule: TrimmedMean, ClipFactor: off, Byzantine: 1, TrimFraction: 0.4},
			in:   []Input{{"a", vec(-50), 0}, {"b", vec(2), 0}, {"c", vec(3), 0}, {"d", vec(1), 0}, {"e", vec(4), 0}, {"f", vec(50), 0}},
			want: vec(2.5),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, rep, err := Merge(tc.c, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if rep.ClipNorm != tc.clip {
				t.Errorf("clip norm %v, want %v", rep.ClipNorm, tc.clip)
			}
			for i, c := range rep.Contributions {
				if i > 0 && rep.Contributions[i-1].Node >= c.Node {
					t.Errorf("contributions not sorted by node: %v", rep.Contributions)
				}
				w, s := 0.0, 1.0
				if tc.w != nil {
					w = tc.w[i]
				}
				if tc.s != nil {
					s = tc.s[i]
				}
				if math.Abs(c.Weight-w) > 1e-15 || math.Abs(c.Scale-s) > 1e-15 {
					t.Errorf("%s: weight %v scale %v, want %v %v", c.Node, c.Weight, c.Scale, w, s)
				}
			}
		})
	}
}

func TestMergeRejects(t *testing.T) {
	ok := []Input{{"a", vec(1, 2), 1}, {"b", vec(3, 4), 1}, {"c", vec(5, 6), 1}}
	with := func(i int, f func(*Input)) []Input {
		in := slices.Clone(ok)
		f(&in[i])
		return in
	}
	nan := float32(math.NaN())
	for name, tc := range map[string]struct {
		c    Config
		in   []Input
		want error
	}{
		"empty":            {DefaultConfig(), nil, ErrInput},
		"duplicate node":   {DefaultConfig(), with(2, func(x *Input) { x.Node = "a" }), ErrInput},
		"no node":          {DefaultConfig(), with(0, func(x *Input) { x.Node = "" }), ErrInput},
		"length":           {DefaultConfig(), with(1, func(x *Input) { x.Vec = vec(1, 2, 3) }), ErrInput},
		"nan element":      {DefaultConfig(), with(1, func(x *Input) { x.Vec = vec(1, nan) }), ErrInput},
		"inf element":      {DefaultConfig(), with(1, func(x *Input) { x.Vec = vec(float32(math.Inf(-1)), 0) }), ErrInput},
		"negative quality": {DefaultConfig(), with(1, func(x *Input) { x.Quality = -0.1 }), ErrInput},
		"nan quality":      {DefaultConfig(), with(1, func(x *Input) { x.Quality = math.NaN() }), ErrInput},
		"inf quality":      {DefaultConfig(), with(1, func(x *Input) { x.Quality = math.Inf(1) }), ErrInput},
		"no rule":          {Config{}, ok, ErrConfig},
		"mean with f":      {Config{Rule: Mean, Byzantine: 1}, ok, ErrIndefensible},
		"median 3f = n":    {Config{Rule: Median, Byzantine: 1}, ok, ErrIndefensible},
		"trim fraction":    {Config{Rule: TrimmedMean, TrimFraction: 0.5}, ok, ErrConfig},
		"nan clip":         {Config{Rule: Mean, ClipFactor: math.NaN()}, ok, ErrConfig},
		"max weight":       {Config{Rule: Mean, MaxWeight: 1.5}, ok, ErrConfig},
		"negative f":       {Config{Rule: Median, Byzantine: -1}, ok, ErrConfig},
	} {
		if _, _, err := Merge(tc.c, tc.in); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// randomInputs returns n contributions whose magnitudes vary over many
// orders, so float addition order shows in the last bits.
func randomInputs(r *rand.Rand, n, dim int) []Input {
	in := make([]Input, n)
	for i := range in {
		v := make([]float32, dim)
		mag := math.Pow(10, r.Float64()*8-4)
		for j := range v {
			v[j] = float32(r.NormFloat64() * mag * math.Pow(10, r.Float64()*4-2))
		}
		in[i] = Input{Node: fmt.Sprintf("node-%02d", r.IntN(1000)*100+i), Vec: v, Quality: r.Float64()}
	}
	return in
}

// cancellingInputs returns contributions whose sums cancel: pairs of nodes
// send v and −v with |v| up to 1e7 (same norm, so the same clip scale, and
// quality 1, so the same weight), and the rest send values near 1e-3. The
// exact mean is far smaller than its terms, so adding in another order
// changes the float32 result (TestSummationOrderMatters).
func cancellingInputs(r *rand.Rand, n, dim int) []Input {
	in := randomInputs(r, n, dim)
	small := 1 + r.IntN(3)
	for i := 0; i+1 < n-small; i += 2 {
		for j := range in[i].Vec {
			in[i].Vec[j] = float32(r.NormFloat64() * math.Pow(10, 3+4*r.Float64()))
			in[i+1].Vec[j] = -in[i].Vec[j]
		}
		in[i].Quality, in[i+1].Quality = 1, 1
	}
	for i := n - small; i < n; i++ {
		for j := range in[i].Vec {
			in[i].Vec[j] = float32(r.NormFloat64() * 1e-3)
		}
	}
	return in
}

func TestMergePermutationInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	configs := []Config{
		{Rule: Mean}, {Rule: Mean, ClipFactor: -1}, {Rule: Mean, MaxWeight: 0.3},
		{Rule: Median}, {Rule: Median, Byzantine: 2, ClipFactor: 1.5},
		{Rule: TrimmedMean}, {Rule: TrimmedMean, Byzantine: 2, TrimFraction: 0.3},
	}
	for _, c := range configs {
		t.Run(fmt.Sprintf("%s/f%d/clip%v/trim%v/w%v", c.Rule, c.Byzantine, c.ClipFactor, c.TrimFraction, c.MaxWeight), func(t *testing.T) {
			for trial := range 10 {
				n := 7 + r.IntN(6)
				in := randomInputs(r, n, 33)
				if trial%2 == 0 {
					in = cancellingInputs(r, n, 33)
				}
				want, wantRep, err := Merge(c, in)
				if err != nil {
					t.Fatal(err)
				}
				for range 20 {
					p := slices.Clone(in)
					r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
					got, rep, err := Merge(c, p)
					if err != nil {
						t.Fatal(err)
					}
					for j := range want {
						if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
							t.Fatalf("trial %d: [%d] = %x after a permutation, want %x", trial, j, math.Float32bits(got[j]), math.Float32bits(want[j]))
						}
					}
					if !equalReports(rep, wantRep) {
						t.Fatalf("trial %d: report differs after a permutation", trial)
					}
				}
			}
		})
	}
}

func equalReports(a, b Report) bool {
	return a.Rule == b.Rule && math.Float64bits(a.ClipNorm) == math.Float64bits(b.ClipNorm) && a.Trim == b.Trim &&
		slices.Equal(a.Contributions, b.Contributions)
}

// The permutation test can fail: for the inputs it uses, a mean that adds
// in the order it is given (as Merge would without sorting by node) gives
// different bits for some permutation.
func TestSummationOrderMatters(t *testing.T) {
	naive := func(in []Input) []float32 {
		out := make([]float32, len(in[0].Vec))
		for j := range out {
			var acc float64
			for _, x := range in {
				acc += float64(x.Vec[j]) / float64(len(in))
			}
			out[j] = float32(acc)
		}
		return out
	}
	r := rand.New(rand.NewPCG(1, 2))
	in := cancellingInputs(r, 9, 33)
	want := naive(in)
	for range 20 {
		p := slices.Clone(in)
		r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		if !slices.Equal(naive(p), want) {
			return
		}
	}
	t.Fatal("the order of addition never changes the result: the permutation test proves nothing")
}

func TestRobustRulesStayWithinHonestRange(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		n := 4 + r.IntN(10)
		f := 1 + r.IntN((n-1)/3)
		rule := []Rule{Median, TrimmedMean}[trial%2]
		clip := []float64{-1, 0, 1}[trial%3]
		c := Config{Rule: rule, Byzantine: f, ClipFactor: clip}
		if rule == TrimmedMean && trial%4 == 1 {
			c.TrimFraction = 0.3 // k = max(f, ⌊0.3n⌋) may exceed f
		}
		const dim = 17
		in := randomInputs(r, n, dim)
		attackers := r.Perm(n)[:f]
		for _, a := range attackers {
			for j := range in[a].Vec {
				in[a].Vec[j] = float32(1e6 * float64(1-2*r.IntN(2)))
			}
			if trial%5 == 0 { // all push the same way
				for j := range in[a].Vec {
					in[a].Vec[j] = 1e6
				}
			}
		}
		got, rep, err := Merge(c, in)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		scale := map[string]float64{}
		for _, ct := range rep.Contributions {
			scale[ct.Node] = ct.Scale
		}
		for j := range dim {
			lo, hi := math.Inf(1), math.Inf(-1)
			for i, x := range in {
				if slices.Contains(attackers, i) {
					continue
				}
				v := scale[x.Node] * float64(x.Vec[j])
				lo, hi = min(lo, v), max(hi, v)
			}
			if got[j] < float32(lo) || got[j] > float32(hi) {
				t.Fatalf("trial %d (%s n=%d f=%d clip %v): [%d] = %v outside the honest range [%v, %v]", trial, rule, n, f, clip, j, got[j], lo, hi)
			}
		}
	}
}

// A mean is not robust: one attacker moves it outside the honest range,
// even through clipping (which bounds how far), which is why
// CheckDefensible refuses Mean with f > 0 and why the robustness test
// above can fail.
func TestMeanIsNotRobust(t *testing.T) {
	in := []Input{{"a", vec(1), 1}, {"b", vec(2), 1}, {"c", vec(3), 1}, {"d", vec(-1e6), 1}}
	for _, clip := range []float64{-1, 0} {
		got, _, err := Merge(Config{Rule: Mean, ClipFactor: clip}, in)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] >= 1 {
			t.Fatalf("clip %v: mean %v stayed within the honest range", clip, got[0])
		}
	}
	if got, _, _ := Merge(Config{Rule: Median}, in); got[0] < 1 || got[0] > 3 {
		t.Fatalf("median %v left the honest range", got[0])
	}
}

func TestWaterFill(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 2000 {
		n := 1 + r.IntN(12)
		q := make([]float64, n)
		for i := range q {
			switch r.IntN(4) {
			case 0:
				q[i] = 0
			case 1:
				q[i] = r.Float64() * 1e300
			default:
				q[i] = r.Float64()
			}
		}
		maxW := []float64{0, 1, r.Float64(), 1 / float64(n), 0.01}[trial%5]
		w := waterFill(q, maxW)
		cap := maxW
		if cap == 0 {
			cap = min(1, 2/float64(n))
		}
		cap = max(cap, 1/float64(n))
		var sum float64
		for i, v := range w {
			if !(v >= 0) || v > cap {
				t.Fatalf("trial %d: q %v cap %v: weight %d = %v", trial, q, cap, i, v)
			}
			sum += v
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Fatalf("trial %d: q %v cap %v: weights %v sum to %v", trial, q, cap, w, sum)
		}
		// Uncapped weights stay proportional to quality.
		for i := range w {
			for j := range w {
				if w[i] < cap && w[j] < cap && q[j] > 0 && q[i] > 0 {
					if d := w[i]/w[j] - q[i]/q[j]; math.Abs(d) > 1e-9*q[i]/q[j] {
						t.Fatalf("trial %d: uncapped weights %v, %v not proportional to %v, %v", trial, w[i], w[j], q[i], q[j])
					}
				}
			}
		}
	}
}

func TestClippingScalesExactly(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 100 {
		n := 1 + r.IntN(9)
		in := randomInputs(r, n, 21)
		factor := 0.5 + 2*r.Float64()
		_, rep, err := Merge(Config{Rule: Median, ClipFactor: factor}, in)
		if err != nil {
			t.Fatal(err)
		}
		norms := make([]float64, n)
		for i, x := range in {
			norms[i] = Norm(x.Vec)
		}
		slices.Sort(norms)
		med := norms[n/2]
		if n%2 == 0 {
			med = (norms[n/2-1] + norms[n/2]) / 2
		}
		if rep.ClipNorm != factor*med {
			t.Fatalf("trial %d: clip norm %v, want %v × %v", trial, rep.ClipNorm, factor, med)
		}
		for _, c := range rep.Contributions {
			want := 1.0
			if c.Norm > rep.ClipNorm {
				want = rep.ClipNorm / c.Norm
			}
			if c.Scale != want || c.Scale > 1 {
				t.Fatalf("trial %d: %s norm %v scale %v, want %v", trial, c.Node, c.Norm, c.Scale, want)
			}
			if c.Scale < 1 && math.Abs(c.Scale*c.Norm-rep.ClipNorm) > 1e-12*rep.ClipNorm {
				t.Fatalf("trial %d: clipped norm %v, want %v", trial, c.Scale*c.Norm, rep.ClipNorm)
			}
		}
	}
	// One contribution merged alone comes out scaled to the clip bound: a
	// vector of norm 10 against a median of 10 with factor 0.5 → norm 5.
	got, rep, err := Merge(Config{Rule: Mean, ClipFactor: 0.5}, []Input{{"a", vec(6, 8), 1}})
	if err != nil || !slices.Equal(got, vec(3, 4)) || rep.Contributions[0].Scale != 0.5 {
		t.Fatalf("got %v %+v %v, want [3 4] at scale 0.5", got, rep, err)
	}
}
