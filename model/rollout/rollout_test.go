package rollout

import (
	"math"
	"slices"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/task"
)

func testModel(t *testing.T, threads int) *llama.Model {
	t.Helper()
	w, err := tinyllama.Weights(tinyllama.Config(), 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	md, err := llama.New(w, nil, threads)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

func problems(n int) []task.Problem {
	s := task.NewSplit(task.Addition{Digits: 2}, 10)
	return s.Batch(1, 0, 1, n)
}

// mixed has prompts of three token lengths, interleaved.
func mixed() []task.Problem {
	return []task.Problem{
		{Prompt: "^1+2=", Answer: "3"}, {Prompt: "^12+34=", Answer: "64"}, {Prompt: "^7+1=", Answer: "8"},
		{Prompt: "^99:", Answer: "99"}, {Prompt: "^10+20=", Answer: "03"},
	}
}

// TestOldLogPMatchesForward: the log-probabilities recorded while sampling
// with the cache equal log softmax(logits/T) of a full forward pass over the
// sampled sequence, exactly, for prompts of several lengths and sequences
// that stop at the end-of-sequence token.
func TestOldLogPMatchesForward(t *testing.T) {
	md := testModel(t, 2)
	md.W.Cfg.EOS = []int{2, tinyllama.EOS} // '1' ends sequences too: some stop early
	tok := tinyllama.Tokenizer()
	const temp = 0.8
	ro, err := Generate(md, tok, mixed(), 4, Config{Temperature: temp, MaxNew: 4}, prng.New(3))
	if err != nil {
		t.Fatal(err)
	}
	V := md.W.Cfg.Vocab
	stopped, full := 0, 0
	for i := 0; i < ro.N(); i++ {
		p := ro.Problems[i/ro.G]
		prompt, _, _ := task.Tokenize(tok, p)
		if !slices.Equal(prompt, ro.Prompts[i/ro.G]) {
			t.Fatalf("prompt %d tokens %v", i/ro.G, ro.Prompts[i/ro.G])
		}
		comp := ro.Completions[i]
		for _, id := range comp[:len(comp)-1] {
			if slices.Contains(md.W.Cfg.EOS, id) {
				t.Fatalf("sequence %d continues after the end-of-sequence token: %v", i, comp)
			}
		}
		if slices.Contains(md.W.Cfg.EOS, comp[len(comp)-1]) {
			stopped++
		} else if len(comp) != 4 {
			t.Fatalf("sequence %d: %d tokens without an end-of-sequence token, want 4", i, len(comp))
		} else {
			full++
		}
		seq := append(slices.Clone(prompt), comp...)
		logits, err := md.Logits(seq[:len(seq)-1], 1, len(seq)-1)
		if err != nil {
			t.Fatal(err)
		}
		lp := make([]float32, V)
		scaled := make([]float32, V)
		for a := range comp {
			row := logits[(len(prompt)-1+a)*V : (len(prompt)+a)*V]
			for j, v := range row {
				scaled[j] = v * float32(1/temp)
			}
			llama.LogSoftmax(lp, scaled)
			if got, want := ro.OldLogP[i][a], lp[comp[a]]; got != want {
				t.Fatalf("sequence %d token %d: recorded %v, forward %v", i, a, got, want)
			}
		}
		text, _ := tok.Decode(comp, true)
		if n := len(comp); slices.Contains(md.W.Cfg.EOS, comp[n-1]) {
			text, _ = tok.Decode(comp[:n-1], true)
		}
		if ro.Texts[i] != text || ro.Rewards[i] != task.Reward(p, text) || ro.Exact[i] != (text == p.Answer) {
			t.Fatalf("sequence %d: text %q reward %v, want %q %v", i, ro.Texts[i], ro.Rewards[i], text, task.Reward(p, text))
		}
	}
	if stopped == 0 || full == 0 {
		t.Fatalf("%d sequences stopped early and %d ran to the limit: the test needs both", stopped, full)
	}
}

// TestGenerateIsDeterministic: the same stream gives the same samples on
// any thread count; another stream other samples. Without MaxNew the
// limit is the answer's length in tokens.
func TestGenerateIsDeterministic(t *testing.T) {
	tok := tinyllama.Tokenizer()
	run := func(threads int, seed uint64) *Rollouts {
		ro, err := Generate(testModel(t, threads), tok, problems(4), 8, Config{Temperature: 1}, prng.New(seed))
		if err != nil {
			t.Fatal(err)
		}
		return ro
	}
	a, b, c := run(1, 5), run(3, 5), run(1, 6)
	eq := func(x, y *Rollouts) bool {
		return slices.EqualFunc(x.Completions, y.Completions, slices.Equal) && slices.EqualFunc(x.OldLogP, y.OldLogP, slices.Equal)
	}
	if !eq(a, b) {
		t.Fatal("same seed, different samples on 1 and 3 threads")
	}
	if eq(a, c) {
		t.Fatal("different seeds, same samples")
	}
	for i, comp := range a.Completions {
		if len(comp) > 3 || (len(comp) < 3 && comp[len(comp)-1] != tinyllama.EOS) {
			t.Fatalf("sequence %d: %v, want 3 tokens (the answer's length) or an early end", i, comp)
		}
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
	md := testModel(t, 2)
	tok := tinyllama.Tokenizer()
	ps := append(problems(5), mixed()...)
	comps, err := Greedy(md, tok, ps, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	V := md.W.Cfg.Vocab
	for i, p := range ps {
		prompt, _, _ := task.Tokenize(tok, p)
		seq := slices.Clone(prompt)
		for range 3 {
			logits, _ := md.Logits(seq, 1, len(seq))
			row := logits[(len(seq)-1)*V:]
			best := 0
			for j, v := range row {
				if v > row[best] {
					best = j
				}
			}
			if best == tinyllama.EOS {
				break
			}
			seq = append(seq, best)
		}
		want, _ := tok.Decode(seq[len(prompt):], true)
		if comps[i] != want {
			t.Fatalf("problem %d: greedy %q, argmax %q", i, comps[i], want)
		}
	}
	sc, err := Evaluate(md, tok, ps, nil)
	if err != nil || sc.Accuracy < 0 || sc.Accuracy > 1 || sc.Reward < sc.Accuracy {
		t.Fatalf("score %+v %v", sc, err)
	}
}

func TestValidate(t *testing.T) {
	md := testModel(t, 1)
	tok := tinyllama.Tokenizer()
	for _, c := range []Config{{Temperature: 0}, {Temperature: math.Inf(1)}, {Temperature: 1, TopK: -1}, {Temperature: 1, MaxNew: -1}} {
		if _, err := Generate(md, tok, problems(1), 2, c, prng.New(1)); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := Generate(md, tok, nil, 2, Config{Temperature: 1}, prng.New(1)); err == nil {
		t.Error("no problems accepted")
	}
	if _, err := Generate(md, tok, problems(1), 2, Config{Temperature: 1, MaxNew: 30}, prng.New(1)); err == nil {
		t.Error("a completion beyond the context accepted")
	}
	if _, err := Generate(md, tok, []task.Problem{{Prompt: "^1", Answer: "\xff"}}, 2, Config{Temperature: 1}, prng.New(1)); err == nil {
		t.Error("an answer that is not UTF-8 accepted")
	}
}
