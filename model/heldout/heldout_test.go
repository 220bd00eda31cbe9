package heldout

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
)

var tok = tinyllama.Tokenizer()

func loadBase(t testing.TB) *llama.Weights {
	t.Helper()
	w, err := tinyllama.Weights(tinyllama.Config(), 2, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func newModel(t testing.TB, w *llama.Weights, a *llama.Adapter, threads int) *llama.Model {
	t.Helper()
	md, err := llama.New(w, a, threads)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// noisyAdapter is an adapter on every module with random A and B, so the
// adapted model differs from the base everywhere.
func noisyAdapter(t testing.TB, mc llama.Config, scale float64) *llama.Adapter {
	t.Helper()
	a, err := llama.InitAdapter(mc, 4, 8, []llama.Module{llama.QProj, llama.KProj, llama.VProj, llama.OProj, llama.GateProj, llama.UpProj, llama.DownProj}, 3)
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
func stepwiseLoss(t *testing.T, md *llama.Model, ps []task.Problem) float64 {
	t.Helper()
	var sum float64
	var n int
	lp := make([]float32, md.W.Cfg.Vocab)
	for _, p := range ps {
		prompt, answer, _ := task.Tokenize(tok, p)
		seq := append(append([]int{}, prompt...), answer...)
		ch, _ := md.NewCache(1, len(seq))
		for pos := 0; pos < len(seq)-1; pos++ {
			logits, err := md.Step(ch, seq[pos:pos+1])
			if err != nil {
				t.Fatal(err)
			}
			if pos+1 >= len(prompt) {
				llama.LogSoftmax(lp, logits)
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
	for _, a := range []*llama.Adapter{nil, noisyAdapter(t, base.Cfg, 0.3)} {
		md := newModel(t, base, a, 2)
		got, err := Loss(md, tok, ps)
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
		l, err := Loss(newModel(t, base, a, threads), tok, ps)
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
	a, err := llama.InitAdapter(base.Cfg, 4, 8, []llama.Module{llama.QProj, llama.VProj, llama.DownProj}, 1)
	if err != nil {
		t.Fatal(err)
	}
	md := newModel(t, base, a, 2)
	before, err := Loss(md, tok, ps)
	if err != nil {
		t.Fatal(err)
	}
	if base0, _ := Loss(newModel(t, base, nil, 2), tok, ps); base0 != before {
		t.Fatalf("zero-B adapter changes the loss: %v vs base %v", before, base0)
	}
	g := answerGrad(t, md, ps)
	for _, dir := range []float32{-1, 1} {
		step := a.Clone()
		st, gt := step.Views(), g.Views()
		for i := range st {
			for j := range st[i].Data {
				st[i].Data[j] += dir * 0.5 * gt[i].Data[j]
			}
		}
		after, err := Loss(newModel(t, base, step, 2), tok, ps)
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
func answerGrad(t *testing.T, md *llama.Model, ps []task.Problem) *llama.Adapter {
	t.Helper()
	var seq []int
	var answers [][]int
	pl, al := 0, 0
	for _, p := range ps {
		prompt, answer, _ := task.Tokenize(tok, p)
		seq = append(append(seq, prompt...), answer...)
		answers = append(answers, answer)
		pl, al = len(prompt), len(answer)
	}
	T, V := pl+al, md.W.Cfg.Vocab
	act, err := md.Forward(seq, len(ps), T)
	if err != nil {
		t.Fatal(err)
	}
	d := make([]float32, len(act.Logits))
	lp := make([]float32, V)
	inv := 1 / float32(len(ps)*al)
	for b, answer := range answers {
		for i, want := range answer {
			r := (b*T + pl - 1 + i) * V
			llama.LogSoftmax(lp, act.Logits[r:r+V])
			for j := range lp {
				d[r+j] = float32(math.Exp(float64(lp[j]))) * inv
			}
			d[r+want] -= inv
		}
	}
	g := md.A.Zeroed()
	if err := md.Backward(act, d, g); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestEvaluateMatchesRollout(t *testing.T) {
	base := loadBase(t)
	a := noisyAdapter(t, base.Cfg, 0.05)
	for _, name := range task.Names() {
		for _, ad := range []*llama.Adapter{nil, a} {
			res, err := Evaluate(base, tok, ad, name, 100, 2)
			if err != nil {
				t.Fatal(err)
			}
			tk, _ := task.Lookup(name)
			ps := task.NewSplit(tk, 100).Eval
			md := newModel(t, base, ad, 1)
			sc, err := rollout.Evaluate(md, tok, ps, nil)
			if err != nil {
				t.Fatal(err)
			}
			loss, _ := Loss(md, tok, ps)
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
	oc := tinyllama.Config()
	oc.Hidden = 16
	other, _ := llama.InitAdapter(oc, 2, 2, []llama.Module{llama.QProj}, 1)
	small := *base
	small.Cfg.MaxPositions = 8
	md := newModel(t, base, nil, 1)
	for name, f := range map[string]func() error{
		"unknown task":  func() error { _, err := Evaluate(base, tok, nil, "chess", 10, 1); return err },
		"n = 0":         func() error { _, err := Evaluate(base, tok, nil, "addition", 0, 1); return err },
		"n > MaxN":      func() error { _, err := Evaluate(base, tok, nil, "addition", MaxN+1, 1); return err },
		"no base":       func() error { _, err := Evaluate(nil, tok, nil, "addition", 10, 1); return err },
		"no tokenizer":  func() error { _, err := Evaluate(base, nil, nil, "addition", 10, 1); return err },
		"adapter shape": func() error { _, err := Evaluate(base, tok, other, "addition", 10, 1); return err },
		"no problems":   func() error { _, err := Loss(md, tok, nil); return err },
		"empty answer":  func() error { _, err := Loss(md, tok, []task.Problem{{Prompt: "^1"}}); return err },
		"not UTF-8":     func() error { _, err := Loss(md, tok, []task.Problem{{Prompt: "^1", Answer: "\xff"}}); return err },
	} {
		err := f()
		if !errors.Is(err, ErrInput) {
			t.Errorf("%s: %v, want ErrInput", name, err)
		}
	}
	if _, err := Evaluate(&small, tok, nil, "sort", 10, 1); err == nil {
		t.Error("sort in an 8-token context accepted")
	}
}

// BenchmarkLoss128 measures what the orchestrator pays to score one delta
// on a shard of 128 held-out problems.
func BenchmarkLoss128(b *testing.B) {
	base := loadBase(b)
	add, _ := task.Lookup("addition")
	ps := task.NewSplit(add, 128).Eval
	for _, ad := range []*llama.Adapter{nil, noisyAdapter(b, base.Cfg, 0.1)} {
		for _, threads := range []int{1, 2} {
			name := fmt.Sprintf("adapter=%v/threads=%d", ad != nil, threads)
			b.Run(name, func(b *testing.B) {
				md := newModel(b, base, ad, threads)
				for b.Loop() {
					if _, err := Loss(md, tok, ps); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestPassAtK: pass@k grows with k (more samples, more chances), pass@k
// of k samples is never below a single sample's, the same seed gives the
// same figure for any thread count, and the bounds are enforced.
func TestPassAtK(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	problems := task.NewSplit(task.Addition{Digits: 1}, 48).Eval
	var calls int
	p1, err := PassAtK(base.Weights, base.Tokenizer, nil, problems, 1, nil, 3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	p8, err := PassAtK(base.Weights, base.Tokenizer, nil, problems, 8, nil, 3, 2, func(done, total int) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	again, err := PassAtK(base.Weights, base.Tokenizer, nil, problems, 8, nil, 3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built-in base, 1-digit addition: pass@1 %.3f, pass@8 %.3f", p1, p8)
	if p8 < p1 || p8 != again || p8 == 0 {
		t.Errorf("pass@1 %v, pass@8 %v (again %v)", p1, p8, again)
	}
	if calls != 3 {
		t.Errorf("%d progress reports for 48 problems, want 3", calls)
	}
	if _, err := PassAtK(base.Weights, base.Tokenizer, nil, problems, 0, nil, 3, 1, nil); err == nil {
		t.Error("k 0 accepted")
	}
}
