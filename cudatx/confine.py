"""RECORD entries that lead out of the environment: never deleted, saved or restored; reported.

A RECORD is data that whoever built or installed the distribution wrote. An entry may name
`../../../../etc/x`, an absolute path, or a path through a symlink inside the environment
that leads out of it (`pkg/escape/x`, `pkg/escape -> /home/user`). uninstalling deletes what
the RECORD lists: uv 0.13 skips the first two with a warning ("escapes the Python
environment") but deletes the third, through the symlink, and older installers skip none.
So before uv runs, cudatx takes such entries out of the RECORD of every distribution uv
will uninstall (or reinstall, which uninstalls first); the snapshot, taken before, holds the
original RECORD, which rollback puts back. The snapshot itself never saves or restores a
path outside (cudatx.snapshot). "The environment" is its `sys.prefix`, with symlinks resolved.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from pathlib import Path

from cudatx.dists import record_rows
from cudatx.errors import StoreError
from cudatx.models import Distribution, Frozen
from cudatx.store import atomic_write


class Outside(Frozen):
    distribution: str
    entry: str  # as the RECORD (or installed-files.txt) spells it


def _resolved(path: str) -> str:
    """Where `path` lands once the folders leading to it are resolved (not the last part: a
    symlink there is itself what gets deleted, saved or restored, never its target)."""
    head, tail = os.path.split(path)
    if tail in ("", ".", ".."):
        return os.path.realpath(path)
    return os.path.join(os.path.realpath(head or "."), tail)


def inside(path: str, real_prefix: str) -> bool:
    """Whether `path` (absolute) lies in the environment whose realpath is `real_prefix`."""
    if not os.path.isabs(path):
        return False  # a relative path means nothing without a working folder
    return os.path.commonpath([real_prefix, _resolved(path)]) == real_prefix


def entry_inside(base: str, entry: str, real_prefix: str) -> bool:
    """Whether a listed path, relative to `base`, stays inside, read both ways it can be: as
    the kernel resolves it (`..` after a symlink climbs from the symlink's target) and as an
    installer that normalizes it first does (os.path.normpath, lexical)."""
    if "\0" in entry:
        return False  # no such path; never handed to a system call
    joined = os.path.join(base, entry)
    return inside(joined, real_prefix) and inside(os.path.normpath(joined), real_prefix)


def _listing(dist: Distribution) -> tuple[str, str]:
    """(the file that lists the distribution's paths, the folder its entries are relative to)."""
    if dist.kind == "egg-info":
        return os.path.join(dist.metadata_dir, "installed-files.txt"), dist.metadata_dir
    return os.path.join(dist.metadata_dir, "RECORD"), dist.site


def outside(dists: Iterable[Distribution], prefix: str) -> tuple[Outside, ...]:
    """The entries of these distributions' RECORDs that lead out of the environment."""
    real_prefix = os.path.realpath(prefix)
    found = []
    for dist in dists:
        base = _listing(dist)[1]
        for entry in dist.records:
            listed = entry.path
            if dist.kind == "egg-info":  # read relative to the site; listed relative to base
                listed = os.path.relpath(os.path.join(dist.site, entry.path), base)
            if not entry_inside(base, listed, real_prefix):
                found.append(Outside(distribution=dist.name, entry=listed))
    return tuple(found)


def note(found: Iterable[Outside]) -> tuple[str, ...]:
    """One line per distribution, for the plan's notes."""
    by_dist: dict[str, list[str]] = {}
    for item in found:
        by_dist.setdefault(item.distribution, []).append(item.entry)
    return tuple(
        f"{name}'s RECORD lists {len(entries)} paths outside the environment; cudatx never "
        f"deletes, saves or restores them: {', '.join(repr(e) for e in entries[:5])}"
        + (", ..." if len(entries) > 5 else "")
        for name, entries in sorted(by_dist.items())
    )


def withhold(dists: Iterable[Distribution], prefix: str) -> list[str]:
    """Rewrite each distribution's RECORD (installed-files.txt for an egg-info) without the
    entries that lead out of the environment, and without rows csv cannot read (another
    reader may read them otherwise); returns the entries taken out, as `name: entry`.

    The RECORD is read again here, under the transaction's lock, not taken from the scan. It
    is replaced by rename (atomic_write), never written in place: the snapshot may hold a hard
    link to the original's inode, which must keep the original bytes for rollback.
    """
    real_prefix = os.path.realpath(prefix)
    withheld: list[str] = []
    for dist in dists:
        listing, base = _listing(dist)
        try:
            fd = os.open(listing, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with open(fd, encoding="utf-8", errors="surrogateescape", newline="") as handle:
                text = handle.read()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreError(f"cannot read {listing}: {exc.strerror}", path=listing) from None
        if dist.kind == "egg-info":
            rows: list[list[str] | csv.Error] = [[ln] for ln in text.splitlines() if ln.strip()]
        else:
            rows = [row for _, row in record_rows(text)]
        kept: list[list[str]] = []
        dropped: list[str] = []
        for row in rows:
            if isinstance(row, csv.Error):
                dropped.append(f"(unreadable row: {row})")
            elif row and row[0] and not entry_inside(base, row[0], real_prefix):
                dropped.append(row[0])
            else:
                kept.append(row)
        if not dropped:
            continue
        out = io.StringIO(newline="")
        if dist.kind == "egg-info":
            out.writelines(row[0] + "\n" for row in kept)
        else:
            csv.writer(out, lineterminator="\n").writerows(kept)
        try:
            atomic_write(Path(listing), out.getvalue().encode("utf-8", "surrogateescape"))
        except OSError as exc:
            raise StoreError(f"cannot rewrite {listing}: {exc.strerror}", path=listing) from None
        withheld += [f"{dist.name}: {entry}" for entry in dropped]
    return withheld
