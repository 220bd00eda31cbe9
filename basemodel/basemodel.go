// Package basemodel ships the base model that the built-in trainer starts
// from: weights produced by sft.Run with Recipe (a deterministic supervised
// pre-training on a mixture of correct and typically-wrong answers), stored
// as safetensors next to this file and embedded in the binary.
//
// Regenerate it with `go generate ./basemodel` after changing Recipe; a test
// fails while the embedded file and Recipe disagree.
package basemodel

//go:generate go run ./mkbase -out base.safetensors

import (
	"crypto/sha3"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/zooai/gym/model"
	"github.com/zooai/gym/sft"
)

//go:embed base.safetensors
var embedded []byte

// Metadata keys written into the safetensors file.
const (
	MetaRecipe     = "gym.sft_recipe"
	MetaRecipeHash = "gym.sft_recipe_sha3"
)

// Recipe is the pre-training run that produced the shipped weights.
func Recipe() sft.Config {
	return sft.Config{
		Model:       model.Config{Vocab: 14, Ctx: 11, Dim: 64, Layers: 2, Heads: 4, Hidden: 256},
		Tasks:       []string{"addition", "sort"},
		BugFrac:     0.7,
		Steps:       1500,
		Batch:       128,
		LR:          1e-3,
		Warmup:      50,
		WeightDecay: 0.01,
		Seed:        0,
	}
}

// RecipeHash is the hex SHA3-256 of Recipe's JSON.
func RecipeHash(c sft.Config) string {
	b, _ := json.Marshal(c)
	h := sha3.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Bytes returns the embedded safetensors file.
func Bytes() []byte { return embedded }

// Load parses the embedded weights.
func Load() (*model.Weights, error) {
	w, meta, err := model.ReadWeights(embedded)
	if err != nil {
		return nil, fmt.Errorf("basemodel: %w", err)
	}
	if got, want := meta[MetaRecipeHash], RecipeHash(Recipe()); got != want {
		return nil, fmt.Errorf("basemodel: embedded weights were made by recipe %.12s, code has %.12s: run go generate ./basemodel", got, want)
	}
	return w, nil
}

// SHA3 is the hex SHA3-256 of the embedded file: the base checkpoint hash
// that deltas refer to.
func SHA3() string {
	h := sha3.Sum256(embedded)
	return hex.EncodeToString(h[:])
}
