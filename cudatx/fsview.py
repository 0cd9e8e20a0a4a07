"""The files the loader can see, probed once each.

The loader never touches the disk itself: it asks a FileView. The planner later hands it a
view in which a simulated change has happened.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from cudatx.elf import read_elf, rodata_sonames
from cudatx.errors import ElfReadError
from cudatx.models import ElfInfo


class Seen(Enum):
    MISSING = "missing"
    DENIED = "denied"  # open() fails with EACCES: glibc goes on searching
    BAD = "bad"  # opens, but is no loadable ELF: glibc stops the search with an error
    ELF = "elf"


@dataclass(frozen=True)
class Probe:
    seen: Seen
    info: ElfInfo | None = None
    reason: str | None = None
    file_id: tuple[int, int] | None = None  # (st_dev, st_ino), as glibc compares loaded files


_MISSING = Probe(Seen.MISSING)


class FileView:
    def __init__(self) -> None:
        self._probes: dict[str, Probe] = {}
        self._strings: dict[str, tuple[str, ...]] = {}

    def probe(self, path: str) -> Probe:
        cached = self._probes.get(path)
        if cached is None:
            cached = self._probes[path] = self._probe(path)
        return cached

    def strings(self, path: str) -> tuple[str, ...]:
        """Soname-shaped strings of the object's .rodata; () where it cannot be read."""
        cached = self._strings.get(path)
        if cached is None:
            try:
                cached = rodata_sonames(path)
            except ElfReadError:
                cached = ()
            self._strings[path] = cached
        return cached

    def glob(self, pattern: str) -> list[str]:
        """Python's glob, in its own (directory) order, as the package's code sees it."""
        return glob.glob(pattern)

    def real(self, path: str) -> str:
        """The file that holds the bytes `path` would have: itself, unless a simulated
        install puts a staged file there."""
        return path

    def _probe(self, path: str) -> Probe:
        try:
            st = os.stat(path)
        except PermissionError:
            return Probe(Seen.DENIED, reason="permission denied")
        except (OSError, ValueError):
            return _MISSING
        file_id = (st.st_dev, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            # open(2) succeeds on a folder and read(2) fails: glibc reports
            # "cannot read file data" and gives up (elf/dl-load.c open_verify).
            return Probe(Seen.BAD, reason="cannot read file data", file_id=file_id)
        try:
            info = read_elf(path)
        except ElfReadError as exc:
            seen = Seen.DENIED if exc.reason == "permission denied" else Seen.BAD
            return Probe(seen, reason=exc.reason, file_id=file_id)
        return Probe(Seen.ELF, info=info, file_id=file_id)


class OverlayView(FileView):
    """The files as they would be after a change: `gone` paths (keys) are missing, and
    `arriving` paths (keys) hold the bytes of a staged file (a simulated install).

    Shares the probes of the view it overlays, so a simulation parses no ELF twice. A path
    is gone when its own key is, or when it is a symlink whose target's key is: deleting
    the target leaves the link dangling. An arriving path is probed at its staged file, so
    its ELF facts are the new bytes', while the loader keeps the target path (and its
    $ORIGIN).
    """

    def __init__(
        self,
        base: FileView,
        gone: frozenset[str],
        key: Callable[[str], str],
        arriving: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self._base = base
        self._gone = gone
        self._key = key
        self._arriving = arriving or {}
        self._verdicts: dict[str, bool] = {}

    def _is_gone(self, path: str) -> bool:
        verdict = self._verdicts.get(path)
        if verdict is None:
            verdict = self._key(path) in self._gone or (
                os.path.islink(path) and self._key(os.path.realpath(path)) in self._gone
            )
            self._verdicts[path] = verdict
        return verdict

    def real(self, path: str) -> str:
        staged = self._arriving.get(self._key(path)) if self._arriving else None
        return staged if staged is not None else self._base.real(path)

    def probe(self, path: str) -> Probe:
        staged = self._arriving.get(self._key(path)) if self._arriving else None
        if staged is not None:
            return self._base.probe(staged)
        return _MISSING if self._is_gone(path) else self._base.probe(path)

    def strings(self, path: str) -> tuple[str, ...]:
        staged = self._arriving.get(self._key(path)) if self._arriving else None
        if staged is not None:
            return self._base.strings(staged)
        return () if self._is_gone(path) else self._base.strings(path)

    def glob(self, pattern: str) -> list[str]:
        found = [p for p in self._base.glob(pattern) if not self._is_gone(p)]
        if self._arriving:
            # New files come after the ones there now: directory order after an install
            # cannot be known beforehand, and torch takes the first match.
            have = {self._key(p) for p in found}
            folder = os.path.dirname(self._key(os.path.join(os.path.dirname(pattern), "x")))
            found += sorted(
                k
                for k in self._arriving
                if k not in have
                and os.path.dirname(k) == folder
                and fnmatch.fnmatchcase(os.path.basename(k), os.path.basename(pattern))
            )
        return found
