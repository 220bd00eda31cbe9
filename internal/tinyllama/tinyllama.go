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

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/tokenizer"
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

// ChatTokenizer is a byte-level tokenizer without merges over all 256
// bytes (byte b is token b, in GPT-2's byte-to-character table) with
// Qwen's chat tokens added: <|endoftext|> 256, <|im_start|> 257 and
// <|im_end|> 258 (special), <tool_call> 259 and </tool_call> 260 (not
// special) — for tests that render chat templates and play episodes on a
// ChatConfig model.
func ChatTokenizer() *tokenizer.Tokenizer {
	t, err := tokenizer.Parse(ChatTokenizerJSON())
	if err != nil {
		panic(fmt.Sprintf("tinyllama: %v", err))
	}
	return t
}

// ChatTokenizerJSON is ChatTokenizer's tokenizer.json.
func ChatTokenizerJSON() []byte {
	var bs []int
	for _, r := range [][2]int{{'!', '~'}, {'¡', '¬'}, {'®', 'ÿ'}} {
		for b := r[0]; b <= r[1]; b++ {
			bs = append(bs, b)
		}
	}
	cs := map[int]rune{}
	for _, b := range bs {
		cs[b] = rune(b)
	}
	n := 0
	for b := range 256 {
		if _, ok := cs[b]; !ok {
			cs[b] = rune(256 + n)
			n++
		}
	}
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(cs[b])] = b
	}
	var added []any
	for i, s := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"} {
		added = append(added, map[string]any{"id": 256 + i, "content": s, "special": i < 3, "normalized": false,
			"lstrip": false, "rstrip": false, "single_word": false})
	}
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	b, err := json.Marshal(map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added, "normalizer": nil,
		"pre_tokenizer": bl, "post_processor": nil, "decoder": bl,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": []any{}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// ChatEOS is ChatTokenizer's <|im_end|>.
const ChatEOS = 258

// ChatConfig is Config with ChatTokenizer's vocabulary, <|im_end|> as the
// end of sequence, and room for a chat conversation.
func ChatConfig() llama.Config {
	c := Config()
	c.Vocab, c.EOS, c.MaxPositions = 261, []int{ChatEOS}, 1024
	return c
}
