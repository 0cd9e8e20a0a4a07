"""Scan one environment: its distributions, its extension modules, and how each one loads."""

from __future__ import annotations

import dataclasses
import os
import re
from collections import defaultdict
from collections.abc import Callable, ItemsView, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import TypeAdapter

from cudatx.catalog import Catalog, load_catalog
from cudatx.dists import scan_distributions
from cudatx.errors import EnvironmentNotFound
from cudatx.fsview import FileView, Seen
from cudatx.loader import LoadResult, Process
from cudatx.models import Distribution, ElfInfo, Finding, PythonTarget, Resolution
from cudatx.preload import read_preloads
from cudatx.runtime import PackageContext, RootLoader, locate_preloads
from cudatx.system import SystemLoader, probe_system
from cudatx.target import Query, start_query

if TYPE_CHECKING:
    from cudatx.cache import ScanCache


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


@dataclass(frozen=True)
class Environment:
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

    def resolutions(self) -> Iterator[Resolution]:
        """Every need resolved: the interpreter's start-up, then each root's."""
        yield from self.base.resolutions
        for load in self.loads:
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


def _search_folders(target: PythonTarget) -> list[str]:
    """Folders whose extension modules are roots: site folders and sys.path beyond stdlib."""
    folders = [p for p in target.site_packages if os.path.isdir(p)]
    stdlib = tuple(os.path.join(p, "") for p in target.stdlib)
    for entry in target.sys_path:
        if entry in folders or not os.path.isdir(entry):
            continue
        if os.path.join(entry, "").startswith(stdlib):
            continue
        folders.append(entry)
    return folders


_LIBRARY_NAME = re.compile(r"\.so(\.|$)")


_SKIPPED = (".dist-info", "__pycache__")


class _Folder(NamedTuple):
    path: str
    state: str  # cudatx.cache.file_key's, joined
    entries: tuple[tuple[str, bool], ...]  # (name, is a symlink) of *.so* names, in order


_LISTING = TypeAdapter(tuple[_Folder, ...])


def _library_files(top: str, cache: ScanCache | None) -> list[tuple[str, list[str]]]:
    """(folder, names of *.so* files in it) for every folder below `top`, in os.walk's order.

    A torch environment has 22,000 files in 1,100 folders. A folder's mtime and ctime change
    whenever a name in it is added, removed or renamed, so the cache keeps the listing and a
    warm run only looks at the folders: one stat each. Symlinks are asked again every time
    (whether one points at a folder is not a fact of the folder holding it).
    """
    text = cache.get("walk", top, "") if cache is not None else None
    if text is not None:
        try:
            listed = _LISTING.validate_json(text)
        except ValueError:
            assert cache is not None
            cache.invalid()
        else:
            if all(_folder_state(f.path) == f.state for f in listed):
                return [(f.path, _files(f)) for f in listed]
    found = _walk_folders(top)
    if cache is not None and all(f.state for f in found):
        cache.put("walk", top, "", _LISTING.dump_json(found).decode())
    return [(f.path, _files(f)) for f in found]


def _files(folder: _Folder) -> list[str]:
    return [
        name
        for name, link in folder.entries
        if not link or not os.path.isdir(os.path.join(folder.path, name))
    ]


def _folder_state(path: str) -> str | None:
    """The folder's state as the cache keys it; None if it is gone or too new to keep."""
    from cudatx.cache import file_key, settled

    try:
        st = os.stat(path)
    except OSError:
        return None
    return ":".join(file_key(st)) if settled(st) else ""


def _walk_folders(top: str) -> tuple[_Folder, ...]:
    """os.walk(top), symlinked folders listed but not entered, metadata folders skipped."""
    out: list[_Folder] = []

    def visit(folder: str) -> None:
        state = _folder_state(folder)  # before listing: a change after it shows next time
        entries: list[tuple[str, bool]] = []
        subfolders: list[str] = []
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    link = entry.is_symlink()
                    if is_dir and not link:
                        if not entry.name.endswith(_SKIPPED):
                            subfolders.append(entry.path)
                    elif (link or not is_dir) and _LIBRARY_NAME.search(entry.name):
                        entries.append((entry.name, link))
        except OSError:
            return  # os.walk passes over a folder it cannot list
        out.append(_Folder(folder, state or "", tuple(entries)))
        for sub in subfolders:
            visit(sub)

    visit(top)
    return tuple(out)


def _walk(
    folders: list[str], target: PythonTarget, view: FileView
) -> tuple[list[str], dict[str, list[str]]]:
    roots: list[str] = []
    libraries: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    suffixes = sorted(target.extension_suffixes, key=len, reverse=True)
    for top in folders:
        for folder, files in _library_files(top, view.cache):
            for name in files:
                path = os.path.join(folder, name)
                key = os.path.realpath(path)
                if key in seen:
                    continue  # reachable from two sys.path entries: the first one imports it
                seen.add(key)
                libraries[name].append(path)
                if _is_extension(name, view.probe(path).inits, suffixes):
                    roots.append(path)
    return roots, libraries


def _is_extension(name: str, inits: tuple[str, ...], suffixes: list[str]) -> bool:
    """Whether Python would import a file called `name`, exporting `inits`, as a module."""
    suffix = next((s for s in suffixes if name.endswith(s)), None)
    if suffix is None:
        return False
    module = name[: -len(suffix)]
    # Python imports a file only if it exports PyInit_<module>; `libfoo.so` in a package's
    # lib folder matches the ".so" suffix but is a library, not a module.
    return module.isidentifier() and f"PyInit_{module}" in inits


def extension_roots(arriving: dict[str, str], target: PythonTarget, view: FileView) -> list[str]:
    """The extension modules among files a simulated install writes (target -> staged)."""
    suffixes = sorted(target.extension_suffixes, key=len, reverse=True)
    return [
        path
        for path, real in sorted(arriving.items())
        if _is_extension(os.path.basename(path), view.probe(real).inits, suffixes)
    ]


def _python_library(process: Process) -> str:
    """The object Python's import code lives in: dlopen's caller for every extension."""
    for obj in process.objects:
        if (obj.info.soname or "").startswith("libpython"):
            return obj.path
    return process.main.path


Progress = Callable[[str, int, int], None]
"""Called as (what, done, total) while a scan works through its files and loads."""


def scan(
    python: str | None,
    *,
    ld_library_path: str | None,
    environ: dict[str, str] | None = None,
    cwd: Path | None = None,
    cache: ScanCache | None = None,
    progress: Progress | None = None,
    query: Query | None = None,
) -> Environment:
    """Read one environment and replay every load root. `cache` keeps what files say between
    runs (cudatx.cache); `progress` hears how far the scan is; `query`, when the caller has
    already started asking the interpreter `python` names (cudatx.target.start_query)."""
    tell = progress or _quiet
    target = (query or start_query(python, environ, cwd)).result()
    view = FileView(cache)
    probe = view.probe(target.executable)
    if probe.info is None:
        reason = probe.reason or "cannot read: no such file"
        raise EnvironmentNotFound(
            f"cannot read the interpreter binary: {target.executable}: {reason}"
        )
    executable = probe.info
    system = probe_system(executable)
    tell("reading distributions", 0, 1)
    distributions, findings = scan_distributions(target.sys_path, cache)
    tell("finding libraries", 0, 1)
    roots, libraries = _walk(_search_folders(target), target, view)
    paths = [path for found in libraries.values() for path in found]
    for done, path in enumerate(paths):
        tell("reading libraries", done, len(paths))
        found = view.probe(path)
        if found.seen is Seen.BAD:
            findings.append(Finding(kind="not ELF", path=path, message=found.reason or ""))
    keys = PathKeys()
    env = Environment(
        target=target,
        system=system,
        executable=executable,
        ld_library_path=ld_library_path,
        cwd=str(cwd or Path.cwd()),
        distributions=distributions,
        findings=tuple(findings),
        keys=keys,
        view=view,
        owners=Owners(distributions, keys),
        libraries={name: tuple(paths) for name, paths in libraries.items()},
        roots=tuple(roots),
        base=LoadResult(root=executable.path, ok=True, loaded=(), resolutions=()),
        loads=(),
        contexts=(),
    )
    return load_roots(env, view, progress)


def _quiet(what: str, done: int, total: int) -> None:
    pass


def load_roots(env: Environment, view: FileView, progress: Progress | None = None) -> Environment:
    """Replay the interpreter's start and every root on `view`.

    The planner calls this again with a view in which a change has happened.
    """
    env = dataclasses.replace(env, view=view)  # facts read bytes through it (staged files)
    tell = progress or _quiet
    catalog = load_catalog()
    process = Process(
        env.system,
        view,
        env.executable,
        ld_library_path=env.ld_library_path,
        cwd=env.cwd,
        is_driver=catalog.is_driver,
    )
    base = process.start()
    # facts derives from an Environment; imported here, where one exists, to avoid a cycle.
    from cudatx.facts import file_classifier

    classify = file_classifier(env)

    def major_of(path: str, info: ElfInfo) -> int | None:
        classified = classify(path, info)
        return classified.major if classified else None

    contexts = _contexts(env, catalog, view)
    loader = RootLoader(
        process,
        _python_library(process),
        catalog,
        view,
        {os.path.join(c.package_dir, ""): c for c in contexts},
        major_of,
    )
    loads = []
    for done, root in enumerate(env.roots):
        tell("replaying imports", done, len(env.roots))
        loads.append(loader.load(root))
    return dataclasses.replace(env, view=view, base=base, loads=tuple(loads), contexts=contexts)


def _contexts(env: Environment, catalog: Catalog, view: FileView) -> tuple[PackageContext, ...]:
    """The packages whose import loads libraries by hand (torch), as installed here."""
    from cudatx.facts import torch_cuda

    out = []
    for load_list in catalog.load_lists:
        dist = env.distribution(load_list.distribution)
        if dist is None:
            continue
        package_dir = os.path.join(dist.site, load_list.package)
        if not view.is_folder(package_dir):  # a simulated install may bring the package
            continue
        preloads = read_preloads(load_list, package_dir, dist.version, view.cache, view.real)
        cuda = torch_cuda(env)
        located = locate_preloads(
            preloads, env.target.sys_path, cuda.split(".")[0] if cuda else None, view
        )
        first = os.path.join(package_dir, load_list.first) if load_list.first else None
        module = next(
            (
                r
                for r in env.roots
                if os.path.dirname(r) == package_dir
                and os.path.basename(r).startswith(load_list.module + ".")
            ),
            None,
        )
        out.append(
            PackageContext(
                load_list=load_list,
                package_dir=package_dir,
                init_py=os.path.join(package_dir, "__init__.py"),
                first=first if first and view.probe(first).seen is not Seen.MISSING else None,
                preloads=located,
                entries=preloads.entries,
                origin=preloads.origin,
                module=module,
            )
        )
    return tuple(out)
