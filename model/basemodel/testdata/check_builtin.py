"""Reference side of basemodel's transformers test (transformers_test.go).

Usage: check_builtin.py MODEL_DIR OUT_DIR < cases.json

cases.json: {"texts": [...], "batches": [{"text": [...]}, ...]}. Loads
MODEL_DIR with transformers (AutoModelForCausalLM in float32, eager
attention; AutoTokenizer) and with the tokenizers library
(Tokenizer.from_file), and writes OUT_DIR/out.json:

  {"tokenizers": [[ids of each text], ...], "auto": [[...], ...],
   "class": AutoTokenizer's class name, "model_class": the model's class,
   "logits": [file of a safetensors tensor "logits" [B, T, V] per batch]}

Each batch's texts are tokenized by AutoTokenizer (no special tokens) and
run through the model as one batch (equal lengths, no padding).
"""

import json
import os
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, out = sys.argv[1], sys.argv[2]
cases = json.load(sys.stdin)
tk = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
auto = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
res = {
    "tokenizers": [tk.encode(t, add_special_tokens=False).ids for t in cases["texts"]],
    "auto": [auto(t, add_special_tokens=False)["input_ids"] for t in cases["texts"]],
    "class": type(auto).__name__,
    "model_class": type(model).__name__,
    "eos": auto.eos_token_id,
    "logits": [],
}
for i, b in enumerate(cases["batches"]):
    ids = torch.tensor([auto(t, add_special_tokens=False)["input_ids"] for t in b["text"]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float().contiguous()
    f = os.path.join(out, f"logits{i}.safetensors")
    save_file({"logits": logits}, f)
    res["logits"].append(f)
with open(os.path.join(out, "out.json"), "w") as f:
    json.dump(res, f)
