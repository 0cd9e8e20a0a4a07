"""Rules about paths and file names that every stage shares.

- Paths as users know them: relative to the site folder that holds them.
- Which file names are shared libraries, a soname's stem, the `PyInit_` name a file name asks.
"""

from __future__ import annotations

import functools
import os
import re

_LIBRARY_NAME = re.compile(r"\.so(\.|$)")


def is_library_name(name: str) -> bool:
    """Whether a file name is a shared library's: `libfoo.so`, `libfoo.so.1.2`, `_C.abi3.so`."""
    return _LIBRARY_NAME.search(name) is not None


def normal(path: str) -> str:
    """os.path.normpath(path), without its cost where `path` is normal already: no empty
    component (`//`, a trailing `/`), none that starts with `.` (`.` and `..` among them),
    not empty. RECORD rows are nearly all such (torch's 13,000), and normpath splits and
    joins every one."""
    if not path or path.startswith(".") or "/." in path or "//" in path or path.endswith("/"):
        return os.path.normpath(path)
    return path


def soname_stem(name: str) -> str:
    """`libcudnn_ops.so.9` -> `libcudnn_ops`: the name without `.so` and its version."""
    return os.path.basename(name).split(".so", 1)[0]


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


def display_path(path: str | None, sites: tuple[str, ...], *, resolve: bool = True) -> str:
    """A path as cudatx shows it: "-" for none; with `resolve`, a path holding `..` (the
    loader's spelling, `torch/lib/../../nvidia`) shown as the file it reaches, its folders
    resolved through symlinks (never folded lexically: `link/..` is not the folder holding
    `link`); then relative to its site folder."""
    if path is None:
        return "-"
    if resolve and ".." in path.split("/"):
        path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    return site_relative(path, sites)


def pyinit_name(path: str) -> str:
    """`PyInit_NAME` for a file `NAME.SUFFIX` (the module name is what comes before the
    first dot: a SUFFIX starts with one, and NAME holds none)."""
    return "PyInit_" + os.path.basename(path).split(".", 1)[0]
