"""RECORD entries that lead out of the environment: never deleted, saved or restored; reported.

The rules live here; cudatx.txn.confine takes such entries out before uv runs.

A RECORD is data that whoever built or installed the distribution wrote. An entry may name
`../../../../etc/x`, an absolute path, or a path through a symlink inside the environment
that leads out of it (`pkg/escape/x`, `pkg/escape -> /home/user`). uninstalling deletes what
the RECORD lists: uv 0.13 skips the first two with a warning ("escapes the Python
environment") but deletes the third, through the symlink, and older installers skip none.
So before uv runs, cudatx takes such entries out of the RECORD of every distribution uv
will uninstall (or reinstall, which uninstalls first); the snapshot, taken before, holds the
original RECORD, which rollback puts back. The snapshot itself never saves or restores a
path outside (cudatx.txn.snapshot). "The environment" is its `sys.prefix`, with symlinks resolved.
"""

from __future__ import annotations

import csv
import os
import stat
from collections.abc import Iterable

from cudatx.discover.dists import record_rows
from cudatx.discover.owners import owner_of
from cudatx.models import Distribution, Frozen
from cudatx.reading import MAX_RECORD, read_bounded
from cudatx.trust import STORE_DIR as STORE_DIR  # named here too, for the readers of the store


class Withheld(Frozen):
    """A RECORD entry uv is never given to delete."""

    distribution: str
    entry: str  # as the RECORD (or installed-files.txt) spells it
    reason: str  # why, in words: "outside the environment", "a folder", ...


class Folders:
    """What one pass over RECORDs learnt of their folders: each one's realpath, and the
    verdict on an entry in it. A RECORD of a million entries names a few folders, and
    os.path.realpath lstat()s every part of a path (about 30 calls an entry): asked once a
    folder instead, a pass is linear in the RECORD's size with a small constant (issue 23: a
    10^6-line RECORD took `remove --dry-run` 129 s). Only for one pass: what is on disk may
    change between passes (a transaction reads everything again under its lock)."""

    def __init__(self) -> None:
        self.real: dict[str, str] = {}
        self.verdict: dict[str, str | None] = {}


def _real(folder: str, memo: Folders | None) -> str:
    if memo is None:
        return os.path.realpath(folder)
    found = memo.real.get(folder)
    if found is None:
        found = memo.real[folder] = os.path.realpath(folder)
    return found


def _resolved(path: str, memo: Folders | None = None) -> str:
    """Where `path` lands once the folders leading to it are resolved (not the last part: a
    symlink there is itself what gets deleted, saved or restored, never its target)."""
    head, tail = os.path.split(path)
    if tail in ("", ".", ".."):
        return os.path.realpath(path)
    return os.path.join(_real(head or ".", memo), tail)


def inside(path: str, real_prefix: str, memo: Folders | None = None) -> bool:
    """Whether `path` (absolute) lies in the environment whose realpath is `real_prefix`."""
    if not os.path.isabs(path):
        return False  # a relative path means nothing without a working folder
    return os.path.commonpath([real_prefix, _resolved(path, memo)]) == real_prefix


def entry_inside(base: str, entry: str, real_prefix: str, memo: Folders | None = None) -> bool:
    """Whether a listed path, relative to `base`, stays inside, read both ways it can be: as
    the kernel resolves it (`..` after a symlink climbs from the symlink's target) and as an
    installer that normalizes it first does (os.path.normpath, lexical)."""
    if "\0" in entry:
        return False  # no such path; never handed to a system call
    joined = os.path.join(base, entry)
    return inside(joined, real_prefix, memo) and inside(os.path.normpath(joined), real_prefix, memo)


def listing(dist: Distribution) -> tuple[str, str]:
    """(the file that lists the distribution's paths, the folder its entries are relative to)."""
    if dist.owner == "egg-info":
        return os.path.join(dist.metadata_dir, "installed-files.txt"), dist.metadata_dir
    return os.path.join(dist.metadata_dir, "RECORD"), dist.site


def withheld_because(
    base: str, entry: str, real_prefix: str, memo: Folders | None = None
) -> str | None:
    """Why uv must not be handed `entry` (relative to `base`) to delete, or None.

    uv deletes an entry with remove_file and, where that fails, remove_dir_all: a folder
    goes whole, whoever owns what is in it (crates/uv-install-wheel/src/uninstall.rs,
    uninstall_wheel). So an entry that is empty (joined to site-packages it names
    site-packages), or names a folder (by lstat, as unlink(2) meets it; a trailing `/`
    makes the kernel follow a symlink there), the prefix, or the transaction store, is
    withheld like one that leads outside.
    """
    if not entry:
        return "empty: uv would delete the whole site folder"
    if "\0" in entry:
        return "holds a NUL byte"
    joined = os.path.join(base, entry)
    folder, tail = os.path.split(joined)
    if memo is not None and tail not in ("", ".", "..") and os.path.normpath(joined) == joined:
        # The common entry, `pkg/mod.py`: read both ways it lands at the same place, in its
        # folder's realpath; what is said of its folder holds for every such entry there.
        if folder not in memo.verdict:
            memo.verdict[folder] = _landing(os.path.join(folder, "x"), real_prefix, memo)
        said = memo.verdict[folder]
        if said is None and tail == STORE_DIR and _real(folder, memo) == real_prefix:
            said = "cudatx's transaction store"
    else:
        said = _landing(joined, real_prefix, memo)
    if said is not None:
        return said
    if entry.endswith(("/", "/.", "/..")) or entry in (".", ".."):
        return "a folder: uv would delete it whole"
    try:
        st = os.lstat(joined)
    except (FileNotFoundError, NotADirectoryError):
        return None  # nothing there: nothing to delete
    except OSError as exc:
        return f"cannot be checked ({exc.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return "a folder: uv would delete it whole"
    return None


def _landing(joined: str, real_prefix: str, memo: Folders | None) -> str | None:
    """Why `joined` (base and entry) is withheld for where it lands, read both ways
    (entry_inside), or None."""
    normal = os.path.normpath(joined)
    if not (inside(joined, real_prefix, memo) and inside(normal, real_prefix, memo)):
        return "outside the environment"
    for landed in {_resolved(joined, memo), _resolved(normal, memo)}:
        if landed == real_prefix:
            return "the environment itself"
        store = os.path.join(real_prefix, STORE_DIR)
        if landed == store or landed.startswith(os.path.join(store, "")):
            return "cudatx's transaction store"
    return None


def escaping_metadata(dists: Iterable[Distribution], prefix: str) -> list[str]:
    """The metadata folders of `dists` that are symlinks leading outside the environment,
    each as `PATH -> TARGET`. uv reads the RECORD there and deletes the folder, cudatx would
    rewrite the RECORD there (cudatx.txn.confine) and save and restore it: all of it outside.
    (A package folder that leads outside needs no refusal: every entry through it is
    withheld from uv, and neither the snapshot nor a rollback goes through it.)"""
    real_prefix = os.path.realpath(prefix)
    found: list[str] = []
    for dist in dists:
        if not owner_of(dist).python:
            continue  # no metadata folder of uv's (a conda record's .json)
        try:
            if not stat.S_ISLNK(os.lstat(dist.metadata_dir).st_mode):
                continue
        except OSError:
            continue
        target = os.path.realpath(dist.metadata_dir)
        if os.path.commonpath([real_prefix, target]) != real_prefix:
            found.append(f"{dist.metadata_dir} -> {target}")
    return found


def listing_rows(dist: Distribution) -> list[list[str] | csv.Error] | None:
    """Every row of the distribution's RECORD (installed-files.txt: one path a line) as uv
    reads it, rows the scan drops included (an empty path, a bad hash): uv deletes what they
    name all the same. None when there is no such file. Raises OSError."""
    path = listing(dist)[0]
    try:
        text = read_bounded(path, MAX_RECORD, follow=False).decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return None
    if dist.owner == "egg-info":
        return [[ln] for ln in text.splitlines() if ln.strip()]
    return [row for _, row in record_rows(text) if not isinstance(row, list) or row]


def withheld_row(
    base: str, row: list[str] | csv.Error, real_prefix: str, memo: Folders | None = None
) -> str | None:
    """Why a row is not given to uv: withheld_because its path, or a row csv cannot read
    (another reader may read it otherwise). `memo`: one dict for one pass (Folders)."""
    if isinstance(row, csv.Error):
        return f"a row csv cannot read ({row})"
    return withheld_because(base, row[0], real_prefix, memo)


def withheld(dists: Iterable[Distribution], prefix: str) -> tuple[Withheld, ...]:
    """The entries of these distributions' RECORDs that uv is not given (withheld_because)."""
    real_prefix = os.path.realpath(prefix)
    found = []
    memo = Folders()
    for dist in dists:
        base = listing(dist)[1]
        try:
            rows = listing_rows(dist) or []
        except OSError:
            rows = []  # said by the transaction, which reads it again under its lock
        for row in rows:
            reason = withheld_row(base, row, real_prefix, memo)
            if reason is not None:
                entry = "" if isinstance(row, csv.Error) else row[0]
                found.append(Withheld(distribution=dist.name, entry=entry, reason=reason))
    return tuple(found)
