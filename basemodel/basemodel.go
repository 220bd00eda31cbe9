// Package basemodel is a TEMPORARY stand-in for branch basellm's package
// of the same name (Base, Builtin, Open), so that branch port builds and
// tests before basellm lands: Builtin returns a random tiny model. It is
// replaced wholesale by basellm's package at the merge.
package basemodel

import (
	"crypto/sha3"
	"encoding/hex"
	"path/filepath"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/llama"
	"github.com/zooai/gym/tokenizer"
)

// Base is a base model: weights, tokenizer, name and hash.
type Base struct {
	Name      string
	Weights   *llama.Weights
	Tokenizer *tokenizer.Tokenizer
	SHA3      string
}

// Builtin is the built-in base (here: a random tiny model).
func Builtin() (*Base, error) {
	w, err := tinyllama.Weights(tinyllama.Config(), 1, 0.3)
	if err != nil {
		return nil, err
	}
	h := sha3.Sum256(tinyllama.TokenizerJSON())
	return &Base{Name: "builtin", Weights: w, Tokenizer: tinyllama.Tokenizer(), SHA3: hex.EncodeToString(h[:])}, nil
}

// Open loads a Hugging Face model directory.
func Open(dir string) (*Base, error) {
	w, err := llama.Load(dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	return &Base{Name: filepath.Base(dir), Weights: w, Tokenizer: tok, SHA3: "0000"}, nil
}
