package llama

import "math"

// invFreq returns the rotary inverse frequencies of c (head_dim/2 of them),
// computed in float32 step by step as transformers computes them
// (_compute_default_rope_parameters, _compute_llama3_parameters).
func invFreq(c Config) []float32 {
	dim := c.HeadDim
	inv := make([]float32, dim/2)
	for i := range inv {
		e := float32(2*i) / float32(dim)
		inv[i] = 1 / float32(math.Pow(c.RopeTheta, float64(e)))
	}
	s := c.RopeScaling
	if s == nil {
		return inv
	}
	old := float64(s.OriginalMaxPositions)
	lowWavelen := float32(old / s.LowFreqFactor)
	highWavelen := float32(old / s.HighFreqFactor)
	factor := float32(s.Factor)
	low, denom := float32(s.LowFreqFactor), float32(s.HighFreqFactor-s.LowFreqFactor)
	twoPi, oldF := float32(2*math.Pi), float32(old)
	for i, f := range inv {
		// torch evaluates scalar / tensor as tensor.reciprocal() * scalar.
		wavelen := float32((1 / f) * twoPi)
		g := f
		if wavelen > lowWavelen {
			g = f / factor
		}
		if !(wavelen < highWavelen) && !(wavelen > lowWavelen) {
			smooth := (float32((1/wavelen)*oldF) - low) / denom
			g = float32(float32((1-smooth)*g)/factor) + float32(smooth*g)
		}
		inv[i] = g
	}
	return inv
}

// ropeTable holds cos and sin of position·invFreq for a run of positions,
// [positions, head_dim/2] each.
type ropeTable struct {
	half     int
	cos, sin []float32
}

// newRopeTable tabulates positions p0 … p0+n-1.
func newRopeTable(inv []float32, p0, n int) ropeTable {
	half := len(inv)
	t := ropeTable{half: half, cos: make([]float32, n*half), sin: make([]float32, n*half)}
	for p := range n {
		pos := float32(p0 + p)
		for i, f := range inv {
			a := float64(float32(pos * f))
			t.cos[p*half+i] = float32(math.Cos(a))
			t.sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return t
}

// rotate applies the rotation of table row p to every head of x (heads
// vectors of head_dim), in transformers' rotate_half convention:
// x' = x·cos + rotate_half(x)·sin, rotate_half(x) = (-x₂, x₁).
func (t ropeTable) rotate(x []float32, heads, p int) {
	half := t.half
	cs, sn := t.cos[p*half:(p+1)*half], t.sin[p*half:(p+1)*half]
	for h := range heads {
		v := x[h*2*half : (h+1)*2*half]
		x1, x2 := v[:half], v[half:]
		for i := range half {
			a, b := x1[i], x2[i]
			x1[i] = float32(a*cs[i]) - float32(b*sn[i])
			x2[i] = float32(b*cs[i]) + float32(a*sn[i])
		}
	}
}
