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

import os
from collections.abc import Iterable

from cudatx.models import Distribution, Frozen


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


def listing(dist: Distribution) -> tuple[str, str]:
    """(the file that lists the distribution's paths, the folder its entries are relative to)."""
    if dist.kind == "egg-info":
        return os.path.join(dist.metadata_dir, "installed-files.txt"), dist.metadata_dir
    return os.path.join(dist.metadata_dir, "RECORD"), dist.site


def outside(dists: Iterable[Distribution], prefix: str) -> tuple[Outside, ...]:
    """The entries of these distributions' RECORDs that lead out of the environment."""
    real_prefix = os.path.realpath(prefix)
    found = []
    for dist in dists:
        base = listing(dist)[1]
        for entry in dist.records:
            listed = entry.path
            if dist.kind == "egg-info":  # read relative to the site; listed relative to base
                listed = os.path.relpath(os.path.join(dist.site, entry.path), base)
            if not entry_inside(base, listed, real_prefix):
                found.append(Outside(distribution=dist.name, entry=listed))
    return tuple(found)
