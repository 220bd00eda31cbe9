#!/usr/bin/python3
"""Reference writer for the delta format (version 1).

This follows the DeltaWriter listing from the protocol paper as closely as
possible. Differences from the listing:

* add_tensor takes raw little-endian bytes (or a numpy array) plus a shape and
  a dtype code instead of a torch tensor: bf16 has no numpy dtype, so tensors
  arrive as raw bytes;
* the compression codec (0 none, 1 LZ4 frame, 2 Zstandard frame) and the flags
  byte are constructor arguments and are written into the header.

finalize() deliberately keeps the quadratic ``payload +=`` concatenation of the
listing: this script is the reference whose speed is benchmarked.

CLI:
    writer.py --spec SPEC.json --out OUT.delta [--time]

SPEC.json:
    {"seed_hex": "<64 hex chars: 32-byte Ed25519 seed>",
     "compression": 0|1|2, "flags": int,
     "tensors": [{"name": str, "dtype": 0..3, "shape": [ints],
                  "data_file": "raw little-endian bytes", "offset": int,
                  "length": int}]}

"offset" defaults to 0 and "length" to numel * dtype size. As a convenience a
tensor may give "data_hex" (hex string) instead of "data_file".

With --time one JSON line {"seconds": float, "bytes": int} is printed to
stdout: the wall time spent in add_tensor + finalize, and the total number of
raw (uncompressed) tensor bytes.
"""
from nacl.signing import SigningKey
import lz4.frame, hashlib, struct
import zstandard

import argparse
import json
import sys
import time

# Bytes per element for each dtype code: 0 fp32, 1 fp16, 2 bf16, 3 int8.
DTYPE_SIZES = {0: 4, 1: 2, 2: 2, 3: 1}

COMPRESSION_NONE = 0
COMPRESSION_LZ4 = 1
COMPRESSION_ZSTD = 2


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


class DeltaWriter:
    MAGIC = b"DELTA"

    def __init__(self, path: str, signing_key: SigningKey, compression: int = 1, flags: int = 0x01):
        if compression not in (COMPRESSION_NONE, COMPRESSION_LZ4, COMPRESSION_ZSTD):
            raise ValueError("unknown compression %r" % (compression,))
        if not 0 <= flags <= 0xFF:
            raise ValueError("flags must fit in a byte, got %r" % (flags,))
        self.path = path; self.sk = signing_key; self.tensors = []
        self.compression = compression; self.flags = flags

    def add_tensor(self, name: str, tensor, shape=None, dtype: int = 2):
        # tensor: raw little-endian bytes (bytes/bytearray/memoryview) or a
        # numpy array (whose shape is used when shape is None).
        if hasattr(tensor, "tobytes") and hasattr(tensor, "dtype"):
            if shape is None:
                shape = tensor.shape
            if tensor.dtype.byteorder == ">":
                tensor = tensor.astype(tensor.dtype.newbyteorder("<"))
            raw = tensor.tobytes()
        else:
            raw = tensor
        if shape is None:
            raise ValueError("shape is required for raw bytes")
        if dtype not in DTYPE_SIZES:
            raise ValueError("unknown dtype code %r" % (dtype,))
        shape = tuple(int(s) for s in shape)
        if len(shape) > 255:
            raise ValueError("rank %d does not fit in a byte" % len(shape))
        if len(raw) != _numel(shape) * DTYPE_SIZES[dtype]:
            raise ValueError("tensor %r: %d bytes, want numel*size = %d"
                             % (name, len(raw), _numel(shape) * DTYPE_SIZES[dtype]))
        if self.compression == COMPRESSION_NONE:
            compressed = bytes(raw)
        elif self.compression == COMPRESSION_LZ4:
            compressed = lz4.frame.compress(raw)
        else:
            compressed = zstandard.ZstdCompressor().compress(raw)
        self.tensors.append((name, dtype, shape, compressed))

    def finalize(self):
        payload = b""
        for name, dtype, shape, data in self.tensors:
            name_bytes = name.encode("utf-8")
            payload += struct.pack("<I", len(name_bytes))
            payload += name_bytes
            payload += struct.pack("<BB", dtype, len(shape))
            for s in shape:
                payload += struct.pack("<Q", s)
            payload += data
        checksum = hashlib.sha3_256(payload).digest()[:16]
        header = self.MAGIC + struct.pack("<BBB", 1, self.compression, self.flags) + checksum
        full = header + payload
        sig = self.sk.sign(hashlib.sha3_256(full).digest()).signature
        with open(self.path, "wb") as f:
            f.write(full); f.write(sig); f.write(self.sk.verify_key.encode())


def _load_tensor_bytes(t):
    dtype = int(t["dtype"])
    if dtype not in DTYPE_SIZES:
        raise ValueError("tensor %r: unknown dtype %r" % (t.get("name"), dtype))
    want = _numel(t["shape"]) * DTYPE_SIZES[dtype]
    if "data_hex" in t:
        return bytes.fromhex(t["data_hex"])
    if "data_file" not in t:
        if want == 0:
            return b""
        raise ValueError("tensor %r: no data_file" % (t.get("name"),))
    offset = int(t.get("offset", 0))
    length = int(t.get("length", want))
    with open(t["data_file"], "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise ValueError("tensor %r: short read from %s (offset %d, want %d bytes, got %d)"
                         % (t.get("name"), t["data_file"], offset, length, len(data)))
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(description="Reference delta-format writer.")
    ap.add_argument("--spec", required=True, help="JSON spec file")
    ap.add_argument("--out", required=True, help="output .delta path")
    ap.add_argument("--time", action="store_true",
                    help='print {"seconds": add_tensor+finalize time, "bytes": raw tensor bytes}')
    args = ap.parse_args(argv)

    with open(args.spec, "r", encoding="utf-8") as f:
        spec = json.load(f)
    seed = bytes.fromhex(spec["seed_hex"])
    if len(seed) != 32:
        raise SystemExit("seed_hex must be 32 bytes (64 hex chars), got %d bytes" % len(seed))
    sk = SigningKey(seed)

    # Read all tensor data before the clock starts: only add_tensor and
    # finalize are timed.
    entries = []
    total = 0
    for t in spec.get("tensors", []):
        data = _load_tensor_bytes(t)
        total += len(data)
        entries.append((t["name"], data, [int(s) for s in t["shape"]], int(t["dtype"])))

    w = DeltaWriter(args.out, sk, compression=int(spec.get("compression", 1)),
                    flags=int(spec.get("flags", 0x01)))
    start = time.perf_counter()
    for name, data, shape, dtype in entries:
        w.add_tensor(name, data, shape=shape, dtype=dtype)
    w.finalize()
    elapsed = time.perf_counter() - start

    if args.time:
        sys.stdout.write(json.dumps({"seconds": elapsed, "bytes": total}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
