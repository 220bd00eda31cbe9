"""Traces files: the sampled completions of a step, crossing the seam.

A traces file is a safetensors file with these tensors (N = P·G sequences,
sequence i = p·G + g is completion g of prompt p):

=================  =====  =========  ==============================================
name               dtype  shape      meaning
=================  =====  =========  ==============================================
prompt_ids         I32    [P, Lp]    prompt token ids, right-padded with 0
prompt_lens        I32    [P]        prompt lengths (>= 1)
completion_ids     I32    [N, Lc]    sampled token ids, right-padded with 0
completion_lens    I32    [N]        completion lengths (>= 1)
old_logp           F32    [N, Lc]    log softmax(logits/T) of each sampled token
                                     under the sampling policy (π_old); 0 in padding
rewards            F64    [N]        rewards (only in files given to Step)
=================  =====  =========  ==============================================

Its metadata holds ``group_size`` (G) in decimal. Files are checked
strictly when read: every tensor present with the right dtype and shape,
lengths within bounds, token ids within the vocabulary, values finite.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from . import BackendError

MAX_SEQUENCES = 1 << 20
MAX_TOKENS = 1 << 16


@dataclass
class Traces:
    """Prompts, completions and their sampling log-probabilities (and rewards)."""

    group_size: int
    prompts: list[list[int]]
    completions: list[list[int]]
    old_logp: list[torch.Tensor]  # float32 [len(completions[i])] each
    rewards: list[float] | None = None

    @property
    def n(self) -> int:
        return len(self.completions)


def confined(exchange: str, name: str) -> str:
    """The path of file ``name`` in the exchange directory; refuses anything but a plain file name."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name or name.startswith("."):
        raise BackendError(f"file name {name!r} is not a plain file name in the exchange directory")
    return os.path.join(exchange, name)


def atomic_save(tensors: dict[str, torch.Tensor], path: str, metadata: dict[str, str] | None = None) -> None:
    """Writes a safetensors file so that readers see either nothing or all of it."""
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".safetensors")
    os.close(fd)
    try:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, tmp, metadata=metadata)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _pad(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.zeros((len(rows), width), dtype=torch.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.int32)
    return out


def write(path: str, t: Traces) -> None:
    """Writes t to path (atomically)."""
    lc = max(len(c) for c in t.completions)
    old = torch.zeros((t.n, lc), dtype=torch.float32)
    for i, lp in enumerate(t.old_logp):
        old[i, : len(lp)] = lp.float()
    tensors = {
        "prompt_ids": _pad(t.prompts),
        "prompt_lens": torch.tensor([len(p) for p in t.prompts], dtype=torch.int32),
        "completion_ids": _pad(t.completions),
        "completion_lens": torch.tensor([len(c) for c in t.completions], dtype=torch.int32),
        "old_logp": old,
    }
    if t.rewards is not None:
        tensors["rewards"] = torch.tensor(t.rewards, dtype=torch.float64)
    atomic_save(tensors, path, {"group_size": str(t.group_size)})


def read(path: str, vocab: int, want_rewards: bool) -> Traces:
    """Reads and checks a traces file for a model with ``vocab`` tokens."""
    if os.path.getsize(path) > 1 << 34:
        raise BackendError(f"traces file {path} is too large")
    want = {"prompt_ids": torch.int32, "prompt_lens": torch.int32, "completion_ids": torch.int32,
            "completion_lens": torch.int32, "old_logp": torch.float32}
    if want_rewards:
        want["rewards"] = torch.float64
    try:
        with safe_open(path, framework="pt") as f:
            keys = set(f.keys())
            meta = f.metadata() or {}
            extra = keys - set(want) - {"rewards"}
            missing = set(want) - keys
            if extra or missing:
                raise BackendError(f"traces file: missing {sorted(missing)}, unexpected {sorted(extra)}")
            ts = {k: f.get_tensor(k) for k in want}
    except BackendError:
        raise
    except Exception as e:  # safetensors' own errors: a malformed file
        raise BackendError(f"traces file {os.path.basename(path)}: {e}") from e
    for k, dt in want.items():
        if ts[k].dtype != dt:
            raise BackendError(f"traces file: {k} is {ts[k].dtype}, want {dt}")
    try:
        G = int(meta.get("group_size", ""))
    except ValueError:
        raise BackendError("traces file: metadata group_size missing or not an integer") from None
    pid, plen, cid, clen, old = (ts[k] for k in ("prompt_ids", "prompt_lens", "completion_ids", "completion_lens", "old_logp"))
    if pid.dim() != 2 or cid.dim() != 2 or plen.dim() != 1 or clen.dim() != 1 or old.shape != cid.shape:
        raise BackendError("traces file: tensors of the wrong rank or shape")
    P, N = plen.shape[0], clen.shape[0]
    if G < 1 or P < 1 or N != P * G or N > MAX_SEQUENCES or pid.shape[0] != P or cid.shape[0] != N:
        raise BackendError(f"traces file: {P} prompts, {N} completions, group size {G}")
    if pid.shape[1] > MAX_TOKENS or cid.shape[1] > MAX_TOKENS:
        raise BackendError("traces file: sequences too long")
    if (plen < 1).any() or (plen > pid.shape[1]).any() or (clen < 1).any() or (clen > cid.shape[1]).any():
        raise BackendError("traces file: a length out of range")
    if (pid < 0).any() or (pid >= vocab).any() or (cid < 0).any() or (cid >= vocab).any():
        raise BackendError(f"traces file: a token id outside the vocabulary of {vocab}")
    if not torch.isfinite(old).all() or (old > 0).any():
        raise BackendError("traces file: old_logp must be finite log-probabilities (<= 0)")
    rewards = None
    if want_rewards:
        r = ts["rewards"]
        if r.shape != (N,) or not torch.isfinite(r).all():
            raise BackendError("traces file: rewards must be N finite values")
        rewards = r.tolist()
    pl, cl = plen.tolist(), clen.tolist()
    return Traces(
        group_size=G,
        prompts=[pid[p, : pl[p]].tolist() for p in range(P)],
        completions=[cid[i, : cl[i]].tolist() for i in range(N)],
        old_logp=[old[i, : cl[i]].clone() for i in range(N)],
        rewards=rewards,
    )
