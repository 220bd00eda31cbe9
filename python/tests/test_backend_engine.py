"""The torch backend's parts: objective, traces files, engine and gRPC service on a tiny random Llama.

The comparison with the Go engine on the built-in base is the Go test
node/backend/torch TestGSPOMatchesGoEngine; these tests pin the Python side alone.
"""

from __future__ import annotations

import math
import os
import pathlib
import sys
from concurrent import futures

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from gym_protocol._proto import trainer_pb2 as pb  # noqa: E402
from gym_protocol._proto import trainer_pb2_grpc as pbg  # noqa: E402
from gym_protocol.backend import BackendError, PreconditionError, objective, traces  # noqa: E402
from gym_protocol.backend.engine import AdamWConfig, Engine, LoadConfig  # noqa: E402
from gym_protocol.backend.service import Service  # noqa: E402


def test_advantages_zero_variance_and_sample_std():
    adv = objective.advantages([1.0, 0.0, 0.5, 0.5], 2, 1e-4)
    std = math.sqrt(0.5)
    assert adv[0] == pytest.approx(0.5 / (std + 1e-4))
    assert adv[1] == pytest.approx(-0.5 / (std + 1e-4))
    assert adv[2:] == [0.0, 0.0]
    with pytest.raises(BackendError):
        objective.advantages([1.0, 0.0, 1.0], 2, 1e-4)


def test_sequence_ratio_is_length_normalised_and_clip_stops_gradient():
    c = objective.Config(level="sequence", beta=0.0, eps_low=0.2, eps_high=0.2)
    old = [torch.tensor([-1.0, -1.0], dtype=torch.float64), torch.tensor([-2.0], dtype=torch.float64)]
    # sequence 0: mean log-ratio 0.05 (inside the band); sequence 1: log-ratio 0.5 (above it).
    lp = [torch.tensor([-0.9, -1.0], dtype=torch.float64, requires_grad=True),
          torch.tensor([-1.5], dtype=torch.float64, requires_grad=True)]
    rewards = [0.0, 1.0]  # A0 < 0, A1 > 0
    loss, st = objective.compute(c, 2, rewards, lp, old, None)
    loss.backward()
    A = objective.advantages(rewards, 2, 1e-4)
    s0 = math.exp(0.05)
    want = -(s0 * A[0] + 1.2 * A[1]) / 2
    assert loss.item() == pytest.approx(want, rel=1e-12)
    # ∂/∂lp_t of −(1/N)·s·A is −(1/N)·A·s/n for every token of an unclipped sequence
    assert lp[0].grad.tolist() == pytest.approx([-A[0] * s0 / 2 / 2] * 2, rel=1e-12)
    assert lp[1].grad is None or lp[1].grad.tolist() == [0.0]  # the clipped branch is a constant
    assert st.clip_frac == 0.5 and st.ratio_max == pytest.approx(math.exp(0.5))


def test_k3_kl_is_averaged_over_tokens_then_sequences():
    c = objective.Config(level="token", beta=1.0)
    lp = [torch.tensor([-1.0, -2.0], dtype=torch.float64, requires_grad=True),
          torch.tensor([-1.0], dtype=torch.float64, requires_grad=True)]
    ref = [torch.tensor([-1.5, -2.0], dtype=torch.float64), torch.tensor([-0.5], dtype=torch.float64)]
    loss, st = objective.compute(c, 2, [1.0, 1.0], lp, [x.detach() for x in lp], ref)
    k3 = lambda d: math.exp(d) - d - 1  # noqa: E731
    assert st.kl == pytest.approx(((k3(-0.5) + k3(0.0)) / 2 + k3(0.5)) / 2, rel=1e-12)
    assert st.policy_loss == 0.0 and st.zero_var_groups == 1


def test_traces_round_trip_and_refusals(tmp_path):
    t = traces.Traces(group_size=2, prompts=[[1, 2], [3]], completions=[[4], [5, 6], [7, 8, 9], [1]],
                      old_logp=[torch.tensor(v) for v in ([-1.0], [-0.5, -0.25], [-1.0, -2.0, -3.0], [0.0])],
                      rewards=[0.0, 1.0, 0.5, 0.25])
    p = str(tmp_path / "t.safetensors")
    traces.write(p, t)
    got = traces.read(p, vocab=10, want_rewards=True)
    assert got.prompts == t.prompts and got.completions == t.completions and got.rewards == t.rewards
    assert got.old_logp[1].tolist() == [-0.5, -0.25]
    with pytest.raises(BackendError, match="vocabulary"):
        traces.read(p, vocab=8, want_rewards=True)
    t.old_logp[0] = torch.tensor([0.5])
    traces.write(p, t)
    with pytest.raises(BackendError, match="old_logp"):
        traces.read(p, vocab=10, want_rewards=True)
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(BackendError):
        traces.read(str(tmp_path / "bad.safetensors"), vocab=10, want_rewards=False)


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "/etc/passwd", "a/b", ".hidden"])
def test_exchange_names_are_confined(name):
    with pytest.raises(BackendError):
        traces.confined("/x", name)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    """A random tiny LlamaForCausalLM saved with transformers."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=32, eos_token_id=15, bos_token_id=None,
                      pad_token_id=None, tie_word_embeddings=False)
    d = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(cfg).save_pretrained(d)
    return str(d)


def load_config(base: str, **kw) -> LoadConfig:
    c = LoadConfig(base_dir=base, rank=4, alpha=8, targets=["q_proj", "v_proj", "down_proj"],
                   gspo=objective.Config(), temperature=1.0, num_iterations=2, grad_accum=2,
                   adamw=AdamWConfig(lr=1e-2), threads=1)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def test_use_4bit_refuses_without_cuda(tiny):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present: the refusal applies only to machines without it")
    with pytest.raises(PreconditionError, match="CUDA"):
        Engine(load_config(tiny, use_4bit=True))
    with pytest.raises(PreconditionError, match="CUDA"):
        Engine(load_config(tiny, device="cuda"))


def test_use_4bit_names_bitsandbytes_when_absent(tiny, monkeypatch):
    """With CUDA but without bitsandbytes, use_4bit is refused naming what to install."""
    try:
        import bitsandbytes  # noqa: F401
        pytest.skip("bitsandbytes is installed")
    except ImportError:
        pass
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # refused before any CUDA call
    with pytest.raises(PreconditionError, match="pip install bitsandbytes"):
        Engine(load_config(tiny, use_4bit=True, device="cuda"))


@pytest.fixture(scope="module")
def tiny_bf16(tmp_path_factory) -> str:
    """The tiny random Llama saved in bfloat16, as checkpoints of real models are."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=32, eos_token_id=15, bos_token_id=None,
                      pad_token_id=None, tie_word_embeddings=False)
    d = tmp_path_factory.mktemp("tiny_bf16")
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(d)
    return str(d)


@pytest.mark.parametrize("fixture,dtype", [("tiny_bf16", "bfloat16"), ("tiny", "bfloat16"), ("tiny", "float16"),
                                           ("tiny_bf16", "float32")])
def test_loads_the_base_in_the_jobs_dtype(fixture, dtype, request):
    """Every base weight is in the job's dtype on the job's device; the adapter trains in float32."""
    e = Engine(load_config(request.getfixturevalue(fixture), dtype=dtype))
    want = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[dtype]
    base = {n: p for n, p in e.model.named_parameters() if not p.requires_grad}
    assert base and all(p.dtype == want and p.device.type == "cpu" for p in base.values()), \
        {n: p.dtype for n, p in base.items() if p.dtype != want}
    assert all(p.dtype == torch.float32 for p in e.params)
    t = e.generate([[1, 2, 3], [4, 5]], G=2, max_new=3, temperature=1.0, top_k=0, seed=1)
    t.rewards = [float(i % 2) for i in range(t.n)]
    stats, _, _ = e.step(t, 2)
    assert math.isfinite(stats["loss"])


_RSS_PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[2])
def status():
    return {k: int(v.split()[0]) << 10 for k, v in (l.split(":", 1) for l in open("/proc/self/status")) if v.strip().endswith("kB")}
import torch, transformers, peft  # noqa: E401
from gym_protocol.backend import objective
from gym_protocol.backend.engine import AdamWConfig, Engine, LoadConfig
def run(base):
    e = Engine(LoadConfig(base_dir=base, rank=4, alpha=8, targets=["q_proj"], dtype=sys.argv[3],
                          gspo=objective.Config(), adamw=AdamWConfig(), threads=1))
    e.evaluate([[1, 2, 3]], max_new=2)  # every weight read once
    return e
run(sys.argv[4])  # the fixed costs (kernels, threads, PEFT) paid on the tiny base first
before = status()["VmRSS"]
e = run(sys.argv[1])
s = status()
print(json.dumps({"growth": s["VmHWM"] - before, "held": s["VmRSS"] - before}))
"""


def test_bf16_base_costs_its_file_size(tiny_bf16, tmp_path):
    """A bfloat16 base loaded in bfloat16 on the CPU and run raises the process's peak RSS by at most 1.2 × its
    file (memory-mapped, no float32 or second copy: a float32 load measures 3.0 ×), and by at least half of it
    (the probe sees the weights)."""
    import json
    import subprocess

    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1536, num_hidden_layers=8,
                      num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=64, eos_token_id=4095,
                      bos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    d = tmp_path / "m"
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(d)
    size = (d / "model.safetensors").stat().st_size
    pkg = str(pathlib.Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", _RSS_PROBE, str(d), pkg, "bfloat16", tiny_bf16], check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    assert 0.5 * size <= r["growth"] <= 1.2 * size, (r, size)


def test_engine_generates_and_steps(tiny, tmp_path):
    e = Engine(load_config(tiny))
    names = e.names
    assert all(n.startswith("base_model.model.model.layers.") and n.endswith(".weight") for n in names)
    assert any(".mlp.down_proj.lora_B." in n for n in names)
    t = e.generate([[1, 2, 3], [4, 5, 6], [7, 8], [9, 10]], G=4, max_new=5, temperature=1.0, top_k=0, seed=7)
    again = e.generate([[1, 2, 3], [4, 5, 6], [7, 8], [9, 10]], G=4, max_new=5, temperature=1.0, top_k=0, seed=7)
    assert t.completions == again.completions  # seeded
    assert len(t.completions) == 16 and all(1 <= len(c) <= 5 for c in t.completions)
    for c in t.completions:
        assert all(x != 15 for x in c[:-1])  # stops at EOS
    # π_old recorded with the KV cache equals the teacher-forced log-probabilities: ratios start at 1.
    lp = e._logp(t, 0, t.n, grad=False)
    for a, b in zip(lp, t.old_logp):
        assert torch.allclose(a, b, atol=1e-5)
    t.rewards = [float(i % 2) for i in range(t.n)]  # every group has variance
    before = {k: v.clone() for k, v in e._state().items()}
    stats, grad, _ = e.step(t, 4, want_grad=True)
    assert stats["updates"] == 2 and math.isfinite(stats["loss"])
    assert sorted(grad) == names
    after = e._state()
    assert any(not torch.equal(before[k], after[k]) for k in names)
    # A dry run changes nothing.
    e.step(t, 4, dry_run=True)
    assert all(torch.equal(after[k], e._state()[k]) for k in names)
    # The adapter written is what set_adapter reads; a wrong one is refused.
    p = str(tmp_path / "a.safetensors")
    e.write_adapter(p)
    e.set_adapter(p, reset_optimizer=False)
    from safetensors.torch import save_file
    bad = {k: v.clone() for k, v in after.items()}
    bad[names[0]][0, 0] = float("nan")
    save_file(bad, p)
    with pytest.raises(BackendError, match="non-finite"):
        e.set_adapter(p, reset_optimizer=False)
    del bad[names[0]]
    save_file(bad, p)
    with pytest.raises(BackendError, match="differ"):
        e.set_adapter(p, reset_optimizer=False)
    greedy = e.evaluate([[1, 2, 3], [4]], max_new=4)
    assert len(greedy) == 2


def test_sgd_steps_the_gradient(tiny):
    """With sgd set the update is plain SGD, Go's rule: θ·(1 − lr·wd) − lr·g, no moments."""
    lr, wd = 1e-2, 0.1
    e = Engine(load_config(tiny, num_iterations=1, adamw=AdamWConfig(lr=lr, weight_decay=wd, sgd=True)))
    assert isinstance(e.opt, torch.optim.SGD)
    t = e.generate([[1, 2, 3], [4, 5, 6], [7, 8], [9, 10]], G=4, max_new=5, temperature=1.0, top_k=0, seed=3)
    t.rewards = [float(i % 2) for i in range(t.n)]
    before = {k: v.clone() for k, v in e._state().items()}
    stats, grad, _ = e.step(t, 4, want_grad=True)
    assert stats["updates"] == 1
    after = e._state()
    moved = 0.0
    for k in e.names:
        want = before[k] * (1 - lr * wd) - lr * grad[k]
        assert torch.allclose(after[k], want, rtol=0, atol=1e-6), k
        moved += float((after[k] - before[k]).abs().sum())
    assert moved > 0


def test_service_over_a_unix_socket(tiny, tmp_path):
    x = tmp_path / "x"
    x.mkdir(mode=0o700)
    sock = str(tmp_path / "s.sock")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pbg.add_TrainerServiceServicer_to_server(Service(str(x)), server)
    assert server.add_insecure_port("unix:" + sock) != 0
    server.start()
    try:
        with grpc.insecure_channel("unix:" + sock) as ch:
            c = pbg.TrainerServiceStub(ch)
            h = c.Health(pb.HealthRequest())
            assert h.pid == os.getpid() and not h.loaded and "torch" in h.versions
            with pytest.raises(grpc.RpcError) as err:
                c.Generate(pb.GenerateRequest(prompts=[pb.Prompt(ids=[1])], group_size=2, max_new_tokens=2, out="g"))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            r = c.Load(pb.LoadRequest(base_dir=tiny, lora_rank=2, lora_alpha=4, lora_target_modules=["q_proj"],
                                      gspo=pb.GSPO(importance_sampling_level="sequence", beta=0.1, epsilon_low=3e-4,
                                                   epsilon_high=4e-4, advantage_epsilon=1e-4, temperature=1,
                                                   num_iterations=1, gradient_accumulation_steps=1),
                                      adamw=pb.AdamW(learning_rate=1e-3, beta1=0.9, beta2=0.99, eps=1e-8)))
            assert r.adapter_parameters == 2 * (2 * 32 + 32 * 2)  # 2 layers × (lora_A [2, 32] + lora_B [32, 2]) and (x / r.adapter).exists()
            g = c.Generate(pb.GenerateRequest(prompts=[pb.Prompt(ids=[1, 2]), pb.Prompt(ids=[3])], group_size=2,
                                              max_new_tokens=3, temperature=1, seed=1, out="gen.safetensors"))
            t = traces.read(str(x / g.traces), 16, want_rewards=False)
            t.rewards = [0.0, 1.0, 1.0, 0.0]
            traces.write(str(x / "t.safetensors"), t)
            s = c.Step(pb.StepRequest(traces="t.safetensors", group_size=2, out="a.safetensors"))
            assert s.adapter == "a.safetensors" and s.stats.updates == 1 and (x / "a.safetensors").exists()
            with pytest.raises(grpc.RpcError) as err:
                c.Step(pb.StepRequest(traces="../t.safetensors", group_size=2, out="a.safetensors"))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            ev = c.Evaluate(pb.EvaluateRequest(prompts=[pb.Prompt(ids=[1, 2])], max_new_tokens=2))
            assert len(ev.completions) == 1
            # A refused Load leaves nothing loaded (the worker loads again).
            with pytest.raises(grpc.RpcError) as err:
                c.Load(pb.LoadRequest(base_dir=tiny, lora_rank=2, lora_alpha=4, lora_target_modules=["q_proj"],
                                      use_4bit=True, gspo=pb.GSPO(), adamw=pb.AdamW(learning_rate=1e-3, beta1=0.9,
                                                                                    beta2=0.99, eps=1e-8)))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "CUDA" in err.value.details()
            assert not c.Health(pb.HealthRequest()).loaded
    finally:
        server.stop(0)


def test_step_hold_hook_fires_once(tmp_path, monkeypatch):
    """GYM_TRAINER_TEST_HOLD_STEP: the first Step writes the file with its pid and waits; later ones do not."""
    import time

    from gym_protocol.backend import service

    service._hold_in_step()  # unset: returns at once
    p = tmp_path / "held"
    monkeypatch.setenv(service.HOLD_ENV, str(p))
    monkeypatch.setattr(service, "HOLD_SECONDS", 0.3)
    t0 = time.monotonic()
    service._hold_in_step()
    assert time.monotonic() - t0 >= 0.3
    assert p.read_text() == f"{os.getpid()}\n"
    t0 = time.monotonic()
    service._hold_in_step()  # the file exists: no wait
    assert time.monotonic() - t0 < 0.2
