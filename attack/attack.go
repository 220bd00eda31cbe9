// Package attack builds the in-bound Byzantine contributions of the
// literature from the honest updates of a sync, on flat vectors (laid out
// as jobconf.Flatten lays out an adapter). They exist to measure the
// defences (gym up --attack, docs/threat-model.md), never to train.
//
//   - ALIE, "A Little Is Enough" (Baruch, Baruch and Goldberg, NeurIPS
//     2019): every coordinate at μ − z·σ of the honest updates, with z from
//     the paper's formula for n contributors of which f collude (ALIEZ).
//     It stays inside the spread of the honest updates, so a median or a
//     trimmed mean cannot tell it apart, and pulls every coordinate the same
//     way.
//   - IPM, inner-product manipulation (Xie, Koyejo and Gupta, "Fall of
//     Empires", UAI 2019): −ε·μ, a small vector against the honest mean, so
//     the merged update's inner product with the true direction shrinks or
//     turns negative.
//   - Noise: a Gaussian vector of a chosen norm, to be added to an honest
//     update and clipped to the bound every contribution is clipped to.
//   - Mimic (Karimireddy, He and Jaggi, ICLR 2022): the colluders all send
//     a copy of one honest node's update (Mimic), over-weighting it.
//
// ALIE, IPM and Mimic are omniscient: they need the honest updates of the
// sync. Package worker gets them through a side channel that only a test
// cluster provides (docs/threat-model.md says which).
package attack

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// ErrInput reports vectors an attack cannot be built from.
var ErrInput = errors.New("attack: invalid input")

// DefaultIPMEpsilon is ε of IPM: the value Xie et al. use against the
// median and Krum, and Karimireddy et al. against robust aggregators.
const DefaultIPMEpsilon = 0.1

// ALIEZ is z_max of ALIE for n contributors of which f are Byzantine:
// s = ⌊n/2 + 1⌋ − f honest contributors the attackers need on their side
// for a majority, and z = Φ⁻¹((n − s)/n), the largest z such that s
// honest values per coordinate lie farther from the mean than μ − z·σ
// (Baruch et al. 2019, Algorithm 3). It is 0 for n = 4, f = 1 (the
// attackers send the honest mean) and ≈ 0.566 for n = 7, f = 2. Some
// reimplementations (Blades, Karimireddy et al.'s bucketing code) use
// Φ⁻¹((n − f − s)/(n − f)) instead; this is the paper's.
func ALIEZ(n, f int) (float64, error) {
	if n < 2 || f < 1 || f >= n {
		return 0, fmt.Errorf("%w: ALIE needs 1 ≤ f < n, got n = %d, f = %d", ErrInput, n, f)
	}
	s := n/2 + 1 - f
	p := float64(n-s) / float64(n)
	if p <= 0 || p >= 1 {
		return 0, fmt.Errorf("%w: ALIE's quantile %v for n = %d, f = %d", ErrInput, p, n, f)
	}
	return math.Sqrt2 * math.Erfinv(2*p-1), nil
}

// Moments returns the coordinate-wise mean and standard deviation (the
// unbiased one, divided by m − 1; 0 for a single vector) of m vectors of
// one length, accumulated in float64 in the order given.
func Moments(vs [][]float32) (mean, std []float64, err error) {
	if len(vs) == 0 {
		return nil, nil, fmt.Errorf("%w: no vectors", ErrInput)
	}
	d := len(vs[0])
	for i, v := range vs {
		if len(v) != d {
			return nil, nil, fmt.Errorf("%w: vector %d has %d values, vector 0 has %d", ErrInput, i, len(v), d)
		}
	}
	m := float64(len(vs))
	mean, std = make([]float64, d), make([]float64, d)
	for _, v := range vs {
		for j, x := range v {
			mean[j] += float64(x)
		}
	}
	for j := range mean {
		mean[j] /= m
	}
	if len(vs) > 1 {
		for _, v := range vs {
			for j, x := range v {
				dx := float64(x) - mean[j]
				std[j] += dx * dx
			}
		}
		for j := range std {
			std[j] = math.Sqrt(std[j] / (m - 1))
		}
	}
	return mean, std, nil
}

// ALIE returns μ − z·σ of the honest vectors, coordinate by coordinate.
func ALIE(honest [][]float32, z float64) ([]float32, error) {
	mean, std, err := Moments(honest)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(mean))
	for j := range out {
		out[j] = float32(mean[j] - z*std[j])
	}
	return out, nil
}

// IPM returns −ε·μ of the honest vectors.
func IPM(honest [][]float32, eps float64) ([]float32, error) {
	mean, _, err := Moments(honest)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(mean))
	for j := range out {
		out[j] = float32(-eps * mean[j])
	}
	return out, nil
}

// Mimic returns a copy of the honest vector the colluders copy: the first
// one (callers order the honest updates, e.g. by node id, so that every
// colluder copies the same node).
func Mimic(honest [][]float32) ([]float32, error) {
	if len(honest) == 0 {
		return nil, fmt.Errorf("%w: no honest vector to copy", ErrInput)
	}
	return append([]float32(nil), honest[0]...), nil
}

// Noise returns a Gaussian vector of d values scaled to L2 norm exactly
// norm (in float64 before rounding to float32).
func Noise(r *rand.Rand, d int, norm float64) []float32 {
	g := make([]float64, d)
	var s float64
	for i := range g {
		g[i] = r.NormFloat64()
		s += g[i] * g[i]
	}
	out := make([]float32, d)
	if s == 0 {
		return out
	}
	f := norm / math.Sqrt(s)
	for i := range g {
		out[i] = float32(g[i] * f)
	}
	return out
}

// Clip scales v in place so that its L2 norm is at most bound (no-op for
// bound ≤ 0) and returns the factor applied.
func Clip(v []float32, bound float64) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	n := math.Sqrt(s)
	if bound <= 0 || n <= bound || n == 0 {
		return 1
	}
	f := float32(bound / n)
	for i := range v {
		v[i] *= f
	}
	return float64(f)
}
