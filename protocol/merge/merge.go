package merge

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Sentinel errors; every error returned wraps one of them.
var (
	ErrConfig       = errors.New("merge: invalid configuration")
	ErrIndefensible = errors.New("merge: the rule cannot tolerate the declared Byzantine contributors")
	ErrInput        = errors.New("merge: invalid input")
)

// Rule is how the clipped contributions are combined. The names are the
// job spec's "aggregation" values.
type Rule string

const (
	Mean        Rule = "mean"         // quality-weighted mean
	Median      Rule = "median"       // coordinate-wise median
	TrimmedMean Rule = "trimmed-mean" // coordinate-wise mean after dropping k values from each end
)

// ParseRule returns the rule named s.
func ParseRule(s string) (Rule, error) {
	switch r := Rule(s); r {
	case Mean, Median, TrimmedMean:
		return r, nil
	}
	return "", fmt.Errorf("%w: aggregation %q (want mean, median or trimmed-mean)", ErrConfig, s)
}

// Defaults.
const (
	DefaultClipFactor = 2.0
)

// Config says how to merge.
type Config struct {
	Rule Rule
	// Byzantine is f, the number of Byzantine contributors the job declares
	// it must tolerate. Merge refuses to run when the rule cannot tolerate
	// f among the contributions it is given (see CheckDefensible).
	Byzantine int
	// TrimFraction (trimmed mean) sets k = max(f, ⌊TrimFraction·n⌋) values
	// dropped from each end of every coordinate; 0 means k = max(f, 1)
	// when n ≥ 3 (and k = f below). It must be in [0, 0.5).
	TrimFraction float64
	// ClipFactor bounds every contribution's L2 norm to ClipFactor × the
	// median of the batch's norms. 0 means DefaultClipFactor; negative
	// switches clipping off. When more than half the contributions are
	// zero the bound is 0 and every other contribution is scaled to zero.
	ClipFactor float64
	// MaxWeight caps any single weight of the quality-weighted mean, in
	// [0, 1]; 0 means min(1, 2/n). A cap below 1/n cannot be met by weights
	// that sum to 1 and is raised to 1/n (equal weights).
	MaxWeight float64
}

// DefaultConfig is a quality-weighted mean with default clipping and cap.
func DefaultConfig() Config { return Config{Rule: Mean} }

// Validate checks the fields that do not depend on the number of
// contributions.
func (c Config) Validate() error {
	if _, err := ParseRule(string(c.Rule)); err != nil {
		return err
	}
	switch {
	case c.Byzantine < 0:
		return fmt.Errorf("%w: byzantine %d is negative", ErrConfig, c.Byzantine)
	case !(c.TrimFraction >= 0 && c.TrimFraction < 0.5):
		return fmt.Errorf("%w: trim fraction %v outside [0, 0.5)", ErrConfig, c.TrimFraction)
	case math.IsNaN(c.ClipFactor) || math.IsInf(c.ClipFactor, 0):
		return fmt.Errorf("%w: clip factor %v (want > 0, 0 for the default %v, or negative for off)", ErrConfig, c.ClipFactor, DefaultClipFactor)
	case !(c.MaxWeight >= 0 && c.MaxWeight <= 1):
		return fmt.Errorf("%w: max weight %v outside [0, 1]", ErrConfig, c.MaxWeight)
	}
	return nil
}

// CheckDefensible refuses a configuration that rule cannot defend with n
// contributors (for a job: its min_nodes) of which f may be Byzantine.
// A mean is moved arbitrarily far by a single input, so it admits no f > 0;
// the coordinate-wise median and the trimmed mean need 3f < n.
func CheckDefensible(rule Rule, n, f int) error {
	if _, err := ParseRule(string(rule)); err != nil {
		return err
	}
	switch {
	case f < 0:
		return fmt.Errorf("%w: byzantine %d is negative", ErrIndefensible, f)
	case n < 1:
		return fmt.Errorf("%w: %d contributors", ErrIndefensible, n)
	case rule == Mean && f > 0:
		return fmt.Errorf("%w: a mean cannot tolerate any Byzantine contributor (byzantine %d): use aggregation median or trimmed-mean, or set byzantine to 0", ErrIndefensible, f)
	case rule != Mean && 3*f >= n:
		return fmt.Errorf("%w: %s tolerates f Byzantine contributors only when 3f < n, and byzantine %d needs at least %d contributors, not %d: raise min_nodes to %d or lower byzantine to %d",
			ErrIndefensible, rule, f, 3*f+1, n, 3*f+1, (n-1)/3)
	}
	return nil
}

// Input is one contribution.
type Input struct {
	Node    string    // contributor id, unique within a merge
	Vec     []float32 // the flattened delta
	Quality float64   // ≥ 0; the weight before normalisation (Mean only)
}

// Contribution says what the merge did with one input.
type Contribution struct {
	Node   string
	Norm   float64 // L2 norm before clipping
	Scale  float64 // clipping factor applied: 1 when not clipped
	Weight float64 // weight in the mean; 0 for Median and TrimmedMean
}

// Report describes a merge.
type Report struct {
	Rule Rule
	// ClipNorm is the bound every norm was clipped to; 0 when clipping is
	// off (and also when the median norm is 0: then Scale says what
	// happened).
	ClipNorm float64
	// Trim is k, the values dropped from each end of every coordinate
	// (TrimmedMean only).
	Trim          int
	Contributions []Contribution // sorted by Node
}

// Merge combines the inputs with c and reports each input's norm, clip
// scale and weight. It refuses a batch in which c.Rule cannot tolerate
// c.Byzantine contributors (CheckDefensible with n = len(in)).
//
// The result is bit-identical for every order of in: the inputs are sorted
// by Node first, and every accumulation runs in float64 in that order.
func Merge(c Config, in []Input) ([]float32, Report, error) {
	if err := c.Validate(); err != nil {
		return nil, Report{}, err
	}
	n := len(in)
	if n == 0 {
		return nil, Report{}, fmt.Errorf("%w: no contributions", ErrInput)
	}
	if err := CheckDefensible(c.Rule, n, c.Byzantine); err != nil {
		return nil, Report{}, err
	}
	in = slices.Clone(in)
	slices.SortFunc(in, func(a, b Input) int { return cmp.Compare(a.Node, b.Node) })
	dim := len(in[0].Vec)
	for i, x := range in {
		switch {
		case x.Node == "":
			return nil, Report{}, fmt.Errorf("%w: a contribution has no node id", ErrInput)
		case i > 0 && x.Node == in[i-1].Node:
			return nil, Report{}, fmt.Errorf("%w: node %q contributes twice", ErrInput, x.Node)
		case len(x.Vec) != dim:
			return nil, Report{}, fmt.Errorf("%w: node %q has %d elements, node %q has %d", ErrInput, x.Node, len(x.Vec), in[0].Node, dim)
		case !(x.Quality >= 0) || math.IsInf(x.Quality, 1):
			return nil, Report{}, fmt.Errorf("%w: node %q has quality %v (want finite and ≥ 0)", ErrInput, x.Node, x.Quality)
		}
		for j, v := range x.Vec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, Report{}, fmt.Errorf("%w: node %q element %d is %v", ErrInput, x.Node, j, v)
			}
		}
	}

	rep := Report{Rule: c.Rule, Contributions: make([]Contribution, n)}
	norms := make([]float64, n)
	for i, x := range in {
		norms[i] = Norm(x.Vec)
		rep.Contributions[i] = Contribution{Node: x.Node, Norm: norms[i], Scale: 1}
	}
	factor := c.ClipFactor
	if factor == 0 {
		factor = DefaultClipFactor
	}
	if factor > 0 {
		rep.ClipNorm = factor * median(slices.Clone(norms))
		for i := range rep.Contributions {
			if norms[i] > rep.ClipNorm {
				rep.Contributions[i].Scale = rep.ClipNorm / norms[i]
			}
		}
	}
	scale := make([]float64, n)
	for i := range scale {
		scale[i] = rep.Contributions[i].Scale
	}

	out := make([]float32, dim)
	switch c.Rule {
	case Mean:
		q := make([]float64, n)
		for i, x := range in {
			q[i] = x.Quality
		}
		w := waterFill(q, c.MaxWeight)
		coef := make([]float64, n)
		for i := range w {
			rep.Contributions[i].Weight = w[i]
			coef[i] = w[i] * scale[i]
		}
		for j := range out {
			var acc float64
			for i, x := range in {
				acc += float64(coef[i] * float64(x.Vec[j])) // rounded: never fused
			}
			out[j] = float32(acc)
		}
	case Median, TrimmedMean:
		k := 0
		if c.Rule == TrimmedMean {
			k = trim(c, n)
			if 2*k >= n {
				return nil, Report{}, fmt.Errorf("%w: trimming %d values from each end of %d leaves none: lower byzantine or trim fraction", ErrConfig, k, n)
			}
			rep.Trim = k
		}
		col := make([]float64, n)
		for j := range out {
			for i, x := range in {
				col[i] = float64(scale[i] * float64(x.Vec[j]))
			}
			slices.Sort(col)
			if c.Rule == Median {
				out[j] = float32(median(col))
				continue
			}
			var acc float64
			for _, v := range col[k : n-k] {
				acc += v
			}
			out[j] = float32(acc / float64(n-2*k))
		}
	}
	return out, rep, nil
}

// trim is the k of a trimmed mean over n contributions.
func trim(c Config, n int) int {
	if c.TrimFraction > 0 {
		return max(c.Byzantine, int(math.Floor(c.TrimFraction*float64(n))))
	}
	if n >= 3 {
		return max(c.Byzantine, 1)
	}
	return c.Byzantine
}

// median sorts v and returns its middle value, or the mean of the two
// middle values when len(v) is even.
func median(v []float64) float64 {
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}

// waterFill normalises the qualities q (≥ 0, finite) to weights that sum to
// 1 with none above maxW (0: min(1, 2/n); raised to 1/n if below). Weights
// above the cap are fixed at it and the remaining mass is shared among the
// others in proportion to their quality, repeatedly until none exceeds the
// cap; if the uncapped contributors all have quality 0 (or all do from the
// start) the remaining mass is shared equally.
func waterFill(q []float64, maxW float64) []float64 {
	n := len(q)
	if maxW == 0 {
		maxW = min(1, 2/float64(n))
	}
	maxW = max(maxW, 1/float64(n))
	// Divide by the largest quality first, so the sum cannot overflow.
	top := slices.Max(q)
	rel := make([]float64, n)
	if top > 0 {
		for i, v := range q {
			rel[i] = v / top
		}
	}
	w := make([]float64, n)
	capped := make([]bool, n)
	for free := n; free > 0; {
		rest := 1 - float64(n-free)*maxW
		var sum float64
		for i, v := range rel {
			if !capped[i] {
				sum += v
			}
		}
		over := false
		for i, v := range rel {
			if capped[i] {
				continue
			}
			if sum > 0 {
				w[i] = rest * v / sum
			} else {
				w[i] = rest / float64(free)
			}
			if w[i] > maxW {
				over = true
			}
		}
		if !over {
			break
		}
		for i := range w {
			if !capped[i] && w[i] > maxW {
				capped[i], w[i] = true, maxW
				free--
			}
		}
	}
	return w
}
