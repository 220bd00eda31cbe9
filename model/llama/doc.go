// Package llama runs Hugging Face checkpoints of the Llama family in pure
// Go: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and
// MistralForCausalLM without sliding window, and the Mixture-of-Experts
// Qwen3MoeForCausalLM, Qwen2MoeForCausalLM and MixtralForCausalLM (moe.go,
// docs/moe.md), in float32, with PEFT LoRA adapters and a KV cache for
// incremental decoding.
//
// A base model is a directory in the Hugging Face layout: config.json (read
// strictly by ParseConfig: what this engine cannot compute exactly is
// refused, naming the field), model.safetensors or shards listed in
// model.safetensors.index.json, in BF16, F16 or F32 (converted to float32
// exactly, as torch does). Load checks every tensor's name and shape
// against the config before reading any data.
//
// The network is transformers' own: token embeddings, then per layer
// RMSNorm → attention (q/k/v projections with optional biases, Qwen3's
// per-head q/k RMSNorm, rotary embeddings in the rotate_half convention
// with optional Llama-3 frequency scaling, grouped-query causal attention
// with a float32 softmax, o projection) → residual → RMSNorm → SwiGLU MLP
// down(silu(gate(x))·up(x)) → residual, a final RMSNorm and the output head
// (tied to the embeddings or not). A LoRA adapter on any of q_proj, k_proj,
// v_proj, o_proj, gate_proj, up_proj, down_proj adds scale·B·A·x.
//
// Model.Backward carries the gradient of a loss with respect to the logits
// back through the frozen base and returns the gradients of the LoRA
// matrices; TokenLogProbs and TokenLogProbsBackward give the per-token
// log-probabilities a policy-gradient loss is built from, and their
// gradient.
//
// Matrix products and attention run on Model.Threads goroutines. Work is
// split into tiles whose boundaries do not depend on the thread count, and
// every output element is computed by exactly one goroutine with a fixed
// summation order (kernels.go documents each), so results are bitwise
// identical for any thread count; products are rounded explicitly
// (float32(a*b)) so no fused multiply-add can make two code paths differ.
// On amd64 with AVX-512 the kernels are assembly (kernels_amd64.s) that
// computes the same sums in the same order, one vector lane per running
// sum, with separate multiply and add instructions; elsewhere, or built
// with the purego tag, Go kernels compute the same bits.
package llama
