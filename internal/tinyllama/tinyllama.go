// Package tinyllama makes small random Llama-family models and a
// character-level tokenizer for tests: the shape of the built-in task
// vocabulary ("^0123456789+=:" as ids 0 to 13, an end-of-sequence token
// 14) on a Qwen2-style network (grouped-query attention, q/k/v biases),
// with seeded weights, so tests of the trainer, the judge and the worker
// need no files.
package tinyllama

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/zooai/gym/llama"
	"github.com/zooai/gym/prng"
	"github.com/zooai/gym/tokenizer"
)

// Chars are the tokenizer's characters, token id i being Chars[i].
const Chars = "^0123456789+=:"

// EOS is the end-of-sequence token's id and text.
const (
	EOS     = len(Chars)
	EOSText = "<|endoftext|>"
)

// Config is a tiny Qwen2 shape over the tokenizer's vocabulary.
func Config() llama.Config {
	return llama.Config{Arch: llama.Qwen2, Vocab: EOS + 1, Hidden: 32, Intermediate: 64, Layers: 2, Heads: 4, KVHeads: 2,
		HeadDim: 8, MaxPositions: 32, NormEps: 1e-6, RopeTheta: 10000, QKVBias: true, BOS: -1, PAD: -1, EOS: []int{EOS}}
}

// Weights returns weights of shape c drawn from seed: normal(0, std)
// embeddings and output head, normal(0, 1/√in) projections (the outputs of
// residual branches scaled down by √(2·layers)), normal(0, 0.02) biases,
// unit norm gains. std 0.02 gives a near-uniform model; larger values a
// peaked one.
func Weights(c llama.Config, seed uint64, std float64) (*llama.Weights, error) {
	w, err := llama.NewWeights(c)
	if err != nil {
		return nil, err
	}
	r := prng.New(seed, 0x74696e79) // "tiny"
	fill := func(x []float32, s float64) {
		for i := range x {
			x[i] = float32(r.Norm() * s)
		}
	}
	ones := func(x []float32) {
		for i := range x {
			x[i] = 1
		}
	}
	fill(w.Embed.F32, std)
	for l := range w.Layers {
		L := &w.Layers[l]
		ones(L.InputNorm)
		ones(L.PostNorm)
		ones(L.QNorm)
		ones(L.KNorm)
		for m := range llama.NumModules {
			in, _ := c.Dims(m)
			s := 1 / math.Sqrt(float64(in))
			if m == llama.OProj || m == llama.DownProj {
				s /= math.Sqrt(2 * float64(c.Layers))
			}
			fill(L.W[m].F32, s)
			fill(L.Bias[m], 0.02)
		}
	}
	ones(w.Norm)
	if !c.Tied {
		fill(w.Head.F32, std)
	}
	return w, nil
}

// TokenizerJSON is the tokenizer.json of the character-level tokenizer:
// byte-level BPE without merges (every character its own token), the
// end-of-sequence token a special added token.
func TokenizerJSON() []byte {
	vocab := map[string]int{}
	for i, ch := range Chars {
		vocab[string(ch)] = i
	}
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
	b, err := json.Marshal(map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []any{map[string]any{"id": EOS, "content": EOSText, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}},
		"normalizer": nil, "pre_tokenizer": bl, "post_processor": bl, "decoder": bl,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": []any{}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// Tokenizer parses TokenizerJSON.
func Tokenizer() *tokenizer.Tokenizer {
	t, err := tokenizer.Parse(TokenizerJSON())
	if err != nil {
		panic(fmt.Sprintf("tinyllama: %v", err))
	}
	return t
}
