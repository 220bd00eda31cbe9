"""PyTorch side of `gym bench model`: the same three figures as the Go engine.

    bench_torch.py --dir MODEL --threads N --seq L --iters I [--rank R --alpha A --targets q_proj,v_proj]

Loads MODEL (a Hugging Face directory) with transformers in float32 on the
CPU, and prints one JSON object: prefill_tokens_per_s, decode_tokens_per_s,
train_tokens_per_s, peak_rss_bytes, threads. Each figure is the best of
--iters timed repetitions after one warm-up. No network is used.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def tokens(n, vocab, salt):
    # The same ids as the Go side (modelbench.benchTokens).
    return [(i * 7919 + salt * 104729 + 13) % vocab for i in range(n)]


def peak_rss():
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over from
    # the parent across fork and exec, so it would report gym's own peak.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def best(iters, fn):
    fn()  # warm-up
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--targets", default="q_proj,v_proj")
    a = ap.parse_args()

    import torch
    torch.set_num_threads(a.threads)
    from transformers import AutoModelForCausalLM, DynamicCache
    from peft import LoraConfig, get_peft_model

    model = AutoModelForCausalLM.from_pretrained(a.dir, dtype=torch.float32)
    model.eval()
    vocab = model.config.vocab_size
    out = {"threads": torch.get_num_threads(), "torch": torch.__version__}

    # Prefill: one sequence of --seq tokens into a fresh cache, logits of
    # the last position only (what sampling needs).
    ids = torch.tensor([tokens(a.seq, vocab, 0)])
    def prefill():
        with torch.no_grad():
            model(input_ids=ids, past_key_values=DynamicCache(config=model.config), use_cache=True, logits_to_keep=1)
    out["prefill_tokens_per_s"] = a.seq / best(a.iters, prefill)

    # Decode: a group of --group sequences, --prompt tokens prefilled (not
    # timed), then --steps KV-cached steps of one token each (timed).
    prompt = torch.tensor(tokens(a.group * a.prompt, vocab, 1)).view(a.group, a.prompt)
    step_ids = torch.tensor(tokens(a.group, vocab, 2)).view(a.group, 1)
    def decode_once():
        with torch.no_grad():
            cache = DynamicCache(config=model.config)
            model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            t0 = time.perf_counter()
            for _ in range(a.steps):
                model(input_ids=step_ids, past_key_values=cache, use_cache=True)
            return time.perf_counter() - t0
    decode_once()
    dt = min(decode_once() for _ in range(a.iters))
    out["decode_tokens_per_s"] = a.group * a.steps / dt

    # One LoRA training step: forward with the full logits, per-token
    # log-probabilities, their mean as the loss, backward into the adapter.
    cfg = LoraConfig(r=a.rank, lora_alpha=a.alpha, target_modules=a.targets.split(","), lora_dropout=0.0)
    pm = get_peft_model(model, cfg)
    pm.train()
    tids = torch.tensor([tokens(a.seq, vocab, 3)])
    targets = torch.roll(tids, -1, dims=1)
    def train():
        logits = pm(input_ids=tids).logits
        lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        loss = -lp.mean()
        loss.backward()
        pm.zero_grad(set_to_none=True)
    out["train_tokens_per_s"] = a.seq / best(a.iters, train)

    out["peak_rss_bytes"] = peak_rss()
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
