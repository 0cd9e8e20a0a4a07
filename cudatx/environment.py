"""The environment model: one scanned environment, the facts every later stage reads.

Built by :func:`cudatx.scan.scan` (discovery, then the loader's replay); the planner builds
simulated ones from it. Frozen: a query or a simulation returns a new value.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import ItemsView, Iterator, Mapping
from typing import Any

from cudatx.discover.frameworks.model import CudaBuild, FrameworkLoads, Installed
from cudatx.discover.handloads import HandLoaded, Unread
from cudatx.discover.imports import Companion
from cudatx.discover.owners import SystemPackages
from cudatx.discover.traces import Trace
from cudatx.elf.system import SystemLoader
from cudatx.loader.fileview import FileView
from cudatx.loader.process import LoadResult
from cudatx.loader.roots import FrameworkRun, PackageContext
from cudatx.models import Distribution, ElfInfo, Finding, Frozen, PythonTarget, Resolution


class PathKeys:
    """The key files are compared by: folders resolved through symlinks, the file itself not.

    RECORD paths and loader paths meet here: `lib64 -> lib`, `torch/lib/../../nvidia` and a
    symlinked site folder all land on the same key, while a library symlink
    (`libfoo.so -> libfoo.so.1`) stays the file its owner's RECORD names. Folders are
    resolved once per scan: an environment lists tens of thousands of files in a few
    thousand folders.
    """

    def __init__(self) -> None:
        self._folders: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        # No os.path.abspath: it folds `link/..` lexically, while the kernel (and so the
        # loader) resolves `link` first and then goes up from where it points.
        absolute = path if path.startswith("/") else os.path.join(os.getcwd(), path)
        # str.rpartition rather than os.path.split and join: this runs for every RECORD
        # line of the environment (28,000 for torch), and the folder is resolved anyway.
        head, _, tail = absolute.rpartition("/")
        real = self._folder(head)
        return real + tail if real.endswith("/") else f"{real}/{tail}"

    def _folder(self, folder: str) -> str:
        """os.path.realpath(folder), from its parent's: one lstat per folder, where realpath
        takes one per component of the path (13 for a file in torch/lib)."""
        real = self._folders.get(folder)
        if real is None:
            parent, _, name = folder.rpartition("/")
            if name in ("", ".", "..") or not parent:
                real = os.path.realpath(folder or "/")  # `link/..` and such: as the kernel does
            else:
                candidate = f"{self._folder(parent).rstrip('/')}/{name}"
                real = os.path.realpath(candidate) if os.path.islink(candidate) else candidate
            self._folders[folder] = real
        return real


class Environment(Frozen, kw_only=False):
    target: PythonTarget
    system: SystemLoader
    executable: ElfInfo  # the interpreter binary, the process's main map
    ld_library_path: str | None  # of the process that will load the libraries
    cwd: str
    distributions: tuple[Distribution, ...]
    findings: tuple[Finding, ...]
    keys: PathKeys
    view: FileView  # the files as the loader saw them (a simulation passes another)
    owners: Owners  # path key -> names of distributions listing it
    libraries: dict[str, tuple[str, ...]]  # file name -> paths of *.so* files in site folders
    roots: tuple[str, ...]
    base: LoadResult  # the interpreter's own start-up
    loads: tuple[LoadResult, ...]  # one per root, each from a fresh interpreter
    contexts: tuple[PackageContext, ...]  # packages that load libraries by hand (torch)
    installed_state: tuple[str, ...] = ()  # discover.owners.installed_state, before the scan
    # Frameworks' run-time roots (cudatx.loader.roots.FrameworkRun): each is replayed in
    # every context of its framework; the primary context's load is in `loads`, the others
    # here (they are compared by a plan and reported by doctor apart: cudatx.analysis.frameworks).
    frameworks: tuple[FrameworkRun, ...] = ()
    context_loads: tuple[LoadResult, ...] = ()
    # Every framework that loads by hand found here, with what its reader read of it (or,
    # `read` False, why it could not: doctor and plans say it is not modelled).
    framework_reads: tuple[tuple[Installed, FrameworkLoads], ...] = ()
    # name -> the Requires-Dist extras taken as installed (every requirement behind them
    # met when the environment was scanned: cudatx.discover.dists.installed_extras)
    extras: dict[str, tuple[str, ...]] | None = None
    # The system's package databases, for files outside the environment: read only when a
    # report names such a file (cudatx.analysis.ownership.system_package).
    system_packages: SystemPackages | None = None
    # The records of traced runs (`cudatx trace`), fresh and stale, and each process of the
    # fresh ones replayed as a root of its own (cudatx.loader.roots.RootLoader.load_trace).
    traces: tuple[Trace, ...] = ()
    observed: tuple[LoadResult, ...] = ()
    # What packages' own code loads by path (cudatx.discover.handloads): each file a root
    # of its own, and a preload of the extension modules of its package that need it; the
    # loads cudatx cannot read, by the distribution that makes them.
    hand_loads: tuple[HandLoaded, ...] = ()
    hand_unread: tuple[tuple[str, Unread], ...] = ()
    # Top-level packages shipped in the wheel of another that imports them (nvfuser in
    # torch's): their modules load in the importer's process (cudatx.discover.imports).
    companions: tuple[Companion, ...] = ()
    # The CUDA version each package whose load list names the constant that says it (torch's
    # torch.version.cuda) was built for, read once per replay (cudatx.discover.frameworks
    # .cuda_build): the build its loads are judged against (cudatx.analysis.cuda).
    cuda_builds: tuple[CudaBuild, ...] = ()

    def companion_of(self, path: str) -> Companion | None:
        """The companion package a file lies in, if it lies in one."""
        return next((c for c in self.companions if path.startswith(c.package + "/")), None)

    def resolutions(self) -> Iterator[Resolution]:
        """Every need resolved: the interpreter's start-up, each root's, each traced run's."""
        yield from self.base.resolutions
        for load in (*self.loads, *self.observed):
            yield from load.resolutions

    def distribution(self, name: str) -> Distribution | None:
        return next((d for d in self.distributions if d.name == name), None)

    def owners_of(self, path: str) -> tuple[Distribution, ...]:
        names = self.owners.get(self.keys(path), ())
        return tuple(d for d in self.distributions if d.name in names)


class _ByName:
    """RECORD paths grouped by file name, keyed one group at a time."""

    def __init__(self, distributions: tuple[Distribution, ...], keys: PathKeys) -> None:
        self.keys = keys
        # Where each distribution's relative RECORD paths start (os.path.join's rules).
        self._sites = {
            d.name: d.site if not d.site or d.site.endswith("/") else d.site + "/"
            for d in distributions
        }
        # File name -> (owner, path as RECORD writes it). This runs once per RECORD line
        # (28,000 for torch) on every run: the file names are cut in a comprehension per
        # distribution and grouped through a defaultdict, half the time of a plain loop.
        self.paths: defaultdict[str, list[tuple[str, str]]] = defaultdict(list)
        paths = self.paths
        for dist in distributions:
            owner = dist.name
            rows = [entry[0] for entry in dist.records]
            # PathKeys resolves the folder only: a key ends in its path's file name.
            for path, name in zip(rows, [p.rpartition("/")[2] for p in rows], strict=True):
                paths[name].append((owner, path))
        self._keyed: dict[str, dict[str, tuple[str, ...]]] = {}
        self._shared: frozenset[str] | None = None

    def shared(self) -> frozenset[str]:
        """The file names more than one distribution's RECORD lists: only a path ending in
        one of them can be co-owned (doctor asks of every RECORD line; keying each took
        half of a warm doctor's ownership checks)."""
        if self._shared is None:
            self._shared = frozenset(
                name
                for name, rows in self.paths.items()
                if len(rows) > 1 and any(owner != rows[0][0] for owner, _ in rows)
            )
        return self._shared

    def group(self, name: str) -> dict[str, tuple[str, ...]]:
        """Key -> owners, in distribution order, for every RECORD path ending in `name`."""
        keyed = self._keyed.get(name)
        if keyed is None:
            index: dict[str, list[str]] = defaultdict(list)
            for owner, path in self.paths.get(name, ()):
                if not path.startswith("/"):
                    path = self._sites[owner] + path
                owners = index[self.keys(path)]
                if owner not in owners:
                    owners.append(owner)
            keyed = self._keyed[name] = {key: tuple(owners) for key, owners in index.items()}
        return keyed


class Owners(Mapping[str, tuple[str, ...]]):
    """Path key -> names of the distributions whose RECORD lists it, in distribution order.

    Worked out per file name when asked: a plan asks about the few hundred files it loads
    and removes, and keying all 28,000 RECORD lines of a torch environment took 50 ms of
    every run. Iterating (doctor's co-owned paths) keys them all, once.
    """

    def __init__(
        self,
        distributions: tuple[Distribution, ...],
        keys: PathKeys,
        *,
        _by_name: _ByName | None = None,
        _without: frozenset[str] = frozenset(),
    ) -> None:
        self._by_name = _by_name or _ByName(distributions, keys)
        self._without = _without
        self._all: dict[str, tuple[str, ...]] | None = None

    def without(self, names: frozenset[str]) -> Owners:
        """The index as it is once the distributions `names` are gone (shares the keying)."""
        return Owners(
            (), self._by_name.keys, _by_name=self._by_name, _without=self._without | names
        )

    def listing(self, name: str) -> tuple[str, ...]:
        """Names of the distributions whose RECORD lists a file called `name` (anywhere), in
        distribution order: who meant to provide a library the loader cannot find."""
        found = dict.fromkeys(owner for owner, _ in self._by_name.paths.get(name, ()))
        return tuple(n for n in found if n not in self._without)

    def co_owned(self) -> dict[str, tuple[str, ...]]:
        """Key -> owners of every path more than one distribution's RECORD lists (keying
        only the paths whose file name is listed by several)."""
        found = {}
        for name in self._by_name.shared():
            for key in self._by_name.group(name):
                owners = self.get(key)
                if owners is not None and len(owners) > 1:
                    found[key] = owners
        return found

    def may_share(self, path: str) -> bool:
        """False where no other distribution's RECORD lists a file of `path`'s name: then
        `path` is not co-owned, and need not be keyed to know it."""
        return path.rpartition("/")[2] in self._by_name.shared()

    def get(self, key: str, default: Any = None) -> Any:
        if self._all is not None:  # every key known: doctor asks about every RECORD line
            return self._all.get(key, default)
        owners = self._by_name.group(key.rpartition("/")[2]).get(key, ())
        if self._without:
            owners = tuple(n for n in owners if n not in self._without)
        return owners or default

    def __getitem__(self, key: str) -> tuple[str, ...]:
        owners: tuple[str, ...] | None = self.get(key)
        if owners is None:
            raise KeyError(key)
        return owners

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def _every(self) -> dict[str, tuple[str, ...]]:
        if self._all is None:
            every = {}
            for name in self._by_name.paths:
                for key in self._by_name.group(name):
                    owners = self.get(key)
                    if owners is not None:
                        every[key] = owners
            self._all = every
        return self._all

    def items(self) -> ItemsView[str, tuple[str, ...]]:
        return self._every().items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        return len(self._every())
