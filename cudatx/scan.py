"""Scan one environment: discovery, then the loader's replay of every load root.

The composition of the first stages (cudatx.discover, cudatx.elf, cudatx.loader) into an
:class:`~cudatx.environment.Environment`; the planner calls :func:`load_roots` again on a
view in which a change has happened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cudatx.analysis.cuda import build_of, file_classifier
from cudatx.cache import file_key, memo, open_cache, settled
from cudatx.discover.catalog import Catalog, load_catalog
from cudatx.discover.dists import installed_extras
from cudatx.discover.frameworks import cuda_build, find_installed, read_installed
from cudatx.discover.frameworks.model import (
    CudaBuild,
    FrameworkLoads,
    Installed,
    Open,
    RuntimeRoot,
)
from cudatx.discover.handloads import (
    HandLoaded,
    LoadCalls,
    PackageLoads,
    Unread,
    cached_hand_loads,
    read_hand_loads,
)
from cudatx.discover.imports import Companion, companions, imports_of
from cudatx.discover.owners import SystemPackages, installed_state, owner_of, read_records
from cudatx.discover.preloads import read_preloads
from cudatx.discover.sitewalk import flat_libraries, search_folders, walk
from cudatx.discover.target import Query
from cudatx.discover.traces import read_traces
from cudatx.elf.system import probe_system
from cudatx.environment import Environment, Owners, PathKeys
from cudatx.errors import EnvironmentNotFound
from cudatx.loader.fileview import FileView, Seen
from cudatx.loader.process import LoadResult, Process
from cudatx.loader.roots import (
    FrameworkRun,
    ModuleLocated,
    PackageContext,
    RootLoader,
    locate_hand,
    locate_preloads,
)
from cudatx.models import Distribution, ElfInfo, Finding, PythonTarget
from cudatx.names import canonical_name
from cudatx.paths import is_library_name

if TYPE_CHECKING:
    from cudatx.cache import ScanCache


def _python_library(process: Process) -> str:
    """The object Python's import code lives in: dlopen's caller for every extension."""
    for obj in process.objects:
        if (obj.info.soname or "").startswith("libpython"):
            return obj.path
    return process.main.path


Progress = Callable[[str, int, int], None]
"""Called as (what, done, total) while a scan works through its files and loads."""


def scan(
    query: Query,
    *,
    ld_library_path: str | None,
    cwd: Path | None = None,
    cache: ScanCache | None = None,
    progress: Progress | None = None,
) -> Environment:
    """Read the environment of the interpreter `query` asks (cudatx.discover.target
    .start_query: the command's target) and replay every load root. `cache` keeps what
    files say between runs (cudatx.cache); `progress` hears how far the scan is."""
    tell = progress or _quiet
    target = query.result()
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
    # first: a change during the scan counts
    state = installed_state(target)
    # Every owner's records, RECORDs and a conda environment's own (cudatx.discover.owners).
    distributions, findings, folders = read_records(target, cache)
    # Staleness is decided here, on the files as they are: a simulated change replays the
    # records that were fresh before it.
    traces, unread_traces = read_traces(target.prefix, strict=False)
    findings += unread_traces
    tell("finding libraries", 0, 1)
    roots, libraries = walk(
        search_folders(target),
        target,
        view.inits,
        cache,
        view.needed,
        load_catalog().core_libraries,
    )
    paths = [path for found in libraries.values() for path in found]
    for done, path in enumerate(paths):
        tell("reading libraries", done, len(paths))
        found = view.probe(path)
        if found.seen is Seen.BAD:
            findings.append(Finding(kind="not ELF", path=path, message=found.reason or ""))
    # Their .rodata names are read beside the replay, by a child (cudatx.elf.prefetch).
    view.prefetch_strings([p for p in paths if view.probe(p).seen is Seen.ELF])
    for folder in folders:  # an owner's libraries beyond the site folders (a conda lib/)
        # Read when the loader or a report asks: a conda lib/ holds hundreds of libraries.
        for name, listed in flat_libraries(folder).items():
            known = libraries.setdefault(name, [])
            known += [p for p in listed if p not in known]
    keys = PathKeys()
    owners = Owners(distributions, keys)
    installed = _installed_frameworks(_framework_sites(target), owners, keys, view)
    hand, unread_loads = _hand_loads(distributions, installed, target, cache)
    # A root only where the file is a shared library now: a plan replays it after the
    # change whatever then stands there.
    hand = tuple(h for h in hand if view.probe(h.path).seen is Seen.ELF)
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
        owners=owners,
        libraries={name: tuple(paths) for name, paths in libraries.items()},
        roots=tuple(roots),
        base=LoadResult(root=executable.path, ok=True, loaded=(), resolutions=()),
        loads=(),
        contexts=(),
        installed_state=state,
        extras=installed_extras(distributions, target.markers, _builds(installed, distributions)),
        system_packages=SystemPackages(keys),
        traces=traces,
        hand_loads=hand,
        hand_unread=unread_loads,
    )
    try:
        return load_roots(env, view, progress)
    finally:
        view.end_prefetch()


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _builds(
    installed: tuple[Installed, ...], distributions: tuple[Distribution, ...]
) -> frozenset[str]:
    """The distributions whose extras count (cudatx.discover.dists.installed_extras): the
    frameworks that load by hand, and those that require one of them (jax-cuda12-plugin
    requires jax-cuda12-pjrt: its `with-cuda` extra brings the libraries the plugin loads)."""
    names = {f.distribution for f in installed}
    out = set(names)
    for dist in distributions:
        for requirement in dist.requires:
            match = _NAME.match(requirement)
            if match and canonical_name(match.group()) in names:
                out.add(dist.name)
                break
    return frozenset(out)


def _hand_loads(
    distributions: tuple[Distribution, ...],
    installed: tuple[Installed, ...],
    target: PythonTarget,
    cache: ScanCache | None,
    view: FileView | None = None,
) -> tuple[tuple[HandLoaded, ...], tuple[tuple[str, Unread], ...]]:
    """What each distribution's Python code loads by path (cudatx.discover.handloads),
    and the loads it makes that cudatx cannot read (with the distribution's name). Read
    for distributions that ship both Python files and a shared library; not for those
    whose loads a reader of their own models (torch's preloads, the frameworks). `view`:
    the files as a change would leave them, for the distributions it installs (their code
    read from its staged bytes, nothing of it kept in the cache)."""
    catalog = load_catalog()
    own = {ll.distribution for ll in catalog.load_lists} | {f.distribution for f in installed}
    calls = LoadCalls(catalog.load_functions)
    head = target.version.split(".")
    version = (int(head[0]), int(head[1])) if len(head) > 1 and head[1].isdigit() else (3, 0)
    entries = [e for e in target.sys_path if e]

    def resolve(dotted: str) -> str | None:
        relative = dotted.replace(".", "/")
        return next(
            (
                os.path.join(e, relative)
                for e in entries
                if os.path.isdir(os.path.join(e, relative))
            ),
            None,
        )

    def read(dist: Distribution) -> PackageLoads:
        rows = [e.path for e in dist.records]
        py = [p for p in rows if p.endswith(".py") and not p.startswith(("../", "/"))]
        if not py or not any(is_library_name(os.path.basename(p)) for p in rows):
            return PackageLoads()
        if view is None:
            return read_hand_loads(dist.site, py, version, resolve, calls)
        return read_hand_loads(
            dist.site, py, version, resolve, calls, view.real, lambda p: sorted(view.glob(p))
        )

    loads: list[HandLoaded] = []
    unread: list[tuple[str, Unread]] = []
    for dist in distributions:
        if dist.name in own or not owner_of(dist).python:
            continue
        try:
            state: os.stat_result | None = os.stat(os.path.join(dist.metadata_dir, "RECORD"))
        except OSError:
            state = None
        # Kept for every distribution, one with nothing to read too: a warm run looks at
        # none of its RECORD rows (22,000 in a torch environment).
        found = cached_hand_loads(dist.metadata_dir, state, cache, functools.partial(read, dist))
        loads += found.loads
        unread += [(dist.name, u) for u in found.unread]
    return tuple(loads), tuple(unread)


def arriving_hand_loads(
    env: Environment, arriving: tuple[Distribution, ...], view: FileView
) -> Environment:
    """`env` (the environment after a change, on `view`) with what the distributions the
    change installs load by path read from their staged code, in place of what the code
    they replace loaded: a replay then makes those loads, as `import` of them would."""
    target = env.target
    installed = _installed_frameworks(_framework_sites(target), env.owners, env.keys, view)
    hand, unread = _hand_loads(arriving, installed, target, None, view)
    names = {d.name for d in arriving}
    written = {env.keys(os.path.join(d.site, e.path)) for d in arriving for e in d.records}
    kept = tuple(h for h in env.hand_loads if env.keys(h.by) not in written)
    return dataclasses.replace(
        env,
        hand_loads=(*kept, *(h for h in hand if view.probe(h.path).seen is Seen.ELF)),
        hand_unread=(*(u for u in env.hand_unread if u[0] not in names), *unread),
    )


def _framework_sites(target: PythonTarget) -> tuple[str, ...]:
    """The folders a framework is imported from, in the order Python's import looks: every
    sys.path entry (a .pth adds folders beside site-packages: onnxruntime installed in one
    of its own), then the site folders."""
    return tuple(dict.fromkeys((*(e for e in target.sys_path if e), *target.site_packages)))


def _installed_frameworks(
    sites: tuple[str, ...], owners: Owners, keys: PathKeys, view: FileView
) -> tuple[Installed, ...]:
    """The frameworks that load by hand installed here (cudatx.discover.frameworks)."""

    def owner_of(path: str) -> str | None:
        names = owners.get(keys(path), ())
        return names[0] if names else None

    return find_installed(sites, owner_of, view)


def _quiet(what: str, done: int, total: int) -> None:
    pass


def collect_less() -> None:
    """Tune the garbage collector for one short process, before the scan.

    The core's modules and classes are imported by now and live until
    exit: gc.freeze() moves them out of every later collection. A warm scan then builds some
    100,000 short-lived tuples (RECORD rows, the owners index); collecting the young
    generation every 10,000 allocations instead of 700 cut 25-30 ms from a 0.35 s warm
    `remove six --dry-run` (benchmarks/). Cycles are still collected: memory stays bounded.
    """
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


@contextlib.contextmanager
def scanning(
    query: Query,
    *,
    ld_library_path: str | None,
    use_cache: bool = True,
    progress: Progress | None = None,
) -> Iterator[Environment]:
    """One command's scan: the scan cache open for as long as the command runs (a plan
    replays again and reads through it), written when it ends; the collector tuned for a
    short process. `ld_library_path`: that of the process that will load (None for none)."""
    collect_less()
    cache = open_cache() if use_cache else None
    try:
        yield scan(query, ld_library_path=ld_library_path, cache=cache, progress=progress)
    finally:
        if cache is not None:
            cache.close()


def load_roots(env: Environment, view: FileView, progress: Progress | None = None) -> Environment:
    """Replay the interpreter's start and every root on `view`.

    The planner calls this again with a view in which a change has happened.
    """
    catalog = load_catalog()
    # facts read bytes through the view (staged files)
    env = dataclasses.replace(env, view=view, cuda_builds=_cuda_builds(env, catalog, view))
    tell = progress or _quiet
    process = Process(
        env.system,
        view,
        env.executable,
        ld_library_path=env.ld_library_path,
        cwd=env.cwd,
        is_driver=catalog.is_driver,
    )
    base = process.start()
    classify = file_classifier(env)

    def major_of(path: str, info: ElfInfo) -> int | None:
        classified = classify(path, info)
        return classified.major if classified else None

    contexts = _contexts(env, catalog, view)
    by_folder = {os.path.join(c.package_dir, ""): c for c in contexts}
    env = dataclasses.replace(env, companions=_companions(env, view, by_folder))
    have = {env.keys(r) for r in env.roots}
    # A hand load is made by its package's code: where a change deletes that code, the load
    # leaves with it (as a traced dlopen whose caller is gone is not made); where the code
    # stays and its library goes, the load is made and fails.
    hand_roots = tuple(
        dict.fromkeys(
            h.path for h in env.hand_loads if env.keys(h.path) not in have and not view.gone(h.by)
        )
    )
    roots = (*env.roots, *hand_roots)
    loader = RootLoader(
        process,
        _python_library(process),
        catalog,
        view,
        by_folder,
        major_of,
        _imported_first(env, by_folder, view, roots),
        _hand_preloads(env, roots, view),
    )
    runs, reads = _frameworks(env, view)
    by_framework = {env.keys(run.path) for run in runs}
    loads = []
    for done, root in enumerate(roots):
        tell("replaying imports", done, len(roots))
        if env.keys(root) not in by_framework:  # CuPy's modules: in their framework's process
            loads.append(loader.load(root))
    others: list[LoadResult] = []
    for run in runs:
        for context in run.contexts:
            if not loader.replays(context):
                continue  # "after `import torch`" only where torch is installed
            (loads if context.primary else others).append(loader.load_framework(run, context))
    observed = tuple(
        loader.load_trace(trace, index)
        for trace in env.traces
        if trace.stale is None
        for index in trace.replayed()
    )
    return dataclasses.replace(
        env,
        view=view,
        base=base,
        loads=tuple(loads),
        contexts=contexts,
        frameworks=runs,
        framework_reads=reads,
        context_loads=tuple(others),
        observed=observed,
    )


def _frameworks(
    env: Environment, view: FileView
) -> tuple[tuple[FrameworkRun, ...], tuple[tuple[Installed, FrameworkLoads], ...]]:
    """The run-time roots of the frameworks installed here (cudatx.discover.frameworks), and
    what each framework's reader read (or why it could not)."""
    runs: list[FrameworkRun] = []
    reads = []
    for found in _installed_frameworks(_framework_sites(env.target), env.owners, env.keys, view):
        loads = read_installed(found, view, view.cache)
        reads.append((found, loads))
        if not loads.read:
            continue
        roots = loads.roots
        if loads.by_soname is not None:
            roots += _module_roots(env, found, loads, view)
        source = os.path.join(found.site, found.sources[0])
        for root in roots:
            if root.is_module:
                module = _module_file(env, (root.path,))
                if module is None:
                    continue  # a build without it
                path = module
            else:
                path = os.path.join(found.site, root.path)
            if view.probe(path).seen is Seen.MISSING:
                continue  # a build without it
            located = tuple(
                (
                    load,
                    locate_hand(
                        load, env.target.sys_path, env.target.site_packages, found.site, view
                    ),
                )
                for load in root.loads
            )
            modules = tuple(
                ModuleLocated(
                    path=_module_file(env, step.modules),
                    module=step.modules[0] if step.modules else "",
                    opens=tuple(_pick(env, names) for names in step.opens),
                    why=step.why,
                )
                for step in root.modules
            )
            companions = {
                owner
                for m in modules
                if m.path is not None
                for owner in env.owners.get(env.keys(m.path), ())
                if owner != found.distribution
            }
            runs.append(
                FrameworkRun(
                    framework=found,
                    loads=loads,
                    root=root,
                    path=path,
                    source=source,
                    located=located,
                    modules=modules,
                    runtime=tuple(_pick(env, names) for names in root.runtime),
                    optional_runtime=tuple(_pick(env, names) for names in root.optional_runtime),
                    first=tuple(os.path.join(found.site, f) for f in root.first),
                    companions=tuple(sorted(companions)),
                )
            )
    return tuple(runs), tuple(reads)


def _pick(env: Environment, opened: Open) -> tuple[str, ...]:
    """The names a framework opens for one library, in the order it tries them: of the
    names its build may open (libcudnn.so.9, libcudnn.so.8), the first a RECORD here lists,
    else the first; then its fallbacks."""
    build = next((n for n in opened.build if env.owners.listing(n)), opened.build[0])
    return (build, *opened.then)


def _module_file(env: Environment, modules: tuple[str, ...]) -> str | None:
    """The extension module file of the first of these dotted names that is installed (in
    sys.path order), as Python's import finds it."""
    for module in modules:
        folder, _, name = module.replace(".", "/").rpartition("/")
        for entry in env.target.sys_path:
            if not entry:
                continue
            base = os.path.join(entry, folder)
            for root in env.roots:
                if os.path.dirname(root) == base and os.path.basename(root).startswith(name + "."):
                    return root
    return None


def _module_roots(
    env: Environment, found: Installed, loads: FrameworkLoads, view: FileView
) -> tuple[RuntimeRoot, ...]:
    """The framework's extension modules that link a library its table knows (CuPy, through
    cuda-pathfinder or its own preloads), or one a wheel here ships: each is a root after
    the loads that provide what it links (cudatx.discover.frameworks.cupy)."""
    table = loads.by_soname or {}
    dist = env.distribution(found.distribution)
    tops = {e.path.split("/", 1)[0] for e in dist.records if "/" in e.path} if dist else set()
    folders = tuple(os.path.join(found.site, t, "") for t in sorted(tops))
    named = {
        env.keys(path)
        for root in loads.roots
        if root.is_module
        for path in [_module_file(env, (root.path,))]
        if path is not None
    }
    out = []
    for root in env.roots:
        if not root.startswith(folders) or env.keys(root) in named:
            continue
        info = view.probe(root).info
        needs = info.needed if info is not None else ()
        if not any(n in table or n in env.libraries for n in needs):
            continue
        chained = tuple(dict.fromkeys(load for n in needs for load in table.get(n, ())))
        relative = os.path.relpath(root, found.site)
        module = relative.split(".", 1)[0].replace("/", ".")
        out.append(RuntimeRoot(path=relative, what=f"module {module}", loads=chained))
    return tuple(out)


def _hand_preloads(
    env: Environment, roots: tuple[str, ...], view: FileView
) -> dict[str, tuple[HandLoaded, ...]]:
    """root -> the libraries its package's code loads by path that the root needs by name
    (its DT_NEEDED names the file or its soname): loaded first, they answer that need
    (elf/dl-load.c `_dl_map_object` reuses a loaded object of that name)."""
    by_name: dict[str, list[HandLoaded]] = {}
    for hand in env.hand_loads:
        if view.gone(hand.by):
            continue  # its code leaves with the change (see the hand roots in replay)
        info = view.probe(hand.path).info
        names = {os.path.basename(hand.path), *([info.soname] if info and info.soname else [])}
        for name in names:
            by_name.setdefault(name, []).append(hand)
    if not by_name:
        return {}
    out: dict[str, tuple[HandLoaded, ...]] = {}
    for root in roots:
        info = view.probe(root).info
        if info is None:
            continue
        found = [
            hand
            for name in info.needed
            for hand in by_name.get(name, ())
            if hand.path != root and _same_package(hand, root, env)
        ]
        if found:
            out[root] = tuple(dict.fromkeys(found))
    return out


def _same_package(hand: HandLoaded, root: str, env: Environment) -> bool:
    """Whether the root is in the top-level package whose code makes the load, or in a
    companion that package imports (Companion) where the load is made as it is imported and,
    in a file that imports the companion, above that import."""
    entry = next((e for e in env.target.sys_path if e and hand.by.startswith(e + "/")), None)
    if entry is None:
        return False
    top = os.path.join(entry, hand.by[len(entry) + 1 :].split("/", 1)[0])
    if root.startswith(top + "/"):
        return True
    companion = env.companion_of(root)
    if companion is None or companion.importer != top or not hand.at_import:
        return False
    return all(hand.line < line for path, line in companion.at if path == hand.by)


def _companions(
    env: Environment, view: FileView, contexts: dict[str, PackageContext]
) -> tuple[Companion, ...]:
    """The companions (cudatx.discover.imports.companions) of every distribution that ships
    an extension module in one of several top-level packages, one importer each: the one
    whose import loads libraries by hand first (torch's preloads, a package's ctypes loads),
    else the first by name. Kept in the scan cache while the distribution's RECORD is the
    same (its .py files change only with it)."""
    entries = sorted((e for e in env.target.sys_path if e), key=len, reverse=True)
    holding: set[str] = set()  # top-level folders holding a root
    for root in env.roots:
        entry = next((e for e in entries if root.startswith(e + "/")), None)
        if entry is not None:
            holding.add(os.path.join(entry, root[len(entry) + 1 :].split("/", 1)[0]))
    hand_tops = {os.path.dirname(h.by) for h in env.hand_loads}
    chosen: dict[str, Companion] = {}
    for dist in env.distributions:
        rows = [e.path for e in dist.records if "/" in e.path and not e.path.startswith("../")]
        tops = {r.split("/", 1)[0] for r in rows}
        if not owner_of(dist).python or len(tops) < 2:
            continue
        if not any(os.path.join(dist.site, t) in holding for t in tops):
            continue
        for companion in _companions_of(dist, rows, view):
            if companion.package not in holding:
                continue
            if canonical_name(os.path.basename(companion.package)) == dist.name:
                continue  # the distribution's own package is its users' import
            have = chosen.get(companion.package)
            first = os.path.join(companion.importer, "") in contexts or any(
                h == companion.importer or h.startswith(companion.importer + "/") for h in hand_tops
            )
            if have is None or (first and os.path.join(have.importer, "") not in contexts):
                chosen[companion.package] = companion
    return tuple(chosen[k] for k in sorted(chosen))


def _companions_of(dist: Distribution, rows: list[str], view: FileView) -> tuple[Companion, ...]:
    record = os.path.join(dist.metadata_dir, "RECORD")
    try:
        state = os.stat(view.real(record))
    except OSError:
        return companions(dist.site, rows, view.real)
    return memo(
        view.cache,
        "companions",
        dist.metadata_dir,
        ":".join(file_key(state)),
        functools.partial(companions, dist.site, rows, view.real),
        load=_companions_from_json,
        dump=lambda found: _companions_to_json(found) if settled(state) else None,
    )


def _companions_to_json(found: tuple[Companion, ...]) -> str:
    return json.dumps([[c.package, c.importer, [list(a) for a in c.at]] for c in found])


def _companions_from_json(text: str) -> tuple[Companion, ...]:
    return tuple(
        Companion(str(p), str(i), tuple((str(f), int(n)) for f, n in at))
        for p, i, at in json.loads(text)
    )


def _imported_first(
    env: Environment,
    contexts: dict[str, PackageContext],
    view: FileView,
    roots: tuple[str, ...],
) -> dict[str, PackageContext]:
    """Roots outside the packages that preload (torch) whose import imports one of them first:
    an `__init__.py` above the extension imports it at module level (README, "Which process
    an extension loads in")."""
    if not contexts:
        return {}
    by_package = {c.load_list.package: c for c in contexts.values()}
    entries = sorted((os.path.join(e, "") for e in env.target.sys_path if e), key=len)
    out: dict[str, PackageContext] = {}
    for root in roots:
        if any(root.startswith(folder) for folder in contexts):
            continue  # inside torch itself: its own context
        entry = next((e for e in reversed(entries) if root.startswith(e)), None)
        if entry is None:
            continue
        folder, parts = entry, os.path.dirname(root[len(entry) :]).split("/")
        for part in filter(None, parts):  # Python runs each package's __init__.py, top first
            folder = os.path.join(folder, part)
            imported = imports_of(os.path.join(folder, "__init__.py"), view.cache, view.real)
            first = next((by_package[name] for name in imported if name in by_package), None)
            if first is not None:
                out[root] = first
                break
        companion = env.companion_of(root)
        if root in out or companion is None:
            continue
        # A companion (nvfuser in torch's wheel) loads where its importer imports it: after
        # torch's preloads when torch is the importer, or after what the importer's own
        # __init__.py imports first.
        importer = os.path.join(companion.importer, "")
        if importer in contexts:
            out[root] = contexts[importer]
            continue
        imported = imports_of(os.path.join(importer, "__init__.py"), view.cache, view.real)
        first = next((by_package[name] for name in imported if name in by_package), None)
        if first is not None:
            out[root] = first
    return out


def _cuda_builds(env: Environment, catalog: Catalog, view: FileView) -> tuple[CudaBuild, ...]:
    """What the packages installed here whose load list names the constant that says their
    CUDA build (torch.version.cuda) say of it."""
    builds = (
        cuda_build(dist, load_list, view.real)
        for load_list in catalog.load_lists
        if (dist := env.distribution(load_list.distribution)) is not None
    )
    return tuple(b for b in builds if b is not None)


def _contexts(env: Environment, catalog: Catalog, view: FileView) -> tuple[PackageContext, ...]:
    """The packages whose import loads libraries by hand (torch), as installed here."""
    out = []
    for load_list in catalog.load_lists:
        dist = env.distribution(load_list.distribution)
        if dist is None:
            continue
        package_dir = os.path.join(dist.site, load_list.package)
        if not view.is_folder(package_dir):  # a simulated install may bring the package
            continue
        preloads = read_preloads(load_list, package_dir, dist.version, view.cache, view.real)
        built = build_of(env, dist.name)
        cuda = built.cuda if built else None
        major = cuda.split(".")[0] if cuda else None
        sys_path = env.target.sys_path
        normal = locate_preloads(preloads, preloads.normal, sys_path, major, view)
        failed = locate_preloads(preloads, preloads.entries, sys_path, major, view)
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
                preloads=preloads,
                normal=normal,
                failed=failed,
                module=module,
            )
        )
    return tuple(out)
