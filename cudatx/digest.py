"""Digests of files, the one place cudatx hashes bytes.

RECORD writes a digest as urlsafe base64 without padding (PEP 376/627, `sha256=...`); the
transaction store keeps hex sha256. hashlib (OpenSSL) is imported only when something is
hashed: most runs hash nothing.
"""

from __future__ import annotations

import base64
import os

from cudatx.reading import open_regular

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
    """The digest of the regular file at `path`; None when it cannot be read or hashed that
    way. Opened as cudatx.reading opens what someone else wrote: without blocking, and only
    a regular file, so a FIFO planted at a listed path, or a symlink to /dev/zero, is "cannot
    be read" at once instead of a hang (open(2) of a FIFO waits for a writer; /dev/zero
    never ends)."""
    try:
        fd, _ = open_regular(path)
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


UNREADABLE = "unreadable"  # file_state of something there that is no readable regular file


def file_state(path: str) -> str | None:
    """What stands at `path`, as a transaction compares it before and after: None when
    nothing does, the hex sha256 of a regular file (through symlinks), else UNREADABLE (a
    FIFO, a device, a folder, a dangling symlink: read without blocking, never hashed)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):
        return UNREADABLE
    digest = sha256_hex(path)
    return UNREADABLE if digest is None else digest
