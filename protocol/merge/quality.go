package merge

import (
	"fmt"
	"math"
)

// Weights are the coefficients of the quality score.
type Weights struct{ Alpha, Beta, Gamma float64 }

// DefaultWeights are α, β, γ = 0.5, 0.3, 0.2.
func DefaultWeights() Weights { return Weights{Alpha: 0.5, Beta: 0.3, Gamma: 0.2} }

// Validate requires finite, non-negative coefficients.
func (w Weights) Validate() error {
	for _, v := range []float64{w.Alpha, w.Beta, w.Gamma} {
		if !(v >= 0) || math.IsInf(v, 1) {
			return fmt.Errorf("%w: quality weights %v, %v, %v (want finite and ≥ 0)", ErrConfig, w.Alpha, w.Beta, w.Gamma)
		}
	}
	return nil
}

// Score is a delta's quality and its three terms, each in [0, 1].
type Score struct {
	Q      float64 // α·DeltaL + β·S + γ·C, in [0, α+β+γ]
	DeltaL float64 // relative loss improvement on the held-out shard
	S      float64 // norm stability
	C      float64 // agreement with the last merged update
}

// Quality scores a delta: q = α·ΔL + β·S + γ·C with
//
//	ΔL = max(0, (L_before − L_after) / L_before), 0 when L_before ≤ 0,
//	     and at most 1 (a loss that turns negative counts as a full drop);
//	S  = exp(−2·|norm/meanNorm − 1|), 0 when meanNorm ≤ 0: with no running
//	     mean there is nothing to be stable against, and the term gives no
//	     credit rather than full credit (the caller should seed the running
//	     mean, e.g. with the median norm of the first epoch's deltas);
//	C  = max(0, cos), at most 1, where cos is the cosine between the delta
//	     and the last merged update (Cosine; 0 when either is zero).
//
// A term whose inputs are NaN or infinite is 0, so Q is always finite and in
// [0, α+β+γ] for valid weights.
func Quality(w Weights, lossBefore, lossAfter, norm, meanNorm, cos float64) Score {
	var s Score
	if lossBefore > 0 && !math.IsInf(lossBefore, 0) && finite(lossAfter) {
		s.DeltaL = clamp01((lossBefore - lossAfter) / lossBefore)
	}
	if meanNorm > 0 && !math.IsInf(meanNorm, 0) && norm >= 0 && finite(norm) {
		s.S = math.Exp(-2 * math.Abs(norm/meanNorm-1))
	}
	if finite(cos) {
		s.C = clamp01(cos)
	}
	s.Q = w.Alpha*s.DeltaL + w.Beta*s.S + w.Gamma*s.C
	return s
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func clamp01(v float64) float64 { return min(1, max(0, v)) }

// Norm is the L2 norm of v, accumulated in float64 in index order.
func Norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(float64(x) * float64(x)) // rounded: never fused
	}
	return math.Sqrt(s)
}

// Cosine is the cosine of the angle between a and b (accumulated in float64
// in index order), or 0 when either has norm 0. It panics if the lengths
// differ.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("merge: cosine of vectors of %d and %d elements", len(a), len(b)))
	}
	na, nb := Norm(a), Norm(b)
	if na == 0 || nb == 0 {
		return 0
	}
	var dot float64
	for i, x := range a {
		dot += float64(float64(x) * float64(b[i]))
	}
	return dot / (na * nb)
}
