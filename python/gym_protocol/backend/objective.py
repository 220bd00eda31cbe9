"""The GSPO objective in torch, term for term as the Go package gspo.

For consecutive groups of G completions with rewards r_i, per-token
log-probabilities under the current policy (lp, with gradient), the sampling
policy (old) and the frozen reference (ref):

* advantages Â_i = (r_i − mean r)/(std r + ε), sample std (n−1), exactly 0
  in a group whose rewards are all equal;
* sequence level: s_i = exp(mean_t[lp − old]) (length-normalised),
  L_pg = −(1/N) Σ_i min(s_i Â_i, clip(s_i, 1−ε_low, 1+ε_high) Â_i);
* token level: the same per token, then the mean over tokens;
* KL: per-token k3 = exp(ref − lp) − (ref − lp) − 1, mean over tokens, then
  over sequences; loss = L_pg + β·KL.

Everything after the log-probabilities is float64, as in Go. The clipped
branch's gradient is zero (the clip value is a constant), as in Go.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from . import BackendError


@dataclass
class Config:
    level: str = "sequence"
    beta: float = 0.1
    eps_low: float = 3e-4
    eps_high: float = 4e-4
    adv_eps: float = 1e-4

    def validate(self) -> None:
        if self.level not in ("sequence", "token"):
            raise BackendError(f"importance_sampling_level {self.level!r} (want sequence or token)")
        for v in (self.beta, self.eps_low, self.eps_high, self.adv_eps):
            if not (v >= 0) or math.isinf(v):
                raise BackendError("beta, epsilon_low, epsilon_high, advantage_epsilon must be finite and >= 0")
        if self.eps_low >= 1:
            raise BackendError(f"epsilon_low {self.eps_low} >= 1")


def advantages(rewards: list[float], G: int, eps: float) -> list[float]:
    """Group-normalised advantages, as gspo.Advantages."""
    if G < 2 or len(rewards) % G:
        raise BackendError(f"{len(rewards)} rewards in groups of {G} (need G >= 2)")
    adv = [0.0] * len(rewards)
    for lo in range(0, len(rewards), G):
        g = rewards[lo : lo + G]
        mean = 0.0
        for r in g:
            mean += r
        mean /= G
        if all(r == g[0] for r in g):
            continue
        ss = 0.0
        for r in g:
            ss += (r - mean) * (r - mean)
        std = math.sqrt(ss / (G - 1))
        for i, r in enumerate(g):
            adv[lo + i] = (r - mean) / (std + eps)
    return adv


@dataclass
class Stats:
    loss: float = 0.0
    policy_loss: float = 0.0
    kl: float = 0.0
    clip_frac: float = 0.0
    ratio_mean: float = 0.0
    ratio_std: float = 0.0
    ratio_min: float = math.inf
    ratio_max: float = -math.inf
    token_ratio_std: float = 0.0
    zero_var_groups: int = 0
    extra: dict = field(default_factory=dict)


def compute(c: Config, G: int, rewards: list[float], lp: list[torch.Tensor], old: list[torch.Tensor],
            ref: list[torch.Tensor] | None) -> tuple[torch.Tensor, Stats]:
    """The loss (a float64 scalar with gradient through lp) and its statistics."""
    c.validate()
    N = len(rewards)
    if N == 0 or len(lp) != N or len(old) != N or (c.beta > 0 and (ref is None or len(ref) != N)):
        raise BackendError("objective: mismatched batch")
    adv = advantages(rewards, G, c.adv_eps)
    lo, hi = 1 - c.eps_low, 1 + c.eps_high
    st = Stats()
    pg = torch.zeros((), dtype=torch.float64)
    kl = torch.zeros((), dtype=torch.float64)
    ratios: list[float] = []
    tok_ratios: list[torch.Tensor] = []
    clipped = 0
    for i in range(N):
        x = lp[i].double()
        o = old[i].double()
        n = x.shape[0]
        if n == 0 or o.shape[0] != n:
            raise BackendError(f"objective: sequence {i} has mismatched rows")
        A = adv[i]
        tok_ratios.append(torch.exp(x - o).detach())
        if c.level == "sequence":
            s = torch.exp((x - o).sum() / n)
            sv = s.item()
            cl = min(max(sv, lo), hi)
            ratios.append(sv)
            if sv * A <= cl * A:
                pg = pg - s * A / N
            else:
                pg = pg - cl * A / N  # constant: no gradient
                clipped += 1
        else:
            r = torch.exp(x - o)
            cl = r.detach().clamp(lo, hi)
            keep = r.detach() * A <= cl * A
            term = torch.where(keep, r * A, cl * A)
            pg = pg - term.sum() / n / N
            clipped += int((~keep).sum().item())
            ratios.extend(r.detach().tolist())
        if c.beta > 0:
            d = ref[i].double() - x
            kl = kl + (torch.exp(d) - d - 1).sum() / n / N
    loss = pg + c.beta * kl
    st.policy_loss, st.kl, st.loss = pg.item(), kl.item(), loss.item()
    m = len(ratios)
    st.clip_frac = clipped / m
    rt = torch.tensor(ratios, dtype=torch.float64)
    st.ratio_mean = rt.mean().item()
    st.ratio_std = math.sqrt(max(0.0, (rt * rt).mean().item() - st.ratio_mean ** 2))
    st.ratio_min, st.ratio_max = rt.min().item(), rt.max().item()
    tr = torch.cat(tok_ratios)
    tm = tr.mean().item()
    st.token_ratio_std = math.sqrt(max(0.0, (tr * tr).mean().item() - tm * tm))
    st.zero_var_groups = sum(1 for g in range(0, N, G) if all(a == 0 for a in adv[g : g + G]))
    return loss, st
