"""Mixture-of-Experts reference models for package llama's tests.

Usage: make_moe_models.py OUTDIR

Builds random tiny Qwen3-MoE, Qwen2-MoE (shared expert, a dense layer
through mlp_only_layers, decoder_sparse_step) and Mixtral checkpoints with
transformers, saves each with save_pretrained (one expert module per expert:
what transformers writes) and, for two of them, a copy in the fused layout
(the model's own state_dict: mlp.experts.gate_up_proj [E, 2I, H],
mlp.experts.down_proj [E, H, I], mlp.gate.weight), which transformers loads
as well. For each it writes the logits of the model loaded back in float32,
and the experts the router chose in every sparse layer (torch.topk of the
softmax of output_router_logits' router logits).

Adapters are made by PEFT as PEFT puts them on these models: attention
projections through target_modules, the stacked experts and the router
through target_parameters, the shared expert and its gate through
target_modules, plus the form PEFT's own v4-name conversion writes
(target_modules gate_proj/up_proj/down_proj become target_parameters with a
rank_pattern and an alpha_pattern doubling the fused gate_up_proj's rank and
alpha) and a full-path list as "all-linear" resolves on Qwen2-MoE.

OUTDIR/manifest.json: {"cases": [...], "grads": [...]} with the fields of
make_models.py's manifest, plus "routes": a file of safetensors tensors
"layer<l>" [B·T, K] (int64; sorted per row) for every sparse layer.
"""

import json
import math
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig
from peft import LoraConfig, PeftModel, get_peft_model

torch.manual_seed(4321)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)

common = dict(vocab_size=96, hidden_size=32, num_hidden_layers=3, max_position_embeddings=64,
              rms_norm_eps=1e-5, attn_implementation="eager")

models = [
    # name, config, save dtype, fused copy
    ("qwen3moe", Qwen3MoeConfig(**common, intermediate_size=40, num_attention_heads=4, num_key_value_heads=2,
                                head_dim=12, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=20,
                                norm_topk_prob=True, tie_word_embeddings=True, rope_theta=1000000.0),
     torch.float32, True),
    ("qwen2moe_bf16", Qwen2MoeConfig(**common, intermediate_size=40, num_attention_heads=4, num_key_value_heads=4,
                                     num_experts=5, num_experts_per_tok=3, moe_intermediate_size=16,
                                     shared_expert_intermediate_size=24, norm_topk_prob=False,
                                     mlp_only_layers=[1], decoder_sparse_step=1),
     torch.bfloat16, False),
    ("mixtral", MixtralConfig(**common, intermediate_size=24, num_attention_heads=4, num_key_value_heads=2,
                              num_local_experts=4, num_experts_per_tok=2, sliding_window=None),
     torch.float32, True),
    ("qwen2moe_step2", Qwen2MoeConfig(**common, intermediate_size=40, num_attention_heads=4, num_key_value_heads=2,
                                      num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                                      shared_expert_intermediate_size=20, norm_topk_prob=True,
                                      decoder_sparse_step=2),
     torch.float32, False),
]

ARCH = {"qwen3_moe": "Qwen3MoeForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM", "mixtral": "MixtralForCausalLM"}


def randomize(model):
    """Weights large enough that every part shows in the logits, routers
    large enough that the top-k choice is far from a tie."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn_like(p))
            elif "embed_tokens" in name:
                p.copy_(0.25 * torch.randn_like(p))
            elif name.endswith("mlp.gate.weight"):
                p.copy_(3 * torch.randn_like(p) / math.sqrt(p.shape[-1]))
            else:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[-1]))


B, T = 3, 9
ids = torch.randint(0, 96, (B, T))
cases = []


def run(model):
    with torch.no_grad():
        o = model(input_ids=ids, output_router_logits=True)
    return o.logits.float().contiguous(), o.router_logits


def save_routes(path, model, router_logits):
    cfg = model.config
    k = cfg.num_experts_per_tok
    t = {}
    sparse = [l for l in range(cfg.num_hidden_layers)
              if type(model.model.layers[l].mlp).__name__.endswith("SparseMoeBlock")]
    assert len(sparse) == len(router_logits), (len(sparse), len(router_logits))
    for l, rl in zip(sparse, router_logits):
        p = torch.softmax(rl.float(), dim=-1)
        t[f"layer{l}"] = torch.topk(p, k, dim=-1).indices.sort(dim=-1).values.contiguous()
    save_file(t, path)


def load(d):
    return AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()


for name, cfg, dtype, fused in models:
    cfg.architectures = [ARCH[cfg.model_type]]
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    randomize(model)
    dirs = [(name, os.path.join(out, name))]
    model.to(dtype).save_pretrained(dirs[0][1])
    if fused:
        fd = os.path.join(out, name + "_fused")
        os.makedirs(fd, exist_ok=True)
        sd = {k: v.contiguous() for k, v in model.state_dict().items() if not (cfg.tie_word_embeddings and k == "lm_head.weight")}
        assert any(k.endswith("mlp.experts.gate_up_proj") for k in sd), sorted(sd)[:20]
        save_file(sd, os.path.join(fd, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(dirs[0][1], "config.json")) as f:
            cj = f.read()
        with open(os.path.join(fd, "config.json"), "w") as f:
            f.write(cj)
        dirs.append((name + "_fused", fd))
    for cname, d in dirs:
        ref = load(d)
        logits, rl = run(ref)
        lf = os.path.join(out, cname + ".logits.safetensors")
        save_file({"logits": logits}, lf)
        rf = os.path.join(out, cname + ".routes.safetensors")
        save_routes(rf, ref, rl)
        cases.append({"name": cname, "dir": d, "adapter": None, "batch": B, "seq": T,
                      "ids": ids.flatten().tolist(), "logits": lf, "routes": rf})

EXPERTS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
adapters = [
    # case name, base, LoraConfig
    ("lora_qwen3moe_experts", "qwen3moe",
     LoraConfig(r=3, lora_alpha=6, target_modules=["q_proj", "v_proj"], target_parameters=EXPERTS)),
    ("lora_qwen3moe_v4names", "qwen3moe",
     LoraConfig(r=2, lora_alpha=4, use_rslora=True, target_modules=["k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])),
    ("lora_mixtral_alllinear", "mixtral", LoraConfig(r=2, lora_alpha=4, target_modules="all-linear")),
    ("lora_mixtral_fused_down", "mixtral_fused",
     LoraConfig(r=2, lora_alpha=8, target_modules=["q_proj"], target_parameters=["mlp.experts.down_proj"])),
    ("lora_qwen2moe_alllinear", "qwen2moe_bf16", LoraConfig(r=2, lora_alpha=4, target_modules="all-linear")),
    ("lora_qwen2moe_experts", "qwen2moe_step2",
     LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "shared_expert_gate", "down_proj"],
                target_parameters=EXPERTS + ["mlp.gate.weight"])),
]
targets = torch.randint(0, 96, (B, T))
targets[2, 4] = -1
weights = torch.randn(B, T)
grad_cases = []
for aname, base, lcfg in adapters:
    d = os.path.join(out, base)
    pm = get_peft_model(load(d), lcfg)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.copy_(0.2 * torch.randn_like(p))
    ad = os.path.join(out, aname)
    pm.save_pretrained(ad)
    loaded = PeftModel.from_pretrained(load(d), ad).eval()
    logits, rl = run(loaded)
    lf = os.path.join(out, aname + ".logits.safetensors")
    save_file({"logits": logits}, lf)
    rf = os.path.join(out, aname + ".routes.safetensors")
    save_routes(rf, loaded.base_model.model, rl)
    cases.append({"name": aname, "dir": d, "adapter": ad, "batch": B, "seq": T,
                  "ids": ids.flatten().tolist(), "logits": lf, "routes": rf})
    # Gradients of sum w·log p(target) with torch autograd, on the adapter
    # as loaded back (what the Go engine reads).
    loaded.train()
    for n, p in loaded.named_parameters():
        p.requires_grad_("lora_" in n)
    lg = loaded(input_ids=ids).logits
    lg.retain_grad()
    mask = targets >= 0
    logp = torch.log_softmax(lg, dim=-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0] * mask
    (weights * logp).sum().backward()
    grads = {"logp": logp.detach().contiguous(), "dlogits": lg.grad.contiguous()}
    for n, p in loaded.named_parameters():
        if "lora_" in n:
            if p.grad is None:
                raise SystemExit(f"LoRA parameter {n} has no gradient")
            grads[n.replace(".default", "")] = p.grad.contiguous()
    gf = os.path.join(out, aname + ".grads.safetensors")
    save_file(grads, gf)
    grad_cases.append({"name": "grad_" + aname, "dir": d, "adapter": ad, "batch": B, "seq": T,
                       "ids": ids.flatten().tolist(), "targets": targets.flatten().tolist(),
                       "weights": weights.flatten().tolist(), "grads": gf})

with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump({"cases": cases, "grads": grad_cases}, f, indent=1)
