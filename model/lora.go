package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/zooai/gym/prng"
)

// LoRAConfig says where adapters go and how large they are.
type LoRAConfig struct {
	Rank    int      `json:"lora_rank"`
	Alpha   float64  `json:"lora_alpha"`
	Targets []string `json:"target_modules"` // subset of q, k, v, o, fc1, fc2
}

// Validate reports whether c can be applied to a model of shape mc.
func (c LoRAConfig) Validate() error {
	if c.Rank < 1 {
		return fmt.Errorf("%w: lora_rank %d < 1", ErrConfig, c.Rank)
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return fmt.Errorf("%w: lora_alpha %v must be positive and finite", ErrConfig, c.Alpha)
	}
	if len(c.Targets) == 0 {
		return fmt.Errorf("%w: no LoRA target modules", ErrConfig)
	}
	seen := map[Module]bool{}
	for _, t := range c.Targets {
		m, err := ParseModule(t)
		if err != nil {
			return err
		}
		if seen[m] {
			return fmt.Errorf("%w: LoRA target %q given twice", ErrConfig, t)
		}
		seen[m] = true
	}
	return nil
}

// Adapter holds LoRA matrices: for layer l and module m, A[l][m] is
// [rank, in] and B[l][m] is [out, rank]; both are nil for modules that are
// not targeted.
type Adapter struct {
	Model Config
	Cfg   LoRAConfig
	A, B  [][numModules][]float32
}

// Scale is alpha/rank, the factor applied to the adapter's output.
func (a *Adapter) Scale() float32 { return float32(a.Cfg.Alpha / float64(a.Cfg.Rank)) }

// NewAdapter returns a zero adapter (every A and B zero) for a model of shape mc.
func NewAdapter(mc Config, c LoRAConfig) (*Adapter, error) {
	if err := mc.Validate(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.Targets = slices.Clone(c.Targets)
	a := &Adapter{Model: mc, Cfg: c, A: make([][numModules][]float32, mc.Layers), B: make([][numModules][]float32, mc.Layers)}
	for _, t := range c.Targets {
		m, _ := ParseModule(t)
		in, out := mc.dims(m)
		for l := 0; l < mc.Layers; l++ {
			a.A[l][m] = make([]float32, c.Rank*in)
			a.B[l][m] = make([]float32, out*c.Rank)
		}
	}
	return a, nil
}

// InitAdapter returns an adapter with A ~ normal(0, 1/in) and B = 0 (the
// standard LoRA initialisation: the adapted model starts equal to the base).
func InitAdapter(mc Config, c LoRAConfig, seed uint64) (*Adapter, error) {
	a, err := NewAdapter(mc, c)
	if err != nil {
		return nil, err
	}
	r := prng.New(seed, 0x6c6f7261) // "lora"
	for l := range a.A {
		for m := range numModules {
			if a.A[l][m] == nil {
				continue
			}
			in, _ := mc.dims(m)
			std := 1 / math.Sqrt(float64(in))
			for i := range a.A[l][m] {
				a.A[l][m][i] = float32(r.Norm() * std)
			}
		}
	}
	return a, nil
}

// Tensors returns views of the adapter's matrices in a fixed order (layer,
// then module, A before B), named lora.<module>.<A|B>.weight, for example
// lora.blocks.0.attn.q.A.weight.
func (a *Adapter) Tensors() []Tensor {
	var ts []Tensor
	for l := range a.A {
		for m := range numModules {
			if a.A[l][m] == nil {
				continue
			}
			in, out := a.Model.dims(m)
			p := "lora." + m.path(l)
			ts = append(ts,
				Tensor{p + ".A.weight", []int{a.Cfg.Rank, in}, a.A[l][m]},
				Tensor{p + ".B.weight", []int{out, a.Cfg.Rank}, a.B[l][m]})
		}
	}
	return ts
}

// Clone returns a deep copy of a.
func (a *Adapter) Clone() *Adapter {
	c, _ := NewAdapter(a.Model, a.Cfg)
	dst := c.Tensors()
	for i, t := range a.Tensors() {
		copy(dst[i].Data, t.Data)
	}
	return c
}

// ZeroLike returns a zero adapter of the same shape as a (for gradients).
func (a *Adapter) ZeroLike() *Adapter {
	c, _ := NewAdapter(a.Model, a.Cfg)
	return c
}

// NumParams is the number of scalars in a.
func (a *Adapter) NumParams() int { return numel(a.Tensors()) }
