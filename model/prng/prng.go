// Package prng is the deterministic pseudo-random number generator the
// trainer uses: a PCG stream (math/rand/v2's PCG, whose output is fixed by
// its algorithm) with integer, uniform and normal draws derived here rather
// than by math/rand, so a (seed, stream) pair yields the same integers and
// uniforms on every Go version and platform (normal draws also go through
// math.Log and math.Cos). Everything that must be replayable (weight
// initialisation, data indices, sampling) draws from a Source derived from
// the job seed.
package prng

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// Source is a deterministic random stream. It is not safe for concurrent use.
type Source struct {
	pcg *rand.PCG
}

// New returns the stream identified by seed and a list of labels (for
// example worker and step): different label lists give independent streams.
func New(seed uint64, labels ...uint64) *Source {
	s1, s2 := mix(seed^0x9e3779b97f4a7c15), mix(seed+0x632be59bd9b4e019)
	for _, l := range labels {
		s1 = mix(s1 ^ mix(l+0x94d049bb133111eb))
		s2 = mix(s2 + mix(l^0xbf58476d1ce4e5b9))
	}
	return &Source{pcg: rand.NewPCG(s1, s2)}
}

// mix is the splitmix64 finaliser.
func mix(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// Uint64 returns the next 64 random bits.
func (s *Source) Uint64() uint64 { return s.pcg.Uint64() }

// IntN returns a uniform integer in [0, n) (Lemire's method, unbiased). It
// panics if n <= 0.
func (s *Source) IntN(n int) int {
	if n <= 0 {
		panic("prng: IntN with n <= 0")
	}
	bound := uint64(n)
	threshold := -bound % bound
	for {
		hi, lo := bits.Mul64(s.Uint64(), bound)
		if lo >= threshold {
			return int(hi)
		}
	}
}

// Float64 returns a uniform number in [0, 1).
func (s *Source) Float64() float64 { return float64(s.Uint64()>>11) * 0x1p-53 }

// Norm returns a standard normal number (Box–Muller; one draw per call).
func (s *Source) Norm() float64 {
	u1 := 1 - s.Float64() // (0, 1]
	u2 := s.Float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}
