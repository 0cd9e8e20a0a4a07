"""The site walk: every shared library under the import path, and which are extension modules.

An extension module is a load root: Python's import dlopens it (cudatx.scan replays that).

So is an operator library of a package whose core libraries the load lists name
(cudatx.discover.catalog.LoadList.core_libraries: torch's): a file named like an extension
module (`torchvision/_C.so`) that exports no `PyInit_*` but needs one of those libraries,
outside that package. Its package loads it with `torch.ops.load_library`, which is
`ctypes.CDLL(path)` once torch is imported: RTLD_NOW and RTLD_LOCAL, as an import.
Deviation (README.md): which files those are is read from their names and DT_NEEDED, not
from the package's code.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from cudatx.cache import Stale, file_key, memo, settled
from cudatx.codec import decode, encode
from cudatx.models import PythonTarget
from cudatx.paths import is_library_name

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

Inits = Callable[[str], tuple[str, ...]]
"""The `PyInit_*` names a file exports (its ELF dynamic strings; () if it is no ELF)."""
Needs = Callable[[str], tuple[str, ...]]
"""A file's DT_NEEDED names (() if it is no ELF)."""
# Package -> its core libraries, what an operator library of it links (torch: libc10.so,
# libtorch.so, libtorch_cpu.so; cudatx.discover.catalog.Catalog.core_libraries).
Cores = Mapping[str, frozenset[str]]


def search_folders(target: PythonTarget) -> list[str]:
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


_SKIPPED = (".dist-info", "__pycache__")


class _Folder(NamedTuple):
    path: str
    state: str  # cudatx.cache.file_key's, joined
    entries: tuple[tuple[str, bool], ...]  # (name, is a symlink) of *.so* names, in order


_LISTING = tuple[_Folder, ...]


def _library_files(top: str, cache: ScanCache | None) -> list[tuple[str, list[tuple[str, bool]]]]:
    """(folder, (name, is a symlink) of each *.so* file in it) for every folder below `top`,
    in os.walk's order.

    A torch environment has 22,000 files in 1,100 folders. A folder's mtime and ctime change
    whenever a name in it is added, removed or renamed, so the cache keeps the listing and a
    warm run only looks at the folders: one stat each. Symlinks are asked again every time
    (whether one points at a folder is not a fact of the folder holding it).
    """

    def load(text: str) -> _LISTING:
        listed = decode(_LISTING, text)
        if not all(_folder_state(f.path) == f.state for f in listed):
            raise Stale(top)
        return listed

    def dump(found: _LISTING) -> str | None:
        return encode(found) if all(f.state for f in found) else None

    found = memo(cache, "walk", top, "", lambda: _walk_folders(top), load=load, dump=dump)
    return [(f.path, _files(f)) for f in found]


def _files(folder: _Folder) -> list[tuple[str, bool]]:
    """(name, is a symlink) of the folder's *.so* files."""
    return [
        (name, link)
        for name, link in folder.entries
        if not link or not os.path.isdir(os.path.join(folder.path, name))
    ]


def _folder_state(path: str) -> str | None:
    """The folder's state as the cache keys it; None if it is gone or too new to keep."""
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
                    elif (link or not is_dir) and is_library_name(entry.name):
                        entries.append((entry.name, link))
        except OSError:
            return  # os.walk passes over a folder it cannot list
        out.append(_Folder(folder, state or "", tuple(entries)))
        for sub in subfolders:
            visit(sub)

    visit(top)
    return tuple(out)


def walk(
    folders: list[str],
    target: PythonTarget,
    inits: Inits,
    cache: ScanCache | None,
    needs: Needs,
    cores: Cores,
) -> tuple[list[str], dict[str, list[str]]]:
    """(extension modules and operator libraries, file name -> paths of every *.so*
    file), in import order."""
    roots: list[str] = []
    libraries: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    suffixes = sorted(target.extension_suffixes, key=len, reverse=True)
    for top in folders:
        for folder, files in _library_files(top, cache):
            real = None
            for name, link in files:
                path = os.path.join(folder, name)
                if link:
                    key = os.path.realpath(path)
                else:  # the file itself is no link: its folder's realpath, once per folder
                    real = real or os.path.realpath(folder)
                    key = os.path.join(real, name)
                if key in seen:
                    continue  # reachable from two sys.path entries: the first one imports it
                seen.add(key)
                libraries[name].append(path)
                if _is_root(path, inits(path), suffixes, needs, cores):
                    roots.append(path)
    return roots, libraries


def flat_libraries(folder: str) -> dict[str, list[str]]:
    """File name -> path of every *.so* file directly in `folder` (not below it): a conda
    environment's `lib/`, where its packages put their libraries and the interpreter's
    RPATH ($ORIGIN/../lib) leads. Libraries only, never roots: its subfolders hold the
    standard library (lib/python3.X/lib-dynload) and the site folders, walked apart."""
    out: dict[str, list[str]] = {}
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                if not is_dir and is_library_name(entry.name):
                    out[entry.name] = [entry.path]
    except OSError:
        pass  # no such folder: nothing to add
    return out


def _is_root(
    path: str,
    inits: tuple[str, ...],
    suffixes: list[str],
    needs: Needs,
    cores: Cores,
    real: str | None = None,
) -> bool:
    """Whether `path` (its bytes at `real`, where a simulated install stages them) is a root."""
    name = os.path.basename(path)
    if _is_extension(name, inits, suffixes):
        return True
    suffix = next((s for s in suffixes if name.endswith(s)), None)
    if suffix is None or not name[: -len(suffix)].isidentifier():
        return False
    outside = [core for package, core in cores.items() if f"/{package}/" not in path]
    if not outside:
        return False
    needed = needs(real or path)
    return any(not core.isdisjoint(needed) for core in outside)


def _is_extension(name: str, inits: tuple[str, ...], suffixes: list[str]) -> bool:
    """Whether Python would import a file called `name`, exporting `inits`, as a module."""
    suffix = next((s for s in suffixes if name.endswith(s)), None)
    if suffix is None:
        return False
    module = name[: -len(suffix)]
    # Python imports a file only if it exports PyInit_<module>; `libfoo.so` in a package's
    # lib folder matches the ".so" suffix but is a library, not a module.
    return module.isidentifier() and f"PyInit_{module}" in inits


def extension_roots(
    arriving: dict[str, str], target: PythonTarget, inits: Inits, needs: Needs, cores: Cores
) -> list[str]:
    """The roots among files a simulated install writes (target -> staged)."""
    suffixes = sorted(target.extension_suffixes, key=len, reverse=True)
    return [
        path
        for path, real in sorted(arriving.items())
        if _is_root(path, inits(real), suffixes, needs, cores, real)
    ]
