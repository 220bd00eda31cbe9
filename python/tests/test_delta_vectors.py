"""gym_protocol.delta against the Go package delta.

The shared vectors in protocol/delta/testdata/vectors (manifest.json says what each
file holds) are read here and by the Go test TestVectors: valid files from
both writers must decode to the manifest's tensors and metadata, every
hostile file must be refused with the sentinel the manifest names. The
Python-written vectors (py-*.delta) are made here with GYM_UPDATE_VECTORS=1
(after `go test ./protocol/delta -run TestVectors -update-vectors`).

Then: files written here verify with `gym delta verify` and Go-written ones
read here, for every dtype and compression; mutated files raise DeltaError
and nothing else, and the two readers agree on which mutants are valid.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import random
import struct
import subprocess

import numpy as np
import pytest
import torch

from gym_protocol import delta as gd
from gym_protocol.keys import SigningKey

REPO = pathlib.Path(__file__).resolve().parents[2]
VECTORS = REPO / "protocol" / "delta" / "testdata" / "vectors"
MANIFEST = json.loads((VECTORS / "manifest.json").read_text())
KEY = SigningKey.from_seed(bytes.fromhex(MANIFEST["seed_hex"]))


def check_against_manifest(d: gd.Delta) -> None:
    assert d.pubkey_hex == MANIFEST["pubkey"]
    assert d.metadata == json.loads(json.dumps(MANIFEST["metadata"]))
    assert [(t.name, t.dtype, list(t.shape), hashlib.sha256(t.data).hexdigest()) for t in d.tensors] == \
        [(t["name"], t["dtype"], t["shape"], t["sha256"]) for t in MANIFEST["tensors"]]


def write_like_go(path: pathlib.Path, compression: str) -> gd.DeltaInfo:
    """Writes the manifest's tensors and metadata with the vectors' key."""
    src = gd.read_delta(VECTORS / "go-none.delta")
    w = gd.DeltaWriter(path, KEY, compression=compression, flags=gd.FLAG_LORA)
    for t in src.tensors:
        w.add_tensor(t.name, t)
    return w.write_delta(MANIFEST["metadata"])


@pytest.mark.parametrize("v", MANIFEST["valid"], ids=lambda v: v["file"])
def test_valid_vectors(v: dict) -> None:
    path = VECTORS / v["file"]
    if v["writer"] == "python" and os.environ.get("GYM_UPDATE_VECTORS") == "1":
        write_like_go(path, v["compression"])
    d = gd.read_delta(path, pubkey=MANIFEST["pubkey"])
    assert d.compression == v["compression"] and d.flags == v["flags"]
    check_against_manifest(d)


def test_python_writes_go_bytes(tmp_path: pathlib.Path) -> None:
    """Without compression the two writers make the same file, byte for byte."""
    info = write_like_go(tmp_path / "none.delta", "none")
    assert (tmp_path / "none.delta").read_bytes() == (VECTORS / "go-none.delta").read_bytes()
    assert info.pubkey == MANIFEST["pubkey"]
    assert info.digest == hashlib.sha3_256((VECTORS / "go-none.delta").read_bytes()[:-96]).hexdigest()


@pytest.mark.parametrize("v", MANIFEST["invalid"], ids=lambda v: v["file"])
def test_hostile_vectors(v: dict) -> None:
    with pytest.raises(gd.DeltaError) as e:
        gd.read_delta(VECTORS / v["file"])
    assert e.value.sentinel == v["error"], f"{v['what']}: {e.value}"
    assert type(e.value) is gd.SENTINELS[v["error"]]


def test_key_vectors() -> None:
    for k in MANIFEST["keys"]:
        try:
            gd.check_public_key(bytes.fromhex(k["hex"]))
            ok = True
        except gd.DeltaKeyError:
            ok = False
        assert ok == k["valid"], k


def test_wrong_signer(tmp_path: pathlib.Path) -> None:
    other = SigningKey.from_seed(bytes(range(32)))
    with pytest.raises(gd.SignerError):
        gd.read_delta(VECTORS / "go-lz4.delta", pubkey=other.public_hex)
    with pytest.raises(gd.DeltaKeyError):  # the identity point is no key
        gd.read_delta(VECTORS / "go-lz4.delta", pubkey="01" + "00" * 31)


def every_dtype() -> dict[str, object]:
    g = torch.Generator().manual_seed(3)
    return {
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.randn(4, 96, generator=g),
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.randn(96, 4, generator=g).half(),
        "bf16": torch.randn(300, 700, generator=g).to(torch.bfloat16),  # > 64 KiB: several LZ4 blocks in Python's default
        "int8": torch.randint(-128, 128, (1000,), dtype=torch.int8, generator=g),
        "numpy.fp32": np.linspace(-1, 1, 17, dtype=np.float32).reshape(1, 17),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 5),
        "edge": torch.tensor([0.0, -0.0, 1e-45, 3.4e38, -3.4e38, float("inf"), float("-inf")]),
        "ünïcode/名前": torch.arange(7, dtype=torch.float16),
    }


def as_bytes(t: object) -> bytes:
    if isinstance(t, torch.Tensor):
        return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return np.ascontiguousarray(t).tobytes()


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_python_to_go(gym: pathlib.Path, node_key: tuple[pathlib.Path, str], tmp_path: pathlib.Path,
                      compression: str) -> None:
    key, pub = node_key
    ts = every_dtype()
    w = gd.DeltaWriter(tmp_path / "p.delta", key, compression=compression)
    for name, t in ts.items():
        w.add_tensor(name, t)
    w.write_delta({"job": "j", "epoch": 3, "claimed_loss": 0.125, "time": gd.rfc3339(), "extra": [1, "x"]})
    subprocess.run([gym, "delta", "verify", "--pubkey", pub, tmp_path / "p.delta"], check=True)
    info = json.loads(subprocess.run([gym, "delta", "inspect", "--json", tmp_path / "p.delta"], check=True,
                                     capture_output=True, text=True).stdout)
    assert info["valid"] and info["compression"] == compression and info["metadata"]["extra"] == [1, "x"]
    subprocess.run([gym, "delta", "unpack", "--pubkey", pub, tmp_path / "p.delta", tmp_path / "p.safetensors"],
                   check=True)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "p.safetensors"), "np") as f:
        for name, t in ts.items():
            got = f.get_slice(name)
            assert list(got.get_shape()) == list(np.shape(t)), name
    # and back through the Python reader, bit for bit
    d = gd.read_delta(tmp_path / "p.delta", pubkey=pub)
    for name, t in ts.items():
        assert d.tensor(name).data == as_bytes(t), name
    # bf16 and fp16 come back as torch tensors of their type
    assert torch.equal(d.tensor("bf16").torch().view(torch.int16), ts["bf16"].view(torch.int16))


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_go_to_python(gym: pathlib.Path, node_key: tuple[pathlib.Path, str], tmp_path: pathlib.Path,
                      compression: str) -> None:
    from safetensors.torch import save_file

    key, pub = node_key
    ts = {k: (v if isinstance(v, torch.Tensor) else torch.from_numpy(v)) for k, v in every_dtype().items()}
    save_file(ts, str(tmp_path / "a.safetensors"))
    meta = json.dumps({"job": "j", "epoch": 1, "step": 5})
    subprocess.run([gym, "delta", "pack", "--key", key, "--compression", compression, "--meta", meta,
                    tmp_path / "a.safetensors", tmp_path / "g.delta"], check=True)
    d = gd.read_delta(tmp_path / "g.delta", pubkey=pub)
    assert d.compression == compression and d.metadata == {"job": "j", "epoch": 1, "step": 5}
    assert sorted(t.name for t in d.tensors) == sorted(ts)
    for name, t in ts.items():
        assert d.tensor(name).data == as_bytes(t), name


def test_writer_refuses_bad_input(tmp_path: pathlib.Path) -> None:
    w = gd.DeltaWriter(tmp_path / "x.delta", KEY)
    for name in ["", "../x", "/abs", "a\x00b", "a\x85b", "x/../y", gd.METADATA_NAME]:
        with pytest.raises(gd.TensorNameError):
            w.add_tensor(name, torch.zeros(1))
    w.add_tensor("a", torch.zeros(1))
    with pytest.raises(gd.DuplicateError):
        w.add_tensor("a", torch.zeros(1))
    with pytest.raises(gd.DTypeError):
        w.add_tensor("b", torch.zeros(1, dtype=torch.float64))
    with pytest.raises(gd.MetadataError):
        w.write_delta({"epoch": -1})
    with pytest.raises(gd.MetadataError):
        w.write_delta({"claimed_loss": float("nan")})
    with pytest.raises(gd.CompressionError):
        gd.DeltaWriter(tmp_path / "y.delta", KEY, compression="gzip")
    assert not (tmp_path / "x.delta").exists()


def resign(b: bytes) -> bytes:
    """Fixes checksum and signature of a mutated file (the vectors' key), so the parser's rules are reached."""
    if len(b) < 120:
        return b
    body = bytearray(b[:-96])
    body[8:24] = hashlib.sha3_256(bytes(body[24:])).digest()[:16]
    digest = hashlib.sha3_256(bytes(body)).digest()
    return bytes(body) + KEY.sign(digest) + KEY.public_key


def mutate(rng: random.Random, b: bytes) -> bytes:
    b = bytearray(b)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if op == 0 and b:  # flip bits
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # truncate
            del b[rng.randrange(len(b)):]
        elif op == 2:  # insert junk
            i = rng.randrange(len(b) + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 3 and len(b) > 40:  # interesting integers over a field
            i = rng.randrange(24, len(b) - 8)
            b[i:i + 8] = struct.pack("<Q", rng.choice([0, 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1, 1 << 40]))
        elif op == 4 and len(b) > 2:  # delete a run
            i = rng.randrange(len(b))
            del b[i:i + rng.randint(1, 64)]
        elif op == 5 and b:  # set a byte
            b[rng.randrange(len(b))] = rng.choice([0, 0xFF, 0x7F, 0x80, 9])
    return bytes(b)


def test_hostile_mutants(gym: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """Mutated vectors raise DeltaError and nothing else; re-signed ones get Go's verdict."""
    seeds = [(VECTORS / v["file"]).read_bytes() for v in MANIFEST["valid"] if v["writer"] == "go"]
    seeds += [(VECTORS / v["file"]).read_bytes() for v in MANIFEST["invalid"][:20]]
    small = [(VECTORS / f"bad-{n}.delta").read_bytes() for n in ("metadata-type", "lz4-size", "duplicate")]
    rng = random.Random(20261202)
    mutants = []
    for i in range(1500):
        m = mutate(rng, rng.choice(seeds + small))
        if i % 3 == 0:
            m = resign(m)
        mutants.append(m)
    verdicts = []
    for m in mutants:
        try:
            gd.parse_delta(m)
            verdicts.append(True)
        except gd.DeltaError:
            verdicts.append(False)
        # anything else propagates and fails the test
    assert 0 < sum(verdicts) < len(verdicts)
    # Go's verdict on the re-signed mutants (where the parser's rules decide).
    files = []
    for i in range(0, len(mutants), 3):
        p = tmp_path / f"m{i:05d}.delta"
        p.write_bytes(mutants[i])
        files.append((p, verdicts[i]))
    disagree = []
    for p, ok in files:
        r = subprocess.run([gym, "delta", "verify", "--max-tensor-bytes", str(4 << 30), "--max-total-bytes",
                            str(64 << 30), "--max-window-bytes", str(128 << 20), p], capture_output=True, text=True)
        if (r.returncode == 0) != ok:
            disagree.append((p.name, ok, r.stdout + r.stderr))
    assert not disagree, disagree[:5]
    assert sum(ok for _, ok in files) >= 5, "too few re-signed mutants stayed valid to compare acceptance"


BOMB_SCRIPT = r"""
import struct, sys, time, hashlib, tracemalloc
import zstandard
from gym_protocol import delta as gd
from gym_protocol.keys import SigningKey

def signed(payload, compression):
    key = SigningKey.from_seed(bytes(range(32)))
    header = b"DELTA" + bytes([1, compression, 1]) + hashlib.sha3_256(payload).digest()[:16]
    return header + payload + key.sign(hashlib.sha3_256(header + payload).digest()) + key.public_key

def entry(name, dtype, shape, data):
    n = name.encode()
    return struct.pack("<I", len(n)) + n + bytes([dtype, len(shape)]) + struct.pack(f"<{len(shape)}Q", *shape) + data

files = {
    # 3 GiB declared, 1 KB present
    "declared": signed(entry("w", 0, [768 << 20], b"\0" * 1024), 0),
    # a 2 GiB tensor of zeros in one Zstandard frame (RLE blocks): decodes only as far as it must
    "zeros": signed(entry("w", 0, [512 << 20], zstandard.ZstdCompressor(level=3, write_content_size=False)
                          .compress(b"\0" * (64 << 20))), 2),
    # 64 MiB of zeros in a frame for a 10-byte tensor
    "bomb": open(sys.argv[1], "rb").read(),
}
tracemalloc.start()
for name, b in files.items():
    t0 = time.perf_counter()
    try:
        gd.parse_delta(b)
        print(name, "accepted")
        sys.exit(1)
    except gd.DeltaError as e:
        print(name, type(e).__name__, round(time.perf_counter() - t0, 3))
    print(name + "_peak_kib", tracemalloc.get_traced_memory()[1] >> 10)
    tracemalloc.reset_peak()
"""


def test_bombs_bounded(tmp_path: pathlib.Path) -> None:
    """Declared sizes and compressed bombs are refused without the memory they claim."""
    import sys

    r = subprocess.run([sys.executable, "-c", BOMB_SCRIPT, VECTORS / "bad-zstd-bomb.delta"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines["declared"].startswith("TruncatedError")
    assert lines["zeros"].startswith("SizeError")  # 64 MiB of zeros where 2 GiB are declared
    assert lines["bomb"].startswith("SizeError")
    # memory follows what the frames hold (64 MiB of zeros, kept twice while joined), never what they declare
    assert int(lines["declared_peak_kib"]) < 1 << 10, r.stdout
    assert int(lines["zeros_peak_kib"]) < 160 << 10, r.stdout
    assert int(lines["bomb_peak_kib"]) < 1 << 10, r.stdout


@pytest.mark.parametrize("name", ["seed-none.delta", "seed-lz4.delta", "seed-zstd.delta", "python-lz4-linked.delta"])
def test_seed_writer_files(gym: pathlib.Path, name: str) -> None:
    """Files of the seed's reference writer (lz4.frame.compress defaults: linked 64 KiB blocks) read as Go reads them."""
    path = REPO / "protocol" / "delta" / "testdata" / name
    d = gd.read_delta(path)
    info = json.loads(subprocess.run([gym, "delta", "inspect", "--json", path], check=True, capture_output=True,
                                     text=True).stdout)
    assert info["valid"] and info["pubkey"] == d.pubkey_hex and info["compression"] == d.compression
    assert [(t["name"], list(t["shape"])) for t in info["tensors"] if t["name"] != gd.METADATA_NAME] == \
        [(t.name, list(t.shape)) for t in d.tensors]
