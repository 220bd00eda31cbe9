"""The GPU check's pure parts (scripts/gpu_check.py): what it reads from a run and when 4-bit is skipped.

The whole script runs in the Go suite (cmd/gym TestGPUCheckScript, on the CPU with a tiny model).
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil

import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"


def load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / file)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def gpu_check():
    return load("gpu_check", "gpu_check.py")


def test_step_seconds_reads_every_workers_steps(gpu_check, tmp_path: pathlib.Path) -> None:
    for w, lines in {"w0": [{"kind": "step", "seconds": 0.5}, {"kind": "registered"}, {"kind": "step", "seconds": 1.5}],
                     "w1": [{"kind": "step", "seconds": 0.25}, {"kind": "step"}]}.items():
        d = tmp_path / "workers" / w
        d.mkdir(parents=True)
        (d / "events.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    assert sorted(gpu_check.step_seconds(tmp_path)) == [0.25, 0.5, 1.5]
    assert gpu_check.step_seconds(tmp_path / "none") == []


def test_four_bit_skip(gpu_check) -> None:
    assert "needs CUDA" in gpu_check.four_bit_skip("cpu", True, True)
    assert "needs CUDA" in gpu_check.four_bit_skip("cuda", False, True)
    assert "bitsandbytes" in gpu_check.four_bit_skip("cuda:1", True, False)
    assert gpu_check.four_bit_skip("cuda", True, True) is None


def test_sampler_without_nvidia_smi(gpu_check, monkeypatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _: None)
    s = gpu_check.GPUSampler()
    s.start()
    s.stop.set()
    s.join(timeout=10)
    assert not s.is_alive() and s.peak is None  # no GPU: the report says null, not 0


def test_shapes_include_the_suites_tiny_model() -> None:
    bm = load("bench_memory", "bench-memory.py")
    assert {"tiny", "0.5", "2"} <= set(bm.SHAPES)
    t = bm.SHAPES["tiny"]
    assert t["num_attention_heads"] * t["head_dim"] == t["hidden_size"]
