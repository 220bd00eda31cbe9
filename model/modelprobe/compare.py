"""The transformers side of `gym model logits --compare-transformers`.

Usage: compare.py MODEL_DIR ADAPTER_DIR_OR_EMPTY IDS_JSON OUT

Loads MODEL_DIR with AutoModelForCausalLM in float32 (eager attention), and
ADAPTER_DIR with PeftModel.from_pretrained when given, runs it on the token
ids (one sequence) and writes the logits [T, vocab] as little-endian float32
to OUT; prints the library versions as JSON.
"""

import json
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

model_dir, adapter_dir, ids_json, out = sys.argv[1:5]
ids = json.loads(ids_json)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
peft_version = None
if adapter_dir:
    import peft
    from peft import PeftModel

    model = PeftModel.from_pretrained(model, adapter_dir).eval()
    peft_version = peft.__version__
with torch.no_grad():
    logits = model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0].float().contiguous()
with open(out, "wb") as f:
    f.write(logits.numpy().astype("<f4").tobytes())
print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__, "peft": peft_version,
                  "architecture": type(model.base_model.model if adapter_dir else model).__name__,
                  "shape": list(logits.shape)}))
