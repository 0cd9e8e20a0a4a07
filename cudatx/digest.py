"""Digests of files, the one place cudatx hashes bytes.

RECORD writes a digest as urlsafe base64 without padding (PEP 376/627, `sha256=...`); the
transaction store keeps hex sha256. hashlib (OpenSSL) is imported only when something is
hashed: most runs hash nothing.
"""

from __future__ import annotations

import array
import base64
import os
import zlib

_CHUNK = 1 << 20


def record_encode(digest: bytes) -> str:
    """A digest as RECORD writes it: urlsafe base64, no padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def digest_fd(fd: int, algorithm: str = "sha256") -> bytes:
    """The digest of what an open file descriptor holds, read from its current offset.

    Raises ValueError for an algorithm hashlib does not know or one of variable length
    (shake_*, which RECORD cannot use), OSError when the file cannot be read."""
    import hashlib

    try:
        hasher = hashlib.new(algorithm)
    except (ValueError, TypeError):
        raise ValueError(f"unknown hash algorithm {algorithm!r}") from None
    if hasher.digest_size == 0:
        raise ValueError(f"{algorithm} has no fixed length")
    while chunk := os.read(fd, _CHUNK):
        hasher.update(chunk)
    return hasher.digest()


def digest_file(path: str, algorithm: str = "sha256") -> bytes | None:
    """The digest of the file at `path`; None when it cannot be read or hashed that way."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        return digest_fd(fd, algorithm)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def sha256_hex(path: str) -> str | None:
    """Hex sha256 of the file at `path` (the store's spelling); None when unreadable."""
    digest = digest_file(path)
    return None if digest is None else digest.hex()


def symbol_key(text: str) -> int:
    """A 64-bit key for a symbol name (or "name@version"), of its bytes as the string table
    holds them: crc32 and adler32 side by side (cudatx.elf.reader computes the same inline).
    Sets of them stand for an object's definitions in the scan cache, at 8 bytes a name
    where a torch library's C++ names average 400; two names colliding could only make a
    missing symbol read as found, never the reverse."""
    data = os.fsencode(text)
    return zlib.crc32(data) << 32 | zlib.adler32(data)


def pack_keys(keys: list[int]) -> str:
    """Keys as ASCII text (base64 of 64-bit little-endian words), for the scan cache."""
    words = array.array("Q", keys)
    if words.itemsize != 8:  # pragma: no cover - every platform CPython runs on has 8
        raise ValueError("no 64-bit array type")
    return base64.b64encode(words.tobytes()).decode("ascii")


def unpack_keys(text: str) -> frozenset[int]:
    words = array.array("Q")
    words.frombytes(base64.b64decode(text))
    return frozenset(words)
