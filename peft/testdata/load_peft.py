# Loads a gym checkpoint directory the way PEFT would see it, without gym:
# the tensors with safetensors.torch when it is installed (else by parsing
# the safetensors header and reading with torch.frombuffer), the config with
# json. Prints one JSON object: every tensor's name, shape and values, and
# whether each lora_A/lora_B has the shape of the nn.Linear PEFT would
# build for the module (lora_A = Linear(in, r), lora_B = Linear(r, out)).
import json
import struct
import sys

import torch

d = sys.argv[1]
try:
    from safetensors.torch import load_file

    tensors = load_file(d + "/adapter_model.safetensors")
    meta = None
    loader = "safetensors"
except Exception:
    raw = open(d + "/adapter_model.safetensors", "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", None)
    body = bytearray(raw[8 + n :])
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", info
        b, e = info["data_offsets"]
        tensors[name] = torch.frombuffer(body[b:e], dtype=torch.float32).reshape(info["shape"]).clone()
    loader = "torch"

cfg = json.load(open(d + "/adapter_config.json"))
mc = cfg["zoo_gym"]["model_config"]
dims = {
    "q": (mc["dim"], mc["dim"]),
    "k": (mc["dim"], mc["dim"]),
    "v": (mc["dim"], mc["dim"]),
    "o": (mc["dim"], mc["dim"]),
    "fc1": (mc["dim"], mc["hidden"]),
    "fc2": (mc["hidden"], mc["dim"]),
}
r = cfg["r"]
out = {"loader": loader, "metadata": meta, "tensors": [], "linear_shapes_ok": True}
for name in sorted(tensors):
    t = tensors[name]
    assert name.startswith("base_model.model.") and name.endswith((".lora_A.weight", ".lora_B.weight")), name
    module = name[len("base_model.model.") :].rsplit(".", 2)[0]
    short = module.rsplit(".", 1)[1]
    assert short in cfg["target_modules"], (short, cfg["target_modules"])
    fin, fout = dims[short]
    lin = torch.nn.Linear(fin, r, bias=False) if ".lora_A." in name else torch.nn.Linear(r, fout, bias=False)
    if tuple(lin.weight.shape) != tuple(t.shape):
        out["linear_shapes_ok"] = False
    out["tensors"].append({"name": name, "shape": list(t.shape), "values": t.flatten().tolist()})
print(json.dumps(out))
