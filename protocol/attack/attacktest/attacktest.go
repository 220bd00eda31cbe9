// Package attacktest makes the honest-looking updates the tests of the
// in-bound attacks and of the defences against them share.
package attacktest

import (
	"math/rand/v2"

	"github.com/zooai/gym/protocol/attack"
)

// Batch makes m honest-looking updates of dim values: a shared direction of
// norm 1 plus each node's own Gaussian part of norm about spread (LoRA
// deltas of different prompts agree on a direction and differ a lot).
func Batch(r *rand.Rand, m, dim int, spread float64) [][]float32 {
	g := attack.Noise(r, dim, 1)
	out := make([][]float32, m)
	for i := range out {
		v := attack.Noise(r, dim, spread)
		for j := range v {
			v[j] += g[j]
		}
		out[i] = v
	}
	return out
}
