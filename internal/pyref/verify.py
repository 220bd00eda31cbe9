#!/usr/bin/python3
"""Independent strict reader/verifier for the delta format (version 1).

CLI:
    verify.py FILE [--pubkey HEX]

Prints one JSON object to stdout:
    {"valid": bool, "error": str|null, "compression": int|null,
     "flags": int|null, "pubkey": hex|null,
     "tensors": [{"name": str, "dtype": int, "shape": [int],
                  "sha256": hex of the decoded bytes}],
     "metadata": object|null}
and exits 0 when the file is valid, 1 otherwise.

Checks, in order: header (magic, version 1, known compression, no reserved
flag bits), --pubkey match, checksum (first 16 bytes of SHA3-256(payload)),
Ed25519 signature over SHA3-256(header || payload), then every entry: known
dtype, data that is exactly numel*size raw bytes (compression 0) or exactly ONE
complete LZ4 / Zstandard frame (boundaries found by parsing the frame format)
decoding to exactly numel*size bytes; names valid UTF-8 and unique; the
"__metadata__" entry int8, rank 1, holding a UTF-8 JSON object; payload fully
consumed. "tensors" lists every entry, including "__metadata__".
"""
import argparse
import hashlib
import json
import struct
import sys

import lz4.frame
import zstandard
from nacl.exceptions import CryptoError
from nacl.signing import VerifyKey

MAGIC = b"DELTA"
VERSION = 1
HEADER_LEN = 24
SIG_LEN = 64
PUB_LEN = 32
TRAILER_LEN = SIG_LEN + PUB_LEN
DTYPE_SIZES = {0: 4, 1: 2, 2: 2, 3: 1}
KNOWN_FLAGS = 0x03  # bit 0 LoRA, bit 1 full
METADATA_NAME = "__metadata__"

LZ4_MAGIC = 0x184D2204
LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
ZSTD_MAGIC = 0xFD2FB528
ZSTD_BLOCK_MAX = 128 << 10


class DeltaError(Exception):
    pass


def _need(buf, pos, n, what):
    if n < 0 or pos + n > len(buf):
        raise DeltaError("truncated %s at payload offset %d: need %d bytes, have %d"
                         % (what, pos, n, len(buf) - pos))


def _u32(buf, pos):
    return struct.unpack_from("<I", buf, pos)[0]


def lz4_frame_end(buf, pos):
    """Parse one LZ4 frame starting at pos.

    Returns (end, content_size or None, max_decoded_bytes)."""
    _need(buf, pos, 7, "LZ4 frame header")
    magic = _u32(buf, pos)
    if magic != LZ4_MAGIC:
        raise DeltaError("bad LZ4 frame magic 0x%08X at payload offset %d" % (magic, pos))
    pos += 4
    flg, bd = buf[pos], buf[pos + 1]
    pos += 2
    if flg >> 6 != 1:
        raise DeltaError("unsupported LZ4 frame version %d" % (flg >> 6))
    if flg & 0x02:
        raise DeltaError("LZ4 frame FLG reserved bit set")
    if bd & 0x8F:
        raise DeltaError("LZ4 frame BD reserved bits set")
    bmax = (bd >> 4) & 0x7
    if bmax not in LZ4_BLOCK_MAX:
        raise DeltaError("invalid LZ4 block max size code %d" % bmax)
    block_max = LZ4_BLOCK_MAX[bmax]
    block_checksum = bool(flg & 0x10)
    content_size = None
    if flg & 0x08:
        _need(buf, pos, 8, "LZ4 content size")
        content_size = struct.unpack_from("<Q", buf, pos)[0]
        pos += 8
    if flg & 0x01:
        _need(buf, pos, 4, "LZ4 dictionary id")
        pos += 4
    _need(buf, pos, 1, "LZ4 header checksum")
    pos += 1  # HC byte; verified by lz4.frame.decompress
    max_decoded = 0
    while True:
        _need(buf, pos, 4, "LZ4 block size")
        size = _u32(buf, pos)
        pos += 4
        if size == 0:
            break  # end mark
        uncompressed = bool(size & 0x80000000)
        n = size & 0x7FFFFFFF
        if n > block_max:
            raise DeltaError("LZ4 block of %d bytes exceeds block max %d" % (n, block_max))
        _need(buf, pos, n, "LZ4 block")
        pos += n
        max_decoded += n if uncompressed else block_max
        if block_checksum:
            _need(buf, pos, 4, "LZ4 block checksum")
            pos += 4
    if flg & 0x04:
        _need(buf, pos, 4, "LZ4 content checksum")
        pos += 4
    return pos, content_size, max_decoded


def zstd_frame_end(buf, pos):
    """Parse one Zstandard frame starting at pos.

    Returns (end, content_size or None, max_decoded_bytes)."""
    _need(buf, pos, 5, "Zstandard frame header")
    magic = _u32(buf, pos)
    if magic != ZSTD_MAGIC:
        if magic & 0xFFFFFFF0 == 0x184D2A50:
            raise DeltaError("Zstandard skippable frame at payload offset %d" % pos)
        raise DeltaError("bad Zstandard frame magic 0x%08X at payload offset %d" % (magic, pos))
    pos += 4
    fhd = buf[pos]
    pos += 1
    fcs_flag = fhd >> 6
    single_segment = bool(fhd & 0x20)
    if fhd & 0x08:
        raise DeltaError("Zstandard frame header reserved bit set")
    checksum = bool(fhd & 0x04)
    did_size = (0, 1, 2, 4)[fhd & 0x03]
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if not single_segment:
        _need(buf, pos, 1, "Zstandard window descriptor")
        pos += 1
    _need(buf, pos, did_size, "Zstandard dictionary id")
    pos += did_size
    _need(buf, pos, fcs_size, "Zstandard frame content size")
    content_size = None
    if fcs_size == 1:
        content_size = buf[pos]
    elif fcs_size == 2:
        content_size = struct.unpack_from("<H", buf, pos)[0] + 256
    elif fcs_size == 4:
        content_size = _u32(buf, pos)
    elif fcs_size == 8:
        content_size = struct.unpack_from("<Q", buf, pos)[0]
    pos += fcs_size
    max_decoded = 0
    while True:
        _need(buf, pos, 3, "Zstandard block header")
        h = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        pos += 3
        last = h & 1
        btype = (h >> 1) & 3
        bsize = h >> 3
        if btype == 3:
            raise DeltaError("Zstandard reserved block type")
        if bsize > ZSTD_BLOCK_MAX:
            raise DeltaError("Zstandard block of %d bytes exceeds %d" % (bsize, ZSTD_BLOCK_MAX))
        if btype == 1:  # RLE: one byte, repeated bsize times
            _need(buf, pos, 1, "Zstandard RLE block")
            pos += 1
            max_decoded += bsize
        else:  # raw or compressed
            _need(buf, pos, bsize, "Zstandard block")
            pos += bsize
            max_decoded += bsize if btype == 0 else ZSTD_BLOCK_MAX
        if last:
            break
    if checksum:
        _need(buf, pos, 4, "Zstandard content checksum")
        pos += 4
    return pos, content_size, max_decoded


def decode_frame(compression, payload, pos, expected, name):
    """Decode exactly one frame at pos; returns (decoded bytes, end)."""
    if compression == 1:
        end, content_size, max_decoded = lz4_frame_end(payload, pos)
        codec = "LZ4"
    else:
        end, content_size, max_decoded = zstd_frame_end(payload, pos)
        codec = "Zstandard"
    if content_size is not None and content_size != expected:
        raise DeltaError("tensor %r: %s frame content size %d, want numel*size = %d"
                         % (name, codec, content_size, expected))
    if expected > max_decoded:
        raise DeltaError("tensor %r: %s frame can decode to at most %d bytes, want %d"
                         % (name, codec, max_decoded, expected))
    frame = payload[pos:end]
    try:
        if compression == 1:
            raw = lz4.frame.decompress(frame)
        else:
            d = zstandard.ZstdDecompressor().decompressobj()
            raw = d.decompress(frame)
            if not d.eof:
                raise DeltaError("tensor %r: incomplete Zstandard frame" % (name,))
            if d.unused_data:
                raise DeltaError("tensor %r: %d bytes after Zstandard frame end"
                                 % (name, len(d.unused_data)))
    except DeltaError:
        raise
    except Exception as e:  # lz4 / zstd library errors
        raise DeltaError("tensor %r: %s decode failed: %s" % (name, codec, e))
    if len(raw) != expected:
        raise DeltaError("tensor %r: %s frame decoded to %d bytes, want numel*size = %d"
                         % (name, codec, len(raw), expected))
    return raw, end


def _reject_constant(c):
    raise ValueError("non-standard JSON constant %s" % c)


def verify(data, pubkey_hex, result):
    if len(data) < HEADER_LEN + TRAILER_LEN:
        raise DeltaError("file too short: %d bytes, need at least %d" % (len(data), HEADER_LEN + TRAILER_LEN))
    header = data[:HEADER_LEN]
    if header[:5] != MAGIC:
        raise DeltaError("bad magic %r" % (header[:5],))
    version, compression, flags = header[5], header[6], header[7]
    result["compression"] = compression
    result["flags"] = flags
    if version != VERSION:
        raise DeltaError("unsupported version %d" % version)
    if compression not in (0, 1, 2):
        raise DeltaError("unknown compression %d" % compression)
    if flags & ~KNOWN_FLAGS & 0xFF:
        raise DeltaError("reserved flag bits set: 0x%02X" % flags)
    checksum = header[8:24]
    payload = data[HEADER_LEN:len(data) - TRAILER_LEN]
    sig = data[len(data) - TRAILER_LEN:len(data) - PUB_LEN]
    pub = data[len(data) - PUB_LEN:]
    result["pubkey"] = pub.hex()

    if pubkey_hex is not None:
        try:
            want = bytes.fromhex(pubkey_hex)
        except ValueError:
            raise DeltaError("--pubkey is not hex")
        if len(want) != PUB_LEN:
            raise DeltaError("--pubkey must be %d bytes, got %d" % (PUB_LEN, len(want)))
        if want != pub:
            raise DeltaError("public key mismatch: file has %s, want %s" % (pub.hex(), want.hex()))

    if hashlib.sha3_256(payload).digest()[:16] != checksum:
        raise DeltaError("checksum mismatch")
    digest = hashlib.sha3_256(data[:len(data) - TRAILER_LEN]).digest()
    try:
        VerifyKey(pub).verify(digest, sig)
    except CryptoError as e:
        raise DeltaError("invalid signature: %s" % e)
    except Exception as e:
        raise DeltaError("invalid public key or signature: %s" % e)

    names = set()
    pos = 0
    n = len(payload)
    while pos < n:
        _need(payload, pos, 4, "name length")
        name_len = _u32(payload, pos)
        pos += 4
        _need(payload, pos, name_len, "name")
        try:
            name = payload[pos:pos + name_len].decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            raise DeltaError("tensor name at payload offset %d is not valid UTF-8" % pos)
        pos += name_len
        if name in names:
            raise DeltaError("duplicate tensor name %r" % (name,))
        names.add(name)
        _need(payload, pos, 2, "dtype/rank")
        dtype, rank = payload[pos], payload[pos + 1]
        pos += 2
        if dtype not in DTYPE_SIZES:
            raise DeltaError("tensor %r: unknown dtype %d" % (name, dtype))
        _need(payload, pos, 8 * rank, "shape")
        shape = list(struct.unpack_from("<%dQ" % rank, payload, pos))
        pos += 8 * rank
        numel = 1
        for s in shape:
            numel *= s
        expected = numel * DTYPE_SIZES[dtype]
        if compression == 0:
            _need(payload, pos, expected, "tensor %r data" % (name,))
            raw = payload[pos:pos + expected]
            pos += expected
        else:
            raw, pos = decode_frame(compression, payload, pos, expected, name)
        result["tensors"].append({
            "name": name, "dtype": dtype, "shape": shape,
            "sha256": hashlib.sha256(raw).hexdigest(),
        })
        if name == METADATA_NAME:
            if dtype != 3 or rank != 1:
                raise DeltaError("%s must be int8 rank 1, got dtype %d rank %d" % (METADATA_NAME, dtype, rank))
            try:
                meta = json.loads(raw.decode("utf-8", errors="strict"), parse_constant=_reject_constant)
            except (UnicodeDecodeError, ValueError) as e:
                raise DeltaError("%s is not valid UTF-8 JSON: %s" % (METADATA_NAME, e))
            if not isinstance(meta, dict):
                raise DeltaError("%s must be a JSON object" % METADATA_NAME)
            result["metadata"] = meta


def main(argv=None):
    ap = argparse.ArgumentParser(description="Strict delta-format verifier.")
    ap.add_argument("file")
    ap.add_argument("--pubkey", help="expected signer public key (64 hex chars)")
    args = ap.parse_args(argv)
    result = {"valid": False, "error": None, "compression": None, "flags": None,
              "pubkey": None, "tensors": [], "metadata": None}
    try:
        try:
            with open(args.file, "rb") as f:
                data = f.read()
        except OSError as e:
            raise DeltaError("cannot read file: %s" % e)
        verify(data, args.pubkey, result)
        result["valid"] = True
    except DeltaError as e:
        result["error"] = str(e)
    except Exception as e:  # never crash without a verdict
        result["error"] = "internal error: %s: %s" % (type(e).__name__, e)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
