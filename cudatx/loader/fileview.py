"""The files the loader can see, probed once each.

The loader never touches the disk itself: it asks a FileView. The planner later hands it a
view in which a simulated change has happened.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
import zlib
from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from cudatx.cache import Stale, Unkept, file_key, memo, memo_file, settled
from cudatx.codec import decode, encode
from cudatx.elf.exports import Definitions
from cudatx.errors import ElfReadError
from cudatx.models import ElfInfo, Frozen, Symbols
from cudatx.paths import pyinit_name

if TYPE_CHECKING:
    from cudatx.cache import ScanCache
    from cudatx.elf.prefetch import RodataPrefetch


class Seen(Enum):
    MISSING = "missing"
    DENIED = "denied"  # open() fails with EACCES: glibc goes on searching
    BAD = "bad"  # opens, but is no loadable ELF: glibc stops the search with an error
    ELF = "elf"


class Probe(Frozen, kw_only=False):
    seen: Seen
    info: ElfInfo | None = None
    reason: str | None = None
    file_id: tuple[int, int] | None = None  # (st_dev, st_ino), as glibc compares loaded files
    inits: tuple[str, ...] = ()  # the PyInit_* name its file name asks, if it exports it


_MISSING = Probe(Seen.MISSING)
_NAMES = tuple[str, ...]
_T = TypeVar("_T")


class FileView:
    """Every file probed once; with a cache, each ELF object parsed once until it changes.

    The ELF reader (cudatx.elf.reader) is imported only when a file has to be parsed.
    """

    def __init__(self, cache: ScanCache | None = None) -> None:
        self.cache = cache
        self._probes: dict[str, Probe] = {}
        self._strings: dict[str, tuple[str, ...]] = {}
        self._symbols: dict[str, Symbols | None] = {}
        # File id -> what it defines (cudatx.elf.exports), for the loader's symbol checks.
        self.tables: dict[object, Definitions | None] = {}
        # The loader's symbol verdicts in this run, keyed by the identities of the files.
        self.verdicts: dict[object, list[Any]] = {}
        self._stats: dict[str, os.stat_result] = {}
        self._prefetch: RodataPrefetch | None = None
        self._folders: dict[str, bool] = {}
        self._globbed: dict[str, list[str]] = {}
        # Answers about the files on disk now, found in this run (kind and key -> answer),
        # for every simulation on this view to start from (cudatx.analysis.ownership).
        self.answers: dict[tuple[str, str], object] = {}

    def probe(self, path: str) -> Probe:
        cached = self._probes.get(path)
        if cached is None:
            cached = self._probes[path] = self._probe(path)
        return cached

    def inits(self, path: str) -> tuple[str, ...]:
        """The `PyInit_*` names the file exports (cudatx.discover.sitewalk's question)."""
        return self.probe(path).inits

    def machine(self, path: str) -> int | None:
        """The ELF header's e_machine; None for a file that is no ELF object."""
        info = self.probe(path).info
        return None if info is None else info.machine

    def needed(self, path: str) -> tuple[str, ...]:
        """The file's DT_NEEDED names; () for what is no ELF object."""
        info = self.probe(path).info
        return info.needed if info is not None else ()

    def prefetch_strings(self, paths: list[str]) -> None:
        """Have a child process read the .rodata of `paths` (those the scan cache does not
        hold) beside the scan (cudatx.elf.prefetch), for strings() to take; until
        end_prefetch."""
        self.end_prefetch()
        todo = []
        for path in paths:
            st = self._stats.get(path)
            if st is None or path in self._strings:
                continue
            if self.cache is None or self.cache.get_file("rodata", st) is None:
                todo.append(path)
        if todo:
            from cudatx.elf.prefetch import RodataPrefetch

            self._prefetch = RodataPrefetch(todo)

    def end_prefetch(self) -> None:
        """Stop the child; what it read of files no one asked about goes to the scan cache,
        so that the next run has it and starts no child for it."""
        if self._prefetch is None:
            return
        left = self._prefetch.close()
        self._prefetch = None
        if self.cache is not None:
            for path, names in left.items():
                st = self._stats.get(path)
                if st is not None and path not in self._strings:
                    self.cache.put_file("rodata", st, encode(names))

    def strings(self, path: str) -> tuple[str, ...]:
        """Soname-shaped strings of the object's .rodata; () where it cannot be read."""
        cached = self._strings.get(path)
        if cached is None:
            cached = self._strings[path] = self._read_strings(path)
        return cached

    def symbols(self, path: str) -> Symbols | None:
        """The object's dynamic references (cudatx.elf.reader.read_symbols); None where they
        cannot be read. Read only when a symbol check needs them, with what the object
        defines (exports), and kept in the scan cache apart from the probe."""
        if path not in self._symbols:
            st = self._stats.get(path)
            probe = self.probe(path)
            if st is None or probe.info is None:
                self._symbols[path] = None
                self.tables[probe.file_id or path] = None
            else:
                self._symbols[path] = memo_file(
                    self.cache,
                    "syms",
                    st,
                    lambda: self._read_symbol_facts(path),
                    load=lambda text: None if text == "null" else decode(Symbols, text),
                    dump=lambda found: "null" if found is None else encode(found),
                )
        return self._symbols[path]

    def exports(self, path: str) -> Definitions | None:
        """What the object at `path` defines (cudatx.elf.reader.read_exports); None where it
        cannot be read. Read when a symbol check first asks, and kept for the run under the
        file's identity, which every fork and simulation on this view shares; not in the
        scan cache, which keeps the checks' verdicts instead."""
        probe = self.probe(path)
        if probe.info is None:
            return None
        key: object = probe.file_id or path
        if key not in self.tables:
            self.symbols(path)  # where the references are not kept: one read of both
        if key not in self.tables:
            from cudatx.elf.reader import read_exports

            try:
                self.tables[key] = read_exports(path)
            except ElfReadError:
                self.tables[key] = None
        return self.tables[key]

    def state(self, path: str) -> str | None:
        """What identifies the bytes at `path` as probed (cudatx.cache.file_key); None when
        it was not probed or changed too recently to be told apart from a later write."""
        st = self._stats.get(path)
        if st is None or not settled(st):
            return None
        where, what = file_key(st)
        return f"{where}:{what}"

    def remember(
        self,
        kind: str,
        key: str | None,
        compute: Callable[[], _T],
        *,
        load: Callable[[str], _T],
        dump: Callable[[_T], str | None],
    ) -> _T:
        """A verdict kept in the scan cache under the exact text `key` (cudatx.cache.memo);
        computed every time where `key` is None (a file read was not settled)."""
        return memo(
            self.cache if key else None,
            kind,
            f"{zlib.crc32((key or '').encode()):08x}:{len(key or '')}",
            key or "",
            compute,
            load=load,
            dump=dump,
        )

    def _read_symbol_facts(self, path: str) -> Symbols | None:
        """The object's references (what symbols() keeps in the scan cache), and what it
        defines kept for the run, from one read of the tables both come from."""
        from cudatx.elf.reader import read_symbol_facts

        key: object = self.probe(path).file_id or path
        try:
            symbols, self.tables[key] = read_symbol_facts(path)
        except ElfReadError as exc:
            self.tables[key] = None
            if exc.passing:
                raise Unkept(None) from None  # a passing failure to read: nothing kept
            return None
        return symbols

    def glob(self, pattern: str) -> list[str]:
        """Python's glob, in its own (directory) order, as the package's code sees it."""
        found = self._globbed.get(pattern)
        if found is None:
            found = self._globbed[pattern] = glob.glob(pattern)
        return list(found)

    def found(self) -> set[str]:
        """Every path this view has answered exists (probed, read, or matched by a glob).

        A change that deletes none of them, replayed on this view, asks the same questions
        and gets the same answers (cudatx.planning.plan uses it)."""
        out = {path for path, probe in self._probes.items() if probe.seen is not Seen.MISSING}
        out.update(self._strings)
        for matches in self._globbed.values():
            out.update(matches)
        return out

    def is_folder(self, path: str) -> bool:
        """Whether `path` is a folder (through symlinks). A change removes files, and a file
        it removes is gone from its folder whether or not the folder stays: an overlay asks
        its base."""
        known = self._folders.get(path)
        if known is None:
            known = self._folders[path] = os.path.isdir(path)
        return known

    def _read_strings(self, path: str) -> tuple[str, ...]:
        st = self._stats.get(path)
        if st is None:
            try:
                st = os.stat(path)
            except (OSError, ValueError):
                return ()

        def compute() -> tuple[str, ...]:
            fetched = self._prefetch.take(path) if self._prefetch is not None else None
            if fetched is not None:
                return fetched
            from cudatx.elf.reader import rodata_sonames

            try:
                return rodata_sonames(path)
            except ElfReadError as exc:
                if exc.passing:
                    raise Unkept(()) from None
                return ()  # no ELF object: none, a fact of its bytes

        return memo_file(
            self.cache, "rodata", st, compute, load=lambda t: decode(_NAMES, t), dump=encode
        )

    def real(self, path: str) -> str:
        """The file that holds the bytes `path` would have: itself, unless a simulated
        install puts a staged file there."""
        return path

    def gone(self, path: str) -> bool:
        """Whether a simulated change deleted `path`: never, for the files as they are."""
        return False

    def changed_folders(self) -> frozenset[str]:
        """The folders (keys) in which a simulated change deletes or puts a file: none,
        for the files as they are."""
        return frozenset()

    @property
    def simulated(self) -> bool:
        """Whether this view is of files as a change would leave them (OverlayView): then
        nothing read through it may be kept as a fact of the files on disk."""
        return False

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
        self._stats[path] = st
        return memo_file(
            self.cache,
            "elf",
            st,
            lambda: _read_probe(path, file_id),
            load=lambda text: _from_stored(text, path, file_id),
            dump=_to_stored,
        )


def _read_probe(path: str, file_id: tuple[int, int]) -> Probe:
    from cudatx.elf.reader import read_object

    try:
        info, inits = read_object(path)
    except ElfReadError as exc:
        seen = Seen.DENIED if exc.reason == "permission denied" else Seen.BAD
        probe = Probe(seen, reason=exc.reason, file_id=file_id)
        if exc.passing:
            raise Unkept(probe) from None
        return probe
    return Probe(Seen.ELF, info=info, file_id=file_id, inits=inits)


def _to_stored(probe: Probe) -> str:
    if probe.info is None:
        return encode(_Stored(bad=probe.reason))
    asked = pyinit_name(probe.info.path)
    return encode(_Stored(info=replace(probe.info, path=""), inits=probe.inits, asked=asked))


class _Stored(Frozen):
    """What the scan cache keeps of one file's probe: its ElfInfo (path left empty: hard links
    share the entry) and the PyInit name it exports, of the one asked (the file name gives
    it: a hard link of another name asks another), or why it is no loadable ELF object."""

    info: ElfInfo | None = None
    inits: tuple[str, ...] = ()
    asked: str | None = None
    bad: str | None = None


def _from_stored(text: str, path: str, file_id: tuple[int, int]) -> Probe:
    """A probe from what the cache holds (ValueError when it holds something else); Stale
    when it was stored under a hard link of another name, which asks of another PyInit name."""
    stored = decode(_Stored, text)
    if stored.bad is not None:
        return Probe(Seen.BAD, reason=stored.bad, file_id=file_id)
    if stored.info is None:
        raise ValueError("neither an ELF object nor a reason")
    if stored.asked != pyinit_name(path):
        raise Stale(path)
    info = replace(stored.info, path=path)
    return Probe(Seen.ELF, info=info, file_id=file_id, inits=stored.inits)


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
        super().__init__(base.cache)
        self._base = base
        self.tables = base.tables
        self.verdicts = base.verdicts
        self.answers = base.answers
        self._gone = gone
        self._key = key
        self._arriving = arriving or {}
        # Folders an install creates: every parent of an arriving file.
        self._new_folders = {os.path.dirname(k) for k in self._arriving}
        self._verdicts: dict[str, bool] = {}
        self._changed: frozenset[str] | None = None

    def _is_gone(self, path: str) -> bool:
        verdict = self._verdicts.get(path)
        if verdict is None:
            verdict = self._key(path) in self._gone or (
                os.path.islink(path) and self._key(os.path.realpath(path)) in self._gone
            )
            self._verdicts[path] = verdict
        return verdict

    def _staged(self, path: str) -> str | None:
        """The staged file a simulated install puts at `path`, if any."""
        return self._arriving.get(self._key(path)) if self._arriving else None

    def _on_disk(self, path: str) -> str:
        """`path` as the files there now answer it: where it climbs out (`..`) of a folder
        only the install creates (an arriving extension's `$ORIGIN/../prov/lib`), the
        kernel cannot walk it today, and will once the folder is there: its key, which
        resolves the folders there are."""
        if self._new_folders and "/../" in path:
            head = path.split("/../", 1)[0]
            if self._key(os.path.join(head, "x"))[:-2] in self._new_folders:
                return self._key(path)
        return path

    def real(self, path: str) -> str:
        staged = self._staged(path)
        return staged if staged is not None else self._base.real(path)

    def probe(self, path: str) -> Probe:
        staged = self._staged(path)
        if staged is not None:
            return self._base.probe(staged)
        return _MISSING if self._is_gone(path) else self._base.probe(self._on_disk(path))

    def strings(self, path: str) -> tuple[str, ...]:
        staged = self._staged(path)
        if staged is not None:
            return self._base.strings(staged)
        return () if self._is_gone(path) else self._base.strings(self._on_disk(path))

    def symbols(self, path: str) -> Symbols | None:
        staged = self._staged(path)
        if staged is not None:
            return self._base.symbols(staged)
        return None if self._is_gone(path) else self._base.symbols(self._on_disk(path))

    def exports(self, path: str) -> Definitions | None:
        staged = self._staged(path)
        if staged is not None:
            return self._base.exports(staged)
        return None if self._is_gone(path) else self._base.exports(self._on_disk(path))

    def state(self, path: str) -> str | None:
        staged = self._staged(path)
        if staged is not None:
            return self._base.state(staged)
        return None if self._is_gone(path) else self._base.state(self._on_disk(path))

    def is_folder(self, path: str) -> bool:
        if self._new_folders and self._key(os.path.join(path, "x"))[:-2] in self._new_folders:
            return True
        return self._base.is_folder(path)

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

    def gone(self, path: str) -> bool:
        """Whether the change deleted `path` (or, for a symlink, what it points at)."""
        return self._is_gone(path)

    def changed_folders(self) -> frozenset[str]:
        if self._changed is None:
            self._changed = frozenset(k.rpartition("/")[0] for k in (*self._gone, *self._arriving))
        return self._changed

    @property
    def simulated(self) -> bool:
        return True
