package jobconf_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// The outer optimiser against a hand computation of Nesterov momentum
// (PyTorch's SGD(nesterov=True), dampening 0, on the pseudo-gradient −Δ):
// η = 0.5, μ = 0.8 and the updates Δ1 = (1, −2), Δ2 = (0.5, 0.25):
//
//	b1 = Δ1 = (1, −2)                u1 = 0.5·(Δ1 + 0.8·b1) = (0.9, −1.8)
//	b2 = 0.8·b1 + Δ2 = (1.3, −1.35)  u2 = 0.5·(Δ2 + 0.8·b2) = (0.77, −0.415)
func TestOuterNesterov(t *testing.T) {
	o := jobconf.Plan{OuterLR: 0.5, OuterMomentum: 0.8}.NewOuter()
	u1, err := o.Step([]float32{1, -2})
	if err != nil {
		t.Fatal(err)
	}
	u2, err := o.Step([]float32{0.5, 0.25})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		got, want []float32
	}{{u1, []float32{0.9, -1.8}}, {u2, []float32{0.77, -0.415}}, {o.Buffer(), []float32{1.3, -1.35}}} {
		for i := range c.want {
			if math.Abs(float64(c.got[i]-c.want[i])) > 1e-6 {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
		}
	}
	if _, err := o.Step([]float32{1}); err == nil {
		t.Fatal("an update of another length was taken")
	}
}

// Without momentum and at rate 1 the outer step is the plain average; a
// nil outer optimiser (outer_learning_rate 0) is AddFlat bit for bit.
func TestOuterPlain(t *testing.T) {
	a, d := randomAdapter(t, 1), randomFlat(t, 2)
	want := a.Clone()
	if err := jobconf.AddFlat(want, d); err != nil {
		t.Fatal(err)
	}
	for _, p := range []jobconf.Plan{{}, {OuterLR: 1}} {
		o := p.NewOuter()
		if (o == nil) != (p.OuterLR == 0) {
			t.Fatalf("plan %+v: outer %v", p, o)
		}
		for range 3 { // no momentum: every step is the update itself
			got := a.Clone()
			if err := o.Apply(got, d); err != nil {
				t.Fatal(err)
			}
			if jobconf.Digest(got) != jobconf.Digest(want) {
				t.Fatalf("plan %+v: not the plain average", p)
			}
		}
	}
}

// The same updates give the same bits, from a clone as from the original;
// a clone does not share the buffer.
func TestOuterDeterministic(t *testing.T) {
	p := jobconf.Plan{OuterLR: 0.7, OuterMomentum: 0.9}
	run := func(o *jobconf.Outer, n int) string {
		a := randomAdapter(t, 1)
		for k := range n {
			if err := o.Apply(a, randomFlat(t, uint64(10+k))); err != nil {
				t.Fatal(err)
			}
		}
		return jobconf.Digest(a)
	}
	o := p.NewOuter()
	first := run(o, 3)
	if again := run(p.NewOuter(), 3); again != first {
		t.Fatal("the same updates gave other bits")
	}
	c := o.Clone()
	if _, err := c.Step(randomFlat(t, 99)); err != nil {
		t.Fatal(err)
	}
	if c.Buffer()[0] == o.Buffer()[0] {
		t.Fatal("a clone shares its momentum buffer")
	}
	var nilOuter *jobconf.Outer
	if nilOuter.Clone() != nil || nilOuter.Buffer() != nil {
		t.Fatal("nil outer optimiser")
	}
}

// A job's outer settings reach the plan; momentum without a rate is
// refused.
func TestOuterFromSpec(t *testing.T) {
	g := jobconf.BuiltinGSPO(5)
	g.OuterLR, g.OuterMomentum = 0.7, 0.9
	s := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 1, MinNodes: 3, StepsPerEpoch: 10, GSPO: g}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	p, err := jobconf.FromSpec("j", s, mustBase(t))
	if err != nil {
		t.Fatal(err)
	}
	if o := p.NewOuter(); o == nil || o.LR != 0.7 || o.Momentum != 0.9 {
		t.Fatalf("outer %+v", o)
	}
	s.GSPO.OuterLR = 0
	if err := s.Normalise(); err == nil {
		t.Fatal("outer_momentum without outer_learning_rate accepted")
	}
}

// The Adam outer rule against Adam written out in float64 with math.Pow
// (PyTorch's Adam, β 0.9 and 0.99, ε 1e-8, on the pseudo-gradient −Δ),
// over three steps; the first step moves every coordinate by the rate,
// Δ's sign. A clone continues alone; a length change is refused.
func TestOuterAdam(t *testing.T) {
	const lr = 1.5e-3
	o := jobconf.Plan{OuterLR: lr, OuterAdam: true}.NewOuter()
	if o == nil || !o.Adam {
		t.Fatalf("outer %+v", o)
	}
	ds := [][]float32{{1e-3, -2e-3, 0}, {5e-4, 2.5e-4, -1e-6}, {-3e-3, 1e-3, 4e-4}}
	m, v := make([]float64, 3), make([]float64, 3)
	for step, d := range ds {
		u, err := o.Step(d)
		if err != nil {
			t.Fatal(err)
		}
		n := float64(step + 1)
		for i, x := range d {
			g := -float64(x)
			m[i] = 0.9*m[i] + 0.1*g
			v[i] = 0.99*v[i] + 0.01*g*g
			want := -lr * (m[i] / (1 - math.Pow(0.9, n))) / (math.Sqrt(v[i]/(1-math.Pow(0.99, n))) + 1e-8)
			if math.Abs(float64(u[i])-want) > 1e-6*lr+1e-12 {
				t.Fatalf("step %d coordinate %d: %v, want %v", step+1, i, u[i], want)
			}
			if step == 0 && x != 0 && math.Abs(math.Abs(float64(u[i]))-lr) > 1e-4*lr {
				t.Fatalf("first step %v, want ±%v", u[i], lr)
			}
		}
		if step == 1 {
			c := o.Clone()
			if _, err := c.Step(ds[2]); err != nil {
				t.Fatal(err)
			}
			if c.Buffer()[0] == o.Buffer()[0] {
				t.Fatal("a clone shares its moments")
			}
		}
	}
	if _, err := o.Step([]float32{1}); err == nil {
		t.Fatal("an update of another length was taken")
	}
	// The same updates give the same bits.
	again := jobconf.Plan{OuterLR: lr, OuterAdam: true}.NewOuter()
	a, b := randomAdapter(t, 1), randomAdapter(t, 1)
	first := jobconf.Plan{OuterLR: lr, OuterAdam: true}.NewOuter()
	for k := range 3 {
		d := randomFlat(t, uint64(20+k))
		if err := first.Apply(a, d); err != nil {
			t.Fatal(err)
		}
		if err := again.Apply(b, d); err != nil {
			t.Fatal(err)
		}
	}
	if jobconf.Digest(a) != jobconf.Digest(b) {
		t.Fatal("the same updates gave other bits")
	}
}

// gspo.inner_optimizer sgd and outer_optimizer adam reach the plan: the
// trainer steps plain SGD, the outer rule is Adam; the torch backend is
// refused such a job.
func TestDataParallelFromSpec(t *testing.T) {
	g := jobconf.BuiltinGSPO(1)
	g.LearningRate, g.OuterLR, g.InnerOptimizer, g.OuterOptimizer = 1e-3, 1.5e-3, "sgd", "adam"
	s := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 1, MinNodes: 3, StepsPerEpoch: 10, GSPO: g, Backend: "any"}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	p, err := jobconf.FromSpec("j", s, mustBase(t))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Trainer.SGD || !p.OuterAdam {
		t.Fatalf("plan: sgd %v, outer adam %v", p.Trainer.SGD, p.OuterAdam)
	}
	if o := p.NewOuter(); o == nil || !o.Adam || o.LR != 1.5e-3 {
		t.Fatalf("outer %+v", o)
	}
	if err := p.Serves("go"); err != nil {
		t.Fatal(err)
	}
	p.Backend = "any" // both backends step plain SGD
	if err := p.Serves("torch"); err != nil {
		t.Fatalf("torch worker: %v", err)
	}
	// The norm bound: √params in G's place without gspo.max_grad_norm,
	// G with it; AdamW's bound ignores G, and a job may not set it there.
	const params = 10000
	sgdC := func(g float64) float64 { return 1e-3 * float64(p.Interval*p.Trainer.NumIterations) * g }
	if c := p.ClipNorm(params); math.Abs(c-sgdC(100)) > 1e-15 {
		t.Fatalf("sgd bound without G: %v, want %v", c, sgdC(100))
	}
	s.GSPO.MaxGradNorm = 10
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	if p, err = jobconf.FromSpec("j", s, mustBase(t)); err != nil {
		t.Fatal(err)
	}
	if c := p.ClipNorm(params); math.Abs(c-sgdC(10)) > 1e-15 {
		t.Fatalf("sgd bound with G 10: %v, want %v", c, sgdC(10))
	}
	a := p
	a.Trainer.SGD = false
	if c := a.ClipNorm(params); math.Abs(c-sgdC(100)) > 1e-15 {
		t.Fatalf("adamw bound: %v, want %v (G is SGD's)", c, sgdC(100))
	}
	s.GSPO.InnerOptimizer = ""
	if err := s.Normalise(); err == nil || !strings.Contains(err.Error(), "max_grad_norm bounds plain SGD") {
		t.Fatalf("max_grad_norm under AdamW: %v", err)
	}
	// The default profile keeps AdamW inside and Nesterov outside.
	d := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 1, MinNodes: 3, StepsPerEpoch: 10, GSPO: jobconf.BuiltinGSPO(5)}
	if err := d.Normalise(); err != nil {
		t.Fatal(err)
	}
	if p, err := jobconf.FromSpec("j", d, mustBase(t)); err != nil || p.Trainer.SGD || p.OuterAdam {
		t.Fatalf("default plan: %v %v %v", p.Trainer.SGD, p.OuterAdam, err)
	}
}

func randomFlat(t *testing.T, seed uint64) []float32 {
	t.Helper()
	a := randomAdapter(t, seed)
	return jobconf.Flatten(a)
}

// randomAdapter is the built-in profile's adapter shape with values drawn
// from seed.
func randomAdapter(t *testing.T, seed uint64) *llama.Adapter {
	t.Helper()
	b := mustBase(t)
	a, err := trainer.InitialAdapter(b.Weights.Cfg, trainer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for _, x := range a.Views() {
		for i := range x.Data {
			x.Data[i] = float32(r.NormFloat64() * 1e-3)
		}
	}
	return a
}

// The built-in profile's outer rate: the plain average's rate up to four
// workers, √(workers/4) to two decimals above; the profile itself carries
// the four-worker rate, without momentum.
func TestBuiltinOuterLR(t *testing.T) {
	for _, c := range []struct {
		workers int
		want    float64
	}{{3, 1}, {4, 1}, {5, 1.12}, {8, 1.41}, {16, 2}, {64, 4}} {
		if got := jobconf.BuiltinOuterLR(c.workers); got != c.want {
			t.Errorf("BuiltinOuterLR(%d) = %v, want %v", c.workers, got, c.want)
		}
	}
	if g := jobconf.BuiltinGSPO(5); g.OuterLR != 1 || g.OuterMomentum != 0 {
		t.Errorf("built-in profile: outer rate %v, momentum %v", g.OuterLR, g.OuterMomentum)
	}
}

// The built-in profile's inner rate: the single worker's 2e-3 ×
// min(workers, 4)^¼, to three significant digits; one worker keeps the
// single worker's rate and the profile itself carries it.
func TestBuiltinLearningRate(t *testing.T) {
	for _, c := range []struct {
		workers int
		want    float64
	}{{0, 0.002}, {1, 0.002}, {2, 0.00238}, {3, 0.00263}, {4, 0.00283}, {8, 0.00283}, {64, 0.00283}} {
		if got := jobconf.BuiltinLearningRate(c.workers); got != c.want {
			t.Errorf("BuiltinLearningRate(%d) = %v, want %v", c.workers, got, c.want)
		}
	}
	if g := jobconf.BuiltinGSPO(5); g.LearningRate != 0.002 {
		t.Errorf("built-in profile: learning rate %v", g.LearningRate)
	}
	if g := jobconf.BuiltinGSPOFor(5, 8); g.LearningRate != 0.00283 || g.OuterLR != 1.41 || g.AggregateInterval != 5 {
		t.Errorf("built-in profile for 8 workers: learning rate %v, outer rate %v, interval %d", g.LearningRate, g.OuterLR, g.AggregateInterval)
	}
}
