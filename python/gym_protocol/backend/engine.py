"""The model, the LoRA adapter and the optimiser of the torch backend.

The base is a Hugging Face directory loaded with transformers'
AutoModelForCausalLM (nothing is downloaded); the adapter is PEFT LoRA on
the job's target modules (dropout 0, no bias), and its tensors cross the
seam in PEFT's own names (``base_model.model.model.layers.N.…lora_A.weight``),
the names the Go engine and published adapters use. The reference policy
is the base with the adapter disabled. A step is what the Go trainer does
after sampling (package trainer): one reference pass, then num_iterations
passes, each splitting the batch into gradient_accumulation_steps
micro-batches of whole groups whose gradients are averaged before one AdamW
update (package optim: β and ε as given, decoupled weight decay, linear
warmup then constant or cosine). The claimed loss is the mean over passes
and micro-batches.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import torch

from . import BackendError, PreconditionError
from . import objective, traces

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
           # Mixture-of-Experts bases (docs/moe.md): Qwen2-MoE's shared expert and its gate are modules;
           # the router's weight and the stacked experts are parameters to PEFT (target_parameters).
           "shared_expert.gate_proj", "shared_expert.up_proj", "shared_expert.down_proj", "shared_expert_gate",
           "gate.weight", "experts.gate_up_proj", "experts.down_proj")
PARAM_TARGETS = ("gate.weight", "experts.gate_up_proj", "experts.down_proj")


@dataclass
class AdamWConfig:
    lr: float = 2e-3
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup: int = 0
    total: int = 0
    min_lr: float = 0.0
    sgd: bool = False  # plain SGD at the same rate instead: θ·(1 − lr·wd) − lr·g (optim.Config.SGD)

    def at(self, step: int) -> float:
        """The learning rate of update ``step`` (1-based), as optim.Schedule.At."""
        step = max(step, 1)
        if step <= self.warmup:
            return self.lr * step / self.warmup
        if self.total <= self.warmup or self.total == 0:
            return self.lr
        p = min(1.0, (step - self.warmup) / (self.total - self.warmup))
        return self.min_lr + (self.lr - self.min_lr) * 0.5 * (1 + math.cos(math.pi * p))

    def validate(self) -> None:
        if not (self.lr > 0) or math.isinf(self.lr):
            raise BackendError(f"learning_rate {self.lr} must be positive and finite")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1) or not (self.eps > 0):
            raise BackendError(f"AdamW betas ({self.beta1}, {self.beta2}) must be in [0, 1), eps {self.eps} > 0")
        if not (self.weight_decay >= 0) or math.isinf(self.weight_decay):
            raise BackendError(f"weight_decay {self.weight_decay}")
        if self.warmup < 0 or self.total < 0 or self.min_lr < 0 or self.min_lr > self.lr:
            raise BackendError("warmup, total updates, min learning rate out of range")


@dataclass
class LoadConfig:
    base_dir: str
    rank: int
    alpha: float
    targets: list[str]
    dtype: str = "float32"
    device: str = "cpu"
    use_4bit: bool = False
    seed: int = 0
    gspo: objective.Config = None  # type: ignore[assignment]
    temperature: float = 1.0
    num_iterations: int = 1
    grad_accum: int = 1
    adamw: AdamWConfig = None  # type: ignore[assignment]
    threads: int = 0


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _device(name: str) -> torch.device:
    if name in ("", "cpu"):
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise PreconditionError(f"device {name}: CUDA is not available on this machine (torch {torch.__version__})")
        return torch.device(name)
    raise BackendError(f"device {name!r} (want cpu, cuda or cuda:N)")


class Engine:
    """One loaded model: policy (base + LoRA), reference (adapter disabled), optimiser."""

    def __init__(self, c: LoadConfig):
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM

        if c.gspo is None or c.adamw is None:
            raise BackendError("load: gspo and adamw settings are required")
        c.gspo.validate()
        c.adamw.validate()
        if not os.path.isabs(c.base_dir) or not os.path.isfile(os.path.join(c.base_dir, "config.json")):
            raise BackendError(f"base_dir {c.base_dir!r} is not an absolute path to a Hugging Face model directory")
        if c.rank < 1 or c.rank > 1 << 16 or not (c.alpha > 0) or math.isinf(c.alpha):
            raise BackendError(f"lora_rank {c.rank}, lora_alpha {c.alpha}")
        if not c.targets or any(t not in TARGETS for t in c.targets) or len(set(c.targets)) != len(c.targets):
            raise BackendError(f"lora_target_modules {c.targets} (each once, from {', '.join(TARGETS)})")
        if c.dtype not in DTYPES:
            raise BackendError(f"dtype {c.dtype!r} (want float32, bfloat16 or float16)")
        if not (c.temperature > 0) or math.isinf(c.temperature):
            raise BackendError(f"temperature {c.temperature}")
        if c.num_iterations < 1 or c.grad_accum < 1:
            raise BackendError("num_iterations and gradient_accumulation_steps must be >= 1")
        dev = _device(c.device)
        # Straight onto the device in the job's dtype: the model is built on
        # the meta device and each tensor is read from the memory-mapped
        # safetensors file, converted and placed (low_cpu_mem_usage, which
        # transformers 5 always does), so host memory never holds a float32
        # copy of a bf16 base, nor a second copy of anything.
        kwargs: dict = {"dtype": DTYPES[c.dtype], "local_files_only": True, "low_cpu_mem_usage": True,
                        "device_map": {"": str(dev)}}
        if c.use_4bit:
            if not torch.cuda.is_available() or dev.type != "cuda":
                raise PreconditionError(
                    "use_4bit loads the base with bitsandbytes NF4, which needs CUDA: this machine has no CUDA device "
                    f"(torch {torch.__version__}); train without use_4bit or on a GPU")
            try:
                from transformers import BitsAndBytesConfig
                import bitsandbytes  # noqa: F401
            except ImportError as e:
                raise PreconditionError(f"use_4bit needs bitsandbytes: pip install bitsandbytes ({e})") from e
            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=DTYPES[c.dtype])
            kwargs["device_map"] = {"": dev.index or 0}
        if c.threads > 0:
            torch.set_num_threads(c.threads)
        torch.manual_seed(c.seed)
        base = AutoModelForCausalLM.from_pretrained(c.base_dir, **kwargs)
        if not c.use_4bit:
            wrong = {f"{n}: {p.dtype} on {p.device}" for n, p in base.named_parameters()
                     if p.dtype != DTYPES[c.dtype] or p.device.type != dev.type}
            if wrong:
                raise BackendError(f"the base loaded other than {c.dtype} on {dev}: {sorted(wrong)[:3]}")
        base.eval()  # no dropout anywhere
        modules = [t for t in c.targets if t not in PARAM_TARGETS]
        params = ["mlp." + t for t in c.targets if t in PARAM_TARGETS]
        if params and not getattr(base.config, "num_experts_per_tok", None):
            raise BackendError(f"lora_target_modules {params} name experts or a router; the base has none")
        # The router's auxiliary (load-balancing) loss is not part of the
        # objective: the model is called without labels, so transformers
        # never adds it (docs/moe.md), as the Go engine does not.
        lc = LoraConfig(r=c.rank, lora_alpha=c.alpha, target_modules=modules or None,
                        target_parameters=params or None, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
        self.model = get_peft_model(base, lc)
        self.model.eval()
        self.c = c
        self.device = dev
        self.vocab = int(base.config.vocab_size)
        eos = base.config.eos_token_id
        self.eos = set([] if eos is None else ([eos] if isinstance(eos, int) else list(eos)))
        self.max_positions = int(getattr(base.config, "max_position_embeddings", 1 << 30))
        self.names = sorted(self._state().keys())
        self.params = [p for n, p in self.model.named_parameters() if p.requires_grad]
        self.base_parameters = sum(p.numel() for n, p in self.model.named_parameters() if not p.requires_grad)
        self.adapter_parameters = sum(p.numel() for p in self.params)
        self._new_optimizer()

    # ---- adapter I/O -------------------------------------------------

    def _state(self) -> dict[str, torch.Tensor]:
        from peft import get_peft_model_state_dict

        return get_peft_model_state_dict(self.model)

    def _new_optimizer(self) -> None:
        a = self.c.adamw
        if a.sgd:
            # torch's SGD adds wd·θ to the gradient: θ − lr·(g + wd·θ) = θ·(1 − lr·wd) − lr·g, Go's rule.
            self.opt = torch.optim.SGD(self.params, lr=a.lr, momentum=0, weight_decay=a.weight_decay, foreach=False)
        else:
            self.opt = torch.optim.AdamW(self.params, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                                         weight_decay=a.weight_decay, foreach=False)
        self.updates = 0

    def write_adapter(self, path: str) -> None:
        """Writes the adapter in PEFT names, float32."""
        traces.atomic_save({k: v.float() for k, v in self._state().items()}, path, {"format": "pt"})

    def grads(self) -> dict[str, torch.Tensor]:
        """The parameters' gradients in PEFT names."""
        out = {}
        for n, p in self.model.named_parameters():
            if p.requires_grad:
                key = n.replace(".default.", ".")
                out[key] = (p.grad if p.grad is not None else torch.zeros_like(p)).float()
        if sorted(out) != self.names:
            raise RuntimeError("gradient names do not match the adapter's")
        return out

    def set_adapter(self, path: str, reset_optimizer: bool) -> None:
        """Loads adapter tensors (exactly this adapter's names, shapes, finite values)."""
        from peft import set_peft_model_state_dict
        from safetensors import safe_open

        try:
            with safe_open(path, framework="pt") as f:
                keys = sorted(f.keys())
                if keys != self.names:
                    missing = sorted(set(self.names) - set(keys))[:3]
                    extra = sorted(set(keys) - set(self.names))[:3]
                    raise BackendError(f"adapter file: tensors differ from the adapter's (missing {missing}, unexpected {extra})")
                sd = {k: f.get_tensor(k) for k in keys}
        except BackendError:
            raise
        except Exception as e:
            raise BackendError(f"adapter file {os.path.basename(path)}: {e}") from e
        cur = self._state()
        for k, v in sd.items():
            if v.dtype != torch.float32 or v.shape != cur[k].shape:
                raise BackendError(f"adapter file: {k} is {v.dtype}{list(v.shape)}, want float32{list(cur[k].shape)}")
            if not torch.isfinite(v).all():
                raise BackendError(f"adapter file: {k} has a non-finite value")
        res = set_peft_model_state_dict(self.model, sd)
        if getattr(res, "unexpected_keys", None):
            raise BackendError(f"adapter file: unexpected keys {res.unexpected_keys[:3]}")
        if reset_optimizer:
            self._new_optimizer()

    # ---- log-probabilities ------------------------------------------------

    def _logp(self, t: traces.Traces, lo: int, hi: int, grad: bool) -> list[torch.Tensor]:
        """log softmax(logits/T) of each completion token of sequences [lo, hi), teacher-forced,
        right-padded to the longest (causal: padding after a position cannot change it)."""
        G = t.group_size
        seqs = [t.prompts[i // G] + t.completions[i][:-1] for i in range(lo, hi)]
        T = max(len(s) for s in seqs)
        if T + 1 > self.max_positions:
            raise BackendError(f"a sequence of {T + 1} tokens exceeds the model context {self.max_positions}")
        ids = torch.zeros((hi - lo, T), dtype=torch.long)
        for s, seq in enumerate(seqs):
            ids[s, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        ids = ids.to(self.device)
        with torch.set_grad_enabled(grad):
            logits = self.model(input_ids=ids, use_cache=False).logits.float()
            lp = torch.log_softmax(logits / self.c.temperature, dim=-1)
            out = []
            for s in range(hi - lo):
                i = lo + s
                pl, comp = len(t.prompts[i // G]), t.completions[i]
                rows = torch.arange(pl - 1, pl - 1 + len(comp), device=self.device)
                tg = torch.tensor(comp, dtype=torch.long, device=self.device)
                out.append(lp[s, rows, tg])
        return out

    # ---- the step ---------------------------------------------------------

    def step(self, t: traces.Traces, G: int, dry_run: bool = False, want_grad: bool = False):
        """One training step on t (with rewards); returns (stats dict, first-pass gradient or None, seconds)."""
        if t.rewards is None:
            raise BackendError("step: the traces carry no rewards")
        if G != t.group_size:
            raise BackendError(f"step: group_size {G}, the traces say {t.group_size}")
        c = self.c
        N = t.n
        P = N // G
        if P % c.grad_accum:
            raise BackendError(f"gradient_accumulation_steps {c.grad_accum} must divide the {P} prompts")
        t0 = time.perf_counter()
        old = [x.to(self.device) for x in t.old_logp]
        ref = None
        tokens = 0
        if c.gspo.beta > 0:
            with self.model.disable_adapter():
                ref = [x.detach() for x in self._logp(t, 0, N, grad=False)]
            tokens += sum(len(t.prompts[i // G]) + len(t.completions[i]) - 1 for i in range(N))
        micro = P // c.grad_accum * G
        iters = 1 if dry_run else c.num_iterations
        passes = iters * c.grad_accum
        acc = {"loss": 0.0, "policy_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "ratio_mean": 0.0, "ratio_std": 0.0,
               "token_ratio_std": 0.0}
        rmin, rmax, zero_var, lr = math.inf, -math.inf, 0, 0.0
        first_grad = None
        for it in range(iters):
            self.opt.zero_grad(set_to_none=False)
            for lo in range(0, N, micro):
                hi = lo + micro
                lp = self._logp(t, lo, hi, grad=True)
                loss, st = objective.compute(c.gspo, G, t.rewards[lo:hi], lp, old[lo:hi],
                                             None if ref is None else ref[lo:hi])
                (loss / c.grad_accum).backward()
                for k in acc:
                    acc[k] += getattr(st, k) / passes
                rmin, rmax = min(rmin, st.ratio_min), max(rmax, st.ratio_max)
                if it == 0:
                    zero_var += st.zero_var_groups
                tokens += sum(len(t.prompts[i // G]) + len(t.completions[i]) - 1 for i in range(lo, hi))
            if it == 0 and want_grad:
                first_grad = {k: v.clone() for k, v in self.grads().items()}
            if dry_run:
                break
            for p in self.params:
                if p.grad is not None and not torch.isfinite(p.grad).all():
                    raise RuntimeError("non-finite gradient: the step was not applied")
            self.updates += 1
            lr = c.adamw.at(self.updates)
            for g in self.opt.param_groups:
                g["lr"] = lr
            self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        stats = dict(acc, ratio_min=rmin, ratio_max=rmax, zero_var_groups=zero_var, learning_rate=lr,
                     train_tokens=tokens, updates=self.updates)
        return stats, first_grad, time.perf_counter() - t0

    # ---- sampling -----------------------------------------------------------

    @torch.no_grad()
    def _decode(self, prompts: list[list[int]], n: int, max_new: int, pick) -> list[list[int]]:
        """Decodes n continuations of each prompt (prompts of one length at a time) with the KV cache."""
        out: list[list[int]] = [[] for _ in range(len(prompts) * n)]
        by_len: dict[int, list[int]] = {}
        for i, p in enumerate(prompts):
            if not p:
                raise BackendError("an empty prompt")
            if any(x < 0 or x >= self.vocab for x in p):
                raise BackendError(f"a prompt token outside the vocabulary of {self.vocab}")
            if len(p) + max_new > self.max_positions:
                raise BackendError(f"{len(p)} prompt and {max_new} new tokens exceed the model context {self.max_positions}")
            by_len.setdefault(len(p), []).append(i)
        for idx in by_len.values():
            rows = [i * n + g for i in idx for g in range(n)]
            ids = torch.tensor([prompts[i] for i in idx for _ in range(n)], dtype=torch.long, device=self.device)
            res = self.model(input_ids=ids, use_cache=True)
            past, logits = res.past_key_values, res.logits[:, -1, :].float()
            done = [False] * len(rows)
            for a in range(max_new):
                toks = pick(logits, rows, done)
                live = False
                for s, r in enumerate(rows):
                    if done[s]:
                        continue
                    out[r].append(toks[s])
                    done[s] = toks[s] in self.eos
                    live = live or not done[s]
                if not live or a + 1 == max_new:
                    break
                step = torch.tensor([[out[r][-1]] for r in rows], dtype=torch.long, device=self.device)
                res = self.model(input_ids=step, past_key_values=past, use_cache=True)
                past, logits = res.past_key_values, res.logits[:, -1, :].float()
        return out

    def generate(self, prompts: list[list[int]], G: int, max_new: int, temperature: float, top_k: int,
                 seed: int) -> traces.Traces:
        """G samples per prompt, recording log softmax(logits/T) of each sampled token over the whole vocabulary."""
        if G < 1 or max_new < 1 or not prompts:
            raise BackendError(f"generate: {len(prompts)} prompts, group size {G}, max_new_tokens {max_new}")
        if not (temperature > 0) or math.isinf(temperature) or top_k < 0:
            raise BackendError(f"generate: temperature {temperature}, top_k {top_k}")
        gen = torch.Generator(device="cpu").manual_seed(seed & ((1 << 63) - 1))
        old: dict[int, list[float]] = {}

        def pick(logits: torch.Tensor, rows: list[int], done: list[bool]) -> list[int]:
            lp = torch.log_softmax(logits / temperature, dim=-1).cpu()
            w = lp
            if 0 < top_k < lp.shape[-1]:
                thr = torch.topk(lp, top_k, dim=-1).values[:, -1:]
                w = torch.where(lp >= thr, lp, torch.full_like(lp, -math.inf))
            toks = torch.multinomial(torch.softmax(w, dim=-1), 1, generator=gen).squeeze(1).tolist()
            for s, r in enumerate(rows):
                if not done[s]:
                    old.setdefault(r, []).append(lp[s, toks[s]].item())
            return toks

        self.model.eval()
        comps = self._decode(prompts, G, max_new, pick)
        return traces.Traces(group_size=G, prompts=prompts, completions=comps,
                             old_logp=[torch.tensor(old[i], dtype=torch.float32) for i in range(len(comps))])

    def evaluate(self, prompts: list[list[int]], max_new: int) -> list[list[int]]:
        """Greedy decoding (ties to the lowest id)."""
        if max_new < 1 or not prompts:
            raise BackendError(f"evaluate: {len(prompts)} prompts, max_new_tokens {max_new}")

        def pick(logits: torch.Tensor, rows: list[int], done: list[bool]) -> list[int]:
            return torch.argmax(logits, dim=-1).tolist()

        return self._decode(prompts, 1, max_new, pick)
