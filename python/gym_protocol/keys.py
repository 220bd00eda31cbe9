"""Node keys: Ed25519 private keys in PKCS#8 PEM, the format of ``gym keygen``.

``gym keygen --out FILE`` and ``openssl genpkey -algorithm ed25519`` make
such files (package nodekey); a key made by any of them works with the
others. Public keys travel as 64 hex characters, which is also the node id.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Union

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

if TYPE_CHECKING:
    import nacl.signing

__all__ = ["SigningKey", "KeyFileError", "KeyLike", "load_key", "generate_key"]

_MAX_KEY_FILE = 64 << 10  # nodekey's bound: a PEM Ed25519 key is about 120 bytes


class KeyFileError(ValueError):
    """A key file is missing, not PKCS#8 PEM, encrypted, or not an Ed25519 key."""


class SigningKey:
    """An Ed25519 signing key (a node's identity)."""

    def __init__(self, key: ed25519.Ed25519PrivateKey) -> None:
        self._key = key

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        """The key of a 32-byte RFC 8032 seed (Go's ed25519.NewKeyFromSeed)."""
        if len(seed) != 32:
            raise KeyFileError(f"seed of {len(seed)} bytes, want 32")
        return cls(ed25519.Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def from_pem(cls, data: bytes) -> SigningKey:
        """Parses a PKCS#8 PEM ("PRIVATE KEY") Ed25519 key."""
        text = data.strip()
        if b"ENCRYPTED PRIVATE KEY" in text:
            raise KeyFileError("the key is encrypted; decrypt it first (openssl pkey -in KEY -out PLAIN)")
        if not text.startswith(b"-----BEGIN PRIVATE KEY-----"):
            raise KeyFileError('no PEM "PRIVATE KEY" block (want PKCS#8, as made by `gym keygen` or '
                               "`openssl genpkey -algorithm ed25519`)")
        try:
            k = serialization.load_pem_private_key(text, password=None)
        except (ValueError, TypeError) as e:
            raise KeyFileError(f"not a PKCS#8 private key: {e}") from None
        if not isinstance(k, ed25519.Ed25519PrivateKey):
            raise KeyFileError(f"a {type(k).__name__}, want an Ed25519 key (make one with `gym keygen --out FILE`)")
        return cls(k)

    @property
    def seed(self) -> bytes:
        """The 32-byte seed."""
        return self._key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                       serialization.NoEncryption())

    @property
    def public_key(self) -> bytes:
        """The 32-byte public key."""
        return self._key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    @property
    def public_hex(self) -> str:
        """The public key as 64 hex characters: the node id."""
        return self.public_key.hex()

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message`` (deterministic)."""
        return self._key.sign(message)

    def to_pem(self) -> bytes:
        """PKCS#8 PEM, byte for byte what package nodekey writes."""
        return self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption())

    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Writes the key with mode 0600; refuses to replace a file unless ``overwrite``."""
        p = Path(path)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
        fd = os.open(p, flags, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(self.to_pem())


def generate_key() -> SigningKey:
    """A new random key."""
    return SigningKey(ed25519.Ed25519PrivateKey.generate())


KeyLike = Union[SigningKey, "nacl.signing.SigningKey", ed25519.Ed25519PrivateKey, bytes, str, "os.PathLike[str]", None]


def load_key(key: KeyLike) -> SigningKey:
    """A signing key from what a caller has: this package's :class:`SigningKey`; a PyNaCl
    ``nacl.signing.SigningKey`` (what the seeds' listings pass); a ``cryptography``
    ``Ed25519PrivateKey``; a raw 32-byte seed; or a key file path (``gym keygen``'s PKCS#8 PEM).
    None reads ``$GYM_KEY``."""
    if isinstance(key, SigningKey):
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return SigningKey(key)
    if isinstance(key, (bytes, bytearray, memoryview)):
        return SigningKey.from_seed(bytes(key))
    if type(key).__module__ == "nacl.signing" and type(key).__name__ == "SigningKey":
        # PyNaCl's key: its encode() is the 32-byte seed (duck-typed, so PyNaCl stays optional here).
        return SigningKey.from_seed(bytes(key.encode()))  # type: ignore[union-attr]
    if key is None:
        env = os.environ.get("GYM_KEY")
        if not env:
            raise KeyFileError("no signing key: pass one (a `gym keygen` file) or set GYM_KEY")
        key = env
    if not isinstance(key, (str, os.PathLike)):
        raise KeyFileError(f"a {type(key).__name__} is not a signing key: pass a key file path, a gym_protocol, "
                           "PyNaCl or cryptography Ed25519 signing key, or a 32-byte seed")
    p = Path(key)
    try:
        with open(p, "rb") as f:
            data = f.read(_MAX_KEY_FILE + 1)
    except OSError as e:
        raise KeyFileError(f"{p}: {e.strerror}") from None
    if len(data) > _MAX_KEY_FILE:
        raise KeyFileError(f"{p} is larger than {_MAX_KEY_FILE} bytes: not a key file")
    try:
        return SigningKey.from_pem(data)
    except KeyFileError as e:
        raise KeyFileError(f"{p}: {e}") from None
