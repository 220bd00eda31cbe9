package jobconf

import (
	"fmt"

	"github.com/zooai/gym/llama"
)

// Outer is a job's outer optimiser (DiLoCo): at every sync the averaged
// update Δ (the ring's mean of the workers' contributions, or the judge's
// merge of the sync's deltas into the checkpoint of record) is the
// pseudo-gradient −Δ of SGD with Nesterov momentum μ and rate η:
//
//	b ← μ·b + Δ
//	θ ← θ + η·(Δ + μ·b)
//
// (PyTorch's SGD(nesterov=True) with dampening 0, the sign turned.) Its
// state b starts at zero with every epoch, so it is a pure function of the
// checkpoint of record and the epoch's averaged updates: the worker, the
// judge's ring reconstruction and its merge each run one, and the judge's
// replay of a sync sees exactly what the worker saw. A nil *Outer is the
// plain average (θ ← θ + Δ), the behaviour of jobs without an outer
// optimiser.
//
// Every value is computed in float64 from the float32 operands and rounded
// once to float32, with explicit conversions between the operations so no
// compiler may fuse them: the results are the same bits on every platform.
type Outer struct {
	LR, Momentum float64
	b            []float32
}

// NewOuter returns the plan's outer optimiser at the start of an epoch
// (nil: the plain average).
func (p Plan) NewOuter() *Outer {
	if p.OuterLR == 0 {
		return nil
	}
	return &Outer{LR: p.OuterLR, Momentum: p.OuterMomentum}
}

// Clone returns an independent copy of o (nil for nil).
func (o *Outer) Clone() *Outer {
	if o == nil {
		return nil
	}
	c := *o
	c.b = append([]float32(nil), o.b...)
	return &c
}

// Buffer returns the momentum buffer b (nil before the first step); it
// is not a copy.
func (o *Outer) Buffer() []float32 {
	if o == nil {
		return nil
	}
	return o.b
}

// Step advances the state by the averaged update d and returns the
// update to apply (d itself for nil).
func (o *Outer) Step(d []float32) ([]float32, error) {
	if o == nil {
		return d, nil
	}
	if o.b == nil {
		o.b = make([]float32, len(d))
	}
	if len(o.b) != len(d) {
		return nil, fmt.Errorf("%w: outer optimiser of %d values given an update of %d", ErrJob, len(o.b), len(d))
	}
	u := make([]float32, len(d))
	mu, lr := o.Momentum, o.LR
	for i, x := range d {
		dx := float64(x)
		b := float32(float64(mu*float64(o.b[i])) + dx)
		o.b[i] = b
		u[i] = float32(lr * float64(dx+float64(mu*float64(b))))
	}
	return u, nil
}

// Apply advances o by d and adds the resulting update into a (d itself
// when o is nil: the plain average, bit for bit what AddFlat does).
func (o *Outer) Apply(a *llama.Adapter, d []float32) error {
	u, err := o.Step(d)
	if err != nil {
		return err
	}
	return AddFlat(a, u)
}
