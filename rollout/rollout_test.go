package rollout

import (
	"math"
	"slices"
	"testing"

	"github.com/zooai/gym/model"
	"github.com/zooai/gym/prng"
	"github.com/zooai/gym/task"
)

func testModel(t *testing.T) *model.Model {
	t.Helper()
	c := model.Config{Vocab: task.VocabSize, Ctx: 11, Dim: 16, Layers: 2, Heads: 2, Hidden: 32}
	w, err := model.Init(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := prng.New(2)
	for _, ts := range w.Tensors() {
		for i := range ts.Data {
			ts.Data[i] += float32(0.3 * r.Norm())
		}
	}
	return &model.Model{W: w, Threads: 2}
}

func problems(n int) []task.Problem {
	s := task.NewSplit(task.Addition{Digits: 2}, 10)
	return s.Batch(1, 0, 1, n)
}

// TestOldLogPMatchesForward: the log-probabilities recorded while sampling
// with the cache equal log softmax(logits/T) of a full forward pass over the
// sampled sequence, exactly.
func TestOldLogPMatchesForward(t *testing.T) {
	md := testModel(t)
	const temp = 0.8
	ro, err := Generate(md, problems(3), 4, Config{Temperature: temp}, prng.New(3))
	if err != nil {
		t.Fatal(err)
	}
	T := ro.PromptLen + ro.AnswerLen
	V := md.W.Cfg.Vocab
	for i := 0; i < ro.N(); i++ {
		seq := ro.Tokens[i*T : (i+1)*T]
		if !slices.Equal(seq[:ro.PromptLen], ro.Problems[i/ro.G].Prompt) {
			t.Fatalf("sequence %d does not start with its prompt", i)
		}
		act, err := md.Forward(seq[:T-1], 1, T-1)
		if err != nil {
			t.Fatal(err)
		}
		lp := make([]float32, V)
		scaled := make([]float32, V)
		for a := 0; a < ro.AnswerLen; a++ {
			row := act.Logits[(ro.PromptLen-1+a)*V : (ro.PromptLen+a)*V]
			for j, v := range row {
				scaled[j] = v * float32(1/temp)
			}
			model.LogSoftmax(lp, scaled)
			if got, want := ro.OldLogP[i*ro.AnswerLen+a], lp[seq[ro.PromptLen+a]]; got != want {
				t.Fatalf("sequence %d token %d: recorded %v, forward %v", i, a, got, want)
			}
		}
		if ro.Rewards[i] != task.Reward(ro.Problems[i/ro.G], ro.Completion(i)) {
			t.Fatalf("reward of sequence %d", i)
		}
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	md := testModel(t)
	a, _ := Generate(md, problems(4), 8, Config{Temperature: 1}, prng.New(5))
	b, _ := Generate(md, problems(4), 8, Config{Temperature: 1}, prng.New(5))
	c, _ := Generate(md, problems(4), 8, Config{Temperature: 1}, prng.New(6))
	if !slices.Equal(a.Tokens, b.Tokens) || !slices.Equal(a.OldLogP, b.OldLogP) {
		t.Fatal("same seed, different samples")
	}
	if slices.Equal(a.Tokens, c.Tokens) {
		t.Fatal("different seeds, same samples")
	}
}

// TestSampleFollowsDistribution draws many tokens from a fixed distribution
// with and without top-k and compares frequencies.
func TestSampleFollowsDistribution(t *testing.T) {
	p := []float64{0.5, 0.05, 0.25, 0.2}
	lp := make([]float32, len(p))
	for i, v := range p {
		lp[i] = float32(math.Log(v))
	}
	r := prng.New(7)
	const n = 40000
	for _, k := range []int{0, 2} {
		counts := make([]float64, len(p))
		for range n {
			counts[sample(lp, k, r)]++
		}
		want := slices.Clone(p)
		if k == 2 { // only tokens 0 and 2, renormalised
			want = []float64{0.5 / 0.75, 0, 0.25 / 0.75, 0}
		}
		for i := range p {
			sd := math.Sqrt(want[i]*(1-want[i])/n) + 1e-9
			if math.Abs(counts[i]/n-want[i]) > 5*sd+1e-9 {
				t.Fatalf("top-k %d: token %d drawn %.4f, want %.4f", k, i, counts[i]/n, want[i])
			}
		}
	}
	// Ties at the threshold are admitted in id order.
	tie := []float32{-1, -2, -2, -2}
	for range 100 {
		if v := sample(tie, 2, r); v > 1 {
			t.Fatalf("top-2 with ties drew %d", v)
		}
	}
}

func TestGreedyIsArgmax(t *testing.T) {
	md := testModel(t)
	ps := problems(5)
	comps, err := Greedy(md, ps, 2)
	if err != nil {
		t.Fatal(err)
	}
	V := md.W.Cfg.Vocab
	for i, p := range ps {
		seq := append(slices.Clone(p.Prompt), comps[i]...)
		act, _ := md.Forward(seq[:len(seq)-1], 1, len(seq)-1)
		for a := range comps[i] {
			row := act.Logits[(len(p.Prompt)-1+a)*V : (len(p.Prompt)+a)*V]
			best := 0
			for j, v := range row {
				if v > row[best] {
					best = j
				}
			}
			if best != comps[i][a] {
				t.Fatalf("problem %d token %d: greedy %d, argmax %d", i, a, comps[i][a], best)
			}
		}
	}
	sc, err := Evaluate(md, ps)
	if err != nil || sc.Accuracy < 0 || sc.Accuracy > 1 || sc.Reward < sc.Accuracy {
		t.Fatalf("score %+v %v", sc, err)
	}
}

func TestValidate(t *testing.T) {
	md := testModel(t)
	for _, c := range []Config{{Temperature: 0}, {Temperature: math.Inf(1)}, {Temperature: 1, TopK: -1}} {
		if _, err := Generate(md, problems(1), 2, c, prng.New(1)); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := Generate(md, nil, 2, Config{Temperature: 1}, prng.New(1)); err == nil {
		t.Error("no problems accepted")
	}
}
