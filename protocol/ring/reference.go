package ring

import (
	"errors"
	"fmt"
)

// ErrReference is wrapped by every error Reference returns.
var ErrReference = errors.New("ring: cannot compute the reference reduction")

// Reference returns exactly, bit for bit, what AllReduce over a ring whose
// member i contributes inputs[i] leaves in every buffer (fp32 wire). The
// orchestrator uses it to recompute, from the deltas the members submitted,
// what an honest ring should have produced.
//
// Float32 addition is not associative, so the order matters: the vector is
// cut into the same N chunks as AllReduce (plan.chunk), and chunk c is
// summed the way scatter-reduce sums it, starting at member c and adding
// each next member's values in ring order,
//
//	((x[c] + x[c+1]) + x[c+2]) + … + x[c+N−1]   (indices mod N)
//
// in float32, then divided by float32(N) for Mean. Segments do not change
// this: they split a chunk into element ranges, and every element still
// passes through the same members in the same order. A ring of one member
// returns its input unchanged. NaN payload bits are not promised.
func Reference(inputs [][]float32, op Op) ([]float32, error) {
	return ReferenceWire(inputs, op, FP32)
}

// ReferenceWire is Reference for a given wire format. With BF16 every
// partial sum is rounded to bfloat16 before the next member adds to it (it
// crossed the wire), and the finished sum (or mean) is rounded once more,
// as the owner of each chunk does before gathering.
func ReferenceWire(inputs [][]float32, op Op, wire Wire) ([]float32, error) {
	n := len(inputs)
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: no inputs", ErrReference)
	case op > Mean:
		return nil, fmt.Errorf("%w: unknown op %d", ErrReference, op)
	case wire.Size() == 0:
		return nil, fmt.Errorf("%w: unknown wire %d", ErrReference, wire)
	}
	total := len(inputs[0])
	for i, v := range inputs {
		if len(v) != total {
			return nil, fmt.Errorf("%w: input %d has %d elements, input 0 has %d", ErrReference, i, len(v), total)
		}
	}
	out := make([]float32, total)
	if n == 1 { // AllReduce returns at once: no division, no rounding
		copy(out, inputs[0])
		return out, nil
	}
	round := func(f float32) float32 { return f }
	if wire == BF16 {
		round = RoundBF16
	}
	p := newPlan(n, 0, total, 1)
	d := float32(n)
	for c := range n {
		lo, hi := p.chunk(c)
		for j := lo; j < hi; j++ {
			acc := inputs[c][j]
			for s := 1; s < n; s++ {
				acc = round(acc) + inputs[(c+s)%n][j] // received + own, as in apply
			}
			if op == Mean {
				acc /= d
			}
			out[j] = round(acc)
		}
	}
	return out, nil
}

// ReferenceGroups is ReferenceWire for a configuration with Groups: what
// the two-level all-reduce leaves in every buffer, bit for bit, from the
// inputs in the configuration's member order. With fewer than two groups
// it is ReferenceWire.
//
// The order (docs/ring.md, "Summation order"): the vector is cut into S
// shards (S = the largest group); in group k (g members from member b) the
// ring's chunk c is a run of shards, and each of its elements is summed
// as the group's reduce-scatter sums it,
//
//	P_k = ((x[b+c] + x[b+c+1]) + …) + x[b+c+g−1]   (member indices mod g within the group)
//
// (a group of one: its input), with no division and no final rounding. Each
// shard is then cut into G balanced sub-chunks and sub-chunk d summed
// across the groups in group order starting at group d,
//
//	((P_d + P_{d+1}) + …) + P_{d+G−1}               (group indices mod G)
//
// and divided by float32(N) for Mean, N the whole ring. With BF16 every
// partial sum is rounded before the next member adds to it, and the
// finished value once more.
func ReferenceGroups(inputs [][]float32, groups []int, op Op, wire Wire) ([]float32, error) {
	if len(groups) < 2 {
		return ReferenceWire(inputs, op, wire)
	}
	n := len(inputs)
	switch {
	case op > Mean:
		return nil, fmt.Errorf("%w: unknown op %d", ErrReference, op)
	case wire.Size() == 0:
		return nil, fmt.Errorf("%w: unknown wire %d", ErrReference, wire)
	}
	sum := 0
	for k, g := range groups {
		if g < 1 {
			return nil, fmt.Errorf("%w: group %d has %d members", ErrReference, k, g)
		}
		sum += g
	}
	if sum != n {
		return nil, fmt.Errorf("%w: groups hold %d members, %d inputs", ErrReference, sum, n)
	}
	total := len(inputs[0])
	for i, v := range inputs {
		if len(v) != total {
			return nil, fmt.Errorf("%w: input %d has %d elements, input 0 has %d", ErrReference, i, len(v), total)
		}
	}
	round := func(f float32) float32 { return f }
	if wire == BF16 {
		round = RoundBF16
	}
	l := newLayout(groups)
	G := len(groups)
	P := make([][]float32, G)
	for k, g := range groups {
		b := l.start[k]
		if g == 1 {
			P[k] = inputs[b]
			continue
		}
		P[k] = make([]float32, total)
		bounds := l.groupBounds(k, total)
		for c := range g {
			for j := bounds[c]; j < bounds[c+1]; j++ {
				acc := inputs[b+c][j]
				for s := 1; s < g; s++ {
					acc = round(acc) + inputs[b+(c+s)%g][j]
				}
				P[k][j] = acc
			}
		}
	}
	out := make([]float32, total)
	d := float32(n)
	for s := range l.shards {
		lo, hi := l.shard(s, total)
		cp := newPlan(G, 0, hi-lo, 1)
		for c := range G {
			clo, chi := cp.chunk(c)
			for j := lo + clo; j < lo+chi; j++ {
				acc := P[c][j]
				for r := 1; r < G; r++ {
					acc = round(acc) + P[(c+r)%G][j]
				}
				if op == Mean {
					acc /= d
				}
				out[j] = round(acc)
			}
		}
	}
	return out, nil
}
