package optim

import (
	"math"
	"testing"
)

func TestScheduleWarmupAndCosine(t *testing.T) {
	s := Schedule{LR: 1, Warmup: 4, Total: 14, MinLR: 0.1}
	cases := []struct {
		step int
		want float64
	}{{1, 0.25}, {2, 0.5}, {4, 1}, {9, 0.55}, {14, 0.1}, {20, 0.1}}
	for _, c := range cases {
		if got := s.At(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("At(%d) = %v, want %v", c.step, got, c.want)
		}
	}
	if got := (Schedule{LR: 2e-3}).At(50); got != 2e-3 {
		t.Errorf("constant schedule gave %v", got)
	}
}

// TestFirstStepIsSignTimesLR: with bias correction Adam's first update is
// lr·g/(|g|+ε) per element, plus decoupled decay lr·wd·p.
func TestFirstStepIsSignTimesLR(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WeightDecay = 0.1
	cfg.Schedule = Schedule{LR: 0.01}
	o, err := New(cfg, []int{3})
	if err != nil {
		t.Fatal(err)
	}
	p := []float32{1, -2, 0.5}
	g := []float32{0.3, -4, 0}
	if _, err := o.Update([][]float32{p}, [][]float32{g}); err != nil {
		t.Fatal(err)
	}
	want := []float64{1 - 0.001 - 0.01, -2 + 0.002 + 0.01, 0.5 - 0.0005}
	for i := range p {
		if math.Abs(float64(p[i])-want[i]) > 1e-6 {
			t.Errorf("p[%d] = %v, want %v", i, p[i], want[i])
		}
	}
}

// TestMatchesReference compares several steps with a float64 transcription
// of the AdamW algorithm (Loshchilov & Hutter).
func TestMatchesReference(t *testing.T) {
	cfg := Config{Beta1: 0.9, Beta2: 0.98, Eps: 1e-8, WeightDecay: 0.05, Schedule: Schedule{LR: 0.02, Warmup: 2}}
	o, _ := New(cfg, []int{2})
	p := []float32{0.7, -0.3}
	rp := []float64{0.7, -0.3}
	var m, v [2]float64
	for step := 1; step <= 6; step++ {
		g := []float32{float32(math.Sin(float64(step))), float32(0.1 * float64(step))}
		if _, err := o.Update([][]float32{p}, [][]float32{g}); err != nil {
			t.Fatal(err)
		}
		lr := cfg.Schedule.At(step)
		for i := range rp {
			gi := float64(g[i])
			m[i] = 0.9*m[i] + 0.1*gi
			v[i] = 0.98*v[i] + 0.02*gi*gi
			mh := m[i] / (1 - math.Pow(0.9, float64(step)))
			vh := v[i] / (1 - math.Pow(0.98, float64(step)))
			rp[i] = rp[i] - lr*0.05*rp[i] - lr*mh/(math.Sqrt(vh)+1e-8)
		}
	}
	for i := range p {
		if math.Abs(float64(p[i])-rp[i]) > 1e-5 {
			t.Errorf("p[%d] = %v, reference %v", i, p[i], rp[i])
		}
	}
}

func TestMinimisesQuadratic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Schedule = Schedule{LR: 0.05, Warmup: 5, Total: 400}
	o, _ := New(cfg, []int{2})
	p := []float32{3, -2}
	for range 400 {
		g := []float32{2 * (p[0] - 1), 2 * (p[1] + 1)}
		if _, err := o.Update([][]float32{p}, [][]float32{g}); err != nil {
			t.Fatal(err)
		}
	}
	if math.Abs(float64(p[0]-1)) > 1e-2 || math.Abs(float64(p[1]+1)) > 1e-2 {
		t.Fatalf("did not converge: %v", p)
	}
}

func TestValidate(t *testing.T) {
	bad := []Config{
		{Beta1: 1, Beta2: 0.9, Eps: 1e-8, Schedule: Schedule{LR: 1}},
		{Beta1: 0.9, Beta2: 0.9, Eps: 0, Schedule: Schedule{LR: 1}},
		{Beta1: 0.9, Beta2: 0.9, Eps: 1e-8, Schedule: Schedule{LR: 0}},
		{Beta1: 0.9, Beta2: 0.9, Eps: 1e-8, WeightDecay: -1, Schedule: Schedule{LR: 1}},
		{Beta1: 0.9, Beta2: 0.9, Eps: 1e-8, Schedule: Schedule{LR: 1, Warmup: -1}},
	}
	for i, c := range bad {
		if _, err := New(c, []int{1}); err == nil {
			t.Errorf("config %d accepted", i)
		}
	}
	o, _ := New(DefaultConfig(), []int{2})
	if _, err := o.Update([][]float32{{1}}, [][]float32{{1}}); err == nil {
		t.Error("wrong shape accepted")
	}
}

// TestSGD: with SGD set an update is p·(1 − lr·wd) − lr·g at the
// schedule's rate, whatever the moments would have said.
func TestSGD(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SGD, cfg.WeightDecay = true, 0.1
	cfg.Schedule = Schedule{LR: 0.5, Warmup: 2}
	o, err := New(cfg, []int{3})
	if err != nil {
		t.Fatal(err)
	}
	p := []float32{1, -2, 0.5}
	g := []float32{0.3, -4, 0}
	for step, lr := range []float64{0.25, 0.5} { // warmup, then the rate
		want := make([]float64, len(p))
		for i := range p {
			want[i] = float64(p[i])*(1-lr*0.1) - lr*float64(g[i])
		}
		got, err := o.Update([][]float32{p}, [][]float32{g})
		if err != nil || got != lr {
			t.Fatalf("step %d: rate %v, %v", step+1, got, err)
		}
		for i := range p {
			if math.Abs(float64(p[i])-want[i]) > 1e-6 {
				t.Errorf("step %d: p[%d] = %v, want %v", step+1, i, p[i], want[i])
			}
		}
	}
}
