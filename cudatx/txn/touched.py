"""What a change touches on disk: the files it deletes or overwrites, the folders it creates."""

from __future__ import annotations

import os
from collections.abc import Iterable

from cudatx.models import Distribution


def files_of(dist: Distribution) -> list[str]:
    """Every path uninstalling `dist` deletes: its RECORD's, and its metadata folder's."""
    paths = [os.path.normpath(os.path.join(dist.site, e.path)) for e in dist.records]
    for folder, _, names in os.walk(dist.metadata_dir):
        paths += [os.path.join(folder, n) for n in names]
    return sorted(set(paths))


def created_folders(paths: Iterable[str], prefix: str) -> list[str]:
    """Folders that writing `paths` would create, deepest first (a rollback removes them)."""
    created: set[str] = set()
    for path in paths:
        folder = os.path.dirname(path)
        while folder.startswith(os.path.join(prefix, "")) and not os.path.lexists(folder):
            created.add(folder)
            folder = os.path.dirname(folder)
    return sorted(created, key=lambda f: (-f.count("/"), f))
