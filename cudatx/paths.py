"""Paths as users know them: relative to the site folder that holds them."""

from __future__ import annotations

import functools
import os


@functools.lru_cache(maxsize=16)
def _prefixes(sites: tuple[str, ...]) -> tuple[str, ...]:
    # A site folder is matched as written and as its realpath (`lib64 -> lib`, a symlinked
    # venv): paths reach us both ways. Longest first, so a nested folder wins.
    found = {os.path.join(s, "") for s in sites}
    found |= {os.path.join(os.path.realpath(s), "") for s in sites}
    return tuple(sorted(found, key=len, reverse=True))


def site_relative(path: str, sites: tuple[str, ...]) -> str:
    """`path` relative to the site folder holding it, else `path` unchanged."""
    for prefix in _prefixes(tuple(sites)):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path
