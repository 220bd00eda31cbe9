"""Router agreement across arithmetic: the models and torch's routes for
package llama's TestRouterAgreement.

Usage: route_agreement.py OUTDIR

For Qwen3-MoE and Mixtral (8 experts, top 2), router weights at
transformers' initialisation (normal(0, 0.02): nearly uniform routing, the
worst case for near-ties) and at 1/sqrt(hidden) (a router that has
learned to discriminate), three seeds each: a random tiny model saved in
float32, 8 sequences of 32 random tokens, and for every sparse layer the
experts torch chose in float32 and with the model in bfloat16, plus the
float32 probabilities (to measure the gap at a disagreement).
OUTDIR/manifest.json lists {"name", "dir", "batch", "seq", "ids",
"routes": file of I64 "fp32.layer<l>", "bf16.layer<l>" [B·T, K] (sorted per
row) and F32 "probs.layer<l>" [B·T, E]}.
"""
import json
import math
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, MixtralConfig, Qwen3MoeConfig

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
B, T = 8, 32
cases = []
for arch in ["qwen3_moe", "mixtral"]:
    for scale in ["init", "wide"]:
        for seed in range(3):
            torch.manual_seed(1000 * seed + 7)
            common = dict(vocab_size=128, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                          attn_implementation="eager")
            if arch == "qwen3_moe":
                cfg = Qwen3MoeConfig(**common, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                     norm_topk_prob=True)
                cfg.architectures = ["Qwen3MoeForCausalLM"]
            else:
                cfg = MixtralConfig(**common, num_local_experts=8, num_experts_per_tok=2)
                cfg.architectures = ["MixtralForCausalLM"]
            m = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
            with torch.no_grad():
                for n, p in m.named_parameters():
                    if "norm" in n:
                        p.fill_(1.0)
                    elif n.endswith("mlp.gate.weight"):
                        std = 0.02 if scale == "init" else 1 / math.sqrt(p.shape[-1])
                        p.copy_(std * torch.randn_like(p))
                    else:
                        p.copy_(torch.randn_like(p) / math.sqrt(p.shape[-1]))
            name = f"{arch}_{scale}_{seed}"
            d = os.path.join(out, name)
            m.save_pretrained(d)
            ids = torch.randint(0, 128, (B, T))
            t = {}
            for dt, key in [(torch.float32, "fp32"), (torch.bfloat16, "bf16")]:
                mm = AutoModelForCausalLM.from_pretrained(d, dtype=dt, attn_implementation="eager").eval()
                with torch.no_grad():
                    rl = mm(input_ids=ids, output_router_logits=True).router_logits
                for l, r in enumerate(rl):
                    p = torch.softmax(r.float(), dim=-1)
                    t[f"{key}.layer{l}"] = torch.topk(p, 2, dim=-1).indices.sort(dim=-1).values.contiguous()
                    if key == "fp32":
                        t[f"probs.layer{l}"] = p.contiguous()
            rf = os.path.join(out, name + ".routes.safetensors")
            save_file(t, rf)
            cases.append({"name": name, "dir": d, "batch": B, "seq": T, "ids": ids.flatten().tolist(), "routes": rf})
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump({"cases": cases}, f)
