package jobconf

import (
	"fmt"
	"math"

	"github.com/zooai/gym/model/llama"
)

// Outer is a job's outer optimiser: at every sync the averaged update Δ
// (the ring's mean of the workers' contributions, or the judge's merge of
// the sync's deltas into the checkpoint of record) is the pseudo-gradient
// −Δ of one of two rules. The default (DiLoCo) is SGD with Nesterov
// momentum μ and rate η:
//
//	b ← μ·b + Δ
//	θ ← θ + η·(Δ + μ·b)
//
// (PyTorch's SGD(nesterov=True) with dampening 0, the sign turned.) With
// Adam set it is Adam (β 0.9 and 0.99, ε 1e-8, no weight decay) at rate η,
// its moments kept of Δ (the first moment of −Δ is −m):
//
//	m ← β1·m + (1−β1)·Δ,  v ← β2·v + (1−β2)·Δ²
//	θ ← θ + η·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε)
//
// Under workers that step plain SGD and sync every step, that is AdamW on
// the ring's averaged gradient (docs/data-parallel.md). The Nesterov
// state starts at zero with every epoch; Adam's carries over, published
// with each checkpoint of record (OuterFile, Plan.ResumeOuter). Either way
// it is a pure function of the checkpoint of record (with its state) and
// the epoch's averaged updates: the worker, the judge's ring
// reconstruction and its merge each run one, and the judge's replay of a
// sync sees exactly what the worker saw. A nil *Outer is the
// plain average (θ ← θ + Δ), the behaviour of jobs without an outer
// optimiser.
//
// Every value is computed in float64 from the float32 operands and rounded
// once to float32, with explicit conversions between the operations so no
// compiler may fuse them: the results are the same bits on every platform.
type Outer struct {
	LR, Momentum float64
	// Adam makes the rule Adam (Momentum is then unused).
	Adam bool
	b    []float32 // the Nesterov buffer, or Adam's first moment m
	v    []float32 // Adam's second moment
	// pow1 and pow2 are β1ᵗ and β2ᵗ after t Adam steps, by repeated
	// multiplication (math.Pow is not promised the same bits everywhere).
	pow1, pow2 float64
	t          int // Adam steps taken
}

// Adam's constants for the outer rule.
const (
	outerBeta1, outerBeta2, outerEps = 0.9, 0.99, 1e-8
)

// NewOuter returns the plan's outer optimiser at the start of an epoch
// (nil: the plain average).
func (p Plan) NewOuter() *Outer {
	if p.OuterLR == 0 {
		return nil
	}
	return &Outer{LR: p.OuterLR, Momentum: p.OuterMomentum, Adam: p.OuterAdam}
}

// Clone returns an independent copy of o (nil for nil).
func (o *Outer) Clone() *Outer {
	if o == nil {
		return nil
	}
	c := *o
	c.b = append([]float32(nil), o.b...)
	if o.v != nil {
		c.v = append([]float32(nil), o.v...)
	}
	return &c
}

// Buffer returns the momentum buffer b, Adam's first moment with Adam
// set (nil before the first step); it is not a copy.
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
	if o.Adam {
		o.adam(d, u)
		return u, nil
	}
	mu, lr := o.Momentum, o.LR
	for i, x := range d {
		dx := float64(x)
		b := float32(float64(mu*float64(o.b[i])) + dx)
		o.b[i] = b
		u[i] = float32(lr * float64(dx+float64(mu*float64(b))))
	}
	return u, nil
}

// adam is Step's Adam rule: it advances the moments by d and writes the
// update into u. Every product is converted explicitly before it is added,
// so no compiler may fuse the two into one rounding.
func (o *Outer) adam(d, u []float32) {
	if o.v == nil {
		o.v = make([]float32, len(d))
		o.pow1, o.pow2 = 1, 1
	}
	o.pow1 = float64(o.pow1 * outerBeta1)
	o.pow2 = float64(o.pow2 * outerBeta2)
	o.t++
	bc1, bc2 := 1-o.pow1, 1-o.pow2
	for i, x := range d {
		dx := float64(x)
		m := float32(float64(outerBeta1*float64(o.b[i])) + float64((1-outerBeta1)*dx))
		v := float32(float64(outerBeta2*float64(o.v[i])) + float64(float64((1-outerBeta2)*dx)*dx))
		o.b[i], o.v[i] = m, v
		den := math.Sqrt(float64(v)/bc2) + outerEps
		u[i] = float32(o.LR * (float64(m) / bc1 / den))
	}
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
