"""Frameworks' run-time roots in their contexts: which work, and what doctor, a plan and
`why` say of them (cudatx.loader.roots.FrameworkRun).

Each root is replayed in every context of its framework (its reader's, cudatx.discover.
frameworks): the
primary one (the process the framework's own documentation sets up: JAX's plugin after its
preloads, onnxruntime's provider after `preload_dlls()`, CuPy's modules after
cuda-pathfinder) is one of `Environment.loads` and counts as any import does; the others
(after `import torch`, onnxruntime alone) are `Environment.context_loads`, compared here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from cudatx.analysis import cuda
from cudatx.analysis.problems import Problem, Severity, short
from cudatx.environment import Environment
from cudatx.loader.process import LoadResult
from cudatx.loader.roots import FrameworkRun, PackageContext
from cudatx.models import Evidence, Frozen, Resolution, Status

_MET = (Status.RESOLVED, Status.SYSTEM)


class ContextState(Frozen):
    """Whether one framework root loads in one context."""

    framework: str
    root: str
    label: str  # "onnxruntime's CUDA provider"
    context: str  # "after `import torch`"
    primary: bool
    expected: bool
    works: bool
    failing: str | None = None  # the first need that fails, as "libcurand.so.10 not found"
    unavailable: bool = False  # an optional module whose library nothing here installs
    module: bool = False  # the root is an extension module imported when first used (CuPy's)


class ContextChange(Frozen):
    """A context a plan changes: worked before and not after (`after` False), or one that
    is gone with what it needed (`after` None: torch removed)."""

    framework: str
    root: str
    label: str
    context: str
    before: bool
    after: bool | None
    failing: str | None = None
    still: tuple[str, ...] = ()  # the contexts the root still loads in after the change

    @property
    def breaks(self) -> bool:
        """A context that stays and fails, or the last one the root loaded in, gone."""
        return self.before and (self.after is False or not self.still)

    def sentence(self) -> str:
        """ "onnxruntime's CUDA provider would load only after `import torch`"."""
        if self.after is None:
            lost = f"loads today {self.context}, which the change removes"
        else:
            lost = f"would no longer load {self.context} ({self.failing})"
        if self.still:
            return f"{self.label} {lost}; it would load only {', '.join(self.still)}"
        return f"{self.label} {lost}; it would load in none of its contexts"


def run_of(env: Environment, load: LoadResult) -> FrameworkRun | None:
    if load.framework is None:
        return None
    key = env.keys(load.root)
    return next((r for r in env.frameworks if env.keys(r.path) == key), None)


def _failing(load: LoadResult) -> Resolution | None:
    return next((r for r in load.resolutions if r.status not in _MET and r.evidence.decisive), None)


def _says(r: Resolution | None) -> str | None:
    if r is None:
        return None
    if r.missing and r.detail:
        return r.detail
    return f"{os.path.basename(r.cause or r.name)} {r.status.value}"


def unavailable(env: Environment, load: LoadResult) -> bool:
    """A root that does not load and is a feature the user does not have (doctor says so in
    a note), not an import that fails: a module of a framework whose modules are imported
    lazily, when first used (CuPy's library modules); or a feature the framework does
    without, none of whose libraries is installed here (TF's GPU check in a plain
    `tensorflow` install: `FrameworkLoads.optional_feature`). A plan still counts one that
    loaded before and does not after (`changes`)."""
    run = run_of(env, load)
    if run is None or load.ok:
        return False
    if run.loads.optional_roots:
        return True
    return run.loads.optional_feature and not any(_installed(env, r) for r in _opens(env, load))


def _opens(env: Environment, load: LoadResult) -> list[Resolution]:
    """The names the root itself opens at run time (its framework's loads, not what they
    DT_NEED in turn)."""
    key = env.keys(load.root)
    return [
        r
        for r in load.resolutions
        if r.evidence is Evidence.DLOPEN and env.keys(r.needed_by) == key
    ]


def _installed(env: Environment, r: Resolution) -> bool:
    """Whether a run-time open finds its library, or something here installs one of that
    name (found or not: a wheel in the wrong folder is an install that went wrong)."""
    return r.status in _MET or bool(env.owners.listing(os.path.basename(r.cause or r.name)))


def read_notes(env: Environment) -> list[str]:
    """One line per framework found: where its load list was read, or that it is not
    modelled and why; one per load by path a package makes that cudatx cannot read."""
    out = []
    for found, loads in env.framework_reads:
        if loads.read:
            out.append(f"{found.name} load list: {loads.origin}")
        else:
            out.append(not_modelled(found.distribution, f"{found.name}: {loads.origin}"))
    for dist, unread in env.hand_unread:  # cudatx.discover.handloads
        where = f"{short(env, unread.by)}:{unread.line}"
        out.append(not_modelled(dist, f"{where} loads {unread.what}"))
    return out


def not_modelled(name: str, why: str) -> str:
    """The note doctor and a plan give a distribution whose run-time loads cudatx does not
    read."""
    return f"not modelled: {name} ({why}); plans cannot vouch for its run-time loads"


def unavailable_notes(env: Environment) -> list[str]:
    """Doctor's notes for the lazily imported modules that do not load in their primary
    context: "cupy's module cupy_backends.cuda.libs.cutensor: needs libcutensor.so.2, which
    nothing installs", or the failure and where it loads instead."""
    out: dict[str, None] = {}
    by_root: dict[str, list[ContextState]] = {}
    for state in states(env):
        by_root.setdefault(env.keys(state.root), []).append(state)
    for found in by_root.values():
        primary = next((s for s in found if s.primary), None)
        if primary is None or not primary.unavailable:
            continue
        elsewhere = [s.context for s in found if s.works]
        load = next(ld for ld in env.loads if env.keys(ld.root) == env.keys(primary.root))
        failing = _failing(load)
        name = os.path.basename(failing.cause or failing.name) if failing else None
        if name and failing and failing.status is Status.NOT_FOUND and not env.owners.listing(name):
            why = f"needs {name}, which nothing installs"
        else:
            why = f"does not load {primary.context} ({primary.failing})"
        if elsewhere:
            why += f"; it loads {', '.join(elsewhere)}"
        if primary.module:
            out.setdefault(f"{primary.label} (imported when first used): {why}")
        else:
            out.setdefault(f"{primary.label}: {_absent(load)}")
    return list(out)


def _absent(load: LoadResult) -> str:
    """ "none of the libraries it opens is installed here (libcudart.so.12, ...)"."""
    names = list(dict.fromkeys(r.name for r in load.resolutions if r.evidence is Evidence.DLOPEN))
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (
        f"none of the libraries it opens is installed here ({shown}): a feature this "
        "environment does not have, not a broken install"
    )


def states(env: Environment) -> tuple[ContextState, ...]:
    """Every framework root in every context it was replayed in, primary first."""
    out = []
    for load in (*env.loads, *env.context_loads):
        run = run_of(env, load)
        if run is None:
            continue
        context = next(c for c in run.contexts if c.name == load.context)
        out.append(
            ContextState(
                framework=run.framework.name,
                root=load.root,
                label=run.label,
                context=context.name,
                primary=context.primary,
                expected=context.expected,
                works=load.ok,
                failing=None if load.ok else _says(_failing(load)),
                unavailable=unavailable(env, load),
                module=run.root.is_module,
            )
        )
    return tuple(out)


def _failing_imports(env: Environment) -> frozenset[str]:
    """The packages a context may import first whose import fails here (`import torch`):
    every context that imports one first ("after `import torch`") fails with it, which is
    that package's break and said as such."""
    first: dict[str, PackageContext] = {}
    for context in env.contexts:
        first.setdefault(context.load_list.package, context)
    failing = set()
    for package, context in first.items():
        if context.module is None:
            continue
        key = env.keys(context.module)
        if any(not ld.ok for ld in env.loads if env.keys(ld.root) == key):
            failing.add(package)
    return frozenset(failing)


def changes(env: Environment, after: Environment) -> tuple[ContextChange, ...]:
    """Contexts a root loaded in before and does not after (the root itself staying)."""
    then = {(env.keys(s.root), s.context): s for s in states(env)}
    now = {(env.keys(s.root), s.context): s for s in states(after)}
    roots_after = {root for root, _ in now}
    failing = _failing_imports(after)
    steps = {(run.framework.name, c.name): c.steps for run in env.frameworks for c in run.contexts}
    out = []
    for key, was in then.items():
        root, context = key
        if not was.works or root not in roots_after:
            continue  # failing already, or the framework itself is gone
        if not failing.isdisjoint(steps.get((was.framework, context), ())):
            continue  # `import torch` itself fails: the plan says so
        state = now.get(key)
        if state is not None and state.works:
            continue
        still = tuple(s.context for (r, _), s in now.items() if r == root and s.works)
        out.append(
            ContextChange(
                framework=was.framework,
                root=was.root,
                label=was.label,
                context=context,
                before=True,
                after=None if state is None else False,
                failing=None if state is None else state.failing,
                still=still,
            )
        )
    return tuple(out)


def role(env: Environment, r: Resolution) -> str | None:
    """What `why` says of a need a framework has: "loaded by jax_plugins/xla_cuda13
    (preload)", "needed by onnxruntime's CUDA provider (run-time root)"."""
    if r.root is None:
        return None
    key = env.keys(r.root)
    run = next((x for x in env.frameworks if env.keys(x.path) == key), None)
    if run is None:
        return None
    if r.evidence is Evidence.PRELOAD and r.needed_by == run.source:
        return f"loaded by {run.framework.name} (preload)"
    if env.keys(r.needed_by) == key:
        return f"needed by {run.label} (run-time root)"
    if r.needed_by == run.source and r.evidence is Evidence.IMPORT:
        return f"loaded by {run.framework.name} by path (run-time root)"
    module = next(
        (m for m in run.modules if m.path and env.keys(m.path) == env.keys(r.needed_by)), None
    )
    if module is not None and r.evidence is Evidence.DLOPEN and module.why:
        # "opened by jax_cuda12_plugin/_versions...so for JAX's version check"
        return f"opened by {short(env, module.path or '')} for {module.why} (run-time root)"
    return None


def doctor_findings(env: Environment) -> Iterator[Problem]:
    """Warnings: a context the framework is used in that fails while its primary one works
    (its primary failing is an error already: cudatx.analysis.broken)."""
    by_root: dict[str, list[ContextState]] = {}
    for state in states(env):
        by_root.setdefault(env.keys(state.root), []).append(state)
    for found in by_root.values():
        primary = next((s for s in found if s.primary), None)
        if primary is None or not primary.works:
            continue
        for state in found:
            if state.works or not state.expected or state.primary:
                continue
            yield Problem(
                severity=Severity.WARNING,
                code="framework-context",
                what=f"{state.label} does not load {state.context}: {state.failing}",
                why=f"it loads {primary.context}; a program that uses it {state.context} "
                "fails where that one works",
                paths=(state.root,),
            )


def mixed(env: Environment) -> Iterator[Problem]:
    """Errors: a framework's own load resolving a library of another CUDA major than its
    build (a CUDA 13 JAX loading a CUDA 12 cuDNN from nvidia/cudnn/lib)."""
    seen: set[tuple[str, str]] = set()
    classify = cuda.file_classifier(env)
    for load in (*env.loads, *env.context_loads):
        run = run_of(env, load)
        major = run.loads.build_major if run is not None else None
        if run is None or major is None:
            continue
        for r in load.resolutions:
            if r.status is not Status.RESOLVED or r.path is None:
                continue
            if r.needed_by != run.source and env.keys(r.needed_by) != env.keys(run.path):
                continue  # torch's own loads, in the after-torch context: torch's to report
            found = classify(r.path, env.view.probe(r.path).info)
            key = (run.framework.name, env.keys(r.path))
            if found is None or found.major == major or key in seen:
                continue
            seen.add(key)
            yield Problem(
                severity=Severity.ERROR,
                code="framework-mixed-cuda-major",
                what=f"{run.label} (CUDA {major}) {load.context} resolves "
                f"{os.path.basename(r.name)} to a CUDA {found.major} build",
                why=f"{short(env, r.path)}: {found.reason}",
                paths=(env.keys(r.path),),
                distributions=tuple(d.name for d in env.owners_of(r.path)),
            )
