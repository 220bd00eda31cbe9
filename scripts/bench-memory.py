#!/usr/bin/env python3
"""Peak memory of every process of a torch-backend `gym up` on big random bases (issue 35, item 6).

For each size it makes a random Qwen3-architecture model with transformers, saved in bf16
(the built-in base's tokenizer, from `gym base export`, so the built-in addition task runs on
it), trains one short epoch with `gym up --model DIR --backend torch`, and samples the peak
resident set (VmHWM) of every process of the run from /proc: the `gym up` process (hanzod runs
inside it), each `gym worker`, each torch backend process and each validator. It prints one
JSON object per size and a table of the peaks against the bf16 file size.

    .venv/bin/python scripts/bench-memory.py --gym /tmp/gym --sizes 0.5,2 --out /tmp/bench-memory

Needs torch and transformers (the test venv) and a gym binary. Targets (docs/models.md):
hanzod ≤ 300 MiB and within 10 % between the sizes; a Go worker of a torch job ≤ 300 MiB; a
torch process ≤ 1.5 × the file; a Go-engine worker on the bf16 base ≤ 1.3 × the file.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

# Qwen3 shapes by size (billions of parameters, the vocabulary being the built-in tokenizer's).
SHAPES = {
    # the test suite's (scripts/gpu-check.sh --size tiny): seconds to make and train on a CPU
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16),
    "0.5": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=40, num_attention_heads=16,
                num_key_value_heads=8, head_dim=64),
    "2": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=36, num_attention_heads=16,
              num_key_value_heads=8, head_dim=128),
}


def make_model(gym: str, size: str, d: pathlib.Path) -> int:
    """Writes a random bf16 Qwen3 of `size` with the built-in tokenizer into d; returns the weights' bytes."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if d.exists():
        shutil.rmtree(d)
    subprocess.run([gym, "base", "export", str(d)], check=True, capture_output=True)
    for p in d.glob("*.safetensors*"):
        p.unlink()
    builtin = json.loads((d / "config.json").read_text())
    (d / "config.json").unlink()
    ids = {k: builtin[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if builtin.get(k) is not None}
    cfg = Qwen3Config(vocab_size=builtin["vocab_size"], max_position_embeddings=512, tie_word_embeddings=False,
                      **ids, **SHAPES[size])
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    model = Qwen3ForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    model.save_pretrained(d, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    del model
    torch.set_default_dtype(torch.float32)
    size_bytes = sum(p.stat().st_size for p in d.glob("*.safetensors"))
    print(f"size {size}: {n / 1e9:.2f} B parameters, {size_bytes / 2**20:.0f} MiB in bf16", file=sys.stderr)
    return size_bytes


def children() -> dict[int, int]:
    """pid → parent pid of every process."""
    out = {}
    for p in pathlib.Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
                out[int(p.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    return out


def role(pid: int, root: int) -> str | None:
    try:
        cmd = (pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"))
    except OSError:
        return None
    argv = [c.decode(errors="replace") for c in cmd if c]
    if pid == root:
        return "gym up (hanzod)"
    text = " ".join(argv)
    if "gym_protocol" in text and "backend" in text:
        return "torch"
    if len(argv) > 1 and argv[1] == "worker":
        return "validator" if "validator" in text else "gym worker"
    return None


def vmhwm(pid: int) -> int:
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) << 10
    except (OSError, ValueError):
        pass
    return 0


def run(gym: str, model: pathlib.Path, out: pathlib.Path, args: list[str], timeout: float) -> tuple[int, dict]:
    """Runs gym up, sampling every process below it; returns its exit status and the peaks by pid."""
    log = open(out / "up.log", "w")
    # The torch workers run this interpreter (it has torch, transformers and gym_protocol).
    env = {**os.environ, "GYM_PYTHON": os.environ.get("GYM_PYTHON", sys.executable)}
    proc = subprocess.Popen([gym, "up", "--model", str(model), "--backend", "torch", "--out", str(out / "up"), *args],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    peaks: dict[int, tuple[str, int]] = {}
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            break
        parents = children()
        tree = {proc.pid}
        grew = True
        while grew:
            grew = False
            for pid, pp in parents.items():
                if pp in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree:
            r = peaks.get(pid, (None, 0))[0] or role(pid, proc.pid)
            if r:
                peaks[pid] = (r, max(peaks.get(pid, (r, 0))[1], vmhwm(pid)))
        time.sleep(0.2)
    log.close()
    return proc.wait(), peaks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gym", default="gym")
    ap.add_argument("--sizes", default="0.5,2", help="comma-separated: " + ", ".join(SHAPES))
    ap.add_argument("--out", default="out/bench-memory")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    ap.add_argument("--up-args", default="--workers 3 --validators 2 --epochs 1 --steps-per-epoch 2 --interval 1 --prompts 1",
                    help="gym up's other flags")
    a = ap.parse_args()
    base = pathlib.Path(a.out)
    base.mkdir(parents=True, exist_ok=True)
    results = []
    for size in a.sizes.split(","):
        d = base / f"qwen3-{size}b"
        file_bytes = make_model(a.gym, size, d / "model")
        code, peaks = run(a.gym, d / "model", d, a.up_args.split(), a.timeout)
        by_role: dict[str, list[int]] = {}
        for r, b in peaks.values():
            by_role.setdefault(r, []).append(b)
        res = {"size": size, "file_mib": round(file_bytes / 2**20), "exit": code,
               "peak_mib": {r: sorted(round(b / 2**20) for b in bs) for r, bs in sorted(by_role.items())},
               "peak_over_file": {r: round(max(bs) / file_bytes, 2) for r, bs in sorted(by_role.items())}}
        print(json.dumps(res), flush=True)
        results.append(res)
        shutil.rmtree(d / "model", ignore_errors=True)  # gigabytes
    print("\nsize  file MiB  exit  " + "  ".join(f"{r} (MiB, ×file)" for r in results[0]["peak_mib"]), file=sys.stderr)
    for res in results:
        cols = "  ".join(f"{max(v)} ({res['peak_over_file'][r]})" for r, v in res["peak_mib"].items())
        print(f"{res['size']:>4}  {res['file_mib']:>8}  {res['exit']:>4}  {cols}", file=sys.stderr)
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
