package trainer

import (
	"context"
	"fmt"
	"testing"

	"github.com/zooai/gym/model/basemodel"
)

// BenchmarkStep measures one default GSPO step (16 prompts × 8 completions,
// generation + reference pass + 2 optimiser passes) on the shipped base
// model with 1 and 2 threads, in generated and processed tokens per second.
func BenchmarkStep(b *testing.B) {
	base, err := basemodel.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			c := DefaultConfig()
			c.Steps = 1 << 20
			tr, err := New(base.Weights, base.Tokenizer, c, 0, th)
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
		})
	}
}
