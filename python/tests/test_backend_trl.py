"""The torch backend's GSPO objective against TRL's GRPOTrainer loss.

SPEC.md asks for GSPO "as published and as in TRL (importance_sampling_level
="sequence")". These tests run TRL's own code path, ``GRPOTrainer._compute_loss``
of a real trainer (built on a tiny random Llama, a tokenizer trained here and
a one-column data set), on fixed inputs, and compare it with
``gym_protocol.backend.objective.compute`` on the same inputs:

* fixed per-token log-probabilities (policy, π_old, reference), advantages and
  masks: the trainer's forward pass (``_get_per_token_logps_and_entropies``)
  is replaced on the instance by one that returns the fixed log-probabilities,
  so everything after it is TRL's code; losses and gradients with respect to
  the log-probabilities agree within 1e-6 for TRL's ``loss_type="grpo"`` (the
  only one whose normalisation is ours), and the other loss types differ
  exactly by their length weighting;
* the advantages: TRL's group normalisation (its ``nanstd``, its lines in
  ``_generate_and_score_completions``) against ``objective.advantages``;
* a real model: the torch engine's PEFT model, traces it sampled, and TRL's
  own forward pass, reference pass (adapter disabled) and loss, against the
  engine's; loss and LoRA gradients agree.

docs/backends.md ("The objective against TRL") lists each difference and why
ours is what SPEC.md says. trl is pinned in python/requirements-test.txt; a
missing trl fails these tests under GYM_REQUIRE_PYTHON=1 and skips them
otherwise.
"""

from __future__ import annotations

import math
import os
import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from gym_protocol.backend import objective  # noqa: E402
from gym_protocol.backend.engine import AdamWConfig, Engine, LoadConfig  # noqa: E402

try:
    import trl  # noqa: F401
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import nanstd
except ImportError as err:  # pragma: no cover - depends on the environment
    if os.environ.get("GYM_REQUIRE_PYTHON") == "1":
        raise ImportError(f"trl is required under GYM_REQUIRE_PYTHON=1 (pip install -r python/requirements-test.txt): "
                          f"{err}") from err
    pytest.skip(f"trl is not installed ({err}); pip install -r python/requirements-test.txt", allow_module_level=True)


EOS = 15


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    """A random tiny LlamaForCausalLM saved with transformers."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=32, eos_token_id=EOS, bos_token_id=None,
                      pad_token_id=None, tie_word_embeddings=False)
    d = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(cfg).save_pretrained(d)
    return str(d)


@pytest.fixture(scope="module")
def tokenizer():
    """A word-level tokenizer trained here with tokenizers (16 ids, [PAD] 0, [EOS] 15)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    words = "a b c d e f g h i j k l m".split()
    tk.train_from_iterator([" ".join(words)] * 4,
                           trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]"], vocab_size=15))
    tk.add_special_tokens(["[EOS]"])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", eos_token="[EOS]", unk_token="[UNK]")
    assert len(tok) == 16 and tok.eos_token_id == EOS and tok.pad_token_id == 0
    return tok


def trl_trainer(model, tokenizer, out: pathlib.Path, G: int, **kw) -> GRPOTrainer:
    """A real GRPOTrainer (CPU, no logging) with GRPOConfig(**kw) over a one-column data set."""
    from datasets import Dataset

    cfg = dict(output_dir=str(out), report_to="none", use_cpu=True, num_generations=G, per_device_train_batch_size=8,
               max_completion_length=8, importance_sampling_level="sequence", loss_type="grpo", beta=0.1,
               epsilon=3e-4, epsilon_high=4e-4, use_bias_correction_kl=False, save_strategy="no",
               bf16=False)  # TRL's default is bf16 autocast, also on the CPU; the comparison is fp32
    cfg.update(kw)
    tr = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions),
                     args=GRPOConfig(**cfg), train_dataset=Dataset.from_dict({"prompt": ["a b c"] * 8}),
                     processing_class=tokenizer)
    # transformers' Trainer sets this in its training loop; _compute_loss divides by it.
    tr.current_gradient_accumulation_steps = tr.args.gradient_accumulation_steps
    tr.model.train()
    return tr


def padded(rows: list[torch.Tensor], T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded [B, T] values (0 in padding) and the completion mask."""
    x = torch.zeros((len(rows), T), dtype=rows[0].dtype)
    m = torch.zeros((len(rows), T), dtype=torch.long)
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
        m[i, : len(r)] = 1
    return x, m


def trl_advantages(rewards: list[float], G: int, dtype=torch.float64) -> torch.Tensor:
    """TRL's advantages (scale_rewards="group", one reward function): the lines of
    GRPOTrainer._generate_and_score_completions, with its nanstd (Bessel-corrected)."""
    r = torch.tensor(rewards, dtype=dtype)
    mean = torch.nanmean(r.view(-1, G), dim=1).repeat_interleave(G, dim=0)
    std = nanstd(r.view(-1, G), dim=1).repeat_interleave(G, dim=0)
    return torch.nan_to_num((r - mean) / (std + 1e-4), nan=0.0)


def trl_loss_fixed(tr: GRPOTrainer, lp: list[torch.Tensor], old: list[torch.Tensor], ref: list[torch.Tensor],
                   adv: torch.Tensor) -> tuple[float, list[torch.Tensor]]:
    """TRL's _compute_loss on fixed per-token log-probabilities: its value and ∂loss/∂lp per sequence."""
    T = tr.args.max_completion_length
    leaf, mask = padded([x.detach() for x in lp], T)
    leaf.requires_grad_(True)
    o, _ = padded(old, T)
    r, _ = padded(ref, T)

    def fixed_logps(model, input_ids, attention_mask, logits_to_keep, *a, compute_entropy=False, **k):
        assert logits_to_keep == T and input_ids.shape[0] == leaf.shape[0]
        return leaf, torch.zeros_like(leaf) if compute_entropy else None, None

    tr._get_per_token_logps_and_entropies = fixed_logps  # the instance only
    try:
        B = len(lp)
        inputs = {"prompt_ids": torch.ones((B, 1), dtype=torch.long), "prompt_mask": torch.ones((B, 1), dtype=torch.long),
                  "completion_ids": torch.ones((B, T), dtype=torch.long), "completion_mask": mask,
                  "advantages": adv, "old_per_token_logps": o, "ref_per_token_logps": r,
                  "num_items_in_batch": mask.sum()}
        loss = tr._compute_loss(tr.model, inputs)
    finally:
        del tr._get_per_token_logps_and_entropies
    loss.backward()
    return loss.item(), [leaf.grad[i, : len(x)] for i, x in enumerate(lp)]


def ours_fixed(c: objective.Config, G: int, rewards: list[float], lp: list[torch.Tensor], old: list[torch.Tensor],
               ref: list[torch.Tensor]) -> tuple[float, list[torch.Tensor], objective.Stats]:
    leaves = [x.detach().clone().requires_grad_(True) for x in lp]
    loss, st = objective.compute(c, G, rewards, leaves, old, ref)
    loss.backward()
    return loss.item(), [x.grad if x.grad is not None else torch.zeros_like(x) for x in leaves], st


def fixed_inputs(lengths: list[int], seed: int, spread: float = 2e-3):
    """Per-token log-probabilities: π_old, the policy (π_old plus noise of the given spread, so that some
    sequences clip at the GSPO recipe's ε and some do not), the reference, and rewards with group variance."""
    g = torch.Generator().manual_seed(seed)
    old = [-torch.rand(n, generator=g, dtype=torch.float64) * 3 - 0.05 for n in lengths]
    lp = [o + torch.randn(n, generator=g, dtype=torch.float64) * spread for o, n in zip(old, lengths)]
    ref = [x + torch.randn(len(x), generator=g, dtype=torch.float64) * 0.05 for x in lp]
    rewards = torch.rand(len(lengths), generator=g, dtype=torch.float64).round(decimals=2).tolist()
    return lp, old, ref, rewards


LENGTHS = [1, 3, 8, 5, 2, 7, 4, 6]  # two groups of four, unequal lengths (TRL's max_completion_length is 8)


@pytest.mark.parametrize("level,beta,eps_low,eps_high,spread", [
    ("sequence", 0.1, 3e-4, 4e-4, 2e-3),   # the GSPO recipe: some sequences clipped
    ("sequence", 0.0, 3e-4, 4e-4, 2e-3),   # no KL term
    ("sequence", 0.04, 0.2, 0.2, 2e-3),    # nothing clipped: every gradient flows through the ratio
    ("sequence", 0.1, 0.2, 0.28, 0.5),     # large ratios: both sides of the band clipped
    ("token", 0.1, 0.2, 0.2, 0.3),         # token-level GRPO
])
def test_loss_and_gradient_match_trl_grpo_loss_type(tiny, tokenizer, tmp_path, level, beta, eps_low, eps_high, spread):
    G = 4
    tr = trl_trainer(tiny, tokenizer, tmp_path, G, importance_sampling_level=level, beta=beta, epsilon=eps_low,
                     epsilon_high=eps_high)
    c = objective.Config(level=level, beta=beta, eps_low=eps_low, eps_high=eps_high, adv_eps=1e-4)
    dl = dg = 0.0
    for seed in range(3):
        lp, old, ref, rewards = fixed_inputs(LENGTHS, seed, spread)
        adv = trl_advantages(rewards, G)
        # TRL's nanstd computes Bessel's factor count/(count−1) in float32 even for float64 rewards: ~1e-8 relative
        assert adv.tolist() == pytest.approx(objective.advantages(rewards, G, 1e-4), rel=1e-7, abs=1e-12)
        got, ggot = trl_loss_fixed(tr, lp, old, ref, adv)
        want, gwant, st = ours_fixed(c, G, rewards, lp, old, ref)
        assert abs(got - want) <= 1e-6 * max(1.0, abs(want)), (seed, got, want)
        for i, (a, b) in enumerate(zip(ggot, gwant)):
            assert torch.allclose(a, b, rtol=1e-6, atol=1e-9), (seed, i, a, b)
            dg = max(dg, ((a - b).abs() / b.abs().clamp(min=1e-9)).max().item())
        dl = max(dl, abs(got - want) / max(1.0, abs(want)))
        if level == "sequence" and spread >= 0.5:
            assert 0 < st.clip_frac < 1  # the case exercises both branches
        # TRL's logged clip fraction (sequences or tokens clipped in the direction that matters) is ours
        assert tr._metrics["train"]["clip_ratio/region_mean"][-1] == pytest.approx(st.clip_frac, abs=1e-7)  # float32
    print(f"\nTRL grpo vs ours, {level}: max |Δloss| {dl:.1e}, max relative Δ∂loss/∂lp {dg:.1e}")


@pytest.mark.parametrize("loss_type", ["bnpo", "dapo", "dr_grpo", "luspo"])
def test_trl_token_summed_loss_types_differ_only_by_length_weighting(tiny, tokenizer, tmp_path, loss_type):
    """TRL's other normalisations weight each sequence by its length (SPEC.md's trap: "do not combine sequence
    ratios with token-summed loss normalisation"). With every completion max_completion_length long they give our
    loss (luspo: times the length); with unequal lengths they do not."""
    G = 4
    tr = trl_trainer(tiny, tokenizer, tmp_path, G, loss_type=loss_type)
    c = objective.Config(level="sequence", beta=0.1, eps_low=3e-4, eps_high=4e-4)
    T = tr.args.max_completion_length
    lp, old, ref, rewards = fixed_inputs([T] * 8, 7)
    got, _ = trl_loss_fixed(tr, lp, old, ref, trl_advantages(rewards, G))
    want, _, _ = ours_fixed(c, G, rewards, lp, old, ref)
    scale = T if loss_type == "luspo" else 1
    assert abs(got - scale * want) <= 1e-6 * max(1.0, abs(want))
    lp, old, ref, rewards = fixed_inputs(LENGTHS, 7)
    got, _ = trl_loss_fixed(tr, lp, old, ref, trl_advantages(rewards, G))
    want, _, _ = ours_fixed(c, G, rewards, lp, old, ref)
    assert abs(got - want) > 1e-3 * abs(want), (got, want)
    print(f"\nTRL {loss_type} with unequal lengths: {got:.6g}, ours {want:.6g}")


def test_trl_default_loss_type_is_not_gspo():
    """TRL's defaults are not the GSPO recipe: a worker configured by TRL's defaults would train something else."""
    d = GRPOConfig(output_dir="unused", report_to="none", use_cpu=True)
    assert d.loss_type != "grpo" and d.importance_sampling_level == "token"
    assert d.epsilon == 0.2 and d.epsilon_high is None and d.beta == 0.0 and d.scale_rewards == "group"
    assert d.bf16  # autocast to bfloat16 by default; our backend's dtype is the job's (fp32 here)
    assert d.use_bias_correction_kl  # TRL's default KL is weighted by the importance ratio; ours (SPEC) is not


def test_advantages_match_trl_and_zero_variance_is_exactly_zero():
    G = 4
    g = torch.Generator().manual_seed(3)
    rewards = torch.rand(32, generator=g, dtype=torch.float64).tolist()
    # float64: within the float32 rounding of TRL's Bessel factor; float32 (TRL's rewards tensor dtype): within
    # float32 rounding
    assert trl_advantages(rewards, G).tolist() == pytest.approx(objective.advantages(rewards, G, 1e-4), rel=1e-7)
    assert trl_advantages(rewards, G, torch.float32).tolist() == pytest.approx(objective.advantages(rewards, G, 1e-4),
                                                                              abs=2e-6)
    # A group of equal rewards: ours is exactly 0 (SPEC: "contributes nothing"); TRL divides (r − mean) by 1e-4,
    # and its float mean of equal values need not be exact.
    flat = [0.7] * 3
    assert objective.advantages(flat, 3, 1e-4) == [0.0] * 3
    assert all(math.isfinite(a) and abs(a) < 1e-3 for a in trl_advantages(flat, 3, torch.float32).tolist())


def test_real_model_loss_and_lora_gradient_match_trl(tiny, tokenizer, tmp_path):
    """The engine's PEFT model, traces it sampled; TRL's forward pass, reference pass (adapter disabled) and loss
    against the engine's log-probabilities and objective: the loss within 1e-6, the LoRA gradient within 1e-5."""
    G = 4
    c = LoadConfig(base_dir=tiny, rank=4, alpha=8, targets=["q_proj", "v_proj", "down_proj"],
                   gspo=objective.Config(level="sequence", beta=0.1, eps_low=0.2, eps_high=0.2), temperature=1.0,
                   num_iterations=1, grad_accum=1, adamw=AdamWConfig(lr=1e-2), threads=1)
    e = Engine(c)
    with torch.no_grad():  # a non-zero adapter, so that the policy differs from the reference
        g = torch.Generator().manual_seed(5)
        for p in e.params:
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    prompts = [[3, 4, 5], [6, 7, 8]]  # equal lengths: no left padding for TRL
    t = e.generate(prompts, G=G, max_new=6, temperature=1.0, top_k=0, seed=11)
    t.rewards = [float(len(x) % 3) / 2 for x in t.completions]
    t.rewards[0] = t.rewards[1] + 1.0  # every group has variance
    t.rewards[G] = t.rewards[G + 1] + 1.0
    N = t.n

    # Ours: teacher-forced log-probabilities with gradient, the reference with the adapter disabled.
    with e.model.disable_adapter():
        ref = [x.detach() for x in e._logp(t, 0, N, grad=False)]
    for p in e.params:
        p.grad = None
    lp = e._logp(t, 0, N, grad=True)
    loss, _ = objective.compute(c.gspo, G, t.rewards, lp, t.old_logp, ref)
    loss.backward()
    want_grad = {k: v.detach().clone() for k, v in e.grads().items()}
    want = loss.item()

    # TRL, on the same PeftModel object.
    tr = trl_trainer(e.model, tokenizer, tmp_path, G, beta=0.1, epsilon=0.2, epsilon_high=0.2)
    T = max(len(x) for x in t.completions)
    pid = torch.tensor([prompts[i // G] for i in range(N)], dtype=torch.long)
    cid, cmask = padded([torch.tensor(x, dtype=torch.long) for x in t.completions], T)
    old, _ = padded([x.double() for x in t.old_logp], T)
    ids = torch.cat([pid, cid], dim=1)
    am = torch.cat([torch.ones_like(pid), cmask], dim=1)
    with torch.no_grad(), e.model.disable_adapter():
        tref, _, _ = tr._get_per_token_logps_and_entropies(e.model, ids, am, T)
    for i in range(N):
        assert torch.allclose(tref[i, : len(t.completions[i])], ref[i], atol=1e-5)
    inputs = {"prompt_ids": pid, "prompt_mask": torch.ones_like(pid), "completion_ids": cid, "completion_mask": cmask,
              "advantages": trl_advantages(t.rewards, G, torch.float32), "old_per_token_logps": old.float(),
              "ref_per_token_logps": tref, "num_items_in_batch": cmask.sum()}
    for p in e.params:
        p.grad = None
    got_loss = tr._compute_loss(e.model, inputs)
    got_loss.backward()
    got = got_loss.item()
    assert abs(got - want) <= 1e-6 * max(1.0, abs(want)), (got, want)
    got_grad = e.grads()
    num = sum(((got_grad[k] - want_grad[k]) ** 2).sum().item() for k in want_grad)
    den = sum((want_grad[k] ** 2).sum().item() for k in want_grad)
    assert den > 0 and math.sqrt(num / den) <= 1e-5, math.sqrt(num / den)
    print(f"\nreal model: loss TRL {got:.9g} ours {want:.9g}; LoRA gradient relative L2 difference "
          f"{math.sqrt(num / den):.1e}")
