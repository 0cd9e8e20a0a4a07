"""A plan is a diff: every edge resolved before and after the simulated change.

Edges satisfied before and not after are broken; edges whose provider changes (another
file, or other bytes at the same path) are rebound; a rebinding that leaves torch resolving
a library built for another CUDA major is a break too; Requires-Dist that stop being met
are broken requirements. What was already broken before is reported apart and never makes
a plan unsafe.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Set
from dataclasses import dataclass, replace

from cudatx.analysis import coverage, frameworks, observed, optional
from cudatx.analysis.broken import already_broken
from cudatx.analysis.cuda import Mixed, cuda_major_of_file, mixed_majors
from cudatx.analysis.frameworks import ContextChange
from cudatx.analysis.ownership import (
    byte_owners,
    is_code_file,
    lost,
    same_bytes,
    system_package,
)
from cudatx.analysis.problems import Problem
from cudatx.discover.owners import owner_of
from cudatx.environment import Environment
from cudatx.loader.process import LoadResult
from cudatx.models import Distribution, Evidence, Resolution
from cudatx.paths import soname_stem
from cudatx.planning.models import (
    MET,
    Broken,
    BrokenRoot,
    Cured,
    Loss,
    NameVersion,
    Plan,
    Preexisting,
    Rebound,
    RequirementBroken,
    TraceRun,
    arriving_of,
    name_version,
)
from cudatx.planning.requirements import requirements_diff
from cudatx.planning.simulate import arrivals, kept_keys, record_keys


def _edges(env: Environment) -> dict[tuple[str, str, str, Evidence], Resolution]:
    """Every need of every root and of every traced run's process, keyed the same way
    before and after a change."""
    out: dict[tuple[str, str, str, Evidence], Resolution] = {}
    for load in (*env.loads, *env.observed):
        for r in load.resolutions:
            name = env.keys(r.name) if "/" in r.name else r.name
            out.setdefault((env.keys(load.root), env.keys(r.needed_by), name, r.evidence), r)
    return out


def _owner_names(env: Environment, path: str | None) -> tuple[str, ...]:
    return tuple(d.name for d in env.owners_of(path)) if path else ()


def _dist_of(env: Environment, path: str, arriving: Set[str] | None = None) -> str | None:
    """The first owner of `path`; an arriving one if the simulated install writes it."""
    owners = _owner_names(env, path)
    if arriving and env.view.real(path) != path:
        owners = tuple(n for n in owners if n in arriving) or owners
    return owners[0] if owners else None


def _reason(env: Environment, before: Resolution, after: Resolution, removed: Set[str]) -> str:
    owners = env.owners_of(before.path) if before.path else ()
    deleting = [d.name for d in owners if d.name in removed]
    staying = [d for d in owners if d.name not in removed]
    # Where the loader then finds another file that fails glibc's checks, its message too.
    then = f"; then {after.detail}" if after.missing and after.detail else ""
    if deleting and staying:
        stay = ", ".join(d.name for d in staying)
        lists = ", ".join(f"{d.name}'s {owner_of(d).listing}" for d in staying)
        return (
            f"deleted with {', '.join(deleting)}; {lists} lists the same path "
            f"(shared path), so {stay} would be left hollow{then}"
        )
    if deleting:
        return f"deleted with {', '.join(deleting)}{then}"
    if after.missing:  # found, but without a version or symbol it had before
        return after.detail or "a version or symbol is missing"
    return f"no longer found: {after.detail or after.status.value}"


_Key = tuple[str, str, str, Evidence]  # (root, needed by, name, evidence): one edge
_Group = tuple[str, str, Evidence]  # (needed by, name, evidence): one finding, whatever root
_Needs = dict[_Group, tuple[Broken, list[str]]]  # a broken need, and the roots that had it


@dataclass(frozen=True)
class _Change:
    """The distributions a change moves, by name, and the files it writes."""

    arriving: frozenset[str]  # staged: installed, or reinstalled from their wheels' bytes
    removed: frozenset[str]  # gone after it, none of their files installed again
    written: Set[str]  # the keys of paths the change installs files at


@dataclass(frozen=True)
class _Edges:
    """Every edge before and after the change, keyed alike, and the roots that failed before."""

    old: dict[_Key, Resolution]
    new: dict[_Key, Resolution]
    failed_before: frozenset[str]


@dataclass(frozen=True)
class _Rebindings:
    """What becomes of the edges met before: those failing after, those that change provider."""

    broken: _Needs
    rebound: dict[_Group, Rebound]


@dataclass(frozen=True)
class _Roots:
    """Imports that fail after the change; the optional modules (cudatx.analysis.optional)
    and the notes of those that stop loading."""

    broken: tuple[BrokenRoot, ...]
    features: frozenset[str]
    lost_features: tuple[str, ...]


@dataclass(frozen=True)
class _Requirements:
    """The Requires-Dist counted against the change, and the plan's notes so far."""

    broken: tuple[RequirementBroken, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class _Verdict:
    """Whether the change is safe, and what beside its broken needs decides it."""

    safe: bool
    mixed: tuple[Mixed, ...]  # torch resolving a library of another CUDA major, new ones
    mixed_before: tuple[Mixed, ...]
    contexts: tuple[ContextChange, ...]


def diff(
    env: Environment,
    after: Environment,
    removing: tuple[Distribution, ...],
    reinstalling: tuple[Distribution, ...],
    check_requirements: bool,
    installing: tuple[Distribution, ...] = (),
    *,
    restaged: tuple[Distribution, ...] = (),
    strict: bool = False,
    no_deps: bool = False,
) -> Plan:
    """`installing`: the staged distributions arriving; `restaged`: the staged copies of
    `reinstalling`, where the simulation put their wheels' bytes (an exact repair)."""
    change = _change_of(env, removing, reinstalling, (*installing, *restaged))
    edges = _edges_of(env, after)
    rebindings = _rebindings(env, after, edges, change)
    broken = _new_failures(env, after, edges, rebindings.broken, change)
    roots = _broken_roots(env, after, change)
    required = _requirements(
        env, after, (*removing, *reinstalling), installing, check_requirements, no_deps
    )
    needs, at_risk = _needs(env, broken, roots.features)
    losses = _losses(env, after, removing, reinstalling, (*installing, *restaged), change.written)
    verdict = _verdict(env, after, needs, at_risk, roots, required, losses, strict=strict)
    # What was broken before is exactly what doctor reports as errors: the same findings;
    # those a safe change leaves the environment without, it cures. (An unsafe one may end
    # an error only by taking away what had it: that is no cure.)
    preexisting, cures = _preexisting(env, after, verdict.mixed_before, judge=verdict.safe)
    return Plan(
        at_risk=at_risk,
        strict=strict,
        left_hollow=tuple(NameVersion(name=x.name, version=x.version) for x in losses if x.missing),
        overwritten=tuple(
            NameVersion(name=x.name, version=x.version) for x in losses if not x.missing
        ),
        losses=losses,
        mixed=verdict.mixed,
        contexts=verdict.contexts,
        prefix=env.target.prefix,
        safe=verdict.safe,
        remove=tuple(name_version(d) for d in removing),
        reinstall=tuple(arriving_of(d) for d in reinstalling),
        install=tuple(arriving_of(d) for d in installing),
        broken=needs,
        broken_roots=roots.broken,
        rebound=tuple(rebindings.rebound.values()),
        requirements_broken=required.broken,
        requirements_checked=check_requirements,
        preexisting=preexisting,
        cures=cures,
        repair=None,
        notes=(*required.notes, *roots.lost_features),
        traces=_trace_runs(env),
    )


def _change_of(
    env: Environment,
    removing: tuple[Distribution, ...],
    reinstalling: tuple[Distribution, ...],
    staged: tuple[Distribution, ...],
) -> _Change:
    """`staged`: the distributions whose wheels the simulation installed."""
    arriving = frozenset(d.name for d in staged)
    return _Change(
        arriving=arriving,
        removed=frozenset({d.name for d in removing} - {d.name for d in reinstalling} - arriving),
        written=arrivals(env, staged).keys(),
    )


def _edges_of(env: Environment, after: Environment) -> _Edges:
    old = _edges(env)
    # Not replayed (cudatx.planning.simulate): the same. Both tuples are compared, for an
    # environment without extension modules has the one empty tuple before and after.
    replayed = after.loads is not env.loads or after.observed is not env.observed
    return _Edges(
        old=old,
        new=_edges(after) if replayed else old,
        # An import that already failed cannot be broken by the plan: its needs are not blamed.
        failed_before=frozenset(env.keys(ld.root) for ld in env.loads if not ld.ok),
    )


def _rebindings(
    env: Environment, after: Environment, edges: _Edges, change: _Change
) -> _Rebindings:
    """The edges met before that fail after, or resolve to another provider."""
    broken: _Needs = {}
    rebound: dict[_Group, Rebound] = {}
    for key, b in edges.old.items():
        root, needer, name, evidence = key
        a = edges.new.get(key)
        if b.status not in MET:
            continue  # already broken: doctor's finding, counted apart below
        if root in edges.failed_before:
            continue
        if a is None:
            continue  # its needer is gone, or not loaded since something above it broke
        if evidence is Evidence.OBSERVED and _leaves_with_its_package(env, b, change.removed):
            continue
        group = (needer, name, evidence)
        if a.status not in MET:
            if group not in broken:
                broken[group] = (_lost_need(env, after, b, a, change.removed), [])
            broken[group][1].append(root)
        elif a.path and b.path and group not in rebound:
            found = _rebound(env, after, b, a, change.arriving)
            if found is not None:
                rebound[group] = found
    return _Rebindings(broken=broken, rebound=rebound)


def _lost_need(
    env: Environment, after: Environment, b: Resolution, a: Resolution, removed: Set[str]
) -> Broken:
    """A need met before (`b`) that fails after (`a`)."""
    return Broken(
        soname=os.path.basename(b.name),
        needed_by=b.needed_by,
        needed_by_dist=_dist_of(env, b.needed_by),
        evidence=b.evidence,
        provider=b.path,
        provider_owners=_owner_names(env, b.path),
        reason=_reason(env, b, a, removed),
        roots=(),
        missing=a.missing,
        system_package=system_package(after, a.path) if a.missing else None,
    )


def _rebound(
    env: Environment, after: Environment, b: Resolution, a: Resolution, arriving: Set[str]
) -> Rebound | None:
    """A need met before (`b`) and after (`a`, both with a path) by another provider; None
    where the provider stays."""
    assert a.path is not None and b.path is not None
    same = env.keys(a.path) == env.keys(b.path)
    real = after.view.real(a.path)
    # A staged file at the same path rebinds only if its bytes differ: reinstalling a
    # distribution over its own bytes changes nothing the loader sees.
    replaced = same and real != a.path and not same_bytes(env, a.path, real)
    if same and not replaced:
        return None
    major = cuda_major_of_file(after, a.path, after.view.probe(a.path).info)
    major_before = cuda_major_of_file(env, b.path, env.view.probe(b.path).info)
    owners = _owner_names(after, a.path)
    if replaced:  # other bytes at the same path: they are the arriving owner's
        owners = tuple(n for n in owners if n in arriving) or owners
    return Rebound(
        soname=os.path.basename(b.name),
        needed_by=b.needed_by,
        needed_by_dist=_dist_of(env, b.needed_by),
        evidence=b.evidence,
        provider_before=b.path,
        provider_after=a.path,
        provider_before_owners=byte_owners(env, b.path),
        provider_after_owners=owners,
        cuda_major_before=major_before.major if major_before else None,
        cuda_major_after=major.major if major else None,
    )


def _new_failures(
    env: Environment, after: Environment, edges: _Edges, broken: _Needs, change: _Change
) -> _Needs:
    """`broken` with the needs that did not exist before and fail after added."""
    out: _Needs = {group: (b, [*roots]) for group, (b, roots) in broken.items()}
    old = edges.old
    # A need that did not exist before and fails now is broken, unless the same object
    # already failed the same library of another version (libnvrtc.so.13 before, .12 after:
    # a rebuilt cuDNN asks for its own CUDA major; nothing was lost).
    # Likewise a versionless .rodata name ("libcudnn.so") that a loaded libcudnn.so.9 used to
    # answer fails now only because that library broke, which is already reported.
    failing_stems = {
        (k[0], k[1], soname_stem(k[2]), k[3]) for k, r in old.items() if r.status not in MET
    }
    # A root that did not exist before (an arriving extension) replays libraries other roots
    # loaded already: a need of theirs that failed before under another root is not new.
    failing_anywhere = {
        (k[1], soname_stem(k[2]), k[3]) for k, r in old.items() if r.status not in MET
    }
    roots_then = {k[0] for k in old}
    broken_stems = {soname_stem(b.soname) for b, _ in broken.values()}
    for key, a in edges.new.items():
        if key not in old and a.status not in MET:
            root, needer, name, evidence = key
            if (
                root in edges.failed_before
                or (root, needer, soname_stem(name), evidence) in failing_stems
                or (
                    root not in roots_then
                    and (needer, soname_stem(name), evidence) in failing_anywhere
                )
            ):
                continue
            if evidence is Evidence.DLOPEN_STRING and soname_stem(name) in broken_stems:
                continue
            group = (needer, name, evidence)
            entry = out.setdefault(group, (_new_need(after, a, change.arriving), []))
            entry[1].append(root)
    return out


def _new_need(after: Environment, a: Resolution, arriving: Set[str]) -> Broken:
    """A need that did not exist before the change and fails after it (`a`)."""
    return Broken(
        soname=os.path.basename(a.name),
        needed_by=a.needed_by,
        needed_by_dist=_dist_of(after, a.needed_by, arriving),
        evidence=a.evidence,
        provider=None,
        provider_owners=(),
        reason=a.detail
        if a.missing and a.detail
        else f"a new need after rebinding: {a.detail or a.status.value}",
        roots=(),
        missing=a.missing,
        system_package=system_package(after, a.path) if a.missing else None,
    )


def _broken_roots(env: Environment, after: Environment, change: _Change) -> _Roots:
    """The imports that load before (or arrive) and fail after the change."""
    roots_before = {env.keys(ld.root): ld for ld in env.loads}
    # A module no top-level import loads (cudatx.analysis.optional: numba's TBB layer, a
    # module only a function imports) that stops loading is a feature lost, said in a note;
    # it makes no plan unsafe. A framework's modules keep their contexts' verdicts.
    features = frozenset(
        env.keys(ld.root)
        for ld in after.loads
        if ld.framework is None and optional.not_imported(after, ld)
    )
    lost_features: list[str] = []
    broken_roots = []
    for load in after.loads:
        was = roots_before.get(env.keys(load.root))
        if was is not None and not was.ok:
            continue
        if env.keys(load.root) in features:
            if was is not None:
                lost_features.append(optional.lost(after, load))
            continue
        # An arriving extension module that would fail is a failing import as much as an
        # installed one: one shape for both.
        if not load.ok:
            broken_roots.append(_broken_root(after, load, change.arriving))
    return _Roots(broken=tuple(broken_roots), features=features, lost_features=tuple(lost_features))


def _broken_root(after: Environment, load: LoadResult, arriving: Set[str]) -> BrokenRoot:
    run = frameworks.run_of(after, load)
    first = glibc_first(
        r for r in load.resolutions if r.evidence in (Evidence.IMPORT, Evidence.DT_NEEDED)
    )
    if first is None and run is not None:  # a hand load, or the root's own dlopen
        first = glibc_first(r for r in load.resolutions if r.evidence.decisive)
    return BrokenRoot(
        root=load.root,
        dist=_dist_of(after, load.root, arriving),
        first_missing=os.path.basename(first.cause or first.name) if first else "a preload",
        detail=first.detail if first and first.missing else None,
        missing=first.missing if first else (),
        framework=run.label if run is not None else None,
        context=load.context,
        importer=_importer(after, load.root),
    )


def _requirements(
    env: Environment,
    after: Environment,
    leaving: tuple[Distribution, ...],
    installing: tuple[Distribution, ...],
    check_requirements: bool,
    no_deps: bool,
) -> _Requirements:
    """The requirements the change breaks, as counted, and the notes on what is not counted
    (`leaving`: the distributions removed or reinstalled)."""
    requirements = requirements_diff(env, after)
    # First: the verdict line of a plan unsafe for a reason of its notes says the last one.
    notes = [
        f"{t.record.label} (trace {t.id}) is stale: {t.stale}; its loads are not counted"
        for t in env.traces
        if t.stale is not None
    ]
    notes += coverage.plan_notes(env, frozenset(d.name for d in leaving))
    if no_deps:
        # uv was told to install only what is named: what those need is the user's to meet.
        own = {d.name for d in installing}
        for r in requirements:
            if r.dist in own:
                notes.append(f"--no-deps: {r.dist} requires {r.requirement}, not counted")
        requirements = [r for r in requirements if r.dist not in own]
    if not check_requirements:
        requirements = []
    return _Requirements(broken=tuple(requirements), notes=tuple(notes))


def _needs(
    env: Environment, broken: _Needs, features: Set[str]
) -> tuple[tuple[Broken, ...], tuple[Broken, ...]]:
    """(the broken needs that make a plan unsafe, those at risk only), each with its roots
    and the traced runs that had it."""
    traced = observed.by_root(env)
    every = [
        replace(
            b,
            roots=tuple(sorted({r for r in roots if r not in traced})),
            traces=tuple(sorted({traced[r].id for r in roots if r in traced})),
        )
        for b, roots in broken.values()
    ]
    # Needs only optional modules had (their roots all in `features`): the notes of
    # _broken_roots.
    every = [b for b in every if b.traces or not set(b.roots) <= features or not b.roots]
    # `broken` holds libraries something needs; a module Python imports is a broken root.
    edges = tuple(b for b in every if b.evidence.decisive and b.evidence is not Evidence.IMPORT)
    at_risk = tuple(b for b in every if not b.evidence.decisive)
    return edges, at_risk


def _verdict(
    env: Environment,
    after: Environment,
    needs: tuple[Broken, ...],
    at_risk: tuple[Broken, ...],
    roots: _Roots,
    required: _Requirements,
    losses: tuple[Loss, ...],
    *,
    strict: bool,
) -> _Verdict:
    """Whether the change is safe: nothing it breaks counts against it, and nothing it
    leaves (a CUDA major mixed anew, a framework's context lost) does."""
    was_mixed = mixed_majors(env)
    mixed_before = {(m.soname, env.keys(m.needed_by)) for m in was_mixed}
    mixed = tuple(
        m for m in mixed_majors(after) if (m.soname, env.keys(m.needed_by)) not in mixed_before
    )
    contexts = frameworks.changes(env, after)
    # A loss of headers, docs or data only (no module, library or executable) breaks no load
    # and no import: said, and counted only with --strict (a build may compile against
    # those headers later; cudatx vouches for loading, not for builds).
    counted_losses = [x for x in losses if x.code or strict]
    safe = not needs and not roots.broken and not required.broken and not mixed
    safe = safe and not counted_losses
    safe = safe and not any(c.breaks for c in contexts)
    safe = safe and not (strict and at_risk)
    return _Verdict(safe=safe, mixed=mixed, mixed_before=was_mixed, contexts=contexts)


def _trace_runs(env: Environment) -> tuple[TraceRun, ...]:
    return tuple(
        TraceRun(
            id=t.id,
            command=t.record.command_line,
            created=t.record.created,
            label=t.record.label,
            exit_code=t.record.exit_code,
            stale=t.stale,
        )
        for t in env.traces
    )


def _importer(env: Environment, root: str) -> str | None:
    companion = env.companion_of(root)
    return os.path.basename(companion.importer) if companion is not None else None


_SONAME = re.compile(r"(lib[\w+-]+)\.so(?:\.\d+)*")


def _stems(text: str) -> str:
    """`text` with every soname cut to its stem."""
    return _SONAME.sub(r"\1.so", text)


def glibc_first(resolutions: Iterable[Resolution]) -> Resolution | None:
    """The failure glibc's dlerror would name of a load whose every failure the replay
    found: a name not found first (elf/dl-deps.c maps every name before anything is
    checked), then a version (elf/dl-version.c, before relocation), then a symbol; the first
    of its kind in load order."""
    failed = [r for r in resolutions if r.status not in MET]
    for kind in (_NAME, _VERSION, _SYMBOL):
        found = next((r for r in failed if _kind(r) == kind), None)
        if found is not None:
            return found
    return None


_NAME, _VERSION, _SYMBOL = range(3)


def _kind(r: Resolution) -> int:
    if not r.missing:
        return _NAME
    return _VERSION if r.missing[0].startswith("`") else _SYMBOL


def _leaves_with_its_package(env: Environment, b: Resolution, removed: Set[str]) -> bool:
    """Whether a traced load leaves with the package the change removes: a dlopen by path,
    made by the interpreter's code (a Python import, or ctypes: the caller is no file of a
    distribution), of a file only distributions that leave list, each of which ships Python
    code in the import package the file lies in. The Python code that asked for that path is
    then the leaving package's own (`os.path.dirname(__file__)`, its import: torch's `_C.so`)
    and goes with it; whether something that stays imports that package is the
    requirements' question. A trace does not say which Python code made the call, so a file
    of a library-only wheel (the NVIDIA wheels: empty `__init__.py` files) counts as loaded
    by someone else's code (torch's preloads), which may stay; so does a load by name, or
    one made by a file of a package that stays."""
    if "/" not in b.name or b.path is None or env.owners_of(b.needed_by):
        return False
    owners = env.owners_of(b.path)
    if not owners or any(d.name not in removed for d in owners):
        return False
    return all(_ships_code_beside(d, b.path) for d in owners)


def _ships_code_beside(dist: Distribution, path: str) -> bool:
    """Whether `dist` lists a non-empty .py file under the top-level folder of its site that
    holds `path`."""
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(dist.site))
    top = relative.split(os.sep, 1)[0]
    if top in (os.curdir, os.pardir) or os.sep not in relative:
        return False
    return any(
        e.path.startswith(top + "/") and e.path.endswith(".py") and e.size != 0
        for e in dist.records
    )


def _losses(
    env: Environment,
    after: Environment,
    removing: tuple[Distribution, ...],
    reinstalling: tuple[Distribution, ...],
    arriving: tuple[Distribution, ...],
    written: Set[str],
) -> tuple[Loss, ...]:
    """Distributions that stay while the change deletes files their RECORD lists, or leaves
    other bytes there (`written`: the keys of paths the change installs files at). Paths a
    staying distribution lists with the same hash are kept (kept_keys): no loss."""
    deleted: set[str] = set()
    for dist in removing:
        deleted |= record_keys(env, dist)
    changed = (deleted - kept_keys(env, removing)) | set(written)
    gone = {d.name for d in (*removing, *reinstalling, *arriving)}
    staying = {d.name for d in after.distributions}
    names = {
        n for key in changed for n in env.owners.get(key, ()) if n not in gone and n in staying
    }
    out = []
    for dist in env.distributions:
        if dist.name not in names:
            continue
        missing, other = lost(env, after, dist, changed)
        if missing or other:
            out.append(
                Loss(
                    name=dist.name,
                    version=dist.version,
                    missing=tuple(missing),
                    other_bytes=tuple(other),
                    imports=_imports(env, dist, missing),
                    code=any(
                        is_code_file(env.view.real(os.path.join(dist.site, p)))
                        for p in (*missing, *other)
                    ),
                )
            )
    return tuple(out)


def _imports(env: Environment, dist: Distribution, paths: list[str]) -> tuple[str, ...]:
    """The modules whose import a lost file breaks, outermost only: `cv2/__init__.py` and
    `cv2/cv2.abi3.so` give `cv2`. A Python file is a module, a shared library only where it
    is an extension module (a load root: it defines its PyInit_ function); a library the
    loader maps, a header or data is none."""
    roots = {env.keys(r) for r in env.roots}
    found: set[str] = set()
    for path in paths:
        if path.startswith("../"):
            continue
        folder, _, name = path.rpartition("/")
        if not name.endswith(".py") and env.keys(os.path.join(dist.site, path)) not in roots:
            continue
        stem = name.split(".", 1)[0]
        parts = [p for p in folder.split("/") if p]
        if stem != "__init__":
            parts.append(stem)
        if parts and all(p.isidentifier() for p in parts):
            found.add(".".join(parts))
    outer = {m for m in found if not any(m.startswith(o + ".") for o in found)}
    return tuple(sorted(outer))


def _preexisting(
    env: Environment, after: Environment, mixed: tuple[Mixed, ...], *, judge: bool
) -> tuple[tuple[Preexisting, ...], tuple[Cured, ...]]:
    """(what doctor reports now and the change leaves, what it reports now and the change
    cures). The environment after is judged only with `judge` and something to cure.

    A finding stays where the environment after has one of the same code about the same
    distributions, or saying the same of a library of the same stem (libnvrtc.so.12 missing
    before, libnvrtc.so.13 after: a cuDNN of the other major asks for its own)."""
    now = already_broken(env, mixed=mixed)
    if not now or not judge:
        return tuple(Preexisting(kind=p.code, what=p.what) for p in now), ()
    then = already_broken(after)
    left = {(p.code, _stems(p.what)) for p in then}
    left |= {(p.code, ",".join(p.distributions)) for p in then if p.distributions}
    stays: list[Problem] = []
    cured: list[Problem] = []
    for p in now:
        same = (p.code, _stems(p.what)) in left or (p.code, ",".join(p.distributions)) in left
        (stays if same else cured).append(p)
    return (
        tuple(Preexisting(kind=p.code, what=p.what) for p in stays),
        tuple(Cured(kind=p.code, what=p.what) for p in cured),
    )
