package trainer

import (
	"context"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
)

// BenchmarkStepBuiltinShape is one default step on a random Llama of the
// old built-in network's size (width 64, 2 layers, 4 heads, MLP 256).
func BenchmarkStepBuiltinShape(b *testing.B) {
	c := tinyllama.Config()
	c.Hidden, c.Intermediate, c.Heads, c.KVHeads, c.HeadDim, c.QKVBias, c.EOS = 64, 256, 4, 4, 16, false, nil
	w, err := tinyllama.Weights(c, 1, 0.3)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Steps = 1 << 20
	tr, err := New(w, tinyllama.Tokenizer(), cfg, 0, 2)
	if err != nil {
		b.Fatal(err)
	}
	var gen, train int
	for b.Loop() {
		st, err := tr.Step(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		gen += st.GenTokens
		train += st.TrainTokens
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(gen+train)/s, "tokens/s")
	b.ReportMetric(float64(gen)/s, "gen-tokens/s")
}
