package model

import (
	"fmt"
	"testing"
)

// BenchmarkTrainStep measures a LoRA forward + backward pass over a batch
// shaped like a GSPO step (128 sequences of 10 tokens) on 1 and 2 threads.
func BenchmarkTrainStep(b *testing.B) {
	c := Config{Vocab: 16, Ctx: 12, Dim: 64, Layers: 2, Heads: 4, Hidden: 256}
	w, _ := Init(c, 1)
	a, _ := InitAdapter(c, LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"q", "v"}}, 1)
	const B, T = 128, 10
	tokens := randomTokens(1, B*T, c.Vocab)
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			md := &Model{W: w, A: a, Threads: th}
			for b.Loop() {
				act, _ := md.Forward(tokens, B, T)
				g := a.ZeroLike()
				_ = md.Backward(act, act.Logits, nil, g)
			}
			b.ReportMetric(float64(B*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkGenerate measures cached decoding of 128 sequences, 10 positions.
func BenchmarkGenerate(b *testing.B) {
	c := Config{Vocab: 16, Ctx: 12, Dim: 64, Layers: 2, Heads: 4, Hidden: 256}
	w, _ := Init(c, 1)
	const B, T = 128, 10
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			md := &Model{W: w, Threads: th}
			tok := make([]int, B)
			for b.Loop() {
				ch := md.NewCache(B)
				for range T {
					_, _ = md.Step(ch, tok)
				}
			}
			b.ReportMetric(float64(B*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
