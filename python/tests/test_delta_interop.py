"""gym's delta tools against the Python reference stack.

Tensors written with the `safetensors` library and torch go through
`gym delta pack` / `verify` / `unpack` and must come back bit for bit;
what the format refuses (hostile names, another signer) must be refused.
"""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
import torch
from safetensors.torch import load_file, save_file


def run(*args: str | pathlib.Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs a command and returns its result (text output)."""
    return subprocess.run([str(a) for a in args], check=check, capture_output=True, text=True)


def adapter() -> dict[str, torch.Tensor]:
    """A small PEFT-named LoRA adapter with values of every magnitude."""
    g = torch.Generator().manual_seed(7)
    ts = {}
    for layer in range(2):
        for mod in ("q_proj", "v_proj"):
            pre = f"base_model.model.model.layers.{layer}.self_attn.{mod}"
            ts[f"{pre}.lora_A.weight"] = torch.randn(4, 16, generator=g) * 10 ** (layer - 3)
            ts[f"{pre}.lora_B.weight"] = torch.randn(16, 4, generator=g)
    ts["edge"] = torch.tensor([0.0, -0.0, 1e-45, 3.4e38, -3.4e38], dtype=torch.float32)
    return ts


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_round_trip(gym: pathlib.Path, node_key: tuple[pathlib.Path, str], tmp_path: pathlib.Path, compression: str) -> None:
    key, pub = node_key
    src = tmp_path / "adapter.safetensors"
    want = adapter()
    save_file(want, str(src))
    packed, back = tmp_path / "adapter.delta", tmp_path / "back.safetensors"
    meta = json.dumps({"job": "j1", "epoch": 1, "step": 5})
    run(gym, "delta", "pack", "--key", key, "--compression", compression, "--meta", meta, src, packed)
    run(gym, "delta", "verify", "--pubkey", pub, packed)
    info = json.loads(run(gym, "delta", "inspect", "--json", packed).stdout)
    assert info["valid"] and info["pubkey"] == pub and info["compression"] == compression
    assert info["metadata"]["job"] == "j1"
    assert sorted(t["name"] for t in info["tensors"]) == sorted(want)
    run(gym, "delta", "unpack", "--pubkey", pub, packed, back)
    got = load_file(str(back))
    assert got.keys() == want.keys()
    for name, t in want.items():
        assert torch.equal(got[name].view(torch.int32), t.view(torch.int32)), name


def test_other_signer_refused(gym: pathlib.Path, node_key: tuple[pathlib.Path, str], tmp_path: pathlib.Path) -> None:
    key, _ = node_key
    src, packed = tmp_path / "a.safetensors", tmp_path / "a.delta"
    save_file(adapter(), str(src))
    run(gym, "delta", "pack", "--key", key, src, packed)
    other = tmp_path / "other.key"
    other_pub = run(gym, "keygen", "--out", other).stdout.strip().split()[-1]
    res = run(gym, "delta", "verify", "--pubkey", other_pub, packed, check=False)
    assert res.returncode == 1, res
    # The identity point verifies a forged signature in plain Ed25519; gym refuses it as a key.
    res = run(gym, "delta", "verify", "--pubkey", "01" + "00" * 31, packed, check=False)
    assert res.returncode == 2 and "small order" in res.stderr, res


@pytest.mark.parametrize("name", ["../../etc/passwd", "/abs", "a\x01b", "x/../y"])
def test_hostile_names_refused(gym: pathlib.Path, node_key: tuple[pathlib.Path, str], tmp_path: pathlib.Path, name: str) -> None:
    key, _ = node_key
    src = tmp_path / "bad.safetensors"
    save_file({name: torch.zeros(2)}, str(src))
    res = run(gym, "delta", "pack", "--key", key, src, tmp_path / "bad.delta", check=False)
    assert res.returncode != 0 and "name" in (res.stderr + res.stdout).lower(), res
