package trainer

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/rollout"
)

var tinyModel = tinyllama.Config()

var tok = tinyllama.Tokenizer()

func tinyBase(t *testing.T) *llama.Weights {
	t.Helper()
	// Larger than a language model's init so samples differ and rewards vary.
	w, err := tinyllama.Weights(tinyModel, 5, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func tinyConfig() Config {
	c := DefaultConfig()
	c.PromptsPerStep, c.GroupSize, c.EvalSize, c.Steps = 4, 4, 50, 3
	c.LearningRate = 1e-2
	c.LoRARank, c.LoRAAlpha, c.LoRATargets = 2, 4, []string{"q_proj", "v_proj", "down_proj"}
	return c
}

func adapterBytes(a *llama.Adapter) []byte {
	var b []byte
	for _, ts := range a.Views() {
		b = append(b, llama.Float32Bytes(ts.Data)...)
	}
	return b
}

// TestReplayIsBitForBit: a run's loss and adapter at step 3 are reproduced
// exactly by Replay from the base weights, on a different thread count, and
// by ReplayStep from the state after step 2.
func TestReplayIsBitForBit(t *testing.T) {
	base := tinyBase(t)
	c := tinyConfig()
	c.GradientAccumulationSteps = 2
	tr, err := New(base, tok, c, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var st StepStats
	var before State
	for range 3 {
		before = tr.State()
		if st, err = tr.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if math.IsNaN(st.Loss) {
		t.Fatal("NaN loss")
	}
	loss, a, err := Replay(ctx, base, tok, c, 7, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(loss) != math.Float64bits(st.Loss) || !bytes.Equal(adapterBytes(a), adapterBytes(tr.Adapter())) {
		t.Fatalf("Replay: loss %v vs %v, adapters equal %v", loss, st.Loss, bytes.Equal(adapterBytes(a), adapterBytes(tr.Adapter())))
	}
	loss, a, err = ReplayStep(ctx, base, tok, c, 7, before, 3)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(loss) != math.Float64bits(st.Loss) || !bytes.Equal(adapterBytes(a), adapterBytes(tr.Adapter())) {
		t.Fatal("ReplayStep differs from the original step")
	}
	// A different worker draws different data: a different result.
	loss2, a2, err := Replay(ctx, base, tok, c, 8, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if loss2 == st.Loss && bytes.Equal(adapterBytes(a2), adapterBytes(a)) {
		t.Fatal("worker 8 reproduced worker 7's step")
	}
}

// TestAdapterGradientMatchesFiniteDifferences checks the whole chain
// (objective → log-probabilities at temperature T → logits → model →
// adapter) against central differences of the step's loss.
func TestAdapterGradientMatchesFiniteDifferences(t *testing.T) {
	for _, lvl := range []string{"sequence", "token"} {
		base := tinyBase(t)
		c := tinyConfig()
		c.ImportanceSamplingLevel = lvl
		c.EpsilonLow, c.EpsilonHigh, c.Beta, c.Temperature = 0.2, 0.2, 0.3, 0.7
		tr, err := New(base, tok, c, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Make B non-zero so A has a gradient too, and the policy differs from
		// the reference so the KL term is live.
		r := prng.New(9)
		for _, ts := range tr.Adapter().Views() {
			for i := range ts.Data {
				ts.Data[i] += float32(0.1 * r.Norm())
			}
		}
		problems := tr.split.Batch(c.Seed, 1, 1, c.PromptsPerStep)
		ro, err := rollout.Generate(tr.policy, tok, problems, c.GroupSize, c.sampling(), prng.New(1))
		if err != nil {
			t.Fatal(err)
		}
		// Move π_old away from π_θ so ratios are not all 1 but stay inside the clip.
		for i := range ro.OldLogP {
			for a := range ro.OldLogP[i] {
				ro.OldLogP[i][a] += float32(0.05 * r.Norm())
			}
		}
		lb, err := tr.logProbs(tr.ref, ro, 0, ro.N(), false)
		if err != nil {
			t.Fatal(err)
		}
		refLogP := lb.logP
		loss := func() float64 {
			g := tr.Adapter().Zeroed()
			s, _, err := tr.microBatch(ro, refLogP, 0, ro.N(), g, 1)
			if err != nil {
				t.Fatal(err)
			}
			return s.Loss
		}
		grad := tr.Adapter().Zeroed()
		s, _, err := tr.microBatch(ro, refLogP, 0, ro.N(), grad, 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.ClipFrac > 0.3 {
			t.Fatalf("%s: clip fraction %v leaves too little to check", lvl, s.ClipFrac)
		}
		gts := grad.Views()
		checked := 0
		for k, p := range tr.Adapter().Views() {
			for trial := 0; trial < 4; trial++ {
				i := r.IntN(len(p.Data))
				old := p.Data[i]
				const h = 1e-3
				p.Data[i] = old + h
				lp := loss()
				p.Data[i] = old - h
				lm := loss()
				p.Data[i] = old
				fd := (lp - lm) / float64(2*float32(h))
				an := float64(gts[k].Data[i])
				if math.Abs(fd-an) > 2e-2*math.Max(math.Abs(fd), math.Abs(an))+2e-4 {
					t.Errorf("%s %s[%d]: backward %.6g, finite difference %.6g", lvl, p.Name, i, an, fd)
				}
				checked++
			}
		}
		if checked == 0 {
			t.Fatal("nothing checked")
		}
	}
}

func TestRatioStartsAtOne(t *testing.T) {
	// π_old is recorded at generation with the KV cache; the first pass of
	// training recomputes it without the cache. They agree exactly, so the
	// first pass's ratios are exactly 1.
	base := tinyBase(t)
	c := tinyConfig()
	c.NumIterations = 1
	tr, _ := New(base, tok, c, 0, 1)
	st, err := tr.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.RatioMin != 1 || st.RatioMax != 1 || st.ClipFrac != 0 {
		t.Fatalf("first-pass ratios [%v, %v], clip %v", st.RatioMin, st.RatioMax, st.ClipFrac)
	}
}

func TestConfigValidation(t *testing.T) {
	mut := []func(*Config){
		func(c *Config) { c.Task = "chess" },
		func(c *Config) { c.ImportanceSamplingLevel = "word" },
		func(c *Config) { c.GroupSize = 1 },
		func(c *Config) { c.GradientAccumulationSteps = 3 },
		func(c *Config) { c.MaxSeqLen = 5 },
		func(c *Config) { c.LoRARank = 0 },
		func(c *Config) { c.LoRATargets = []string{"x"} },
		func(c *Config) { c.LoRATargets = []string{"q"} },
		func(c *Config) { c.LoRATargets = []string{"q_proj", "q_proj"} },
		func(c *Config) { c.LoRATargets = nil },
		func(c *Config) { c.LearningRate = 0 },
		func(c *Config) { c.WeightDecay = math.NaN() },
		func(c *Config) { c.Temperature = 0 },
		func(c *Config) { c.Beta = -1 },
		func(c *Config) { c.AggregateInterval = 0 },
	}
	for i, m := range mut {
		c := DefaultConfig()
		m(&c)
		if err := c.Validate(tinyModel, tok); err == nil {
			t.Errorf("mutation %d accepted", i)
		}
	}
	c := DefaultConfig()
	c.Use4Bit = true
	if err := c.Validate(tinyModel, tok); err != nil || len(c.Notes()) != 1 {
		t.Fatalf("use_4bit: %v %v", err, c.Notes())
	}
	c = DefaultConfig()
	c.Task = "sort"
	small := tinyModel
	small.MaxPositions = 11
	if err := c.Validate(small, tok); !errors.Is(err, ErrConfig) {
		t.Fatalf("sort in an 11-token context: %v", err)
	}
	small.MaxPositions = 12
	if err := c.Validate(small, tok); err != nil {
		t.Fatalf("sort in a 12-token context: %v", err)
	}
	if err := c.Validate(tinyModel, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("no tokenizer: %v", err)
	}
}

// TestStopsAtEOS: with a model whose end-of-sequence token is common,
// completions of several lengths train: replay stays exact, the gradient
// is finite, and tokens after an end are never generated.
func TestStopsAtEOS(t *testing.T) {
	base := tinyBase(t)
	base.Cfg.EOS = []int{1, 2, tinyllama.EOS} // '0' and '1' end a completion
	c := tinyConfig()
	tr, err := New(base, tok, c, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	var st StepStats
	for range 2 {
		if st, err = tr.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if full := c.PromptsPerStep * c.GroupSize * 3; st.GenTokens >= full || st.GenTokens <= c.PromptsPerStep*c.GroupSize {
		t.Fatalf("%d tokens generated; without early ends %d", st.GenTokens, full)
	}
	loss, a, err := Replay(context.Background(), base, tok, c, 3, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(loss) != math.Float64bits(st.Loss) || !bytes.Equal(adapterBytes(a), adapterBytes(tr.Adapter())) || math.IsNaN(loss) {
		t.Fatalf("replay with early ends: loss %v vs %v", loss, st.Loss)
	}
}

// TestSGDStep: with SGD set a step moves the adapter by −lr × the step's
// gradient (Gradient on the same rollouts from the same start).
func TestSGDStep(t *testing.T) {
	base := tinyBase(t)
	c := tinyConfig()
	c.SGD, c.NumIterations = true, 1
	tr, err := New(base, tok, c, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	start := tr.Adapter().Clone()
	if _, err := tr.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh, err := New(base, tok, c, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, g, err := fresh.Gradient(tr.Rollouts())
	if err != nil {
		t.Fatal(err)
	}
	got, s0, gv := tr.Adapter().Views(), start.Views(), g.Views()
	var moved float64
	for i := range got {
		for j, x := range got[i].Data {
			want := float64(s0[i].Data[j]) - c.LearningRate*float64(gv[i].Data[j])
			if math.Abs(float64(x)-want) > 1e-6 {
				t.Fatalf("tensor %d value %d: %v, want %v", i, j, x, want)
			}
			moved += math.Abs(float64(x - s0[i].Data[j]))
		}
	}
	if moved == 0 {
		t.Fatal("the step did not move the adapter")
	}
}

// Rebase continues a trainer's state from another adapter: the same bits,
// step for step, as Resume with that state, under AdamW (whose moments
// carry over) and plain SGD.
func TestRebase(t *testing.T) {
	base := tinyBase(t)
	for _, sgd := range []bool{false, true} {
		c := tinyConfig()
		c.SGD = sgd
		tr, err := New(base, tok, c, 7, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		other := tr.Adapter().Clone()
		for _, x := range other.Views() {
			for j := range x.Data {
				x.Data[j] += 1e-3 * float32(j%7-3)
			}
		}
		st := tr.State()
		st.Adapter = other
		want, err := Resume(base, tok, c, 7, 1, st)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tr.Rebase(other)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			a, err := got.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			b, err := want.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if a.Loss != b.Loss || llama.Digest(got.Adapter().Views()) != llama.Digest(want.Adapter().Views()) {
				t.Fatalf("sgd %v: rebased trainer differs from the resumed one", sgd)
			}
		}
		if got.StepCount() != want.StepCount() || got.State().Updates != want.State().Updates {
			t.Fatalf("sgd %v: step %d/%d, updates %d/%d", sgd, got.StepCount(), want.StepCount(), got.State().Updates, want.State().Updates)
		}
	}
}
