"""Scan one environment: its distributions, its extension modules, and how each one loads."""

from __future__ import annotations

import dataclasses
import os
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cudatx.catalog import Catalog, load_catalog
from cudatx.dists import scan_distributions
from cudatx.elf import dynstr_contains, read_elf
from cudatx.errors import ElfReadError, EnvironmentNotFound
from cudatx.fsview import FileView, Seen
from cudatx.loader import LoadResult, Process
from cudatx.models import Distribution, ElfInfo, Finding, PythonTarget, Resolution
from cudatx.preload import read_preloads
from cudatx.runtime import PackageContext, RootLoader, locate_preloads
from cudatx.system import SystemLoader, probe_system
from cudatx.target import find_target


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
        head, tail = os.path.split(absolute)
        real = self._folders.get(head)
        if real is None:
            real = self._folders[head] = os.path.realpath(head)
        return os.path.join(real, tail)


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
    owners: dict[str, tuple[str, ...]]  # path key -> names of distributions listing it
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


def owners_index(
    distributions: tuple[Distribution, ...], keys: PathKeys
) -> dict[str, tuple[str, ...]]:
    index: dict[str, list[str]] = defaultdict(list)
    for dist in distributions:
        for entry in dist.records:
            key = keys(os.path.join(dist.site, entry.path))
            if dist.name not in index[key]:
                index[key].append(dist.name)
    return {key: tuple(names) for key, names in index.items()}


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


def _walk(folders: list[str], target: PythonTarget) -> tuple[list[str], dict[str, list[str]]]:
    roots: list[str] = []
    libraries: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    suffixes = sorted(target.extension_suffixes, key=len, reverse=True)
    for top in folders:
        for folder, subfolders, files in os.walk(top):
            subfolders[:] = [s for s in subfolders if not s.endswith((".dist-info", "__pycache__"))]
            for name in files:
                if not _LIBRARY_NAME.search(name):
                    continue
                path = os.path.join(folder, name)
                key = os.path.realpath(path)
                if key in seen:
                    continue  # reachable from two sys.path entries: the first one imports it
                seen.add(key)
                libraries[name].append(path)
                if _is_extension(path, path, suffixes):
                    roots.append(path)
    return roots, libraries


def _is_extension(path: str, real: str, suffixes: list[str]) -> bool:
    """Whether Python would import `path` (whose bytes are at `real`) as a module."""
    name = os.path.basename(path)
    suffix = next((s for s in suffixes if name.endswith(s)), None)
    if suffix is None:
        return False
    module = name[: -len(suffix)]
    if not module.isidentifier():
        return False
    # Python imports a file only if it exports PyInit_<module>; `libfoo.so` in a package's
    # lib folder matches the ".so" suffix but is a library, not a module.
    try:
        return dynstr_contains(real, f"PyInit_{module}")
    except ElfReadError:
        return False


def extension_roots(arriving: dict[str, str], target: PythonTarget) -> list[str]:
    """The extension modules among files a simulated install writes (target -> staged)."""
    suffixes = sorted(target.extension_suffixes, key=len, reverse=True)
    return [path for path, real in sorted(arriving.items()) if _is_extension(path, real, suffixes)]


def _python_library(process: Process) -> str:
    """The object Python's import code lives in: dlopen's caller for every extension."""
    for obj in process.objects:
        if (obj.info.soname or "").startswith("libpython"):
            return obj.path
    return process.main.path


def scan(
    python: str | None,
    *,
    ld_library_path: str | None,
    environ: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Environment:
    target = find_target(python, environ, cwd)
    try:
        executable = read_elf(target.executable)
    except ElfReadError as exc:
        raise EnvironmentNotFound(f"cannot read the interpreter binary: {exc.message}") from None
    system = probe_system(executable)
    distributions, findings = scan_distributions(target.sys_path)
    roots, libraries = _walk(_search_folders(target), target)
    view = FileView()
    for paths in libraries.values():
        for path in paths:
            probe = view.probe(path)
            if probe.seen is Seen.BAD:
                findings.append(Finding(kind="not ELF", path=path, message=probe.reason or ""))
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
        owners=owners_index(distributions, keys),
        libraries={name: tuple(paths) for name, paths in libraries.items()},
        roots=tuple(roots),
        base=LoadResult(root=executable.path, ok=True, loaded=(), resolutions=()),
        loads=(),
        contexts=(),
    )
    return load_roots(env, view)


def load_roots(env: Environment, view: FileView) -> Environment:
    """Replay the interpreter's start and every root on `view`.

    The planner calls this again with a view in which a change has happened.
    """
    env = dataclasses.replace(env, view=view)  # facts read bytes through it (staged files)
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
    from cudatx.facts import cuda_major_of_file

    def major_of(path: str, info: ElfInfo) -> int | None:
        classified = cuda_major_of_file(env, path, info)
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
    loads = tuple(loader.load(root) for root in env.roots)
    return dataclasses.replace(env, view=view, base=base, loads=loads, contexts=contexts)


def _contexts(env: Environment, catalog: Catalog, view: FileView) -> tuple[PackageContext, ...]:
    """The packages whose import loads libraries by hand (torch), as installed here."""
    from cudatx.facts import torch_cuda

    out = []
    for load_list in catalog.load_lists:
        dist = env.distribution(load_list.distribution)
        if dist is None:
            continue
        package_dir = os.path.join(dist.site, load_list.package)
        if not os.path.isdir(package_dir):
            continue
        preloads = read_preloads(load_list, package_dir, dist.version, view.real)
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
