#!/usr/bin/env python3
"""The GPU check (issue 35, item 7): a torch job in bf16 and in 4-bit, its deltas checked by validators.

Run through scripts/gpu-check.sh, which prepares the Python environment (from wheels carried with
it where the machine has no index) and the gym binary. For each mode it makes a random Qwen3
saved in bf16 by transformers (the built-in tokenizer, so the built-in addition task runs on it),
runs `gym up --model DIR --backend torch --torch-device DEVICE` with two validators (hanzod never
loads the base: the validators check every sampled delta — half of them, --spot-check-bp 5000 — from
its traces on the CPU, in the Go engine, and measure the held-out figures), and prints one JSON report:

- per mode: the job's status, wall time, the torch workers' step time (mean and max, from their
  events), the peak GPU memory in use (the sum over every compute process nvidia-smi lists: run it on an otherwise
  idle GPU; null on the CPU), and every
  trace check's distances between the device's computation and the CPU checker (log-prob max
  difference, the update's relative L2 and cosine, the loss difference), with its outcome;
- 4-bit needs CUDA and bitsandbytes: on the CPU the mode is reported as skipped with the reason.

    scripts/gpu-check.sh --device cuda          # on a GPU machine: the report for docs/gpu-owners.md
    scripts/gpu-check.sh --device cpu --size tiny   # what the test suite runs (cmd/gym TestGPUCheckScript)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent


def bench_memory():
    """scripts/bench-memory.py as a module (its model maker and shapes)."""
    spec = importlib.util.spec_from_file_location("bench_memory", HERE / "bench-memory.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


class GPUSampler(threading.Thread):
    """Samples the GPU memory of every compute process with nvidia-smi; peak is the largest sum seen (MiB)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak: int | None = None
        self.stop = threading.Event()
        self.smi = shutil.which("nvidia-smi")

    def run(self) -> None:
        if not self.smi:
            return
        self.peak = 0
        while not self.stop.is_set():
            try:
                out = subprocess.run([self.smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10).stdout
                used = sum(int(line.split(",")[1]) for line in out.splitlines() if line.strip())
                self.peak = max(self.peak, used)
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass
            self.stop.wait(0.5)


def step_seconds(up_dir: pathlib.Path) -> list[float]:
    """The seconds of every training step the workers reported (their events.jsonl)."""
    out = []
    for ev in sorted(up_dir.glob("workers/w*/events.jsonl")):
        for line in ev.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("kind") == "step" and e.get("seconds"):
                out.append(float(e["seconds"]))
    return out


def four_bit_skip(device: str, cuda_available: bool, has_bitsandbytes: bool) -> str | None:
    """Why the 4-bit mode cannot run here, or None when it can."""
    if not (device.startswith("cuda") and cuda_available):
        return "4-bit NF4 needs CUDA (bitsandbytes); this run's device is " + device
    if not has_bitsandbytes:
        return "bitsandbytes is not installed in this interpreter"
    return None


def gpu_name() -> str | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        return subprocess.run([smi, "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def run_mode(gym: str, python: str, model: pathlib.Path, out: pathlib.Path, device: str, mode: str,
             up_args: list[str], timeout: float) -> dict:
    """One gym up run; returns the mode's part of the report."""
    up = out / mode
    args = [gym, "up", "--model", str(model), "--backend", "torch", "--torch-device", device, "--torch-dtype", "bfloat16",
            "--python", python, "--validators", "2", "--json", "--out", str(up), "--timeout", f"{int(timeout)}s",
            # half the deltas trace-checked (the default 10% may sample none
            # of a short run's: the report is about those checks' differences)
            "--spot-check-bp", "5000", *up_args]
    if mode == "4bit":
        args.append("--use-4bit")
    sampler = GPUSampler()
    sampler.start()
    t0 = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "GYM_PYTHON": python})
    seconds = time.monotonic() - t0
    sampler.stop.set()
    sampler.join()
    (out / f"{mode}.stderr").write_text(proc.stderr)
    res: dict = {"mode": mode, "exit": proc.returncode, "seconds": round(seconds, 1), "peak_gpu_mib": sampler.peak}
    try:
        summary = json.loads(proc.stdout)
    except ValueError:
        res["status"] = "no summary"
        res["error"] = proc.stderr.strip().splitlines()[-5:]
        return res
    res["status"] = summary.get("status")
    if summary.get("reason"):
        res["reason"] = summary["reason"]
    steps = step_seconds(up)
    res["steps"] = len(steps)
    res["step_seconds_mean"] = round(statistics.fmean(steps), 3) if steps else None
    res["step_seconds_max"] = round(max(steps), 3) if steps else None
    res["accuracy_before"], res["accuracy_after"] = summary.get("eval_before"), summary.get("eval_after")
    res["loss_before"], res["loss_after"] = summary.get("loss_before"), summary.get("loss_after")
    res["hanzod_base_loads"] = summary.get("hanzod_base_loads")
    checks = []
    for e in summary.get("epochs") or []:
        res.setdefault("evaluators", e.get("evaluators"))
        for c in e.get("trace_checks") or []:
            checks.append({k: c.get(k) for k in ("slot", "dtype", "failed", "unverifiable", "validators", "logprob_max",
                                                  "update_rel_l2", "update_cosine", "update_scale", "loss_diff", "steps", "tokens")})
    res["trace_checks"] = checks
    refused = [n.get("refused") for n in summary.get("nodes") or [] if n.get("refused")]
    if refused:
        res["refused"] = refused
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gym", required=True, help="the gym binary")
    ap.add_argument("--python", default=sys.executable, help="the interpreter the torch workers run")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    ap.add_argument("--size", default="0.5", help="model size: 0.5, 2 or tiny")
    ap.add_argument("--out", default="out/gpu-check")
    ap.add_argument("--timeout", type=float, default=420, help="seconds per mode")
    ap.add_argument("--up-args", default="--workers 3 --epochs 1 --steps-per-epoch 4 --interval 1 --prompts 4 --eval-size 8 --shard-size 4",
                    help="gym up's other flags")
    a = ap.parse_args()
    t0 = time.monotonic()
    out = pathlib.Path(a.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    bm = bench_memory()
    model = out / "model"
    file_bytes = bm.make_model(a.gym, a.size, model)
    import torch

    report: dict = {"device": a.device, "gpu": gpu_name(), "torch": torch.__version__,
                    "cuda_available": torch.cuda.is_available(), "size": a.size, "file_mib": round(file_bytes / 2**20),
                    "modes": []}
    for mode in ("bf16", "4bit"):
        if mode == "4bit":
            why = four_bit_skip(a.device, torch.cuda.is_available(), importlib.util.find_spec("bitsandbytes") is not None)
            if why:
                report["modes"].append({"mode": mode, "status": "skipped", "reason": why})
                continue
        report["modes"].append(run_mode(a.gym, a.python, model, out, a.device, mode, a.up_args.split(), a.timeout))
    report["seconds"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(model, ignore_errors=True)
    print(json.dumps(report, indent=2))
    ok = report["modes"][0].get("status") == "published"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
