"""Owners of files: the databases that say which package installed a file, one module each.

A wheel's RECORD (`records`: dist-info and egg-info folders on sys.path), a conda
environment's `conda-meta/` records (`conda`), and the system's package databases for files
outside the environment (`dpkg`, `rpm`) are each an :class:`Owner`, registered by its module
when imported (every module of this package is, in `BUILT_IN`'s order, before any an
outside caller registers). Nothing outside this package names one: a question about owners
is asked of the owner a distribution names (`owner_of`), or of every owner in turn.

A distribution names its owner by key (`Distribution.owner`: "dist-info", "egg-info",
"conda"), not by an object: models are frozen and kept in the scan cache as JSON
(cudatx.codec), where a key survives and an object would not, and `models.py` sits below
every stage, this one included. The registry resolves the key.

An owner answers:
- its records (`read`): the distributions it lists in the environment, each path relative
  to its `site`; and the state the transaction's lock compares (`state`);
- the folders beyond the site folders where its packages put libraries (`library_folders`);
- which of a record's rows can be checked against the bytes on disk (`checked`) and the
  file whose state keys what is kept of that check (`listing_file`);
- whether cudatx may change its packages (`changeable`: through uv) and, where not, the
  command a user runs instead (`command`), named in the refusal and in fixes;
- for a database of files outside the environment, the package that installed a path
  (`lookup`, asked lazily through :class:`SystemPackages`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from cudatx.models import (
    PACKAGES_OF,
    Distribution,
    Finding,
    PythonTarget,
    RecordEntry,
    SystemPackage,
)

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

BUILT_IN = ("records", "conda", "dpkg", "rpm")
"""The modules of this package, in the order their answers count: a path's owners in the
environment (RECORDs before conda's records), the system's databases (dpkg before rpm)."""


Keys = Callable[[str], str]
"""A path's key, its folders resolved (cudatx.environment.PathKeys)."""


class Lookup(Protocol):
    """One scan's questions to a database of files outside the environment, read once."""

    read: int  # listings read so far: none until a file outside is asked about

    def package(self, path: str) -> SystemPackage | None:
        """The package that lists `path`, compared by its key; None where none does."""
        ...


class Owner(Protocol):
    """A database that owns files. Subclass :class:`Owns` for what an owner leaves as it is."""

    name: str  # who installs its packages, in words ("conda", "uv or pip")
    packages: str  # one of its packages, in words ("Debian package"), as a report names it
    prefix: str  # the start of its records' names ("conda:"); "" for a PEP 503 name
    listing: str  # what lists a record's files, in words ("RECORD", "conda-meta record")
    hashes: str  # what holds the hashes of its files, as "its ... hash matches" says it
    python: bool  # its records are Python distributions in a site folder (uv reads them)
    changeable: bool  # cudatx may change its packages (through uv)
    command_note: str  # said after `command` where cudatx refuses

    @property
    def keys(self) -> tuple[str, ...]:
        """The values of Distribution.owner its records carry."""
        ...

    def read(
        self, target: PythonTarget, cache: ScanCache | None
    ) -> tuple[tuple[Distribution, ...], list[Finding]]:
        """Its records in the environment; a record it cannot read is a finding."""
        ...

    def state(self, target: PythonTarget) -> tuple[str, ...]:
        """What a change of its records since a scan would alter (cudatx.txn.apply's check)."""
        ...

    def library_folders(self, target: PythonTarget) -> tuple[str, ...]:
        """Folders outside the site folders where its packages put libraries the loader finds,
        walked where it has records."""
        ...

    def checked(self, dist: Distribution) -> Iterator[RecordEntry]:
        """The rows of `dist` worth checking against the bytes on disk."""
        ...

    def listing_file(self, dist: Distribution) -> str | None:
        """The file whose state keys what is kept of `dist`'s check; None: not kept."""
        ...

    def command(
        self, prefix: str, verb: str, records: Sequence[Distribution], *, exact: bool
    ) -> str:
        """The command a user runs to `verb` ("install", "remove") its `records` in the
        environment at `prefix` (`exact`: their installed builds, reinstalled)."""
        ...

    def cuda_major(self, dist: Distribution) -> tuple[int, str] | None:
        """The CUDA major its own record says `dist` is built for, with the words that show
        it (cudatx.analysis.cuda, rule (f)); None where it says none."""
        ...

    def lookup(self, keys: Keys, environ: Mapping[str, str]) -> Lookup | None:
        """A database of files outside the environment: its lazy lookup; None for others."""
        ...


class Owns:
    """What an owner has unless it says otherwise: no records, nothing outside, packages
    cudatx may not change (a subclass of this and :class:`Owner`'s attributes is an Owner)."""

    keys: tuple[str, ...]
    name: str
    packages: str
    listing: str
    prefix = ""
    hashes = "RECORD"
    python = False
    changeable = False
    command_note = ""

    def read(
        self, target: PythonTarget, cache: ScanCache | None
    ) -> tuple[tuple[Distribution, ...], list[Finding]]:
        return (), []

    def state(self, target: PythonTarget) -> tuple[str, ...]:
        return ()

    def library_folders(self, target: PythonTarget) -> tuple[str, ...]:
        return ()

    def checked(self, dist: Distribution) -> Iterator[RecordEntry]:
        return iter(dist.records)

    def listing_file(self, dist: Distribution) -> str | None:
        return None

    def command(
        self, prefix: str, verb: str, records: Sequence[Distribution], *, exact: bool
    ) -> str:
        return ""

    def cuda_major(self, dist: Distribution) -> tuple[int, str] | None:
        return None

    def lookup(self, keys: Keys, environ: Mapping[str, str]) -> Lookup | None:
        return None


_OWNERS: list[Owner] = []
_BY_KEY: dict[str, Owner] = {}
_LOADED: list[bool] = []


def register(owner: Owner) -> Owner:
    """Register an owner (a module of this package calls it on import; a caller may add
    its own after them)."""
    owners()
    _OWNERS.append(owner)
    _BY_KEY.update(dict.fromkeys(owner.keys, owner))
    PACKAGES_OF.update(dict.fromkeys(owner.keys, owner.packages))
    return owner


def unregister(owner: Owner) -> None:
    """Forget an owner a caller registered."""
    _OWNERS.remove(owner)
    for key in owner.keys:
        _BY_KEY.pop(key, None)
        PACKAGES_OF.pop(key, None)


def owners() -> tuple[Owner, ...]:
    """Every registered owner: the modules of this package, imported once, then the rest."""
    if not _LOADED:
        _LOADED.append(True)  # before they load: each calls register(), which calls this
        for module in BUILT_IN:
            importlib.import_module(f"{__name__}.{module}")
    return tuple(_OWNERS)


def owner_of(dist: Distribution) -> Owner:
    """The owner that lists `dist`'s files."""
    return by_key(dist.owner)


def by_key(key: str) -> Owner:
    """The owner of this key (asked for every distribution: a lookup, once they are loaded)."""
    found = _BY_KEY.get(key)
    if found is None:
        owners()
        found = _BY_KEY[key]
    return found


def by_prefix(name: str) -> Owner | None:
    """The owner whose records' names start as `name` does (`conda:cudnn`), if any."""
    lowered = name.lower()
    return next((o for o in owners() if o.prefix and lowered.startswith(o.prefix)), None)


def read_records(
    target: PythonTarget, cache: ScanCache | None = None
) -> tuple[tuple[Distribution, ...], list[Finding], tuple[str, ...]]:
    """Every owner's records in the environment, the findings of reading them, and the
    library folders of the owners that have records."""
    distributions: list[Distribution] = []
    findings: list[Finding] = []
    folders: list[str] = []
    for owner in owners():
        found, unread = owner.read(target, cache)
        distributions += found
        findings += unread
        if found:
            folders += owner.library_folders(target)
    return tuple(distributions), findings, tuple(folders)


def installed_state(target: PythonTarget) -> tuple[str, ...]:
    """What a change since a scan would alter, of every owner (compared under the
    transaction's lock with the value the scan took first)."""
    return tuple(line for owner in owners() for line in owner.state(target))


def grouped(records: Iterable[Distribution]) -> dict[Owner, list[Distribution]]:
    """`records` by owner, each owner and each record once, in the order first met."""
    out: dict[Owner, list[Distribution]] = {}
    for record in records:
        listed = out.setdefault(owner_of(record), [])
        if record not in listed:
            listed.append(record)
    return out


class SystemPackages:
    """The system packages that own files outside the environment, asked path by path of
    each owner with a lookup (dpkg's database, then rpm), each read once."""

    def __init__(self, keys: Keys, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self._keys = keys
        found = (o.lookup(keys, environ) for o in owners())
        self._lookups = tuple(lookup for lookup in found if lookup is not None)
        self._found: dict[str, SystemPackage | None] = {}

    @property
    def lists_read(self) -> int:
        """Listings read: none until a file outside is asked about."""
        return sum(lookup.read for lookup in self._lookups)

    def owner(self, path: str) -> SystemPackage | None:
        """The package that installed `path` (or, for a symlink no package lists, the file it
        points to); None when no database here lists it."""
        if path not in self._found:
            found = self._ask(path)
            real = os.path.realpath(path)
            if found is None and real != self._keys(path):
                found = self._ask(real)
            self._found[path] = found
        return self._found[path]

    def _ask(self, path: str) -> SystemPackage | None:
        return next((p for p in (lk.package(path) for lk in self._lookups) if p), None)

    def owners(self, paths: Iterable[str]) -> dict[str, SystemPackage]:
        """The owner of each of `paths` that has one."""
        out = {}
        for path in paths:
            found = self.owner(path)
            if found is not None:
                out[path] = found
        return out
