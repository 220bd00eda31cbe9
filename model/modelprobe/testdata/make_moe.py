"""A random tiny MoE model (vocabulary of the built-in tokenizer, 15 ids)
and a PEFT adapter on its attention and experts, for modelprobe's tests.

Usage: make_moe.py OUTDIR ARCH... (writes OUTDIR/ARCH/model and OUTDIR/ARCH/adapter)
"""
import os
import math
import sys

import torch
from transformers import AutoModelForCausalLM, MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig
from peft import LoraConfig, get_peft_model

torch.manual_seed(7)
common = dict(vocab_size=15, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=32, intermediate_size=24)
for arch in sys.argv[2:]:
    out, adapter = os.path.join(sys.argv[1], arch, "model"), os.path.join(sys.argv[1], arch, "adapter")
    cfg = {"qwen3_moe": lambda: Qwen3MoeConfig(**common, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16),
           "qwen2_moe": lambda: Qwen2MoeConfig(**common, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                                               shared_expert_intermediate_size=20),
           "mixtral": lambda: MixtralConfig(**common, num_local_experts=4, num_experts_per_tok=2)}[arch]()
    cfg.architectures = [{"qwen3_moe": "Qwen3MoeForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
                          "mixtral": "MixtralForCausalLM"}[arch]]
    m = AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" not in n:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[-1]))
    m.save_pretrained(out)
    pm = get_peft_model(m, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"],
                                      target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]))
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.copy_(0.3 * torch.randn_like(p))
    pm.save_pretrained(adapter)
