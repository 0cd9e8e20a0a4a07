"""One load root in its own process, with what DT_NEEDED does not say.

A fresh `import torch._C` does not start with torch._C: torch/__init__.py first loads
torch/lib/libtorch_global_deps.so and, when that mapped libcudart, preloads a list of
NVIDIA libraries by path with ctypes (cudatx.discover.preloads). Those objects then satisfy later
needs by name even where no search path would find them. After the import, libraries load
more with dlopen at run time: the shipped manifest (cudatx/data/runtime.json) and
soname-shaped strings in each object's .rodata say what. All of it is replayed here on a
cudatx.loader.Process, each edge tagged with its evidence.

A framework other than torch (JAX's CUDA plugin, onnxruntime's CUDA provider, CuPy's modules
through cuda-pathfinder: cudatx.discover.frameworks) dlopens a library by path once its own
code has loaded others by hand: that library is a root of its own, a FrameworkRun, replayed
in each process the framework is used in (its contexts: alone, after `import torch`).

A traced run (`cudatx trace`, cudatx.discover.traces) is a root of its own per process it
ran: a fork of the interpreter's process with the run's LD_LIBRARY_PATH, in which each
dlopen the real loader reported is made again, in the order it was made, from the object
that called it, with evidence `observed`; what those objects need by DT_NEEDED follows as
for any load, and a need that fails is said as itself (the dlopen is not undone, as an
import's is not: the run made it, and it held). Replayed so before and after a change, a
library the run loaded that the change takes away fails as any other need does, and the
plan names the run. A dlopen whose caller's file the change deletes is not made: a load
counts only while what loaded it stays.

Deviations (also in README.md): ctypes' dlopen is modelled as called from libpython, not
from the _ctypes module (they differ only if _ctypes carried an RPATH, which CPython builds
do not); where several files match a preload glob, the first in the directory's own order
is taken, as torch's glob.glob does. A traced process is replayed in the interpreter's
process whatever program it ran (its dlopens by path are the same; one by name from its
main program is taken as from libpython, and where its caller was not mapped in the replay
too), so a program's own start-up (its executable's DT_NEEDED) is the interpreter's, and a
process that made no dlopen is not replayed; processes of one run that made the same
dlopens are replayed once; its dlopens are taken as lazy and local (LD_DEBUG does not
print the flags), so their versions are checked and their symbols only where an object
asks for BIND_NOW; a forked child's loads are replayed after its parent's; loads in
another namespace (dlmopen) and dlopens answered by an object already loaded (glibc prints
nothing for them) are not.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from cudatx.discover.catalog import Catalog, LoadList, PreloadEntry, Preloads
from cudatx.discover.frameworks.model import (
    FrameworkContext,
    FrameworkLoads,
    HandLoad,
    Installed,
    RuntimeRoot,
)
from cudatx.discover.handloads import HandLoaded
from cudatx.discover.lddebug import DLOPEN, absolute
from cudatx.discover.traces import Trace
from cudatx.loader.fileview import FileView, Seen
from cudatx.loader.process import Loaded, LoadResult, Process
from cudatx.models import ElfInfo, Evidence, Frozen, Resolution, Status
from cudatx.paths import soname_stem

MajorOf = Callable[[str, ElfInfo], int | None]

_OWN = "preloads"  # a framework context's step: the framework's own hand loads


Located = tuple[PreloadEntry, str | None]
"""A preload and the file its package's search finds for it (None: nothing matches)."""


class PackageContext(Frozen, kw_only=False):
    """What importing a package loads before the module asked for."""

    load_list: LoadList
    package_dir: str
    init_py: str  # who asks for the preloads
    first: str | None  # path of the library loaded first (libtorch_global_deps.so)
    preloads: Preloads  # what the package's source says it preloads
    normal: tuple[Located, ...]  # the normal path's preloads, located
    failed: tuple[Located, ...]  # the except path's, located
    module: str | None  # path of the package's extension loaded after the preloads

    @property
    def origin(self) -> str:
        """Where the preload list came from."""
        return self.preloads.origin


HandLocated = tuple[HandLoad, str | None]
"""A framework's hand load and the file its search finds (None: none)."""


class ModuleLocated(Frozen, kw_only=False):
    """A module a framework imports before its root (cudatx.discover.frameworks.model.
    ModuleStep), as installed: its file (None: none of its names is installed), and the
    names it then opens by bare name, each picked among its alternatives."""

    path: str | None
    module: str  # the first of its dotted names, said where none is installed
    opens: tuple[tuple[str, ...], ...]  # per library, the names tried in order
    why: str


class FrameworkRun(Frozen, kw_only=False):
    """One run-time root of a framework, as installed here."""

    framework: Installed
    loads: FrameworkLoads  # what the framework's reader read
    root: RuntimeRoot
    path: str  # the root file
    source: str  # the file whose code loads by hand, and then the root
    located: tuple[HandLocated, ...]
    modules: tuple[ModuleLocated, ...]
    runtime: tuple[tuple[str, ...], ...]  # what the root dlopens by name itself
    optional_runtime: tuple[tuple[str, ...], ...]
    first: tuple[str, ...] = ()  # paths the framework loads RTLD_GLOBAL before the root
    companions: tuple[str, ...] = ()  # distributions of the same build (jax-cuda12-plugin)

    @property
    def label(self) -> str:
        """ "onnxruntime's CUDA provider", "jax_plugins/xla_cuda13's XLA plugin"."""
        return f"{self.framework.name}'s {self.root.what}"

    @property
    def origin(self) -> str:
        return self.loads.origin

    @property
    def contexts(self) -> tuple[FrameworkContext, ...]:
        return self.loads.contexts


def _first_match(view: FileView, folder: str, names: tuple[str, ...]) -> str | None:
    """The first of `names` in `folder`; a name with a glob character is its first match in
    sorted order (cuda-pathfinder sorts its glob)."""
    for name in names:
        path = os.path.join(folder, name)
        found = sorted(view.glob(path)) if any(c in name for c in "*?[") else view.glob(path)
        if found:
            return found[0]
    return None


def locate_hand(
    load: HandLoad,
    sys_path: tuple[str, ...],
    site_packages: tuple[str, ...],
    beside: str,
    view: FileView,
) -> str | None:
    """Where the framework's own search finds `load` (cudatx.discover.frameworks.model.
    HandLoad)."""
    if load.search == "package":
        # JAX's _load: importlib.import_module("nvidia.<module>").__path__[0], the first
        # sys.path entry holding the package's folder; only there.
        for folder in load.folders:
            package = os.path.dirname(folder)
            entry = next((e for e in sys_path if view.is_folder(os.path.join(e, package))), None)
            if entry is None:
                continue
            return _first_match(view, os.path.join(entry, folder), load.names)
        return None
    # "beside": onnxruntime's `<package>/..`; "site": cuda-pathfinder's
    # find_sub_dirs_all_sitepackages, folder by folder, then site folder by site folder;
    # "path": each folder as it is (relative: to the framework's site folder).
    bases = site_packages if load.search == "site" else (beside,)
    for folder in load.folders:
        for base in bases:
            found = _first_match(view, os.path.join(base, folder), load.names)
            if found is not None:
                return found
    return None


def locate_preloads(
    pre: Preloads,
    entries: tuple[PreloadEntry, ...],
    sys_path: tuple[str, ...],
    cuda_major: str | None,
    view: FileView,
) -> tuple[Located, ...]:
    """torch's per-library search for each of `entries`: the first sys.path entry with any
    match, its first match (glob's order). An entry only some CUDA builds have (cufile for
    CUDA >= 12, torch 2.7 and 2.8) is left out of the others."""
    major = int(cuda_major) if cuda_major and cuda_major.isdigit() else None
    out: list[Located] = []
    for entry in entries:
        if entry.min_cuda is not None and (major is None or major < entry.min_cuda):
            continue
        found: str | None = None
        for path_entry in sys_path:
            if pre.nvidia_folder_required and not view.is_folder(
                os.path.join(path_entry, "nvidia")
            ):
                continue  # torch before 2.7: `if not os.path.exists(nvidia_path): continue`
            matches: list[str] = []
            for pattern in pre.search:
                if "{cuda_major}" in pattern and cuda_major is None:
                    continue  # torch skips the cuNN folder of a CPU build
                if matches and pre.fallback_only_if_empty:
                    break  # torch 2.6: the second pattern only where the first found nothing
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
        out.append((entry, found))
    return tuple(out)


def _attempt(
    process: Process,
    name: str,
    caller: Loaded,
    *,
    root: str,
    evidence: Evidence,
    needed_by: str | None = None,
    global_: bool | None = None,
) -> tuple[list[Resolution], Resolution | None]:
    """One dlopen done by hand (ctypes, or a library at run time), all or nothing: its
    resolutions, and the first need that failed (None when it loaded).

    A failed dlopen maps nothing (glibc unloads what it mapped, dlerror names the first
    failure): the process goes back to where it was, and the load becomes one resolution of
    the same evidence carrying the error, so that a run-time load's own broken needs never
    read as the import's.
    """
    mark = process.mark()
    done = process.dlopen(
        name, caller, root=root, evidence=evidence, needed_by=needed_by, global_=global_
    )
    if done.ok:
        return list(done.resolutions), None
    process.undo(mark)
    failed = next(r for r in done.resolutions if r.status in (Status.NOT_FOUND, Status.ERROR))
    head = done.resolutions[0]
    if failed is not head:
        cause = f"{failed.name} {failed.status.value}, needed by {failed.needed_by}"
        if failed.missing:  # a version or a symbol: glibc's own message says it all
            cause = failed.detail or cause
        head = replace(
            head,
            status=Status.ERROR,
            detail=f"cannot load: {cause}",
            cause=failed.cause or failed.name,
            missing=failed.missing,
        )
    return [head], failed


def _open(
    process: Process, names: tuple[str, ...], caller: Loaded, root: str
) -> tuple[list[Resolution], Resolution | None]:
    """dlopen of each name in turn from `caller`'s code, until one loads; where none does,
    the first one's failure (the name the library was built for)."""
    first: tuple[list[Resolution], Resolution | None] | None = None
    for name in names:
        done = _attempt(process, name, caller, root=root, evidence=Evidence.DLOPEN)
        if done[1] is None:
            return done
        first = first or done
    return first if first is not None else ([], None)


def _no_module(module: ModuleLocated, run: FrameworkRun) -> Resolution:
    return Resolution(
        name=module.module,
        needed_by=run.source,
        root=run.path,
        status=Status.NOT_FOUND,
        evidence=Evidence.IMPORT,
        detail=f"no module {module.module} is installed ({module.why} needs it)",
    )


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
        after: dict[str, PackageContext] | None = None,
        hand: dict[str, tuple[HandLoaded, ...]] | None = None,
    ) -> None:
        self.base = base
        self.caller = caller
        self.catalog = catalog
        self.view = view
        self.contexts = contexts  # package folder (with trailing /) -> context
        self.major_of = major_of
        # root -> the package its import imports first (cudatx.discover.imports): a
        # functorch or torchvision extension loads once `import torch` has run.
        self.after = after or {}
        # root -> the libraries its package loads by path before importing it, that it
        # needs (cudatx.discover.handloads): torchaudio's libtorchaudio.so before _torchaudio.
        self.hand = hand or {}
        # package -> its context, for a framework context's step that names it: the
        # package is imported first (`import torch`), its preloads and then its module.
        self.imports: dict[str, PackageContext] = {}
        for context in contexts.values():
            if context.module:
                self.imports.setdefault(context.load_list.package, context)

    def replays(self, context: FrameworkContext) -> bool:
        """Whether `context` is a process of this environment: every package its steps
        import first is installed ("after `import torch`" only where torch is)."""
        return all(step == _OWN or step in self.imports for step in context.steps)

    def load_framework(self, run: FrameworkRun, context: FrameworkContext) -> LoadResult:
        """`run`'s root in a process of `context`: its steps (`import torch`; the
        framework's own hand loads), the modules it imports first and what it opens through
        them (JAX's version check), then the root by path, then what it loads at run time.
        It loads when every import, DT_NEEDED, required open and the root's own run-time
        load is met and no required hand load failed."""
        process = self.base.fork()
        start = len(process.objects)
        caller = process.find(self.caller) or process.main
        root = run.path
        out: list[Resolution] = []
        fatal = False
        for step in context.steps:
            imported = self.imports.get(step)
            if imported is not None and imported.module:
                fatal |= self._package(process, caller, root, imported, out)
                out += process.dlopen(imported.module, caller, root=root).resolutions
            elif step == _OWN:
                fatal |= self._hand(process, caller, run, out)
        for path in run.first if not fatal else ():
            first, failure = self._by_hand(process, path, caller, root, run.source)
            out += first
            fatal |= failure is not None
        required: set[str] = {root}  # objects whose run-time loads must succeed
        for module in run.modules if not fatal else ():
            if module.path is None:
                if module.opens:  # JAX: `assert cuda_versions is not None`
                    out.append(_no_module(module, run))
                    fatal = True
                continue
            done = process.dlopen(module.path, caller, root=root, needed_by=run.source)
            out += done.resolutions
            obj = process.find(module.path)
            if not done.ok or obj is None:
                fatal = True
                continue
            required.add(module.path)
            for names in module.opens:
                loaded, failure = _open(process, names, obj, root)
                out += loaded
                if failure is not None:
                    fatal = True  # "Unable to load cuDNN. Is it installed?"
                    break
        if not fatal:
            done = process.dlopen(root, caller, root=root, needed_by=run.source)
            out += done.resolutions
            obj = process.find(root)
            if done.ok and obj is not None:
                for names in run.runtime:
                    out += _open(process, names, obj, root)[0]
                for names in run.optional_runtime:
                    loaded, failure = _open(process, names, obj, root)
                    if failure is None:
                        out += loaded
            self._run_time(process, start, root, out)
        ok = not fatal and all(
            r.status in (Status.RESOLVED, Status.SYSTEM)
            for r in out
            if r.evidence in (Evidence.IMPORT, Evidence.DT_NEEDED)
            or (r.evidence is Evidence.DLOPEN and r.needed_by in required)
        )
        return LoadResult(
            root=root,
            ok=ok,
            loaded=tuple(obj.path for obj in process.objects[start:]),
            resolutions=tuple(out),
            framework=run.framework.name,
            context=context.name,
        )

    def _hand(
        self, process: Process, caller: Loaded, run: FrameworkRun, out: list[Resolution]
    ) -> bool:
        """The framework's own loads, in order; returns whether one that is required failed
        (cuda-pathfinder raises). One that is not required is swallowed (JAX's _load,
        onnxruntime's preload_dlls, CuPy's _preload_library): its failure is no need of
        anything, and what then fails to find the library says so itself."""
        for load, found in run.located:
            if load.reuse_loaded:
                # load_nvidia_dynamic_lib: check_if_already_loaded_from_elsewhere.
                have = next(
                    (n for n in load.sonames for o in process.objects if o.answers_to(n)), None
                )
                if have is not None:
                    out += self._by_hand(process, have, caller, run.path, run.source)[0]
                    continue
            if found is not None:
                done, failure = self._by_hand(process, found, caller, run.path, run.source)
                if failure is None or load.required:
                    out += done
                    if failure is not None:
                        return True
                    continue
                # Swallowed: onnxruntime goes on to the bare name.
            if load.by_name:
                failed: list[Resolution] = []
                for name in load.sonames:
                    done, failure = self._by_hand(process, name, caller, run.path, run.source)
                    if failure is None:
                        out += done
                        break
                    failed += done
                else:
                    if load.required:
                        # Say the name the root links where it is one of them
                        # (cuda-pathfinder tries libcurand.so.11 before the libcurand.so.10
                        # CuPy's module needs).
                        info = self.view.probe(run.path).info
                        linked = set(info.needed) if info is not None else set()
                        said = next((n for n in load.sonames if n in linked), None)
                        out += [r for r in failed if r.name == said][:1] or failed[:1]
                        return True
                continue
            if load.required:
                out.append(
                    Resolution(
                        name=load.names[0],
                        needed_by=run.source,
                        root=run.path,
                        status=Status.NOT_FOUND,
                        evidence=Evidence.PRELOAD,
                        detail="not in " + ", ".join(load.folders),
                    )
                )
                return True
        return False

    def load_trace(self, trace: Trace, index: int) -> LoadResult:
        """Process `index` of a traced run, replayed (module docstring): always `ok`, for
        it is no import; each of its loads that fails is a need that fails."""
        record = trace.record
        traced = record.processes[index]
        process = self.base.fork()
        process.ld_library_path = record.ld_library_path or None
        start = len(process.objects)
        fallback = process.find(self.caller) or process.main
        root = trace.root(index)
        out: list[Resolution] = []
        for load in traced.loads:
            if load.kind != DLOPEN or load.namespace != 0:
                continue
            name = absolute(load.path, record.cwd) if "/" in load.name else load.name
            caller = self._caller(process, load.by, record.cwd)
            if caller is None and self._gone(load.by, record.cwd):
                continue  # what loaded it is gone (a change removed it): so is the load
            caller = caller or fallback
            # Not all or nothing (as _attempt makes a run-time load): the run made this load
            # and it held, so a need of it that fails after a change is said as that need,
            # and what the run loaded next is still replayed.
            done = process.dlopen(
                name, caller, root=root, evidence=Evidence.OBSERVED, needed_by=caller.path
            )
            out += done.resolutions
        return LoadResult(
            root=root,
            ok=True,
            loaded=tuple(obj.path for obj in process.objects[start:]),
            resolutions=tuple(out),
            trace=record.id,
        )

    def _gone(self, by: str | None, cwd: str) -> bool:
        """Whether the file the run named as a dlopen's caller is no longer there."""
        if by is None or "/" not in by:
            return False
        return self.view.probe(absolute(by, cwd)).seen is Seen.MISSING

    def _caller(self, process: Process, by: str | None, cwd: str) -> Loaded | None:
        """The object of the replay that the run named as dlopen's caller: by its name,
        else by its file (the replay may have opened it by another spelling). A name with
        no '/' is a main program's argv[0]."""
        if by is None or "/" not in by:
            return None
        path = absolute(by, cwd)
        found = process.find(path)
        if found is not None:
            return found
        file_id = self.view.probe(path).file_id
        if file_id is None:
            return None
        return next((o for o in process.objects if o.file_id == file_id), None)

    def load(self, root: str) -> LoadResult:
        process = self.base.fork()
        start = len(process.objects)
        caller = process.find(self.caller) or process.main
        resolutions: list[Resolution] = []
        context = next((c for d, c in self.contexts.items() if root.startswith(d)), None)
        context = context or self.after.get(root)
        fatal = False
        if context is not None:
            fatal = self._package(process, caller, root, context, resolutions)
            if context.module and context.module != root:
                resolutions += process.dlopen(context.module, caller, root=root).resolutions
        for hand in self.hand.get(root, ()):
            # ctypes.CDLL(path) (RTLD_LOCAL) or torch.ops.load_library, before the import.
            done, failure = _attempt(
                process,
                hand.path,
                caller,
                root=root,
                evidence=Evidence.PRELOAD,
                needed_by=hand.by,
                global_=False,
            )
            resolutions += done
            fatal |= failure is not None and not hand.swallowed
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
        """torch's _load_global_deps (cudatx.discover.preloads); returns whether it makes
        the import fail.

        The normal path (libtorch_global_deps.so loaded) is best effort: torch wraps it in
        `except Exception: pass`, so a library that is missing and required, or that fails
        to load, ends the list there and the import goes on. If the first load fails with
        an error naming a library of the list, torch preloads the except path's list outside
        any try and loads it again: then a missing required preload, or one that fails,
        makes `import torch` fail; an error naming none of them is raised as it is.
        """
        if context.first is None:
            # No libtorch_global_deps.so where torch looks (a build without it): what torch
            # then does depends on the release, and is not modelled; the normal path is.
            self._normal(process, caller, root, context, out)
            return False
        done, failure = self._by_hand(process, context.first, caller, root, context)
        if failure is None:
            out += done
            self._normal(process, caller, root, context, out)
            return False
        named = os.path.basename(failure.name)
        if not any(stem in named for stem in context.preloads.error_stems):
            out += done  # `raise err`: the import fails with the first load's own error
            return True
        # torch raises at the first preload that fails; the replay goes on through the list
        # as if it had loaded, so that one diagnosis names every library the import misses
        # (cudatx.loader.process's deviations).
        fatal = False
        for entry, found in context.failed:
            if found is None:
                if entry.required:
                    out.append(_unfound(entry.pattern, context, root))  # ValueError
                    fatal = True
                continue
            loaded, failure = self._by_hand(process, found, caller, root, context)
            out += loaded
            fatal = fatal or failure is not None  # OSError, outside any try
        done, failure = self._by_hand(process, context.first, caller, root, context)
        out += done
        return fatal or failure is not None

    def _normal(
        self,
        process: Process,
        caller: Loaded,
        root: str,
        context: PackageContext,
        out: list[Resolution],
    ) -> None:
        gate = context.preloads.gate
        # `if "<gate>" not in open("/proc/self/maps").read(): return`: maps names each file by
        # the path the kernel resolved (`torch/lib/../../nvidia` shows as `nvidia`).
        if gate is not None and not any(gate in os.path.realpath(o.path) for o in process.objects):
            return
        for entry, found in context.normal:
            if found is None:
                if entry.required:
                    return  # the ValueError ends the list
                continue
            done, failure = self._by_hand(process, found, caller, root, context)
            out += done
            if failure is not None:
                return  # the OSError ends the list

    def _by_hand(
        self, process: Process, path: str, caller: Loaded, root: str, context: PackageContext | str
    ) -> tuple[list[Resolution], Resolution | None]:
        """ctypes.CDLL(path) from the package's __init__.py (or the framework's `source`)."""
        who = context if isinstance(context, str) else context.init_py
        return _attempt(process, path, caller, root=root, evidence=Evidence.PRELOAD, needed_by=who)

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
                done, failure = _attempt(process, name, obj, root=root, evidence=Evidence.DLOPEN)
                if failure is None:
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
