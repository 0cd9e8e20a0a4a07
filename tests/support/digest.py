"""Tree digests: what "the environment is back, byte for byte" means in the tests.

Every path under a root, with its kind, permission bits and content (sha256 for a file, the
target for a symlink); ``__pycache__`` and the cudatx store are left out, since importing
and transacting legitimately change them.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["Entry", "diff", "tree_digest"]

# (kind, mode, content): kind is "file", "symlink", "dir" or "other"; mode is S_IMODE of the
# lstat; content is the sha256 (hex) of a file, the target of a symlink, None otherwise.
Entry = tuple[str, int, str | None]


def _sha256(path: str) -> str:
    # O_NOFOLLOW: the entry was a regular file by lstat; never hash what a swapped-in link
    # would point at.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with open(fd, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def tree_digest(
    root: Path, *, exclude: Iterable[str] = ("__pycache__", ".cudatx")
) -> dict[str, Entry]:
    """Every path under `root` (relative, '/'-separated) -> (kind, mode, sha256 or target).

    Any path with a component named in `exclude` is skipped, with everything below it.
    Symlinks are recorded, never followed.
    """
    skip = frozenset(exclude)
    out: dict[str, Entry] = {}

    def walk(folder: str, rel: str) -> None:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if entry.name in skip:
                continue
            name = f"{rel}/{entry.name}" if rel else entry.name
            st = entry.stat(follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[name] = ("symlink", mode, os.readlink(entry.path))
            elif stat.S_ISDIR(st.st_mode):
                out[name] = ("dir", mode, None)
                walk(entry.path, name)
            elif stat.S_ISREG(st.st_mode):
                out[name] = ("file", mode, _sha256(entry.path))
            else:
                out[name] = ("other", mode, None)

    walk(os.fspath(root), "")
    return out


def diff(a: Mapping[str, Entry], b: Mapping[str, Entry]) -> list[str]:
    """How tree `b` differs from tree `a`, one readable line per difference, sorted by path."""
    lines: list[str] = []
    for path in sorted(set(a) | set(b)):
        before, after = a.get(path), b.get(path)
        if before == after:
            continue
        if after is None:
            assert before is not None
            lines.append(f"{path}: {before[0]} missing from the second tree")
        elif before is None:
            lines.append(f"{path}: {after[0]} only in the second tree")
        elif before[0] != after[0]:
            lines.append(f"{path}: was a {before[0]}, now a {after[0]}")
        else:
            if before[1] != after[1]:
                lines.append(f"{path}: mode {before[1]:#o} -> {after[1]:#o}")
            if before[2] != after[2]:
                what = "target" if before[0] == "symlink" else "sha256"
                lines.append(f"{path}: {what} {before[2]} -> {after[2]}")
    return lines
