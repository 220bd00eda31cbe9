package merge

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Outlier bounds, as multiples of the batch's medians (measured on honest
// gym up runs, docs/threat-model.md: an honest delta's distance to the
// coordinate-wise median was 0.72–1.31 × the median distance, its nearest
// other delta at least 0.79 × the typical distance between deltas away,
// its norm 0.84–1.31 × the median norm).
const (
	DefaultFarFactor   = 2.0 // distance to the centre above this: too far (noise)
	DefaultNearFactor  = 0.5 // distance to the centre below this: too central (ALIE)
	DefaultTwinFactor  = 0.5 // another delta closer than this × the typical distance: a copy (mimic, colluders sending one vector)
	DefaultSmallFactor = 0.5 // norm below this × the median norm (IPM)
	DefaultLargeFactor = 2.0 // norm above this × the median norm
)

// OutlierConfig says when a contribution is an outlier; zero fields take
// the defaults above, a negative field switches that test off.
type OutlierConfig struct {
	Far, Near, Twin, Small, Large float64
}

// SingleStepOutliers are the bounds for contributions of one optimiser
// step each (synchronous data parallelism: a sync every step, plain SGD
// inside, docs/byzantine.md), where an honest contribution is one noisy
// gradient. On the 2,040 honest deltas of seven gym up runs (four workers,
// seeds 0–4; seven workers, seeds 0–1; two epochs each; gym bench
// outliers) an honest delta was 0.20–17× the median distance from the
// centre (99% below 3.4×), its norm 5e-5–15× the median (a worker whose
// groups all had one reward sends the KL term's gradient alone), its
// nearest other delta 0.11–10× the typical distance away, and the default
// bounds flagged 19% of them. Far and large at 6× keep the in-bound noise
// (16–25× both) and flag 0.2% of the honest deltas (single-step spikes);
// the near and small tests are off (ALIE, IPM and the noisy mimic sit
// inside the honest spread of single steps: the keyed share catches them
// while the epoch runs), and the twin test takes only copies closer than
// 0.1× the typical distance (a mimic sends 0).
var SingleStepOutliers = OutlierConfig{Far: 6, Near: -1, Twin: 0.1, Small: -1, Large: 6}

// BoundsFor is the outlier configuration of a job: c's bounds, each zero
// field taken from SingleStepOutliers when the job's contributions are
// single optimiser steps (jobconf.Plan.SingleStep), else left to the
// defaults.
func BoundsFor(singleStep bool, c OutlierConfig) OutlierConfig {
	if singleStep {
		return c.Or(SingleStepOutliers)
	}
	return c
}

// Or returns c with each zero field taken from d.
func (c OutlierConfig) Or(d OutlierConfig) OutlierConfig {
	pick := func(a, b float64) float64 {
		if a == 0 {
			return b
		}
		return a
	}
	return OutlierConfig{Far: pick(c.Far, d.Far), Near: pick(c.Near, d.Near), Twin: pick(c.Twin, d.Twin), Small: pick(c.Small, d.Small), Large: pick(c.Large, d.Large)}
}

// Outlier is a contribution that stands apart from the batch, and why.
type Outlier struct {
	Node   string
	Reason string // e.g. "far from the centre (3.2 × the median distance)"
}

// Outliers names the contributions of one sync that stand apart from the
// others in a way no honest delta did in measurement: far from the
// coordinate-wise median (the robust centre) or suspiciously close to it,
// a near-copy of another contribution, or a norm far from the median norm.
// The robust statistics (medians over contributions) hold while fewer than
// half the contributions are Byzantine. An outlier is not proof of
// anything: the judge re-executes it (epoch.Evaluate), and only a replay
// that differs is punished, so a false alarm costs a replay and nothing
// else. Fewer than 3 contributions have no centre to stand apart from:
// Outliers returns none.
//
// Like Merge it is a pure function, its result the same for any order of
// in (sorted by node; outliers in node order).
func Outliers(c OutlierConfig, in []Input) ([]Outlier, error) {
	return outliers(c, in, nil)
}

func outliers(c OutlierConfig, in []Input, ratios *[]Ratios) ([]Outlier, error) {
	n := len(in)
	if n < 3 {
		return nil, nil
	}
	in = slices.Clone(in)
	slices.SortFunc(in, func(a, b Input) int { return cmp.Compare(a.Node, b.Node) })
	dim := len(in[0].Vec)
	for i, x := range in {
		if len(x.Vec) != dim {
			return nil, fmt.Errorf("%w: node %q has %d elements, node %q has %d", ErrInput, x.Node, len(x.Vec), in[0].Node, dim)
		}
		if i > 0 && x.Node == in[i-1].Node {
			return nil, fmt.Errorf("%w: node %q contributes twice", ErrInput, x.Node)
		}
	}
	def := func(v, d float64) float64 {
		if v == 0 {
			return d
		}
		return v
	}
	far, near, twin := def(c.Far, DefaultFarFactor), def(c.Near, DefaultNearFactor), def(c.Twin, DefaultTwinFactor)
	small, large := def(c.Small, DefaultSmallFactor), def(c.Large, DefaultLargeFactor)

	centre := make([]float64, dim)
	col := make([]float64, n)
	for j := range centre {
		for i, x := range in {
			col[i] = float64(x.Vec[j])
		}
		centre[j] = median(col)
	}
	dist := make([]float64, n) // to the centre
	norms := make([]float64, n)
	for i, x := range in {
		var s float64
		for j, v := range x.Vec {
			d := float64(v) - centre[j]
			s += float64(d * d) // rounded: never fused
		}
		dist[i] = math.Sqrt(s)
		norms[i] = Norm(x.Vec)
	}
	// pair[a][b]: the distance between two contributions. The twin test's
	// scale is the median over contributions of each one's median
	// distance to the others: copies collapse the centre (and with it the
	// median distance to it) but not this.
	pair := make([][]float64, n)
	for a := range pair {
		pair[a] = make([]float64, n)
	}
	for a := range in {
		for b := a + 1; b < n; b++ {
			var s float64
			for j, v := range in[a].Vec {
				d := float64(v) - float64(in[b].Vec[j])
				s += float64(d * d)
			}
			pair[a][b] = math.Sqrt(s)
			pair[b][a] = pair[a][b]
		}
	}
	nearest, typical := make([]float64, n), make([]float64, n)
	for a := range in {
		others := slices.Delete(slices.Clone(pair[a]), a, a+1)
		nearest[a], typical[a] = slices.Min(others), median(others)
	}
	md, mn, mp := median(slices.Clone(dist)), median(slices.Clone(norms)), median(typical)
	var out []Outlier
	for i, x := range in {
		var why string
		switch {
		case mp > 0 && twin > 0 && nearest[i] < twin*mp:
			why = fmt.Sprintf("a near-copy of another delta (%.3g × the typical distance apart)", nearest[i]/mp)
		case md > 0 && far > 0 && dist[i] > far*md:
			why = fmt.Sprintf("far from the centre (%.3g × the median distance)", dist[i]/md)
		case md > 0 && near > 0 && dist[i] < near*md:
			why = fmt.Sprintf("close to the centre (%.3g × the median distance)", dist[i]/md)
		case mn > 0 && small > 0 && norms[i] < small*mn:
			why = fmt.Sprintf("small (%.3g × the median norm)", norms[i]/mn)
		case mn > 0 && large > 0 && norms[i] > large*mn:
			why = fmt.Sprintf("large (%.3g × the median norm)", norms[i]/mn)
		}
		if why != "" {
			out = append(out, Outlier{Node: x.Node, Reason: why})
		}
	}
	if ratios != nil {
		for i, x := range in {
			r := Ratios{Node: x.Node}
			if md > 0 {
				r.Distance = dist[i] / md
			}
			if mn > 0 {
				r.Norm = norms[i] / mn
			}
			if mp > 0 {
				r.Nearest = nearest[i] / mp
			}
			*ratios = append(*ratios, r)
		}
	}
	return out, nil
}

// Ratios are the statistics Outliers compares with its bounds, for one
// contribution: its distance to the coordinate-wise median over the median
// distance, its norm over the median norm, its nearest other contribution's
// distance over the typical distance apart (0 where the scale is 0).
type Ratios struct {
	Node                    string
	Distance, Norm, Nearest float64
}

// OutlierRatios is Outliers that also returns every contribution's
// Ratios, in node order (none for fewer than 3 contributions): what a
// measurement of the bounds (gym bench outliers) reads.
func OutlierRatios(c OutlierConfig, in []Input) ([]Outlier, []Ratios, error) {
	var rs []Ratios
	out, err := outliers(c, in, &rs)
	return out, rs, err
}
