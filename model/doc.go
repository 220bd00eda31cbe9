// Package model is the built-in causal language model: a small pre-norm
// transformer in pure Go, float32, with LoRA adapters, a hand-written
// backward pass and a KV cache for generation.
//
// The network is token + learned position embeddings, Layers blocks of
// causal multi-head self-attention and a GELU MLP (each behind an RMSNorm,
// with residual connections), a final RMSNorm and an untied output head.
// Linear layers have no biases. LoRA adds s·(x·Aᵀ)·Bᵀ with s = alpha/rank to
// any of the block projections q, k, v, o, fc1, fc2.
//
// Matrix products run on Model.Threads goroutines. Every output element is
// computed by exactly one goroutine with a fixed summation order, so results
// are bitwise identical for any thread count, not only for a given one.
package model
