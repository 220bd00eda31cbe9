# Loads a gym checkpoint with PEFT on its base model, as a user would:
# PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), ckpt).
# Prints one JSON object: the keys PEFT found missing or unexpected when
# loading the adapter's state dict, whether every LoRA weight of the model
# equals the file's tensor, and the adapted model's logits on the given ids.
import json
import sys
import warnings

import torch
from peft import PeftModel
from peft.utils import load_peft_weights, set_peft_model_state_dict
from transformers import AutoModelForCausalLM

base_dir, ckpt, ids_json = sys.argv[1], sys.argv[2], sys.argv[3]
ids = json.loads(ids_json)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, ckpt)
load_warnings = [str(w.message) for w in caught if "adapter" in str(w.message).lower() or "key" in str(w.message).lower()]
model.eval()
sd = load_peft_weights(ckpt)
res = set_peft_model_state_dict(model, sd)
missing = [k for k in res.missing_keys if "lora_" in k]
params = dict(model.named_parameters())
equal = True
lora_params = 0
for name, p in params.items():
    if "lora_" not in name:
        continue
    lora_params += 1
    key = name.replace(".default.weight", ".weight")
    if key not in sd or not torch.equal(sd[key].to(p.dtype), p.detach()):
        equal = False
with torch.no_grad():
    logits = model(torch.tensor(ids)).logits
print(json.dumps({
    "missing": missing,
    "unexpected": list(res.unexpected_keys),
    "warnings": load_warnings,
    "file_tensors": len(sd),
    "lora_params": lora_params,
    "weights_equal": equal,
    "logits": logits.flatten().tolist(),
}))
