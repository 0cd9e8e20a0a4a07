"""The judgement before a change, kept between trials.

A trial judges the environment twice, before and after the change, and the judgement
before is the same on every trial of an environment that has not changed: after the
first, it is half a trial's time. It is kept in the scan cache (cudatx.cache) with what it
depends on, and used again only while all of that stands:

- every file a check read, each by its state (cudatx.cache.file_key; a symlink's and its
  target's): each module's file, and each file mapped into the process (/proc/self/maps:
  the interpreter, every library, from the environment or the system); and every folder
  searched (sys.path entries and package folders: a module added to one would be found),
  by its state, which an entry added or removed changes;
- every file and folder of the site folders (what an import reads that is no module: a
  distribution's METADATA, a package's data files), by one digest of their states;
- the interpreter, LD_LIBRARY_PATH, the judge's environment variables, each check's
  timeout, the sandbox the code runs in, the loader's cache (/etc/ld.so.cache), and
  cudatx's own code (the cache's fingerprint: another cudatx keeps nothing of this one).

A judgement is kept only where every check said what it read (READS_PREAMBLE: a check
killed or timed out says nothing), no `--trial-cmd` ran (a command reads what it likes),
and nothing it depends on changed in the RACY_NS before the trial started or since: a file
written while the trial ran must not be keyed by the state it was not judged in. The GPU
probe runs in every trial; where its answer differs from the kept one, the judgement before
is made again (cudatx.trial.run).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cudatx.cache import RACY_NS, ScanCache, file_key

KIND = "trial before"
_LOADER_CACHE = "/etc/ld.so.cache"
# Variables a shell changes from one command to the next, which no import reads.
_VOLATILE = frozenset({"_", "OLDPWD", "PWD", "SHLVL", "TMPDIR"})


def _state(path: str) -> str:
    """A path's state (cudatx.cache.file_key), and for a symlink its target's too (a module
    file linked from elsewhere, edited there): "-" for either where there is nothing."""
    states = []
    for follow in (False, True):
        try:
            states.append(":".join(file_key(os.stat(path, follow_symlinks=follow))))
        except OSError:
            states.append("-")
    return " ".join(states)


def _newest(path: str) -> int:
    """The ctime of a path and, for a symlink, of what it points to (0 where absent)."""
    newest = 0
    for follow in (False, True):
        with contextlib.suppress(OSError):
            newest = max(newest, os.stat(path, follow_symlinks=follow).st_ctime_ns)
    return newest


def site_digest(sites: Iterable[str]) -> tuple[str, int]:
    """(a digest of the state of every file and folder under the site folders, the newest
    ctime among them); symlinks are not followed into."""
    digest = hashlib.sha256()
    newest = 0
    todo = sorted(set(sites), reverse=True)  # a stack: folders in name order, depth first
    while todo:
        folder = todo.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            digest.update(f"{folder}\0-\n".encode("utf-8", "surrogateescape"))
            continue
        below = []
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            newest = max(newest, st.st_ctime_ns)
            line = f"{entry.path}\0{':'.join(file_key(st))}\n"
            digest.update(line.encode("utf-8", "surrogateescape"))
            if stat.S_ISDIR(st.st_mode):
                below.append(entry.path)
        todo += reversed(below)
    return digest.hexdigest(), newest


def facts(
    python: str,
    sites: Iterable[str],
    ld_library_path: str | None,
    environ: Mapping[str, str],
    timeout: float,
    sandbox: Mapping[str, object],
) -> str:
    """What a kept judgement is looked up by: everything it depends on but the files."""
    told = {
        "python": python,
        "sites": list(sites),
        "ld_library_path": ld_library_path,
        "environ": sorted((k, v) for k, v in environ.items() if k not in _VOLATILE),
        "timeout": timeout,
        "sandbox": {k: sandbox[k] for k in sorted(sandbox)},
        "loader_cache": _state(_LOADER_CACHE),
    }
    return hashlib.sha256(json.dumps(told, sort_keys=True).encode()).hexdigest()


def recall(
    cache: ScanCache | None, key: str, looked_up: str, sites: Iterable[str]
) -> tuple[dict[str, Any], int] | None:
    """The judgement kept for `key` in state `looked_up` and the number of paths it depends
    on, where none of them has changed since; else None."""
    if cache is None:
        return None
    text = cache.get(KIND, key, looked_up)
    if text is None:
        return None
    try:
        kept = json.loads(text)
        judged = kept["judged"]
        paths: dict[str, str] = kept["paths"]
        digest = kept["sites"]
        if not isinstance(judged, dict) or not isinstance(paths, dict):
            raise TypeError("a kept judgement of the wrong shape")
    except (ValueError, KeyError, TypeError):
        cache.invalid()
        return None
    if any(_state(path) != was for path, was in paths.items()):
        return None
    if site_digest(sites)[0] != digest:
        return None
    return judged, len(paths)


def keep(
    cache: ScanCache | None,
    key: str,
    looked_up: str,
    judged: Mapping[str, Any],
    sites: Iterable[str],
    original: Callable[[str], str],
    started_ns: int,
) -> int:
    """Keep `judged` (a session's judgement, with what its checks read) where it may be
    kept; the number of paths it depends on, or 0 where it is not kept. `original` maps a
    path as the shadow showed it to the environment's own; `started_ns`: when the trial
    began (time.time_ns())."""
    reads = judged.get("reads")
    if cache is None or not isinstance(reads, dict) or not reads.get("complete"):
        return 0
    limit = started_ns - RACY_NS
    paths: dict[str, str] = {}
    for path in map(original, [*reads["files"], *reads["folders"], _LOADER_CACHE]):
        if path.endswith(" (deleted)") or _newest(path) >= limit:
            return 0  # replaced while mapped, or written since just before the trial began
        paths[path] = _state(path)  # "-" for a folder on sys.path that is not there
    digest, newest = site_digest(sites)
    if newest >= limit:
        return 0
    stored = {k: v for k, v in judged.items() if k != "reads"}
    kept = {"judged": stored, "paths": paths, "sites": digest}
    cache.put(KIND, key, looked_up, json.dumps(kept))
    return len(paths)
