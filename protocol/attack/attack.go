// Package attack builds the in-bound Byzantine contributions of the
// literature from the honest updates of a sync, on flat vectors (laid out
// as jobconf.Flatten lays out an adapter). They exist to measure the
// defences (gym up --attack, docs/threat-model.md), never to train.
//
//   - ALIE, "A Little Is Enough" (Baruch, Baruch and Goldberg, NeurIPS
//     2019): every coordinate at μ − z·σ of the honest updates, by default
//     with z = DefaultALIEZ(n, f) for n contributors of which f collude.
//     It stays inside the spread of the honest updates, so a median or a
//     trimmed mean cannot tell it apart, and pulls every coordinate the same
//     way.
//   - Adaptive ALIE (AdaptiveALIE): ALIE with the largest z whose vector a
//     given test (the judge's outlier tests, in package worker) accepts.
//   - IPM, inner-product manipulation (Xie, Koyejo and Gupta, "Fall of
//     Empires", UAI 2019): −ε·μ, against the honest mean, so the merged
//     update's inner product with the true direction shrinks or turns
//     negative; ε = DefaultIPMEpsilon by default.
//   - Noise: a Gaussian vector of a chosen norm, to be added to an honest
//     update and clipped to the bound every contribution is clipped to.
//   - Mimic (Karimireddy, He and Jaggi, ICLR 2022): the colluders all send
//     a copy of one honest node's update (Mimic), over-weighting it; the
//     noisy mimic (NoisyMimic) adds Gaussian noise of a multiple of the
//     typical distance between honest updates to the copy, so that it is
//     no near-copy of its model.
//
// The attacks built from honest updates are omniscient: they need the
// honest updates of the sync. Package worker gets them through a side
// channel that only a test cluster provides (docs/threat-model.md says
// which).
package attack

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// ErrInput reports vectors an attack cannot be built from.
var ErrInput = errors.New("attack: invalid input")

// DefaultIPMEpsilon is ε of IPM by default: −2·μ, the default of ByzFL
// (EPFL's library of Byzantine-robust learning, the attacks of Allouah et
// al., "Fixing by Mixing", AISTATS 2023). Xie et al. used ε = 0.1 against
// the median and Krum, so small a vector that a norm test flags it every
// time (docs/threat-model.md); at ε = 2 its norm is that of a typical
// update.
const DefaultIPMEpsilon = 2.0

// LiteratureALIEZ is the z of ALIE that ByzFL uses by default (τ = 1.5)
// and DefaultALIEZ's floor.
const LiteratureALIEZ = 1.5

// DefaultMimicNoise is NoisyMimic's scale by default: noise of 0.6 × the
// typical distance between honest updates puts the copy beyond the 0.5 ×
// that distance under which the judge's outlier tests call a delta a
// near-copy (merge.DefaultTwinFactor), and well inside the spread of the
// honest updates.
const DefaultMimicNoise = 0.6

// DefaultALIEZ is the z ALIE uses unless told otherwise: the paper's z
// (ALIEZ) where it is above LiteratureALIEZ, 1.5 otherwise. The paper's
// formula is built for many contributors (n = 50 in its experiments: z =
// 1.75 for f = 24); with the few a robust merge accepts here it is small
// or 0 — for any 3f < n it is below Φ⁻¹(5/6) ≈ 0.967, and 0 for f = 1 of
// 4 (the colluders send the honest mean, which cannot hurt). So for every
// configuration a job with f declared can have the default is 1.5, the
// z the literature's benchmarks use, and the formula decides only beyond
// (a mean merge, or a caller's own n and f).
func DefaultALIEZ(n, f int) float64 {
	z, err := ALIEZ(n, f)
	if err != nil || z < LiteratureALIEZ {
		return LiteratureALIEZ
	}
	return z
}

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

// TypicalDistance returns the median of the L2 distances between every
// two of the vectors (computed in float64): how far apart honest updates
// typically are. It is 0 for a single vector.
func TypicalDistance(vs [][]float32) (float64, error) {
	if _, _, err := Moments(vs); err != nil { // none, or ragged
		return 0, err
	}
	var ds []float64
	for a := range vs {
		for b := a + 1; b < len(vs); b++ {
			var s float64
			for j, x := range vs[a] {
				d := float64(x) - float64(vs[b][j])
				s += d * d
			}
			ds = append(ds, math.Sqrt(s))
		}
	}
	if len(ds) == 0 {
		return 0, nil
	}
	slices.Sort(ds)
	m := len(ds)
	if m%2 == 1 {
		return ds[m/2], nil
	}
	return (ds[m/2-1] + ds[m/2]) / 2, nil
}

// NoisyMimic returns a copy of the first honest vector (as Mimic) plus a
// Gaussian vector from r of norm scale × TypicalDistance(honest): a copy
// the twin test does not see, whose distance to its model is exactly that
// norm (before the caller clips it). scale must be positive; with a
// single honest vector there is no distance to scale and the copy is
// exact.
func NoisyMimic(r *rand.Rand, honest [][]float32, scale float64) ([]float32, error) {
	if !(scale > 0) || math.IsInf(scale, 1) {
		return nil, fmt.Errorf("%w: noisy mimic's scale %v: want a positive number", ErrInput, scale)
	}
	t, err := TypicalDistance(honest)
	if err != nil {
		return nil, err
	}
	out := append([]float32(nil), honest[0]...)
	for j, x := range Noise(r, len(out), scale*t) {
		out[j] += x
	}
	return out, nil
}

// Adaptive ALIE's search: z on a grid of AdaptiveStep over [0,
// MaxAdaptiveZ], then bisection to AdaptiveTol.
const (
	MaxAdaptiveZ = 8.0
	AdaptiveStep = 0.25
	AdaptiveTol  = 1e-3
)

// ErrNoHiding reports that no z hides ALIE from the test AdaptiveALIE was
// given.
var ErrNoHiding = fmt.Errorf("attack: no z in [0, %v] passes the test", MaxAdaptiveZ)

// AdaptiveALIE returns ALIE's vector μ − z·σ of the honest vectors, clipped
// to norm clip (no clip for clip ≤ 0) as the caller will send it, for the
// largest z that hidden accepts, and that z. It evaluates hidden at z = 0,
// AdaptiveStep, 2·AdaptiveStep, … up to MaxAdaptiveZ; takes the largest z
// accepted; and, unless that is MaxAdaptiveZ, bisects between it and the
// next grid point (refused) until they are AdaptiveTol apart, returning
// the accepted end: so hidden accepts the vector of the z returned and
// refuses that of some z at most AdaptiveTol larger. (A test may refuse
// small z too — the outlier tests flag a vector too close to the centre —
// so the search scans the grid instead of starting at 0.) It returns
// ErrNoHiding when hidden accepts no grid point, and hidden's error as
// soon as it returns one.
func AdaptiveALIE(honest [][]float32, clip float64, hidden func(v []float32) (bool, error)) ([]float32, float64, error) {
	mean, std, err := Moments(honest)
	if err != nil {
		return nil, 0, err
	}
	at := func(z float64) []float32 {
		v := make([]float32, len(mean))
		for j := range v {
			v[j] = float32(mean[j] - z*std[j])
		}
		Clip(v, clip)
		return v
	}
	steps := int(math.Round(MaxAdaptiveZ / AdaptiveStep))
	best := -1
	var bestV []float32
	for i := 0; i <= steps; i++ {
		v := at(float64(i) * AdaptiveStep)
		ok, err := hidden(v)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			best, bestV = i, v
		}
	}
	if best < 0 {
		return nil, 0, ErrNoHiding
	}
	lo := float64(best) * AdaptiveStep
	if best == steps {
		return bestV, lo, nil
	}
	hi := lo + AdaptiveStep
	for hi-lo > AdaptiveTol {
		mid := (lo + hi) / 2
		v := at(mid)
		ok, err := hidden(v)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			lo, bestV = mid, v
		} else {
			hi = mid
		}
	}
	return bestV, lo, nil
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
