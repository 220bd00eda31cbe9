"""Signing keys in every form a caller has them (the seeds pass a PyNaCl key)."""

from __future__ import annotations

import pathlib

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from nacl.signing import SigningKey as NaclKey

from gym_protocol import delta as gd
from gym_protocol.keys import KeyFileError, SigningKey, generate_key, load_key


def test_key_forms(tmp_path: pathlib.Path) -> None:
    seed = bytes(range(32))
    want = SigningKey.from_seed(seed).public_hex
    path = tmp_path / "node.key"
    SigningKey.from_seed(seed).save(path)
    for form in (NaclKey(seed), ed25519.Ed25519PrivateKey.from_private_bytes(seed), seed, bytearray(seed),
                 str(path), path, SigningKey.from_seed(seed)):
        assert load_key(form).public_hex == want, type(form)
    for bad in (b"short", 42, object()):
        with pytest.raises(KeyFileError):
            load_key(bad)  # type: ignore[arg-type]


def test_seeds_delta_writer_with_nacl_key(tmp_path: pathlib.Path) -> None:
    """The seeds' listing: ``DeltaWriter(path, SigningKey.generate())`` with PyNaCl's key."""
    import numpy as np

    sk = NaclKey.generate()
    w = gd.DeltaWriter(tmp_path / "d.delta", sk, compression="zstd")
    w.add_tensor("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", np.ones((2, 4), np.float32))
    w.write_delta({"job": "job-00000001", "epoch": 1, "step": 5})
    d = gd.read_delta(tmp_path / "d.delta", pubkey=bytes(sk.verify_key).hex())
    assert d.metadata == {"job": "job-00000001", "epoch": 1, "step": 5}
    assert generate_key().public_hex != d.pubkey_hex
