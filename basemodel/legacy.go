package basemodel

import (
	"crypto/sha3"
	_ "embed"
	"encoding/hex"
	"fmt"

	"github.com/zooai/gym/model"
)

// The previous built-in base: package model's network, kept until its
// callers move to Builtin.

//go:embed base.safetensors
var embedded []byte

// legacyRecipeHash is the recipe hash base.safetensors records (the
// package-model recipe: vocab 14, ctx 11, dim 64, 2 layers, 4 heads,
// hidden 256; addition and sort, bug_frac 0.7, 1500 steps of 128).
const legacyRecipeHash = "11094e9eee2cd58f9003a7ce550dce8c918e585ca9b86b2af4743a000b1e5052"

// Bytes returns the previous base's embedded safetensors file.
func Bytes() []byte { return embedded }

// Load parses the previous base's weights (package model).
func Load() (*model.Weights, error) {
	w, meta, err := model.ReadWeights(embedded)
	if err != nil {
		return nil, fmt.Errorf("basemodel: %w", err)
	}
	if got := meta[MetaRecipeHash]; got != legacyRecipeHash {
		return nil, fmt.Errorf("basemodel: embedded weights were made by recipe %.12s, want %.12s", got, legacyRecipeHash)
	}
	return w, nil
}

// SHA3 is the hex SHA3-256 of the previous base's file: the base checkpoint
// hash that deltas on it refer to.
func SHA3() string {
	h := sha3.Sum256(embedded)
	return hex.EncodeToString(h[:])
}
