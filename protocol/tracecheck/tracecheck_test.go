package tracecheck

import (
	"errors"
	"math"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/trace"
)

// policies are the built-in base alone and with a random adapter.
func policies(t *testing.T) (base *basemodel.Base, plain, adapted *llama.Model) {
	t.Helper()
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	a, err := trainer.InitialAdapter(base.Weights.Cfg, trainer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := prng.New(99, 1)
	for _, v := range a.Views() {
		for k := range v.Data {
			v.Data[k] = float32(r.Float64()-0.5) * 0.2
		}
	}
	if plain, err = llama.New(base.Weights, nil, 2); err != nil {
		t.Fatal(err)
	}
	if adapted, err = llama.New(base.Weights, a, 2); err != nil {
		t.Fatal(err)
	}
	return base, plain, adapted
}

func sample(t *testing.T, base *basemodel.Base, md *llama.Model, c rollout.Config) *trace.Set {
	t.Helper()
	probs := task.NewSplit(task.Sort{Len: 5}, 10).Batch(3, 0, 1, 6)
	ro, err := rollout.Generate(md, base.Tokenizer, probs, 4, c, prng.New(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	return trace.FromRollouts(trace.Header{Model: "builtin", Dataset: "sort", Temperature: c.Temperature, TopK: c.TopK,
		Vocab: base.Weights.Cfg.Vocab}, ro)
}

// TestGoTracesRecomputeExactly: traces the Go engine sampled (with and
// without an adapter, at temperatures 1 and 0.7 with top-k) recompute
// teacher-forced to the same bits; under another policy, or with one
// log-probability edited, they do not.
func TestGoTracesRecomputeExactly(t *testing.T) {
	base, plain, adapted := policies(t)
	for _, c := range []rollout.Config{{Temperature: 1}, {Temperature: 0.7, TopK: 4}} {
		for name, md := range map[string]*llama.Model{"base": plain, "adapted": adapted} {
			s := sample(t, base, md, c)
			r, err := LogProbs(md, s, 3)
			if err != nil {
				t.Fatal(err)
			}
			if r.Tokens != s.Tokens() || r.MaxAbs != 0 || r.SeqMaxAbs != 0 {
				t.Errorf("%s, T=%v: %+v over %d tokens, want every token exact", name, c.Temperature, r, s.Tokens())
			}
			other := map[string]*llama.Model{"base": adapted, "adapted": plain}[name]
			w, err := LogProbs(other, s, 8)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, T=%v: under the other policy max |Δ| %.3g, mean %.3g, sequence %.3g", name, c.Temperature, w.MaxAbs, w.MeanAbs, w.SeqMaxAbs)
			if !(w.MeanAbs > 1e-3) {
				t.Errorf("%s, T=%v: checked under the other policy: %+v", name, c.Temperature, w)
			}
		}
	}
	s := sample(t, base, plain, rollout.Config{Temperature: 1})
	s.Seqs[5].LogProbs[1] -= 0.01
	r, err := LogProbs(plain, s, 4)
	if err != nil {
		t.Fatal(err)
	}
	if r.WorstSeq != 5 || r.WorstTok != 1 || math.Abs(r.MaxAbs-0.01) > 1e-6 {
		t.Errorf("one edited log-probability: %+v", r)
	}
	s.Header.Vocab++
	if _, err := LogProbs(plain, s, 4); !errors.Is(err, ErrMismatch) {
		t.Errorf("another vocabulary: %v", err)
	}
}
