"""Reference models for package llama's tests.

Usage: make_models.py OUTDIR

Builds random tiny checkpoints of every supported architecture with
transformers, saves them (float32, bfloat16, float16, one sharded), runs each
on fixed token ids and writes the logits; builds random LoRA adapters with
PEFT, saves them with save_pretrained and writes PeftModel's logits after
loading them back. OUTDIR/manifest.json lists the cases:

  {"cases": [{"name", "dir", "adapter" (or null), "batch", "seq", "ids",
              "logits": file of a safetensors tensor "logits" [B, T, V]}],
   "grads": [{"name", "dir", "adapter", "batch", "seq", "ids", "targets",
              "weights", "grads": file of safetensors tensors}]}

For every architecture a grads case puts a random PEFT adapter (r=4, random
lora_A and lora_B, all seven modules; rsLoRA on Qwen3; plus one case on
three modules only) on the model loaded back in float32 and has torch
autograd compute loss = sum over b, t of weights[b,t] * log p(targets[b,t])
(log_softmax of the logits gathered at the targets; a target of -1 has no
term). The grads file holds every lora_A and lora_B gradient under the name
PEFT saves the matrix with, plus "logp" [B, T] and "dlogits" [B, T, V] (the
gradient of the loss with respect to the logits).

For every base model a "full" case (same fields as a grads case, adapter
null) has torch autograd compute the same loss on the model loaded in float32
with every parameter trainable; its grads file holds the gradient of every
parameter under its transformers name (model.embed_tokens.weight carries the
head's gradient too when embeddings are tied), plus "logp" and "dlogits".
"""

import json
import math
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, LlamaConfig, MistralConfig,
                          Qwen2Config, Qwen3Config)
from peft import LoraConfig, PeftModel, get_peft_model

torch.manual_seed(1234)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)

SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

common = dict(vocab_size=120, hidden_size=64, intermediate_size=96,
              num_hidden_layers=2, max_position_embeddings=64,
              rms_norm_eps=1e-5, attn_implementation="eager")

models = [
    # name, config, save dtype, save kwargs
    ("llama_gqa_llama3", LlamaConfig(**common, num_attention_heads=4, num_key_value_heads=2,
                                     rope_theta=10000.0,
                                     rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 16}),
     torch.float32, {}),
    ("llama_tied_bias_bf16", LlamaConfig(**common, num_attention_heads=4, num_key_value_heads=4,
                                         tie_word_embeddings=True, attention_bias=True,
                                         mlp_bias=True, rope_theta=500000.0),
     torch.bfloat16, {}),
    ("qwen2_sharded", Qwen2Config(**common, num_attention_heads=4, num_key_value_heads=2,
                                  rope_theta=1000000.0, use_sliding_window=False),
     torch.float32, {"max_shard_size": "40KB"}),
    ("qwen3_headdim", Qwen3Config(**common, num_attention_heads=4, num_key_value_heads=2,
                                  head_dim=24, tie_word_embeddings=True, rope_theta=1000000.0),
     torch.float32, {}),
    ("mistral_f16", MistralConfig(**common, num_attention_heads=8, num_key_value_heads=2,
                                  sliding_window=None),
     torch.float16, {}),
]

adapters = {
    # base name → (adapter name, LoraConfig)
    "llama_gqa_llama3": ("lora_llama", LoraConfig(r=4, lora_alpha=8, target_modules=SEVEN)),
    "qwen2_sharded": ("lora_qwen2", LoraConfig(r=4, lora_alpha=8, target_modules=SEVEN)),
    "qwen3_headdim": ("lora_qwen3_rslora", LoraConfig(r=4, lora_alpha=16, use_rslora=True,
                                                      target_modules=["q_proj", "v_proj", "down_proj"])),
}


def randomize(model):
    """Weights large enough that every part of the network shows in the logits."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn_like(p))
            elif "embed_tokens" in name:
                p.copy_(0.25 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[1]))


B, T = 3, 9
ids = torch.randint(0, 120, (B, T))
ids[0, 0], ids[1, 1] = 0, 119
cases = []


def run(model):
    with torch.no_grad():
        return model(input_ids=ids).logits.float().contiguous()


for name, cfg, dtype, kw in models:
    cfg.architectures = [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                          "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM"}[cfg.model_type]]
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    randomize(model)
    d = os.path.join(out, name)
    model.to(dtype).save_pretrained(d, **kw)
    # The reference is what transformers computes after loading the saved
    # directory in float32, as the Go engine does.
    ref = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    logits = os.path.join(out, name + ".logits.safetensors")
    save_file({"logits": run(ref)}, logits)
    cases.append({"name": name, "dir": d, "adapter": None, "batch": B, "seq": T,
                  "ids": ids.flatten().tolist(), "logits": logits})
    if name in adapters:
        aname, lcfg = adapters[name]
        pm = get_peft_model(ref, lcfg)
        with torch.no_grad():
            for n, p in pm.named_parameters():
                if "lora_" in n:
                    p.copy_(0.2 * torch.randn_like(p))
        ad = os.path.join(out, aname)
        pm.save_pretrained(ad)
        base = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
        loaded = PeftModel.from_pretrained(base, ad).eval()
        logits = os.path.join(out, aname + ".logits.safetensors")
        save_file({"logits": run(loaded)}, logits)
        cases.append({"name": aname, "dir": d, "adapter": ad, "batch": B, "seq": T,
                      "ids": ids.flatten().tolist(), "logits": logits})


# Gradient cases.
grad_cases = []
targets = torch.randint(0, 120, (B, T))
targets[2, 4] = -1  # a position without a target
weights = torch.randn(B, T)
grad_adapters = [
    # case name, base, LoraConfig
    ("grad_llama_gqa_llama3", "llama_gqa_llama3", LoraConfig(r=4, lora_alpha=8, target_modules=SEVEN)),
    ("grad_llama_tied_bias", "llama_tied_bias_bf16", LoraConfig(r=4, lora_alpha=8, target_modules=SEVEN)),
    ("grad_qwen2", "qwen2_sharded", LoraConfig(r=4, lora_alpha=8, target_modules=SEVEN)),
    ("grad_qwen3_rslora", "qwen3_headdim", LoraConfig(r=4, lora_alpha=16, use_rslora=True, target_modules=SEVEN)),
    ("grad_mistral", "mistral_f16", LoraConfig(r=4, lora_alpha=8, target_modules=SEVEN)),
    ("grad_llama_three_modules", "llama_gqa_llama3",
     LoraConfig(r=4, lora_alpha=8, target_modules=["k_proj", "o_proj", "up_proj"])),
    # all-linear on a tied-embedding Qwen3: PEFT saves every module's full
    # path (model.layers.1.mlp.up_proj, …) in target_modules (issue 38).
    ("grad_qwen3_tied_all_linear", "qwen3_headdim", LoraConfig(r=4, lora_alpha=8, target_modules="all-linear")),
]
for gname, base, lcfg in grad_adapters:
    d = os.path.join(out, base)
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    pm = get_peft_model(m, lcfg)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.copy_(0.2 * torch.randn_like(p))
    ad = os.path.join(out, gname)
    pm.save_pretrained(ad)
    logits = pm(input_ids=ids).logits
    logits.retain_grad()
    mask = targets >= 0
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0] * mask
    loss = (weights * logp).sum()
    loss.backward()
    grads = {"logp": logp.detach().contiguous(), "dlogits": logits.grad.contiguous()}
    for n, p in pm.named_parameters():
        if "lora_" in n:
            grads[n.replace(".default", "")] = p.grad.contiguous()
        elif p.grad is not None:
            raise SystemExit(f"frozen parameter {n} has a gradient")
    gf = os.path.join(out, gname + ".grads.safetensors")
    save_file(grads, gf)
    grad_cases.append({"name": gname, "dir": d, "adapter": ad, "batch": B, "seq": T,
                       "ids": ids.flatten().tolist(), "targets": targets.flatten().tolist(),
                       "weights": weights.flatten().tolist(), "grads": gf})

# Full-parameter gradient cases.
full_cases = []
for name, _, _, _ in models:
    d = os.path.join(out, name)
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    m.zero_grad()
    logits = m(input_ids=ids).logits
    logits.retain_grad()
    mask = targets >= 0
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0] * mask
    (weights * logp).sum().backward()
    grads = {"logp": logp.detach().contiguous(), "dlogits": logits.grad.contiguous()}
    for n, p in m.named_parameters():
        if p.grad is None:
            raise SystemExit(f"parameter {n} has no gradient")
        grads[n] = p.grad.contiguous()
    gf = os.path.join(out, "full_" + name + ".grads.safetensors")
    save_file(grads, gf)
    full_cases.append({"name": "full_" + name, "dir": d, "adapter": None, "batch": B, "seq": T,
                       "ids": ids.flatten().tolist(), "targets": targets.flatten().tolist(),
                       "weights": weights.flatten().tolist(), "grads": gf})

with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump({"cases": cases, "grads": grad_cases, "full": full_cases}, f, indent=1)
