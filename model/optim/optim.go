// Package optim holds the optimiser the trainer uses: AdamW (decoupled
// weight decay) with a learning-rate schedule of linear warmup followed by a
// constant rate or a cosine decay. It works on flat float32 slices; the
// update is element-wise, so it is deterministic.
package optim

import (
	"errors"
	"fmt"
	"math"
)

// ErrConfig reports invalid optimiser settings.
var ErrConfig = errors.New("optim: invalid config")

// Schedule maps a 1-based step to a learning rate.
type Schedule struct {
	LR     float64 // peak learning rate
	Warmup int     // steps of linear warmup from LR/Warmup up to LR
	// Total > 0 decays the rate from LR to MinLR along a half cosine
	// between the end of warmup and step Total; 0 keeps it constant.
	Total int
	MinLR float64
}

// Validate reports whether s is usable.
func (s Schedule) Validate() error {
	if !(s.LR > 0) || math.IsInf(s.LR, 0) {
		return fmt.Errorf("%w: learning_rate %v must be positive and finite", ErrConfig, s.LR)
	}
	if s.Warmup < 0 || s.Total < 0 || s.MinLR < 0 || s.MinLR > s.LR {
		return fmt.Errorf("%w: warmup %d, total %d, min lr %v", ErrConfig, s.Warmup, s.Total, s.MinLR)
	}
	return nil
}

// At returns the learning rate of step (1-based).
func (s Schedule) At(step int) float64 {
	if step < 1 {
		step = 1
	}
	if step <= s.Warmup {
		return s.LR * float64(step) / float64(s.Warmup)
	}
	if s.Total <= s.Warmup || s.Total == 0 {
		return s.LR
	}
	p := math.Min(1, float64(step-s.Warmup)/float64(s.Total-s.Warmup))
	return s.MinLR + (s.LR-s.MinLR)*0.5*(1+math.Cos(math.Pi*p))
}

// Config holds AdamW's hyper-parameters.
type Config struct {
	Beta1, Beta2 float64
	Eps          float64
	WeightDecay  float64 // decoupled: p -= lr·wd·p
	Schedule     Schedule
	// SGD makes Update plain SGD, p ← p·(1 − lr·wd) − lr·g, without
	// moments (the betas and ε are then unused). A screen setting
	// (gym bench quality-sim --inner-sgd): local SGD under an adaptive
	// outer step, FedAdam's split (Reddi et al. 2021).
	SGD bool
}

// DefaultConfig returns β = (0.9, 0.99), ε = 1e-8, no weight decay, lr 1e-3
// without warmup.
func DefaultConfig() Config {
	return Config{Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, Schedule: Schedule{LR: 1e-3}}
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if !(c.Beta1 >= 0 && c.Beta1 < 1 && c.Beta2 >= 0 && c.Beta2 < 1) {
		return fmt.Errorf("%w: betas (%v, %v) must be in [0, 1)", ErrConfig, c.Beta1, c.Beta2)
	}
	if !(c.Eps > 0) || !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0) {
		return fmt.Errorf("%w: eps %v, weight_decay %v", ErrConfig, c.Eps, c.WeightDecay)
	}
	return c.Schedule.Validate()
}

// AdamW is the optimiser state for a fixed list of parameter slices.
type AdamW struct {
	cfg  Config
	Step int         // number of updates applied
	M, V [][]float32 // first and second moments, one per parameter slice
}

// New returns an optimiser for parameter slices of the given lengths.
func New(cfg Config, sizes []int) (*AdamW, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := &AdamW{cfg: cfg, M: make([][]float32, len(sizes)), V: make([][]float32, len(sizes))}
	for i, n := range sizes {
		o.M[i], o.V[i] = make([]float32, n), make([]float32, n)
	}
	return o, nil
}

// Update applies one step to params given their gradients (same shapes as
// at construction) and returns the learning rate it used.
func (o *AdamW) Update(params, grads [][]float32) (float64, error) {
	if len(params) != len(o.M) || len(grads) != len(o.M) {
		return 0, fmt.Errorf("optim: %d params and %d grads for %d slots", len(params), len(grads), len(o.M))
	}
	for i := range params {
		if len(params[i]) != len(o.M[i]) || len(grads[i]) != len(o.M[i]) {
			return 0, fmt.Errorf("optim: slot %d has %d params and %d grads, want %d", i, len(params[i]), len(grads[i]), len(o.M[i]))
		}
	}
	o.Step++
	c := o.cfg
	lr := c.Schedule.At(o.Step)
	if c.SGD {
		flr, decay := float32(lr), float32(1-lr*c.WeightDecay)
		for i, p := range params {
			for j, g := range grads[i] {
				p[j] = p[j]*decay - flr*g
			}
		}
		return lr, nil
	}
	b1, b2 := c.Beta1, c.Beta2
	bc1 := 1 - math.Pow(b1, float64(o.Step))
	bc2 := 1 - math.Pow(b2, float64(o.Step))
	stepSize := float32(lr / bc1)
	decay := float32(1 - lr*c.WeightDecay)
	invBC2 := float32(1 / bc2)
	eps := float32(c.Eps)
	fb1, fb2 := float32(b1), float32(b2)
	for i, p := range params {
		m, v, g := o.M[i], o.V[i], grads[i]
		for j := range p {
			m[j] = fb1*m[j] + (1-fb1)*g[j]
			v[j] = fb2*v[j] + (1-fb2)*g[j]*g[j]
			p[j] = p[j]*decay - stepSize*m[j]/(float32(math.Sqrt(float64(v[j]*invBC2)))+eps)
		}
	}
	return lr, nil
}
