"""Scan one environment: discovery, then the loader's replay of every load root.

The composition of the first stages (cudatx.discover, cudatx.elf, cudatx.loader) into an
:class:`~cudatx.environment.Environment`; the planner calls :func:`load_roots` again on a
view in which a change has happened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cudatx.analysis.cuda import file_classifier, torch_cuda
from cudatx.cache import open_cache
from cudatx.discover.catalog import Catalog, Framework, FrameworkLoads, RuntimeRoot, load_catalog
from cudatx.discover.conda import conda_meta, read_conda_records
from cudatx.discover.dists import installed_extras, installed_state, scan_distributions
from cudatx.discover.frameworks import read_framework
from cudatx.discover.imports import imports_of
from cudatx.discover.preloads import read_preloads
from cudatx.discover.sitewalk import flat_libraries, search_folders, walk
from cudatx.discover.syspkgs import SystemPackages
from cudatx.discover.target import Query, start_query
from cudatx.discover.traces import read_traces
from cudatx.elf.system import probe_system
from cudatx.environment import Environment, Owners, PathKeys
from cudatx.errors import EnvironmentNotFound
from cudatx.loader.fileview import FileView, Seen
from cudatx.loader.process import LoadResult, Process
from cudatx.loader.roots import (
    FrameworkRun,
    PackageContext,
    RootLoader,
    locate_hand,
    locate_preloads,
)
from cudatx.models import ElfInfo, Finding

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
    # first: a change during the scan counts
    state = installed_state(target.site_packages, conda_meta(target.prefix))
    distributions, findings = scan_distributions(target.sys_path, cache)
    # A conda environment's own records own files beside the RECORDs (cudatx.discover.conda).
    conda, unread = read_conda_records(target.prefix, cache)
    distributions, findings = (*distributions, *conda), findings + unread
    # Staleness is decided here, on the files as they are: a simulated change replays the
    # records that were fresh before it.
    traces, unread_traces = read_traces(target.prefix, strict=False)
    findings += unread_traces
    tell("finding libraries", 0, 1)
    roots, libraries = walk(search_folders(target), target, view.inits, cache, view.needed)
    paths = [path for found in libraries.values() for path in found]
    for done, path in enumerate(paths):
        tell("reading libraries", done, len(paths))
        found = view.probe(path)
        if found.seen is Seen.BAD:
            findings.append(Finding(kind="not ELF", path=path, message=found.reason or ""))
    # Their .rodata names are read beside the replay, by a child (cudatx.elf.prefetch).
    view.prefetch_strings([p for p in paths if view.probe(p).seen is Seen.ELF])
    if conda:
        # Read when the loader or a report asks: a conda lib/ holds hundreds of libraries.
        for name, listed in flat_libraries(os.path.join(target.prefix, "lib")).items():
            known = libraries.setdefault(name, [])
            known += [p for p in listed if p not in known]
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
        installed_state=state,
        extras=installed_extras(distributions, target.markers, _framework_names()),
        system_packages=SystemPackages(keys),
        traces=traces,
    )
    try:
        return load_roots(env, view, progress)
    finally:
        view.end_prefetch()


def _framework_names() -> frozenset[str]:
    """The distributions of the frameworks that load by hand, whose extras count."""
    return frozenset(
        name for f in load_catalog().frameworks for name in (f.distribution, *f.companions)
    )


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
    python: str | None,
    *,
    ld_library_path: str | None,
    use_cache: bool = True,
    progress: Progress | None = None,
    query: Query | None = None,
) -> Iterator[Environment]:
    """One command's scan: the scan cache open for as long as the command runs (a plan
    replays again and reads through it), written when it ends; the collector tuned for a
    short process. `ld_library_path` None means the current process's."""
    collect_less()
    cache = open_cache() if use_cache else None
    if ld_library_path is None:
        ld_library_path = os.environ.get("LD_LIBRARY_PATH")
    try:
        yield scan(
            python,
            ld_library_path=ld_library_path or None,
            cache=cache,
            progress=progress,
            query=query,
        )
    finally:
        if cache is not None:
            cache.close()


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
    classify = file_classifier(env)

    def major_of(path: str, info: ElfInfo) -> int | None:
        classified = classify(path, info)
        return classified.major if classified else None

    contexts = _contexts(env, catalog, view)
    by_folder = {os.path.join(c.package_dir, ""): c for c in contexts}
    loader = RootLoader(
        process,
        _python_library(process),
        catalog,
        view,
        by_folder,
        major_of,
        _imported_first(env, by_folder, view),
    )
    runs = _frameworks(env, catalog, view)
    by_framework = {env.keys(run.path) for run in runs}
    loads = []
    for done, root in enumerate(env.roots):
        tell("replaying imports", done, len(env.roots))
        if env.keys(root) not in by_framework:  # CuPy's modules: in their framework's process
            loads.append(loader.load(root))
    others: list[LoadResult] = []
    for run in runs:
        for context in run.framework.contexts:
            if "torch" in context.steps and loader.torch is None:
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
        context_loads=tuple(others),
        observed=observed,
    )


def _frameworks(env: Environment, catalog: Catalog, view: FileView) -> tuple[FrameworkRun, ...]:
    """The run-time roots of the frameworks installed here (cudatx.discover.frameworks)."""
    out = []
    for framework in catalog.frameworks:
        dist = env.distribution(framework.distribution)
        if dist is None or not view.is_folder(os.path.join(dist.site, framework.package)):
            continue
        loads = read_framework(framework, dist.site, dist.version, view.cache, view.real)
        roots = loads.roots
        if loads.by_soname is not None:
            roots = _pathfinder_roots(env, framework, loads, dist.site, view)
        source = os.path.join(dist.site, framework.sources[0]) if framework.sources else ""
        beside = dist.site
        for root in roots:
            path = os.path.join(dist.site, root.path)
            if view.probe(path).seen is Seen.MISSING:
                continue  # a build without it (a CPU build's provider)
            runtime, optional = framework.runtime.get(os.path.basename(root.path), ((), ()))
            located = tuple(
                (
                    load,
                    *locate_hand(load, env.target.sys_path, env.target.site_packages, beside, view),
                )
                for load in root.loads
            )
            out.append(
                FrameworkRun(
                    framework=framework,
                    loads=loads,
                    root=root,
                    path=path,
                    source=source,
                    located=located,
                    runtime=runtime,
                    optional_runtime=optional,
                )
            )
    return tuple(out)


def _pathfinder_roots(
    env: Environment, framework: Framework, loads: FrameworkLoads, site: str, view: FileView
) -> tuple[RuntimeRoot, ...]:
    """CuPy's extension modules that link a library cuda-pathfinder knows: CuPy has
    pathfinder load it before importing them (cupy_backends/cuda/libs/__init__.py
    `__getattr__`; cupy/cuda/__init__.py for cufft; cupy/_environment.py for nvrtc), so each
    is a root after those loads. A deviation: cudatx takes every such module so, where CuPy
    names each; a module imported after another one's loads is modelled on its own."""
    table = loads.by_soname or {}
    dist = env.distribution(framework.distribution)
    tops = {e.path.split("/", 1)[0] for e in dist.records if "/" in e.path} if dist else set()
    folders = tuple(os.path.join(site, t, "") for t in sorted(tops))
    out = []
    for root in env.roots:
        if not root.startswith(folders):
            continue
        info = view.probe(root).info
        needs = [n for n in info.needed if n in table] if info is not None else []
        if not needs:
            continue
        chained = tuple(dict.fromkeys(load for n in needs for load in table[n]))
        relative = os.path.relpath(root, site)
        module = relative.split(".", 1)[0].replace("/", ".")
        out.append(RuntimeRoot(path=relative, what=f"module {module}", loads=chained))
    return tuple(out)


def _imported_first(
    env: Environment, contexts: dict[str, PackageContext], view: FileView
) -> dict[str, PackageContext]:
    """Roots outside the packages that preload (torch) whose import imports one of them first:
    an `__init__.py` above the extension imports it at module level (README, "Which process
    an extension loads in")."""
    if not contexts:
        return {}
    by_package = {c.load_list.package: c for c in contexts.values()}
    entries = sorted((os.path.join(e, "") for e in env.target.sys_path if e), key=len)
    out: dict[str, PackageContext] = {}
    for root in env.roots:
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
    return out


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
        cuda = torch_cuda(env)
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
