"""What a change touches on disk: the files it deletes or overwrites, the folders it creates."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping

from cudatx.discover.confinement import listing, listing_rows, withheld_row
from cudatx.models import Distribution

PYCACHE = "__pycache__"


def files_of(dist: Distribution) -> list[str]:
    """Every path uninstalling `dist` deletes: its RECORD's, and its metadata folder's."""
    paths = [os.path.normpath(os.path.join(dist.site, e.path)) for e in dist.records]
    for folder, _, names in os.walk(dist.metadata_dir):
        paths += [os.path.join(folder, n) for n in names]
    return sorted(set(paths))


def _isdir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _tree(folder: str, files: set[str], folders: set[str]) -> None:
    """Everything under `folder` (not following symlinks), as remove_dir_all deletes it."""
    for top, subdirs, names in os.walk(folder):
        folders.add(top)
        files.update(os.path.join(top, n) for n in names)
        # os.walk lists a symlink to a folder among subdirs and does not enter it.
        files.update(os.path.join(top, d) for d in subdirs if os.path.islink(os.path.join(top, d)))


def uninstalled(
    dists: Iterable[Distribution], prefix: str, kept: Mapping[str, frozenset[str]] | None = None
) -> tuple[list[str], list[str]]:
    """(files, folders) that uv's uninstall of `dists` deletes, as uv does it.

    uv deletes each RECORD entry (those cudatx lets it have: cudatx.txn.confine), then, for
    the folder of every file it deleted, inside site-packages and below it: that folder's
    `__pycache__` whole, and the folder itself if nothing is left in it, climbing while
    folders empty (crates/uv-install-wheel/src/uninstall.rs, uninstall_wheel). Files a
    metadata folder holds that its RECORD does not list are counted too (as files_of does).
    Folders come with them so the snapshot can give them back with their modes.
    """
    real_prefix = os.path.realpath(prefix)
    files: set[str] = set()
    folders: set[str] = set()
    visited: set[tuple[str, str]] = set()  # (site, folder of a file uv deletes)
    for dist in dists:
        base = listing(dist)[1]
        try:
            rows = listing_rows(dist) or []
        except OSError:
            rows = []  # confine.withhold says it, under the lock, before uv runs
        shared = (kept or {}).get(dist.name, frozenset())
        for row in rows:
            if isinstance(row, list) and row and row[0] in shared:
                continue  # confine.withhold keeps it from uv
            if isinstance(row, list) and withheld_row(base, row, real_prefix) is None:
                path = os.path.normpath(os.path.join(base, row[0]))
                files.add(path)
                if os.path.lexists(path) and not _isdir(path):
                    visited.add((os.path.normpath(dist.site), os.path.dirname(path)))
        if _isdir(dist.metadata_dir):
            _tree(dist.metadata_dir, files, folders)
    for site, folder in sorted(visited, key=lambda v: v[1], reverse=True):
        while folder != site and folder.startswith(os.path.join(site, "")):
            pycache = os.path.join(folder, PYCACHE)
            if _isdir(pycache):
                _tree(pycache, files, folders)
            gone = files | folders
            try:
                left = [n for n in os.listdir(folder) if os.path.join(folder, n) not in gone]
            except OSError:
                break
            if left:
                break
            folders.add(folder)
            folder = os.path.dirname(folder)
    return sorted(files), sorted(folders)


def created_folders(paths: Iterable[str], prefix: str) -> list[str]:
    """Folders that writing `paths` would create, deepest first (a rollback removes them)."""
    created: set[str] = set()
    for path in paths:
        folder = os.path.dirname(path)
        while folder.startswith(os.path.join(prefix, "")) and not os.path.lexists(folder):
            created.add(folder)
            folder = os.path.dirname(folder)
    return sorted(created, key=lambda f: (-f.count("/"), f))
