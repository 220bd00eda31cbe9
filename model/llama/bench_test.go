package llama

import (
	"fmt"
	"testing"
)

// smolShape is a model shaped like SmolLM2-135M (4 layers instead of 30
// with -short).
func smolShape() Config {
	if testing.Short() {
		return Config{Arch: Llama, Vocab: 49152, Hidden: 576, Intermediate: 1536, Layers: 4, Heads: 9, KVHeads: 3,
			HeadDim: 64, MaxPositions: 8192, NormEps: 1e-5, RopeTheta: 100000, Tied: true, BOS: -1, PAD: -1}
	}
	return Config{Arch: Llama, Vocab: 49152, Hidden: 576, Intermediate: 1536, Layers: 30, Heads: 9, KVHeads: 3,
		HeadDim: 64, MaxPositions: 8192, NormEps: 1e-5, RopeTheta: 100000, Tied: true, BOS: -1, PAD: -1}
}

func BenchmarkMatMulT(b *testing.B) {
	for _, s := range []struct{ N, in, out int }{{128, 576, 1536}, {8, 576, 1536}, {128, 1536, 576}} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.N, s.in, s.out), func(b *testing.B) {
			x, w, y := make([]float32, s.N*s.in), make([]float32, s.out*s.in), make([]float32, s.N*s.out)
			for i := range x {
				x[i] = float32(i%7) * 0.1
			}
			for i := range w {
				w[i] = float32(i%5) * 0.1
			}
			for b.Loop() {
				matMulT(1, y, x, w, nil, s.N, s.in, s.out)
			}
			b.ReportMetric(float64(2*s.N*s.in*s.out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSmolLM measures prefill and KV-cached decode (a group of 8) on
// a random model shaped like SmolLM2-135M.
func BenchmarkSmolLM(b *testing.B) {
	c := smolShape()
	w := randomWeights(b, c, 1)
	for _, threads := range []int{1, 2} {
		md, _ := New(w, nil, threads)
		b.Run(fmt.Sprintf("prefill-1x128/threads=%d", threads), func(b *testing.B) {
			ids := randomTokens(1, 128, c.Vocab)
			for b.Loop() {
				if _, err := md.Logits(ids, 1, 128); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
		b.Run(fmt.Sprintf("decode-8x32/threads=%d", threads), func(b *testing.B) {
			ids := randomTokens(2, 8*16, c.Vocab)
			for b.Loop() {
				b.StopTimer()
				ch, _ := md.NewCache(8, 48)
				if _, err := md.Prefill(ch, ids, 16); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for range 32 {
					if _, err := md.Step(ch, ids[:8]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(8*32*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkSmolLMTrainStep measures one LoRA training step — forward with
// activations, token log-probabilities, their backward and the backward
// pass into the adapter (r=16 on all seven modules) — on 128 tokens of a
// random model shaped like SmolLM2-135M.
func BenchmarkSmolLMTrainStep(b *testing.B) {
	c := smolShape()
	w := randomWeights(b, c, 1)
	a, err := NewAdapter(c, 16, 32, []Module{QProj, KProj, VProj, OProj, GateProj, UpProj, DownProj})
	if err != nil {
		b.Fatal(err)
	}
	for _, ts := range a.Tensors(c) {
		for i := range ts.Data {
			ts.Data[i] = float32(i%7-3) * 0.01
		}
	}
	const B, T = 1, 128
	ids := randomTokens(1, B*T, c.Vocab)
	targets := append(ids[1:], 0)
	weights := make([]float32, B*T)
	for i := range weights {
		weights[i] = 1
	}
	for _, threads := range []int{1, 2} {
		md, _ := New(w, a, threads)
		g := a.Zeroed()
		b.Run(fmt.Sprintf("%dx%d/threads=%d", B, T, threads), func(b *testing.B) {
			for b.Loop() {
				act, err := md.Forward(ids, B, T)
				if err != nil {
					b.Fatal(err)
				}
				dl, err := TokenLogProbsBackward(threads, act.Logits, c.Vocab, targets, weights)
				if err != nil {
					b.Fatal(err)
				}
				if err := md.Backward(act, dl, g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(B*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkMatMulHalf compares the products with a float32 weight and with
// the same weight kept BF16 (widened panel by panel): x·Wᵀ (matMulTW) and
// x·W (matMulNNW), on one thread, for 1, 8 and 128 rows.
func BenchmarkMatMulHalf(b *testing.B) {
	const in, out = 1024, 3072
	wf := make([]float32, out*in)
	wh := Mat{dtype: BF16, half: make([]uint16, out*in)}
	for i := range wf {
		wh.half[i] = uint16(0x3c00 + i%97) // bfloat16 values near 2⁻⁷…
		wf[i] = bf16ToFloat(wh.half[i])
	}
	for _, N := range []int{1, 8, 128} {
		x := make([]float32, N*max(in, out))
		for i := range x {
			x[i] = float32(i%7) * 0.1
		}
		y := make([]float32, N*max(in, out))
		for _, w := range []Mat{{F32: wf}, wh} {
			b.Run(fmt.Sprintf("xWT/%s/N=%d", w.DType(), N), func(b *testing.B) {
				for b.Loop() {
					matMulTW(1, y, x, w, nil, N, in, out)
				}
				b.ReportMetric(float64(2*N*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
			b.Run(fmt.Sprintf("xW/%s/N=%d", w.DType(), N), func(b *testing.B) {
				for b.Loop() {
					matMulNNW(1, y, x, w, N, out, in)
				}
				b.ReportMetric(float64(2*N*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
