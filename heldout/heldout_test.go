package heldout

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/model"
	"github.com/zooai/gym/prng"
	"github.com/zooai/gym/rollout"
	"github.com/zooai/gym/task"
)

func loadBase(t testing.TB) *model.Weights {
	t.Helper()
	w, err := basemodel.Load()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// noisyAdapter is an adapter on every module with random A and B, so the
// adapted model differs from the base everywhere.
func noisyAdapter(t testing.TB, mc model.Config, scale float64) *model.Adapter {
	t.Helper()
	a, err := model.InitAdapter(mc, model.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "k", "v", "o", "fc1", "fc2"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := prng.New(4, 2)
	for l := range a.B {
		for _, b := range a.B[l] {
			for i := range b {
				b[i] = float32(r.Norm() * scale)
			}
		}
	}
	return a
}

// mixed returns held-out problems of both tasks interleaved, so batches
// split on shape changes.
func mixed(t testing.TB, n int) []task.Problem {
	t.Helper()
	add, _ := task.Lookup("addition")
	srt, _ := task.Lookup("sort")
	a, s := task.NewSplit(add, n).Eval, task.NewSplit(srt, n).Eval
	var ps []task.Problem
	for i := range n {
		ps = append(ps, a[i])
		if i%3 == 0 {
			ps = append(ps, s[i])
		}
	}
	return ps
}

// stepwiseLoss is Loss computed another way: one problem at a time, through
// the KV cache, reading the next-token logits after each fed token.
func stepwiseLoss(t *testing.T, md *model.Model, ps []task.Problem) float64 {
	t.Helper()
	var sum float64
	var n int
	lp := make([]float32, md.W.Cfg.Vocab)
	for _, p := range ps {
		ch := md.NewCache(1)
		seq := append(append([]int{}, p.Prompt...), p.Answer...)
		for pos := 0; pos < len(seq)-1; pos++ {
			logits, err := md.Step(ch, seq[pos:pos+1])
			if err != nil {
				t.Fatal(err)
			}
			if pos+1 >= len(p.Prompt) {
				model.LogSoftmax(lp, logits)
				sum -= float64(lp[seq[pos+1]])
				n++
			}
		}
	}
	return sum / float64(n)
}

func TestLossMatchesStepwise(t *testing.T) {
	base := loadBase(t)
	ps := mixed(t, 40)
	for _, a := range []*model.Adapter{nil, noisyAdapter(t, base.Cfg, 0.3)} {
		md := &model.Model{W: base, A: a, Threads: 2}
		got, err := Loss(md, ps)
		if err != nil {
			t.Fatal(err)
		}
		want := stepwiseLoss(t, md, ps)
		if math.Abs(got-want) > 1e-5*math.Abs(want) || !(got > 0) {
			t.Fatalf("adapter %v: Loss %v, stepwise %v", a != nil, got, want)
		}
	}
}

func TestLossDeterministic(t *testing.T) {
	base := loadBase(t)
	ps := mixed(t, 150) // more than one batch of additions
	a := noisyAdapter(t, base.Cfg, 0.2)
	var first float64
	for i, threads := range []int{1, 2, 3, 1} {
		l, err := Loss(&model.Model{W: base, A: a, Threads: threads}, ps)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = l
		} else if math.Float64bits(l) != math.Float64bits(first) {
			t.Fatalf("threads %d: %v, first run %v", threads, l, first)
		}
	}
}

// TestLossFallsAlongItsGradient takes gradient steps on the adapter
// towards the reference answers (the gradient computed here, independently
// of Loss's indexing) and checks that Loss falls, and that a step the other
// way makes it rise.
func TestLossFallsAlongItsGradient(t *testing.T) {
	base := loadBase(t)
	add, _ := task.Lookup("addition")
	ps := task.NewSplit(add, 64).Eval
	a, err := model.InitAdapter(base.Cfg, model.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "v", "fc2"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	md := &model.Model{W: base, A: a, Threads: 2}
	before, err := Loss(md, ps)
	if err != nil {
		t.Fatal(err)
	}
	if base0, _ := Loss(&model.Model{W: base, Threads: 2}, ps); base0 != before {
		t.Fatalf("zero-B adapter changes the loss: %v vs base %v", before, base0)
	}
	g := answerGrad(t, md, ps)
	for _, dir := range []float32{-1, 1} {
		step := a.Clone()
		st, gt := step.Tensors(), g.Tensors()
		for i := range st {
			for j := range st[i].Data {
				st[i].Data[j] += dir * 0.5 * gt[i].Data[j]
			}
		}
		after, err := Loss(&model.Model{W: base, A: step, Threads: 2}, ps)
		if err != nil {
			t.Fatal(err)
		}
		if dir < 0 && !(after < before-1e-3) {
			t.Fatalf("descending the gradient: loss %v -> %v", before, after)
		}
		if dir > 0 && !(after > before+1e-3) {
			t.Fatalf("ascending the gradient: loss %v -> %v", before, after)
		}
		t.Logf("step %+v: loss %.4f -> %.4f", dir, before, after)
	}
}

// answerGrad is the gradient of the mean answer-token NLL with respect to
// md's adapter, over full sequences (prompt and whole answer: a layout other
// than Loss's).
func answerGrad(t *testing.T, md *model.Model, ps []task.Problem) *model.Adapter {
	t.Helper()
	pl, al := len(ps[0].Prompt), len(ps[0].Answer)
	T, V := pl+al, md.W.Cfg.Vocab
	var seq []int
	for _, p := range ps {
		seq = append(append(seq, p.Prompt...), p.Answer...)
	}
	act, err := md.Forward(seq, len(ps), T)
	if err != nil {
		t.Fatal(err)
	}
	d := make([]float32, len(act.Logits))
	lp := make([]float32, V)
	inv := 1 / float32(len(ps)*al)
	for b, p := range ps {
		for i, want := range p.Answer {
			r := (b*T + pl - 1 + i) * V
			model.LogSoftmax(lp, act.Logits[r:r+V])
			for j := range lp {
				d[r+j] = float32(math.Exp(float64(lp[j]))) * inv
			}
			d[r+want] -= inv
		}
	}
	g := md.A.ZeroLike()
	if err := md.Backward(act, d, nil, g); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestEvaluateMatchesRollout(t *testing.T) {
	base := loadBase(t)
	a := noisyAdapter(t, base.Cfg, 0.05)
	for _, name := range task.Names() {
		for _, ad := range []*model.Adapter{nil, a} {
			res, err := Evaluate(base, ad, name, 100, 2)
			if err != nil {
				t.Fatal(err)
			}
			tk, _ := task.Lookup(name)
			ps := task.NewSplit(tk, 100).Eval
			md := &model.Model{W: base, A: ad, Threads: 1}
			sc, err := rollout.Evaluate(md, ps)
			if err != nil {
				t.Fatal(err)
			}
			loss, _ := Loss(md, ps)
			want := Result{Task: name, N: 100, Accuracy: sc.Accuracy, Reward: sc.Reward, Loss: loss}
			if res != want {
				t.Fatalf("%s (adapter %v): %+v, want %+v", name, ad != nil, res, want)
			}
			t.Logf("%s adapter=%v: %+v", name, ad != nil, res)
		}
	}
}

func TestRefuses(t *testing.T) {
	base := loadBase(t)
	other, _ := model.InitAdapter(model.Config{Vocab: 14, Ctx: 11, Dim: 8, Layers: 2, Heads: 2, Hidden: 16},
		model.LoRAConfig{Rank: 2, Alpha: 2, Targets: []string{"q"}}, 1)
	small := base.Clone()
	small.Cfg.Ctx = 8
	for name, f := range map[string]func() error{
		"unknown task":  func() error { _, err := Evaluate(base, nil, "chess", 10, 1); return err },
		"n = 0":         func() error { _, err := Evaluate(base, nil, "addition", 0, 1); return err },
		"n > MaxN":      func() error { _, err := Evaluate(base, nil, "addition", MaxN+1, 1); return err },
		"no base":       func() error { _, err := Evaluate(nil, nil, "addition", 10, 1); return err },
		"adapter shape": func() error { _, err := Evaluate(base, other, "addition", 10, 1); return err },
		"short context": func() error { _, err := Evaluate(small, nil, "sort", 10, 1); return err },
		"no problems":   func() error { _, err := Loss(&model.Model{W: base}, nil); return err },
		"empty answer":  func() error { _, err := Loss(&model.Model{W: base}, []task.Problem{{Prompt: []int{0}}}); return err },
		"token outside": func() error {
			_, err := Loss(&model.Model{W: base}, []task.Problem{{Prompt: []int{0}, Answer: []int{99}}})
			return err
		},
	} {
		err := f()
		if !errors.Is(err, ErrInput) {
			t.Errorf("%s: %v, want ErrInput", name, err)
		}
	}
}

// BenchmarkLoss128 measures what the orchestrator pays to score one delta
// on a shard of 128 held-out problems.
func BenchmarkLoss128(b *testing.B) {
	base := loadBase(b)
	add, _ := task.Lookup("addition")
	ps := task.NewSplit(add, 128).Eval
	for _, ad := range []*model.Adapter{nil, noisyAdapter(b, base.Cfg, 0.1)} {
		for _, threads := range []int{1, 2} {
			name := fmt.Sprintf("adapter=%v/threads=%d", ad != nil, threads)
			b.Run(name, func(b *testing.B) {
				md := &model.Model{W: base, A: ad, Threads: threads}
				for b.Loop() {
					if _, err := Loss(md, ps); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
