"""One load root in its own process, with what DT_NEEDED does not say.

A fresh `import torch._C` does not start with torch._C: torch/__init__.py first loads
torch/lib/libtorch_global_deps.so and, when that mapped libcudart, preloads a list of
NVIDIA libraries by path with ctypes (cudatx.discover.preloads). Those objects then satisfy later
needs by name even where no search path would find them. After the import, libraries load
more with dlopen at run time: the shipped manifest (cudatx/data/runtime.json) and
soname-shaped strings in each object's .rodata say what. All of it is replayed here on a
cudatx.loader.Process, each edge tagged with its evidence.

Deviations (also in README.md): ctypes' dlopen is modelled as called from libpython, not
from the _ctypes module (they differ only if _ctypes carried an RPATH, which CPython builds
do not); where several files match a preload glob, the first in the directory's own order
is taken, as torch's glob.glob does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from cudatx.discover.catalog import Catalog, LoadList, PreloadEntry
from cudatx.discover.preloads import Preloads
from cudatx.loader.fileview import FileView
from cudatx.loader.process import Loaded, LoadResult, Process
from cudatx.models import ElfInfo, Evidence, Resolution, Status
from cudatx.paths import soname_stem

MajorOf = Callable[[str, ElfInfo], int | None]


@dataclass(frozen=True)
class PackageContext:
    """What importing a package loads before the module asked for."""

    load_list: LoadList
    package_dir: str
    init_py: str  # who asks for the preloads
    first: str | None  # path of the library loaded first (libtorch_global_deps.so)
    preloads: tuple[tuple[str, str | None], ...]  # (glob, the file it found or None)
    entries: tuple[PreloadEntry, ...]  # the list the globs came from, in the same order
    origin: str  # where the preload list came from
    module: str | None  # path of the package's extension loaded after the preloads


def locate_preloads(
    pre: Preloads, sys_path: tuple[str, ...], cuda_major: str | None, view: FileView
) -> tuple[tuple[str, str | None], ...]:
    """torch's _preload_cuda_lib: the first sys.path entry with any match, its first match."""
    out: list[tuple[str, str | None]] = []
    for entry in pre.entries:
        found: str | None = None
        for path_entry in sys_path:
            matches: list[str] = []
            for pattern in pre.search:
                if "{cuda_major}" in pattern and cuda_major is None:
                    continue  # torch skips the cuNN folder of a CPU build
                matches += view.glob(
                    pattern.format(
                        entry=path_entry,
                        folder=entry.folder,
                        glob=entry.pattern,
                        cuda_major=cuda_major,
                    )
                )
            if matches:
                found = matches[0]
                break
        out.append((entry.pattern, found))
    return tuple(out)


def _attempt(
    process: Process,
    name: str,
    caller: Loaded,
    *,
    root: str,
    evidence: Evidence,
    needed_by: str | None = None,
) -> tuple[list[Resolution], bool]:
    """One dlopen done by hand (ctypes, or a library at run time), all or nothing.

    A failed dlopen maps nothing (glibc unloads what it mapped, dlerror names the first
    failure): the process goes back to where it was, and the load becomes one resolution of
    the same evidence carrying the error, so that a run-time load's own broken needs never
    read as the import's.
    """
    mark = process.mark()
    done = process.dlopen(name, caller, root=root, evidence=evidence, needed_by=needed_by)
    if done.ok:
        return list(done.resolutions), True
    process.undo(mark)
    failed = next(r for r in done.resolutions if r.status in (Status.NOT_FOUND, Status.ERROR))
    head = done.resolutions[0]
    if failed is not head:
        cause = f"{failed.name} {failed.status.value}, needed by {failed.needed_by}"
        head = head.model_copy(update={"status": Status.ERROR, "detail": f"cannot load: {cause}"})
    return [head], False


def _unfound(pattern: str, context: PackageContext, root: str) -> Resolution:
    return Resolution(
        name=pattern,
        needed_by=context.init_py,
        root=root,
        status=Status.NOT_FOUND,
        evidence=Evidence.PRELOAD,
        detail=f"no sys.path entry holds a file matching {pattern}",
    )


class RootLoader:
    """Loads each root into a fork of the interpreter's process."""

    def __init__(
        self,
        base: Process,
        caller: str,
        catalog: Catalog,
        view: FileView,
        contexts: dict[str, PackageContext],
        major_of: MajorOf,
    ) -> None:
        self.base = base
        self.caller = caller
        self.catalog = catalog
        self.view = view
        self.contexts = contexts  # package folder (with trailing /) -> context
        self.major_of = major_of

    def load(self, root: str) -> LoadResult:
        process = self.base.fork()
        start = len(process.objects)
        caller = process.find(self.caller) or process.main
        resolutions: list[Resolution] = []
        context = next((c for d, c in self.contexts.items() if root.startswith(d)), None)
        fatal = False
        if context is not None:
            fatal = self._package(process, caller, root, context, resolutions)
            if context.module and context.module != root:
                resolutions += process.dlopen(context.module, caller, root=root).resolutions
        result = process.dlopen(root, caller, root=root)
        resolutions += result.resolutions
        self._run_time(process, start, root, resolutions)
        loaded = tuple(obj.path for obj in process.objects[start:])
        import_ok = not fatal and all(
            r.status in (Status.RESOLVED, Status.SYSTEM)
            for r in resolutions
            if r.evidence in (Evidence.IMPORT, Evidence.DT_NEEDED)
        )
        return LoadResult(root=root, ok=import_ok, loaded=loaded, resolutions=tuple(resolutions))

    def _package(
        self,
        process: Process,
        caller: Loaded,
        root: str,
        context: PackageContext,
        out: list[Resolution],
    ) -> bool:
        """torch's _load_global_deps; returns whether it makes the import fail.

        On the ordinary path (libtorch_global_deps.so loads) the preloads are best effort:
        the first one that fails raises OSError, which torch swallows, ending the list. If
        the first load fails, torch preloads with required=True outside any try and loads it
        again: then a missing or failing preload makes `import torch` fail.
        """
        first_ok = True
        if context.first is not None:
            done, first_ok = self._by_hand(process, context.first, caller, root, context)
            if first_ok:
                out += done
        when = context.load_list.when_loaded
        mapped = any(os.path.basename(o.path).startswith(when or "") for o in process.objects)
        fatal = False
        if not first_ok or when is None or mapped:
            for (pattern, found), entry in zip(context.preloads, context.entries, strict=True):
                if found is None:
                    if not first_ok and entry.required:
                        fatal = True  # _preload_cuda_lib raises ValueError
                        out.append(_unfound(pattern, context, root))
                        break
                    continue
                done, ok = self._by_hand(process, found, caller, root, context)
                out += done
                if not ok:
                    fatal = not first_ok
                    break
            if not first_ok and not fatal and context.first is not None:
                done, ok = self._by_hand(process, context.first, caller, root, context)
                out += done
                fatal = not ok
        return fatal

    def _by_hand(
        self, process: Process, path: str, caller: Loaded, root: str, context: PackageContext
    ) -> tuple[list[Resolution], bool]:
        """ctypes.CDLL(path) from the package's __init__.py."""
        return _attempt(
            process, path, caller, root=root, evidence=Evidence.PRELOAD, needed_by=context.init_py
        )

    def _run_time(self, process: Process, start: int, root: str, out: list[Resolution]) -> None:
        """Known dlopens and .rodata names of every object this root mapped."""
        index = start
        while index < len(process.objects):
            obj = process.objects[index]
            index += 1
            soname = obj.info.soname or os.path.basename(obj.path)
            loads, optional = self.catalog.known_loads(soname, self.major_of(obj.path, obj.info))
            covered = {soname_stem(n) for n in (*loads, *optional)}
            for name in loads:
                out += _attempt(process, name, obj, root=root, evidence=Evidence.DLOPEN)[0]
            for name in optional:
                done, ok = _attempt(process, name, obj, root=root, evidence=Evidence.DLOPEN)
                if ok:
                    out += done  # an optional load is checked only where it exists
            for name in self.view.strings(obj.path):
                if self._skip_string(process, obj, name, soname, covered):
                    continue
                out += _attempt(process, name, obj, root=root, evidence=Evidence.DLOPEN_STRING)[0]

    def _skip_string(
        self, process: Process, obj: Loaded, name: str, soname: str, covered: set[str]
    ) -> bool:
        if name in (soname, os.path.basename(obj.path)) or name in obj.info.needed:
            return True
        if name in self.catalog.not_loads or soname_stem(name) in covered:
            return True
        if name.endswith(".so"):
            # A versionless name ("libcudnn_adv.so") is completed with a version at run
            # time; a loaded library of that stem answers it.
            return any(
                (o.info.soname or os.path.basename(o.path)).startswith(name + ".")
                for o in process.objects
            )
        return False
