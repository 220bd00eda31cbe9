"""Zoo Gym delta files (format version 1) in pure Python.

A delta file carries named tensors (usually a LoRA update), each compressed
into its own frame, checksummed with SHA3-256 and signed with the node's
Ed25519 key::

    header   "DELTA" · version u8 · compression u8 · flags u8 · checksum[16]
    payload  { name_len u32 · name · dtype u8 · rank u8 · shape u64×rank · data }*
    trailer  Ed25519 signature[64] over SHA3-256(header ‖ payload) · public key[32]

docs/delta-format.md is the normative description; this module follows the Go
package ``delta`` rule for rule, so a file one writes the other reads, and a
file one refuses the other refuses for the same reason (the shared vectors in
``protocol/delta/testdata/vectors`` are checked by both test suites).

:class:`DeltaWriter` writes files (the seed's class, with the seed's
``add_tensor`` / ``finalize`` and the client's ``write_delta`` /
``upload_ipfs``); :func:`read_delta` reads one strictly and returns its
tensors only when the whole file verified. Every malformed input raises a
subclass of :class:`DeltaError` that names the Go sentinel it matches
(``MagicError.sentinel == "ErrMagic"``), never another exception.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import mmap
import os
import re
import struct
import tempfile
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import lz4.frame
import nacl.exceptions
import nacl.signing
import numpy as np
import zstandard

from gym_protocol.keys import KeyLike, SigningKey, load_key

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "DTYPES", "COMPRESSIONS", "FLAG_LORA", "FLAG_FULL", "METADATA_NAME", "Limits", "Tensor", "Delta",
    "DeltaInfo", "DeltaWriter", "read_delta", "parse_delta", "check_name", "check_public_key",
    "DeltaError", "MagicError", "VersionError", "CompressionError", "FlagsError", "DTypeError",
    "TensorNameError", "DuplicateError", "ShapeError", "LimitError", "FrameError", "SizeError",
    "TrailingDataError", "TruncatedError", "ChecksumError", "SignatureError", "DeltaKeyError",
    "MetadataError", "SignerError",
]

MAGIC = b"DELTA"
VERSION = 1
HEADER_SIZE = 24
SIGNATURE_SIZE = 64
PUBLIC_KEY_SIZE = 32
TRAILER_SIZE = SIGNATURE_SIZE + PUBLIC_KEY_SIZE
CHECKSUM_SIZE = 16
METADATA_NAME = "__metadata__"

#: dtype code → (name, bytes per element)
DTYPES: dict[int, tuple[str, int]] = {0: ("fp32", 4), 1: ("fp16", 2), 2: ("bf16", 2), 3: ("int8", 1)}
_DTYPE_CODES = {name: code for code, (name, _) in DTYPES.items()}
#: compression code → name
COMPRESSIONS: dict[int, str] = {0: "none", 1: "lz4", 2: "zstd"}
_COMPRESSION_CODES = {name: code for code, name in COMPRESSIONS.items()}
FLAG_LORA = 0x01
FLAG_FULL = 0x02
_RESERVED_FLAGS = 0xFF & ~(FLAG_LORA | FLAG_FULL)

_LZ4_MAGIC = 0x184D2204
_LZ4_LEGACY_MAGIC = 0x184C2102
_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_BASE = 0x184D2A50
_ZSTD_BLOCK_MAX = 128 << 10
_ZSTD_MIN_WINDOW = 8 << 20
_U64 = (1 << 64) - 1


# ---------------------------------------------------------------- errors


class DeltaError(ValueError):
    """A delta file (or what is about to be written as one) breaks a rule.

    ``sentinel`` names the Go error of package delta the rule has there;
    ``offset``, ``entry`` and ``name`` say where, when known.
    """

    sentinel = "Err"

    def __init__(self, detail: str, *, offset: int = -1, entry: int = -1, name: str | None = None) -> None:
        self.detail, self.offset, self.entry, self.name = detail, offset, entry, name
        if entry >= 0 and name:
            where = f"entry {entry} {name!r} at offset {offset}: "
        elif entry >= 0:
            where = f"entry {entry} at offset {offset}: "
        elif offset >= 0:
            where = f"offset {offset}: "
        else:
            where = ""
        super().__init__(f"delta: {self.what}: {where}{detail}")

    what = "bad delta file"


def _error(sentinel: str, what: str) -> type[DeltaError]:
    return type(sentinel[3:] + "Error", (DeltaError,), {"sentinel": sentinel, "what": what})


MagicError = _error("ErrMagic", "not a delta file (bad magic)")
VersionError = _error("ErrVersion", "unsupported version")
CompressionError = _error("ErrCompression", "unknown compression")
FlagsError = _error("ErrFlags", "reserved flag bits set")
DTypeError = _error("ErrDType", "unknown dtype")
TensorNameError = _error("ErrName", "bad tensor name")
TensorNameError.__name__ = TensorNameError.__qualname__ = "TensorNameError"
DuplicateError = _error("ErrDuplicate", "duplicate tensor name")
ShapeError = _error("ErrShape", "bad shape")
LimitError = _error("ErrLimit", "limit exceeded")
FrameError = _error("ErrFrame", "malformed compressed frame")
SizeError = _error("ErrSize", "decoded size does not match shape")
TrailingDataError = _error("ErrTrailingData", "trailing bytes after the last entry")
TruncatedError = _error("ErrTruncated", "truncated file")
ChecksumError = _error("ErrChecksum", "checksum mismatch")
SignatureError = _error("ErrSignature", "signature does not verify")
DeltaKeyError = _error("ErrKey", "bad key")
DeltaKeyError.__name__ = DeltaKeyError.__qualname__ = "DeltaKeyError"
MetadataError = _error("ErrMetadata", "bad metadata")


class SignerError(SignatureError):
    """The file verifies, but under another key than the one asked for."""

    sentinel = "ErrSigner"
    what = "signed by another key"


#: Go sentinel name → exception class (for the shared test vectors).
SENTINELS: dict[str, type[DeltaError]] = {
    c.sentinel: c
    for c in (MagicError, VersionError, CompressionError, FlagsError, DTypeError, TensorNameError, DuplicateError,
              ShapeError, LimitError, FrameError, SizeError, TrailingDataError, TruncatedError, ChecksumError,
              SignatureError, DeltaKeyError, MetadataError)
}


# ---------------------------------------------------------------- rules


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a reader accepts; the defaults are the Go package's DefaultLimits."""

    max_name_len: int = 1024
    max_rank: int = 8
    max_tensor_bytes: int = 4 << 30
    max_total_bytes: int = 64 << 30
    max_tensors: int = 1 << 20
    max_metadata_bytes: int = 1 << 20
    max_window_bytes: int = 128 << 20


def check_name(name: str) -> None:
    """Raises TensorNameError unless ``name`` may name a tensor (package tensorname's rule).

    A name is non-empty UTF-8 without control characters (C0, DEL, C1), does
    not start with ``/`` or ``\\`` and has no ``..`` segment between ``/`` and ``\\``.
    """
    if not name:
        raise TensorNameError("empty name")
    for ch in name:
        o = ord(ch)
        if o < 0x20 or 0x7F <= o <= 0x9F:
            raise TensorNameError(f"name {name!r} holds control character U+{o:04X}")
        if 0xD800 <= o <= 0xDFFF:
            raise TensorNameError(f"name {name!r} is not UTF-8")
    if name[0] in "/\\":
        raise TensorNameError(f"name {name!r} starts with {name[0]!r}")
    if ".." in re.split(r"[/\\]", name):
        raise TensorNameError(f'name {name!r} has a ".." segment')


_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
# The canonical encodings of the eight points of small order (order 1, 2, 4, 8).
_SMALL_ORDER = {bytes.fromhex(h) for h in (
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
)}


def check_public_key(key: bytes) -> None:
    """Raises DeltaKeyError unless ``key`` is a usable Ed25519 public key.

    Package edkey's rule, exactly: 32 bytes, the canonical encoding (y < p,
    no sign bit on x = 0) of a point on the curve, not of small order. (A key
    with a torsion component but not of small order passes, as in Go; the
    libsodium point checks would also refuse those, so they are not used.)
    """
    key = bytes(key)
    if len(key) != PUBLIC_KEY_SIZE:
        raise DeltaKeyError(f"key has {len(key)} bytes, want {PUBLIC_KEY_SIZE}")
    y = int.from_bytes(key, "little") & ((1 << 255) - 1)
    sign = key[31] >> 7
    if y >= _P:
        raise DeltaKeyError(f"key {key.hex()} is not the canonical encoding of its point (y ≥ p)")
    # RFC 8032 5.1.3: x² = (y² − 1) / (d·y² + 1)
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P
    if v * x * x % _P != u:
        x = x * _SQRT_M1 % _P
        if v * x * x % _P != u:
            raise DeltaKeyError(f"key {key.hex()} is not a point on the curve")
    if x == 0 and sign:
        raise DeltaKeyError(f"key {key.hex()} is not the canonical encoding of its point (x = 0 with the sign bit)")
    if key in _SMALL_ORDER:
        raise DeltaKeyError(f"key {key.hex()} is of small order, signatures under it prove nothing")


_L = 2**252 + 27742317777372353535851937790883648493


def _num_bytes(shape: Iterable[int], size: int) -> int | None:
    n = size
    for d in shape:
        n *= d
        if n > _U64:
            return None
    return n


def _extent(shape: Iterable[int], size: int) -> int | None:
    return _num_bytes((max(d, 1) for d in shape), size)


def _frame_limit(n: int) -> int:
    return n + n // 64 + 4096


# ---------------------------------------------------------------- metadata

_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


class _RawInt(int):
    """An int that remembers its JSON text (ParseUint refuses "-0")."""

    raw: str


def _parse_int(s: str) -> int:
    v = _RawInt(s)
    v.raw = s
    return v


def _reject_constant(c: str) -> Any:
    raise ValueError(f"{c} is not JSON")


def _check_time(s: str) -> bool:
    m = _RFC3339.match(s)
    if not m:
        return False
    y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
    try:
        datetime(y, mo, d, h, mi, min(sec, 59))
    except ValueError:
        return False
    if sec > 59:
        return False
    tz = m.group(8)
    return tz == "Z" or (int(tz[1:3]) < 24 and int(tz[4:6]) < 60)


_KNOWN_FIELDS = {
    "job": "str", "node": "str", "base_checkpoint": "str",
    "epoch": "uint", "step": "uint", "sequence": "uint", "samples": "uint",
    "claimed_loss": "float", "time": "time",
}


def parse_metadata(raw: bytes) -> dict[str, Any]:
    """Parses the ``__metadata__`` JSON object and type-checks the fields SPEC.md defines."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MetadataError("not UTF-8") from None
    try:
        obj = json.loads(text, parse_int=_parse_int, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise MetadataError(f"not a JSON object: {e}") from None
    if not isinstance(obj, dict):
        raise MetadataError(f"not a JSON object ({type(obj).__name__})")
    for k, kind in _KNOWN_FIELDS.items():
        if k not in obj:
            continue
        v = obj[k]
        ok = False
        if kind == "str":
            ok = isinstance(v, str)
        elif kind == "uint":
            ok = isinstance(v, _RawInt) and not v.raw.startswith("-") and 0 <= v <= _U64
        elif kind == "float":
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            try:
                ok = ok and math.isfinite(float(v))
            except OverflowError:
                ok = False
        elif kind == "time":
            ok = isinstance(v, str) and _check_time(v)
        if not ok:
            want = {"str": "a string", "uint": "an integer in [0, 2^64)", "float": "a finite number",
                    "time": "an RFC 3339 time string"}[kind]
            raise MetadataError(f"field {k!r} must be {want}, is {json.dumps(v)[:80]}")
    return {k: (int(v) if isinstance(v, _RawInt) else v) for k, v in obj.items()}


def _marshal_metadata(meta: Mapping[str, Any]) -> bytes:
    """Encodes metadata as the Go writer does: keys sorted, compact, UTF-8, and type-checked."""
    for k, v in meta.items():
        if not isinstance(k, str):
            raise MetadataError(f"key {k!r} is not a string")
        if isinstance(v, datetime):
            raise MetadataError(f"field {k!r}: pass times as RFC 3339 strings (rfc3339(dt))")
    try:
        js = json.dumps(dict(meta), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise MetadataError(str(e)) from None
    b = js.encode("utf-8")
    parse_metadata(b)  # the fields SPEC.md defines have their types
    return b


def rfc3339(t: datetime | None = None) -> str:
    """A time as the Go writer formats it (RFC 3339, UTC, ``Z``); now when ``t`` is None."""
    t = (t or datetime.now(timezone.utc)).astimezone(timezone.utc)
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        s += f".{t.microsecond:06d}".rstrip("0")
    return s + "Z"


# ---------------------------------------------------------------- tensors


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One decoded entry: name, dtype ("fp32", "fp16", "bf16", "int8"), shape and little-endian bytes."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def numpy(self) -> np.ndarray:
        """The values as a numpy array (bf16 widened to float32, exactly)."""
        if self.dtype == "bf16":
            u = np.frombuffer(self.data, dtype="<u2").astype(np.uint32) << 16
            return u.view(np.float32).reshape(self.shape)
        np_dtype = {"fp32": "<f4", "fp16": "<f2", "int8": "i1"}[self.dtype]
        return np.frombuffer(self.data, dtype=np_dtype).reshape(self.shape).copy()

    def torch(self) -> torch.Tensor:
        """The values as a torch tensor of the file's dtype (needs torch)."""
        import torch

        td = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8}[self.dtype]
        if not self.data:
            return torch.empty(self.shape, dtype=td)
        return torch.frombuffer(bytearray(self.data), dtype=td).reshape(self.shape)


@dataclasses.dataclass(frozen=True)
class Delta:
    """A verified delta file: header fields, metadata, tensors (in file order) and signer."""

    compression: str
    flags: int
    metadata: dict[str, Any] | None
    tensors: list[Tensor]
    public_key: bytes
    signature: bytes
    digest: bytes  # SHA3-256(header ‖ payload): what the signature signs
    size: int

    @property
    def pubkey_hex(self) -> str:
        """The signer's public key as 64 hex characters (the node id)."""
        return self.public_key.hex()

    def tensor(self, name: str) -> Tensor:
        """The tensor called ``name`` (KeyError when there is none)."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def to_dict(self) -> dict[str, Tensor]:
        """Tensors by name."""
        return {t.name: t for t in self.tensors}


@dataclasses.dataclass(frozen=True)
class DeltaInfo:
    """What :meth:`DeltaWriter.write_delta` wrote."""

    path: Path
    size: int
    digest: str  # hex SHA3-256 signature digest (hanzod's name for the file)
    pubkey: str  # hex signer key


# ---------------------------------------------------------------- reader


class _Payload:
    """A bounded view of the payload with the Go reader's truncation rules."""

    def __init__(self, buf: memoryview, start: int, end: int) -> None:
        self.buf, self.pos, self.end, self.start = buf, start, end, start

    def take(self, n: int, what: str, **where: Any) -> memoryview:
        if n > self.end - self.pos:
            raise TruncatedError(f"inside the {what}", **where)
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b


class _Frame:
    """Walks one LZ4 or Zstandard frame's structure as package delta's frameReader does."""

    def __init__(self, p: _Payload, want: int, max_window: int) -> None:
        self.p, self.want, self.max, self.max_window = p, want, _frame_limit(want), max_window
        self.start, self.n = p.pos, 0

    def take(self, k: int) -> memoryview:
        self.n += k
        if self.n > self.max:
            raise FrameError(f"frame longer than {self.max} bytes for {self.want} decoded bytes")
        if k > self.p.end - self.p.pos:
            raise TruncatedError("inside a compressed frame")
        b = self.p.buf[self.p.pos:self.p.pos + k]
        self.p.pos += k
        return b

    def magic_error(self, m: int, want: str) -> DeltaError:
        if m & _SKIPPABLE_MASK == _SKIPPABLE_BASE:
            return FrameError(f"skippable frame where one {want} frame must be")
        if m == _LZ4_LEGACY_MAGIC:
            return FrameError(f"legacy LZ4 frame where one {want} frame must be")
        return FrameError(f"magic {m:#010x} is not a {want} frame")

    def lz4(self) -> memoryview:
        b = self.take(6)
        m = struct.unpack_from("<I", b)[0]
        if m != _LZ4_MAGIC:
            raise self.magic_error(m, "LZ4")
        flg, bd = b[4], b[5]
        if flg >> 6 != 1:
            raise FrameError(f"LZ4 frame version {flg >> 6}")
        if flg & 0x02 or bd & 0x8F:
            raise FrameError("LZ4 frame reserved bits set")
        if flg & 0x01:
            raise FrameError("LZ4 frame needs a dictionary")
        bid = bd >> 4 & 7
        if bid < 4:
            raise FrameError(f"LZ4 block size id {bid}")
        block_max = 1 << (8 + 2 * bid)
        has_size = bool(flg & 0x08)
        b = self.take(9 if has_size else 1)
        if has_size and (size := struct.unpack_from("<Q", b)[0]) != self.want:
            raise SizeError(f"LZ4 frame declares {size} bytes, shape needs {self.want}")
        while True:
            v = struct.unpack_from("<I", self.take(4))[0]
            if v == 0:
                if flg & 0x04:
                    self.take(4)
                break
            size = v & 0x7FFFFFFF
            if size > block_max:
                raise FrameError(f"LZ4 block of {size} bytes exceeds the frame's {block_max}-byte blocks")
            self.take(size + (4 if flg & 0x10 else 0))
        return self.p.buf[self.start:self.p.pos]

    def zstd(self) -> memoryview:
        b = self.take(5)
        m = struct.unpack_from("<I", b)[0]
        if m != _ZSTD_MAGIC:
            raise self.magic_error(m, "Zstandard")
        fhd = b[4]
        fcs_flag, single = fhd >> 6, bool(fhd >> 5 & 1)
        if fhd & 0x08:
            raise FrameError("Zstandard frame reserved bit set")
        checksum = bool(fhd & 0x04)
        dict_len = (0, 1, 2, 4)[fhd & 3]
        fcs_len = (0, 2, 4, 8)[fcs_flag]
        if single and fcs_flag == 0:
            fcs_len = 1
        wd_len = 0 if single else 1
        b = self.take(wd_len + dict_len + fcs_len)
        window = 0
        if not single:
            exp, mant = b[0] >> 3, b[0] & 7
            base = 1 << (10 + exp)
            window = base + base // 8 * mant
        if int.from_bytes(b[wd_len:wd_len + dict_len], "little"):
            raise FrameError(f"Zstandard frame needs dictionary {int.from_bytes(b[wd_len:wd_len + dict_len], 'little')}")
        if fcs_len:
            fcs = int.from_bytes(b[wd_len + dict_len:], "little") + (256 if fcs_len == 2 else 0)
            if fcs != self.want:
                raise SizeError(f"Zstandard frame declares {fcs} bytes, shape needs {self.want}")
            if single:
                window = fcs
        if window > max(2 * self.want, _ZSTD_MIN_WINDOW):
            raise FrameError(f"Zstandard window of {window} bytes for {self.want} decoded bytes")
        if window > self.max_window:
            raise LimitError(f"Zstandard window of {window} bytes exceeds the limit of {self.max_window}")
        while True:
            b = self.take(3)
            h = b[0] | b[1] << 8 | b[2] << 16
            last, typ, size = h & 1, h >> 1 & 3, h >> 3
            if typ == 3:
                raise FrameError("Zstandard reserved block type")
            if size > _ZSTD_BLOCK_MAX:
                raise FrameError(f"Zstandard block of {size} bytes exceeds {_ZSTD_BLOCK_MAX}")
            self.take(1 if typ == 1 else size)
            if last:
                break
        if checksum:
            self.take(4)
        return self.p.buf[self.start:self.p.pos]


_CHUNK = 16 << 20  # decoded bytes asked of a decoder at once: buffers grow as bytes arrive


def _decode(kind: int, frame: memoryview, want: int) -> bytes:
    """Decodes one whole frame: exactly ``want`` bytes or an error, never more than want+1 decoded.

    Output is taken in chunks of at most 16 MiB, so memory follows what the
    frame really holds, not what its shape declares.
    """
    parts: list[bytes] = []
    got = 0
    try:
        if kind == 1:
            d = lz4.frame.LZ4FrameDecompressor()
            data = bytes(frame)
            while got <= want:
                chunk = d.decompress(data, max_length=min(_CHUNK, want + 1 - got))
                data = b""
                parts.append(chunk)
                got += len(chunk)
                if d.eof or (not chunk and d.needs_input):
                    break
            if got <= want and not d.eof:
                raise FrameError("LZ4 frame ends before its end mark")
            if d.unused_data:
                raise FrameError("LZ4 frame does not end where its structure does")
        else:
            r = zstandard.ZstdDecompressor().stream_reader(bytes(frame), read_across_frames=False)
            while got <= want:
                chunk = r.read(min(_CHUNK, want + 1 - got))
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
    except DeltaError:
        raise
    except Exception as e:  # the codecs' own errors: corrupt blocks, bad checksums
        raise FrameError(f"decoder: {e}") from None
    if got > want:
        raise SizeError(f"frame decodes to more than the {want} bytes the shape needs")
    if got != want:
        raise SizeError(f"frame decodes to {got} bytes, shape needs {want}")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _parse_header(b: bytes | memoryview) -> tuple[int, int]:
    if bytes(b[:5]) != MAGIC:
        raise MagicError(f"file starts with {bytes(b[:5])!r}, want b'DELTA'", offset=0)
    if b[5] != VERSION:
        raise VersionError(f"version {b[5]}, this reader knows version {VERSION}", offset=5)
    if b[6] not in COMPRESSIONS:
        raise CompressionError(f"compression byte {b[6]} (want 0 none, 1 lz4, 2 zstd)", offset=6)
    if b[7] & _RESERVED_FLAGS:
        raise FlagsError(f"flags {b[7]:#04x} (only bit 0 LoRA and bit 1 full are defined)", offset=7)
    return b[6], b[7]


def parse_delta(data: bytes | bytearray | memoryview | mmap.mmap, pubkey: bytes | str | None = None,
                limits: Limits | None = None) -> Delta:
    """Verifies and decodes a delta held in memory; see :func:`read_delta`."""
    lim = limits or Limits()
    buf = memoryview(data)
    size = len(buf)
    want_key = _pubkey_bytes(pubkey) if pubkey is not None else None
    if size < HEADER_SIZE + TRAILER_SIZE:
        # Say what the bytes are, when their start already rules them out.
        if size >= HEADER_SIZE:
            _parse_header(buf[:HEADER_SIZE])
        elif size >= len(MAGIC) and bytes(buf[:5]) != MAGIC:
            raise MagicError(f"file starts with {bytes(buf[:5])!r}, want b'DELTA'", offset=0)
        raise TruncatedError(f"{size} bytes: no room for the 24-byte header and the 96-byte trailer", offset=size)
    compression, flags = _parse_header(buf[:HEADER_SIZE])
    p = _Payload(buf, HEADER_SIZE, size - TRAILER_SIZE)
    names: set[str] = set()
    total = 0
    tensors: list[Tensor] = []
    metadata: dict[str, Any] | None = None
    i = 0
    while p.pos < p.end:
        off = p.pos
        if p.end - p.pos < 4:
            raise TrailingDataError(f"{p.end - p.pos} bytes after the last entry are not a whole entry", offset=off)
        if i >= lim.max_tensors:
            raise LimitError(f"more than {lim.max_tensors} entries", offset=off, entry=i)
        name_len = struct.unpack_from("<I", p.take(4, "name length"))[0]
        if name_len == 0:
            raise TensorNameError("empty name", offset=off, entry=i)
        if name_len > lim.max_name_len:
            raise LimitError(f"name of {name_len} bytes exceeds the {lim.max_name_len}-byte limit", offset=off, entry=i)
        raw_name = bytes(p.take(name_len, "name", offset=off, entry=i))
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise TensorNameError(f"name {raw_name!r} is not UTF-8", offset=off, entry=i) from None
        try:
            check_name(name)
        except TensorNameError as e:
            raise TensorNameError(e.detail, offset=off, entry=i) from None
        where = {"offset": off, "entry": i, "name": name}
        if name in names:
            raise DuplicateError("the name appears twice", **where)
        dt_rank = p.take(2, "dtype and rank", **where)
        dtype, rank = dt_rank[0], dt_rank[1]
        if dtype not in DTYPES:
            raise DTypeError(f"dtype byte {dtype} (want 0 fp32, 1 fp16, 2 bf16, 3 int8)", **where)
        if rank > min(lim.max_rank, 255):
            raise LimitError(f"rank {rank} exceeds the limit of {lim.max_rank}", **where)
        shape = struct.unpack_from(f"<{rank}Q", p.take(8 * rank, "shape", **where)) if rank else ()
        dname, dsize = DTYPES[dtype]
        nbytes = _num_bytes(shape, dsize)
        if nbytes is None:
            raise ShapeError(f"shape {list(shape)} of {dname} overflows 64 bits", **where)
        if nbytes > lim.max_tensor_bytes:
            raise LimitError(f"{nbytes} bytes exceed the per-tensor limit of {lim.max_tensor_bytes}", **where)
        ext = _extent(shape, dsize)
        if ext is None:
            raise ShapeError(f"shape {list(shape)} of {dname} overflows 64 bits with its zero dimensions counted as 1",
                             **where)
        if ext > lim.max_tensor_bytes:
            raise LimitError(f"shape {list(shape)} of {dname}: dimensions span {ext} bytes (zeros counted as 1), "
                             f"over the per-tensor limit of {lim.max_tensor_bytes}", **where)
        if total + nbytes > lim.max_total_bytes:
            raise LimitError(f"tensors total more than the limit of {lim.max_total_bytes} bytes", **where)
        if name == METADATA_NAME:
            if dtype != 3 or rank != 1:
                raise MetadataError(f"must be int8 of rank 1, is {dname} of rank {rank}", **where)
            if nbytes > lim.max_metadata_bytes:
                raise LimitError(f"metadata of {nbytes} bytes exceeds the limit of {lim.max_metadata_bytes}", **where)
        total += nbytes
        names.add(name)
        try:
            if compression == 0:
                raw = bytes(p.take(nbytes, "data"))
            else:
                fr = _Frame(p, nbytes, lim.max_window_bytes)
                frame = fr.lz4() if compression == 1 else fr.zstd()
                raw = _decode(compression, frame, nbytes)
        except DeltaError as e:
            raise type(e)(e.detail, **where) from None
        if name == METADATA_NAME:
            try:
                metadata = parse_metadata(raw)
            except MetadataError as e:
                raise MetadataError(e.detail, **where) from None
        else:
            tensors.append(Tensor(name, dname, tuple(shape), raw))
        i += 1
    payload = buf[HEADER_SIZE:size - TRAILER_SIZE]
    if hashlib.sha3_256(payload).digest()[:CHECKSUM_SIZE] != bytes(buf[8:HEADER_SIZE]):
        raise ChecksumError(f"header says {bytes(buf[8:24]).hex()}, payload hashes to "
                            f"{hashlib.sha3_256(payload).digest()[:16].hex()}", offset=8)
    sig = bytes(buf[size - TRAILER_SIZE:size - PUBLIC_KEY_SIZE])
    key = bytes(buf[size - PUBLIC_KEY_SIZE:])
    try:
        check_public_key(key)
    except DeltaKeyError as e:
        raise DeltaKeyError("trailer " + e.detail, offset=size - PUBLIC_KEY_SIZE) from None
    if int.from_bytes(sig[32:], "little") >= _L:
        raise SignatureError("signature has S ≥ L, the non-canonical (malleable) form", offset=size - TRAILER_SIZE)
    digest = hashlib.sha3_256(buf[:size - TRAILER_SIZE]).digest()
    try:
        nacl.signing.VerifyKey(key).verify(digest, sig)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError):
        raise SignatureError(f"signature does not verify under the trailer's key {key.hex()}",
                             offset=size - TRAILER_SIZE) from None
    if want_key is not None and want_key != key:
        raise SignerError(f"signed by {key.hex()}, not by {want_key.hex()}", offset=size - PUBLIC_KEY_SIZE)
    return Delta(COMPRESSIONS[compression], flags, metadata, tensors, key, sig, digest, size)


def read_delta(path: str | os.PathLike[str], pubkey: bytes | str | None = None,
               limits: Limits | None = None) -> Delta:
    """Reads, verifies and decodes the delta file at ``path``.

    Returns its tensors only when every rule of docs/delta-format.md holds:
    header, entries, frames (one whole frame per tensor, decoded to exactly
    the shape's size, never past it), limits, metadata, checksum, trailer key
    and signature. With ``pubkey`` (32 bytes or 64 hex characters) the file
    must also be signed by that key (:class:`SignerError` otherwise).

    The file is mapped, not read: memory is the decoded tensors plus one
    frame, never what a frame claims. Raises a :class:`DeltaError` subclass
    for every malformed file, OSError when it cannot be opened.
    """
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size == 0:
            return parse_delta(b"", pubkey, limits)
        # Not closed here: views of the mapping may live on in an exception's
        # traceback; the mapping goes when the last of them does.
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return parse_delta(m, pubkey, limits)


def _pubkey_bytes(k: bytes | str) -> bytes:
    if isinstance(k, str):
        try:
            k = bytes.fromhex(k.strip())
        except ValueError:
            raise DeltaKeyError("public key is not hex") from None
    if len(k) != PUBLIC_KEY_SIZE:
        raise DeltaKeyError(f"public key of {len(k)} bytes, want {PUBLIC_KEY_SIZE} (64 hex characters)")
    check_public_key(k)
    return bytes(k)


# ---------------------------------------------------------------- writer


@runtime_checkable
class DeltaSource(Protocol):
    """Something that knows its tensors and metadata (an :class:`~gym_protocol.client.EpochDelta`)."""

    def delta_tensors(self) -> list[tuple[str, Any]]: ...  # noqa: E704

    def delta_metadata(self) -> dict[str, Any]: ...  # noqa: E704


def _tensor_bytes(t: Any, dtype: str | None) -> tuple[str, tuple[int, ...], bytes]:
    """(dtype name, shape, little-endian bytes) of a torch tensor, numpy array or Tensor."""
    if isinstance(t, Tensor):
        if dtype not in (None, t.dtype):
            raise DTypeError(f"tensor is {t.dtype}, asked for {dtype}")
        return t.dtype, t.shape, t.data
    mod = type(t).__module__
    if mod.startswith("torch"):
        import torch

        names = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int8: "int8"}
        tt = t.detach().to("cpu").contiguous()
        if dtype is not None:
            want = {v: k for k, v in names.items()}.get(dtype)
            if want is None:
                raise DTypeError(f"dtype {dtype!r} (want fp32, fp16, bf16 or int8)")
            tt = tt.to(want)
        if tt.dtype not in names:
            raise DTypeError(f"torch dtype {tt.dtype} has no delta dtype: pass dtype='fp32' (or fp16, bf16, int8)")
        shape = tuple(int(s) for s in tt.shape)
        raw = tt.reshape(-1).view(torch.uint8).numpy().tobytes() if tt.numel() else b""
        return names[tt.dtype], shape, raw
    a = np.asarray(t)
    np_names = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16", np.dtype(np.int8): "int8"}
    if dtype == "bf16":
        f = a.astype("<f4")
        u = f.view("<u4").astype(np.uint64)
        # round to nearest even, as torch does; NaN stays NaN
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
        r = np.where(np.isnan(f), ((u >> 16) | 0x40).astype("<u2"), r)
        return "bf16", tuple(a.shape), r.tobytes()
    if dtype is not None:
        np_dtype = {"fp32": "<f4", "fp16": "<f2", "int8": "i1"}.get(dtype)
        if np_dtype is None:
            raise DTypeError(f"dtype {dtype!r} (want fp32, fp16, bf16 or int8)")
        a = a.astype(np_dtype)
    name = np_names.get(a.dtype.newbyteorder("=")) if a.dtype.kind in "fi" else None
    if name is None:
        raise DTypeError(f"numpy dtype {a.dtype} has no delta dtype: pass dtype='fp32' (or fp16, bf16, int8)")
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return name, tuple(int(s) for s in a.shape), a.tobytes()


def _compress(kind: int, raw: bytes) -> bytes:
    """One frame per tensor with its content size, as the Go writer does."""
    if kind == 0:
        return raw
    if kind == 1:
        return lz4.frame.compress(raw, block_size=lz4.frame.BLOCKSIZE_MAX1MB, block_linked=False,
                                  content_checksum=False, store_size=True)
    return zstandard.ZstdCompressor(level=3, write_checksum=False, write_content_size=True).compress(raw)


class DeltaWriter:
    """Writes a signed delta file (the seeds' ``DeltaWriter``).

    >>> w = DeltaWriter("delta.bin", signing_key="node.key", compression="zstd")  # doctest: +SKIP
    >>> w.add_tensor("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", a)  # doctest: +SKIP
    >>> w.write_delta({"job": "job-00000001", "epoch": 1})  # doctest: +SKIP

    Tensors are written in the order they were added, after the metadata
    (the Go writer's order). ``add_tensor`` checks each one as the reader
    will (name, dtype, shape), so nothing is written for bad input. With
    compression ``"none"`` the bytes are those the Go writer makes for the
    same tensors, metadata and key (Ed25519 signatures are deterministic).
    """

    MAGIC = MAGIC

    def __init__(self, path: str | os.PathLike[str], signing_key: KeyLike = None,
                 compression: str | int = "lz4", flags: int = FLAG_LORA) -> None:
        self.path = Path(path)
        self.signing_key = signing_key
        self.compression = _COMPRESSION_CODES.get(compression) if isinstance(compression, str) else compression
        if self.compression not in COMPRESSIONS:
            raise CompressionError(f"{compression!r} (want none, lz4 or zstd)")
        if not isinstance(flags, int) or not 0 <= flags <= 0xFF or flags & _RESERVED_FLAGS:
            raise FlagsError(f"{flags!r} (only FLAG_LORA and FLAG_FULL are defined)")
        self.flags = flags
        self.tensors: list[tuple[str, int, tuple[int, ...], bytes]] = []
        self._names: set[str] = set()
        self.info: DeltaInfo | None = None
        self.metadata: dict[str, Any] | None = None
        self._store: Path | None = None
        self._store_key: Path | None = None

    def add_tensor(self, name: str, tensor: Any, dtype: str | int | None = None) -> None:
        """Adds a tensor: a torch tensor, a numpy array or a :class:`Tensor`.

        ``dtype`` ("fp32", "fp16", "bf16", "int8", or the seed's codes 0–3)
        converts to that type; without it the tensor's own type must be one
        of the four (bf16 from numpy needs dtype="bf16").
        """
        if isinstance(dtype, int):
            if dtype not in DTYPES:
                raise DTypeError(f"dtype code {dtype} (want 0 fp32, 1 fp16, 2 bf16, 3 int8)")
            dtype = DTYPES[dtype][0]
        check_name(name)
        if name == METADATA_NAME:
            raise TensorNameError("reserved name: pass metadata to write_delta")
        if name in self._names:
            raise DuplicateError(f"{name!r} was added before")
        dname, shape, raw = _tensor_bytes(tensor, dtype)
        if len(shape) > 255:
            raise ShapeError(f"rank {len(shape)} exceeds 255")
        n = _num_bytes(shape, DTYPES[_DTYPE_CODES[dname]][1])
        if n is None:
            raise ShapeError(f"shape {list(shape)} overflows 64 bits")
        ext = _extent(shape, DTYPES[_DTYPE_CODES[dname]][1])
        if ext is None or ext > max(n, Limits().max_tensor_bytes):
            raise ShapeError(f"shape {list(shape)}: dimensions too large for a tensor of {n} bytes")
        if n != len(raw):
            raise SizeError(f"shape {list(shape)} of {dname} needs {n} bytes, data has {len(raw)}")
        self._names.add(name)
        self.tensors.append((name, _DTYPE_CODES[dname], shape, raw))

    def write_delta(self, delta: DeltaSource | Mapping[str, Any] | None = None,
                    key: SigningKey | str | os.PathLike[str] | None = None) -> DeltaInfo:
        """Writes the file atomically and returns what was written.

        ``delta`` is the metadata (a JSON object: job, epoch, step, node,
        sequence, base_checkpoint, claimed_loss, samples, time, and any
        other keys), or what :meth:`GSPOTrainer.train_epoch` returned, whose
        tensors and metadata are added here. ``key`` (a node key file, as
        ``gym keygen`` makes, or a :class:`SigningKey`) overrides the key
        given to the constructor.
        """
        meta: Mapping[str, Any] | None
        if isinstance(delta, DeltaSource):
            for name, t in delta.delta_tensors():
                self.add_tensor(name, t)
            meta = delta.delta_metadata()
            if key is None and self.signing_key is None:
                key = getattr(delta, "key_path", None)
            # upload_ipfs goes to the store of the worker the delta came from
            self._store = getattr(delta, "store_dir", None)
            self._store_key = getattr(delta, "key_path", None)
        else:
            meta = delta
        sk = load_key(key if key is not None else self.signing_key)
        entries = []
        if meta is not None:
            js = _marshal_metadata(meta)
            if len(js) > Limits().max_metadata_bytes:
                raise LimitError(f"metadata of {len(js)} bytes exceeds the limit of {Limits().max_metadata_bytes}")
            entries.append((METADATA_NAME, 3, (len(js),), js))
            self.metadata = parse_metadata(js)
        entries.extend(self.tensors)
        sum1 = hashlib.sha3_256()
        parts: list[bytes] = []
        for name, code, shape, raw in entries:
            nb = name.encode("utf-8")
            head = struct.pack("<I", len(nb)) + nb + struct.pack("<BB", code, len(shape)) + \
                struct.pack(f"<{len(shape)}Q", *shape)
            body = _compress(self.compression, raw)
            sum1.update(head)
            sum1.update(body)
            parts += (head, body)
        header = MAGIC + bytes([VERSION, self.compression, self.flags]) + sum1.digest()[:CHECKSUM_SIZE]
        sum2 = hashlib.sha3_256(header)
        for b in parts:
            sum2.update(b)
        digest = sum2.digest()
        sig = sk.sign(digest)
        pub = sk.public_key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix="." + self.path.name + ".")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                for b in parts:
                    f.write(b)
                f.write(sig)
                f.write(pub)
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise
        self.info = DeltaInfo(self.path, self.path.stat().st_size, digest.hex(), pub.hex())
        return self.info

    def finalize(self) -> DeltaInfo:
        """The seed listing's name for :meth:`write_delta` without metadata."""
        return self.write_delta()

    def upload_ipfs(self, store: str | os.PathLike[str] | None = None,
                    key: str | os.PathLike[str] | None = None, gym: str | os.PathLike[str] | None = None) -> str:
        """Publishes the written file into a local artifact store and returns its CID.

        The store is the worker's (``$GYM_DATA/artifacts`` by default, see
        :func:`gym_protocol.client.publish_artifact`); the CID is the one
        ``ipfs add --cid-version=1`` gives for the same bytes.
        """
        from gym_protocol.client import publish_artifact

        if self.info is None:
            raise RuntimeError("write_delta first: nothing written yet")
        if store is None:
            store = self._store
        if key is None:
            key = self._store_key if self._store_key is not None else (
                self.signing_key if isinstance(self.signing_key, (str, os.PathLike)) else None)
        return publish_artifact(self.path, store=store, key=key, gym=gym)

