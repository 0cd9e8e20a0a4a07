"""The planner: what removing, installing or upgrading distributions would break, before
anything is touched.

A plan is a diff (design.md section 3). The environment is replayed twice: as it is, and
through an overlay in which every path the removed distributions' RECORDs list is gone,
co-owned paths included, because that is what uv and pip delete, and every file an
arriving distribution writes holds its staged bytes (cudatx.stage), because uv writes over
whatever is there. Edges satisfied before and not after are broken; edges whose provider
changes (another file, or other bytes at the same path) are rebound; a rebinding that
leaves torch resolving a library built for another CUDA major is a break too; Requires-Dist
that stop being met are broken requirements. What was already broken before is reported
apart and never makes a plan unsafe.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Set

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudatx import confine
from cudatx.dists import applicable_requirements
from cudatx.facts import Mixed
from cudatx.fsview import OverlayView
from cudatx.models import Distribution, Evidence, Frozen, Resolution, Status
from cudatx.scan import Environment, Owners, extension_roots, load_roots

SCHEMA_VERSION = 1
_MET = (Status.RESOLVED, Status.SYSTEM)


class NameVersion(Frozen):
    name: str
    version: str


class Broken(Frozen):
    soname: str
    needed_by: str
    needed_by_dist: str | None
    evidence: Evidence
    provider: str | None  # the file that met the need before
    provider_owners: tuple[str, ...]
    reason: str
    roots: tuple[str, ...]


class BrokenRoot(Frozen):
    root: str
    dist: str | None
    first_missing: str


class Rebound(Frozen):
    soname: str
    needed_by: str
    needed_by_dist: str | None
    evidence: Evidence
    provider_before: str
    provider_after: str
    provider_after_owners: tuple[str, ...]
    cuda_major_after: int | None


class RequirementBroken(Frozen):
    dist: str
    requirement: str


class Preexisting(Frozen):
    kind: str  # "edge", "root" or "requirement"
    what: str


class Repair(Frozen):
    reinstall: tuple[NameVersion, ...]
    safe: bool


class Plan(Frozen):
    schema_version: int = SCHEMA_VERSION
    prefix: str
    safe: bool
    remove: tuple[NameVersion, ...]
    reinstall: tuple[NameVersion, ...]
    install: tuple[NameVersion, ...] = ()  # arriving (new, or the new version of an upgrade)
    broken: tuple[Broken, ...]
    broken_roots: tuple[BrokenRoot, ...]
    rebound: tuple[Rebound, ...]
    requirements_broken: tuple[RequirementBroken, ...]
    requirements_checked: bool
    left_hollow: tuple[NameVersion, ...]  # stay, but lose files their RECORD lists (shared paths)
    # stay, but arriving files replace bytes their RECORD lists (shared paths): the path's
    # effective owner changes
    overwritten: tuple[NameVersion, ...] = ()
    mixed: tuple[Mixed, ...] = ()  # torch would resolve a library built for another CUDA major
    preexisting: tuple[Preexisting, ...]
    repair: Repair | None  # a repair that would help, when the plan does not include it
    notes: tuple[str, ...]


def _nv(dist: Distribution) -> NameVersion:
    return NameVersion(name=dist.name, version=dist.version)


def _record_keys(env: Environment, dist: Distribution) -> set[str]:
    keys = {env.keys(os.path.join(dist.site, e.path)) for e in dist.records}
    keys.add(env.keys(dist.metadata_dir))
    return keys


def simulate(
    env: Environment,
    removed: tuple[Distribution, ...],
    restored: tuple[Distribution, ...] = (),
    arriving: tuple[Distribution, ...] = (),
) -> Environment:
    """The environment after uninstalling `removed`, then reinstalling `restored`, then
    installing `arriving` (staged distributions: their `site` is the staging folder)."""
    from cudatx.stage import relocate

    gone: set[str] = set()
    for dist in removed:
        gone |= _record_keys(env, dist)
    for dist in restored:
        gone -= _record_keys(env, dist)
    site = env.target.site_packages[0]
    arrivals = _arrivals(env, arriving)
    gone -= arrivals.keys()
    names = {d.name for d in removed} - {d.name for d in restored}
    remaining = tuple(d for d in env.distributions if d.name not in names)
    remaining += tuple(relocate(d, site) for d in arriving)
    roots = [r for r in env.roots if env.keys(r) not in gone]
    known = {env.keys(r) for r in roots}
    roots += [
        r for r in extension_roots(arrivals, env.target, env.view) if env.keys(r) not in known
    ]
    after = dataclasses.replace(
        env,
        distributions=remaining,
        # Arrivals change who lists which path: index afresh. Otherwise the scan's index,
        # less what leaves.
        owners=Owners(remaining, env.keys) if arriving else env.owners.without(frozenset(names)),
        roots=tuple(roots),
    )
    view = OverlayView(env.view, frozenset(gone), env.keys, arrivals)
    if not arriving and _replay_unchanged(env, view, names):
        return dataclasses.replace(after, view=view)
    return load_roots(after, view)


def _replay_unchanged(env: Environment, view: OverlayView, removed: set[str]) -> bool:
    """Whether replaying on `view` must give what `env` holds, so it need not be done again.

    A replay reads files (through the view: probes, .rodata names, globs), the owners of
    the objects it maps (their CUDA major) and the packages that preload (torch). If the
    change deletes no file the first replay found and removes none of those distributions,
    the second replay would read the same answers and say the same (typical of removing a
    pure-Python package: `cudatx remove six`)."""
    if isinstance(env.view, OverlayView):
        return False  # only the scan's own view records what its replay read
    found = env.view.found()
    if any(view.gone(path) for path in found):
        return False
    if any(c.load_list.distribution in removed for c in env.contexts):
        return False
    return not any(name in removed for path in found for name in env.owners.get(env.keys(path), ()))


def _edges(env: Environment) -> dict[tuple[str, str, str, Evidence], Resolution]:
    """Every need of every root, keyed the same way before and after a change."""
    out: dict[tuple[str, str, str, Evidence], Resolution] = {}
    for load in env.loads:
        for r in load.resolutions:
            name = env.keys(r.name) if "/" in r.name else r.name
            out.setdefault((env.keys(load.root), env.keys(r.needed_by), name, r.evidence), r)
    return out


def _stem(name: str) -> str:
    return os.path.basename(name).split(".so", 1)[0]


def _owner_names(env: Environment, path: str | None) -> tuple[str, ...]:
    return tuple(d.name for d in env.owners_of(path)) if path else ()


def _dist_of(env: Environment, path: str, arriving: set[str] | None = None) -> str | None:
    """The first owner of `path`; an arriving one if the simulated install writes it."""
    owners = _owner_names(env, path)
    if arriving and env.view.real(path) != path:
        owners = tuple(n for n in owners if n in arriving) or owners
    return owners[0] if owners else None


def _reason(env: Environment, before: Resolution, after: Resolution, removed: set[str]) -> str:
    owners = _owner_names(env, before.path)
    deleting = [o for o in owners if o in removed]
    staying = [o for o in owners if o not in removed]
    if deleting and staying:
        stay = ", ".join(staying)
        return (
            f"deleted with {', '.join(deleting)}; {stay}'s RECORD lists the same path "
            f"(shared path), so {stay} would be left hollow"
        )
    if deleting:
        return f"deleted with {', '.join(deleting)}"
    return f"no longer found: {after.detail or after.status.value}"


# (canonical name, requirement text, specifier) of one distribution's applicable
# Requires-Dist, parsed once per plan: marker evaluation is most of their cost.
_Parsed = tuple[tuple[str, str, SpecifierSet], ...]


def _parsed(dist: Distribution, markers: dict[str, str], memo: dict[str, _Parsed]) -> _Parsed:
    found = memo.get(dist.metadata_dir)
    if found is None:
        found = memo[dist.metadata_dir] = tuple(
            (canonicalize_name(r.name), str(r), r.specifier)
            for r in applicable_requirements(dist, markers)
        )
    return found


def _why_unmet(name: str, specifier: SpecifierSet, versions: dict[str, str]) -> str | None:
    if name not in versions:
        return "is not installed"
    if not specifier:
        return None
    try:
        met = specifier.contains(Version(versions[name]), prereleases=True)
    except InvalidVersion:
        met = True  # a legacy version string: packaging cannot compare it, nor can we
    return None if met else f"is installed at {versions[name]}"


# The name a Requires-Dist line starts with (PEP 508), read without parsing the line.
_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _naming(dist: Distribution, names: set[str]) -> Distribution:
    """`dist` with only the Requires-Dist lines that may name one of `names` (a line whose
    name cannot be read this way is kept, to be parsed)."""

    def may_name(text: str) -> bool:
        match = _NAME.match(text)
        return match is None or canonicalize_name(match.group(1)) in names

    return dist.model_copy(update={"requires": tuple(filter(may_name, dist.requires))})


def _unmet_before(env: Environment, memo: dict[str, _Parsed]) -> dict[tuple[str, str], str]:
    """(dist, requirement) -> why, for every applicable Requires-Dist not met now.

    Parsing and evaluating every Requires-Dist of a torch environment takes 30 ms, the same
    on every run of the same installed set: the answer is kept in the scan cache, keyed by
    that set (names, versions, metadata folders, Requires-Dist lines) and the markers."""
    markers = env.target.markers
    cache = env.view.cache
    state = ""
    if cache is not None:
        facts: list[object] = [sorted(markers.items())]
        facts += [[d.name, d.version, d.metadata_dir, *d.requires] for d in env.distributions]
        state = hashlib.sha256(json.dumps(facts).encode()).hexdigest()
        text = cache.get("unmet", env.target.prefix, state)
        if text is not None:
            try:
                return {(d, r): why for d, r, why in json.loads(text)}
            except (TypeError, ValueError):
                cache.invalid()
    versions = {d.name: d.version for d in env.distributions}
    out: dict[tuple[str, str], str] = {}
    for dist in env.distributions:
        for name, text, specifier in _parsed(dist, markers, memo):
            why = _why_unmet(name, specifier, versions)
            if why is not None:
                out[(dist.name, text)] = why
    if cache is not None:
        cache.put("unmet", env.target.prefix, state, json.dumps([[*k, v] for k, v in out.items()]))
    return out


def _requirements(
    env: Environment, after: Environment
) -> tuple[list[RequirementBroken], list[str]]:
    """Requirements met before and not after (broken), and those already unmet before.

    After the change, only what can have changed is evaluated again: the requirements of
    arriving distributions, and those naming a distribution that leaves or changes version.
    """
    markers = env.target.markers
    memo: dict[str, _Parsed] = {}
    old = {d.name: d.version for d in env.distributions}
    new = {d.name: d.version for d in after.distributions}
    changed = {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)}
    before = _unmet_before(env, memo)
    staying = {d.metadata_dir for d in env.distributions}
    broken = []
    for dist in after.distributions:
        stays = dist.metadata_dir in staying and dist.name not in changed
        # What stays is met or not as before, but where it names what changed.
        reading = _naming(dist, changed) if stays else dist
        for name, text, specifier in _parsed(reading, markers, {} if stays else memo):
            if (dist.name, text) in before:
                continue
            if _why_unmet(name, specifier, new) is not None:
                broken.append(RequirementBroken(dist=dist.name, requirement=text))
    # Only what stays: a requirement of a distribution that leaves, or that arrives in
    # another version, is not the environment's any more.
    already = [
        f"{dist} requires {text}, which {why}"
        for (dist, text), why in before.items()
        if dist in new and new[dist] == old[dist]
    ]
    return broken, already


def diff(
    env: Environment,
    after: Environment,
    removing: tuple[Distribution, ...],
    reinstalling: tuple[Distribution, ...],
    check_requirements: bool,
    installing: tuple[Distribution, ...] = (),
) -> Plan:
    from cudatx.facts import cuda_major_of_file, mixed_majors

    arriving = {d.name for d in installing}
    written = _arrivals(env, installing).keys()
    removed = {d.name for d in removing} - {d.name for d in reinstalling} - arriving
    old = _edges(env)
    new = old if after.loads is env.loads else _edges(after)  # not replayed: the same
    # An import that already failed cannot be broken by the plan: its needs are not blamed.
    failed_before = {env.keys(ld.root) for ld in env.loads if not ld.ok}
    broken: dict[tuple[str, str, Evidence], tuple[Broken, list[str]]] = {}
    rebound: dict[tuple[str, str, Evidence], Rebound] = {}
    preexisting: dict[str, Preexisting] = {}
    for key, b in old.items():
        root, needer, name, evidence = key
        a = new.get(key)
        if b.status not in _MET:
            what = f"{b.name} {b.status.value} for {needer}"
            preexisting.setdefault(what, Preexisting(kind="edge", what=what))
            continue
        if root in failed_before:
            continue
        if a is None:
            continue  # its needer is gone, or not loaded since something above it broke
        group = (needer, name, evidence)
        if a.status not in _MET:
            if group not in broken:
                broken[group] = (
                    Broken(
                        soname=os.path.basename(b.name),
                        needed_by=b.needed_by,
                        needed_by_dist=_dist_of(env, b.needed_by),
                        evidence=evidence,
                        provider=b.path,
                        provider_owners=_owner_names(env, b.path),
                        reason=_reason(env, b, a, removed),
                        roots=(),
                    ),
                    [],
                )
            broken[group][1].append(root)
        elif a.path and b.path and group not in rebound:
            same = env.keys(a.path) == env.keys(b.path)
            replaced = same and after.view.real(a.path) != a.path
            if same and not replaced:
                continue
            info = after.view.probe(a.path).info
            major = cuda_major_of_file(after, a.path, info)
            owners = _owner_names(after, a.path)
            if replaced:  # other bytes at the same path: they are the arriving owner's
                owners = tuple(n for n in owners if n in arriving) or owners
            rebound[group] = Rebound(
                soname=os.path.basename(b.name),
                needed_by=b.needed_by,
                needed_by_dist=_dist_of(env, b.needed_by),
                evidence=evidence,
                provider_before=b.path,
                provider_after=a.path,
                provider_after_owners=owners,
                cuda_major_after=major.major if major else None,
            )
    # A need that did not exist before and fails now is broken, unless the same object
    # already failed the same library of another version (libnvrtc.so.13 before, .12 after:
    # a rebuilt cuDNN asks for its own CUDA major; nothing was lost).
    # Likewise a versionless .rodata name ("libcudnn.so") that a loaded libcudnn.so.9 used to
    # answer fails now only because that library broke, which is already reported.
    failing_stems = {
        (k[0], k[1], _stem(k[2]), k[3]) for k, r in old.items() if r.status not in _MET
    }
    broken_stems = {_stem(b.soname) for b, _ in broken.values()}
    for key, a in new.items():
        if key not in old and a.status not in _MET:
            root, needer, name, evidence = key
            if root in failed_before or (root, needer, _stem(name), evidence) in failing_stems:
                continue
            if evidence is Evidence.DLOPEN_STRING and _stem(name) in broken_stems:
                continue
            group = (needer, name, evidence)
            entry = broken.setdefault(
                group,
                (
                    Broken(
                        soname=os.path.basename(a.name),
                        needed_by=a.needed_by,
                        needed_by_dist=_dist_of(after, a.needed_by, arriving),
                        evidence=evidence,
                        provider=None,
                        provider_owners=(),
                        reason=f"a new need after rebinding: {a.detail or a.status.value}",
                        roots=(),
                    ),
                    [],
                ),
            )
            entry[1].append(root)
    roots_before = {env.keys(ld.root): ld for ld in env.loads}
    broken_roots = []
    for load in after.loads:
        was = roots_before.get(env.keys(load.root))
        if was is None:
            continue
        if not was.ok:
            what = f"import of {load.root} already fails"
            preexisting.setdefault(what, Preexisting(kind="root", what=what))
            continue
        if not load.ok:
            first = next(
                (
                    r
                    for r in load.resolutions
                    if r.status not in _MET and r.evidence in (Evidence.IMPORT, Evidence.DT_NEEDED)
                ),
                None,
            )
            broken_roots.append(
                BrokenRoot(
                    root=load.root,
                    dist=_dist_of(env, load.root),
                    first_missing=os.path.basename(first.name) if first else "a preload",
                )
            )
    requirements, unmet_before = _requirements(env, after)
    for what in unmet_before:
        preexisting.setdefault(what, Preexisting(kind="requirement", what=what))
    if not check_requirements:
        requirements = []
    edges = tuple(
        b.model_copy(update={"roots": tuple(sorted(set(roots)))}) for b, roots in broken.values()
    )
    mixed_before = {(m.soname, env.keys(m.needed_by)) for m in mixed_majors(env)}
    mixed = tuple(
        m for m in mixed_majors(after) if (m.soname, env.keys(m.needed_by)) not in mixed_before
    )
    safe = not edges and not broken_roots and not requirements and not mixed
    return Plan(
        left_hollow=_left_hollow(env, removing, reinstalling, written),
        overwritten=_overwritten(env, after, removing, installing, written),
        mixed=mixed,
        prefix=env.target.prefix,
        safe=safe,
        remove=tuple(_nv(d) for d in removing),
        reinstall=tuple(_nv(d) for d in reinstalling),
        install=tuple(_nv(d) for d in installing),
        broken=edges,
        broken_roots=tuple(broken_roots),
        rebound=tuple(rebound.values()),
        requirements_broken=tuple(requirements),
        requirements_checked=check_requirements,
        preexisting=tuple(preexisting.values()),
        repair=None,
        notes=(),
    )


def _left_hollow(
    env: Environment,
    removing: tuple[Distribution, ...],
    reinstalling: tuple[Distribution, ...],
    written: Set[str],
) -> tuple[NameVersion, ...]:
    """Distributions that stay though the change deletes paths their RECORD lists too
    (`written`: the keys of paths the change installs files at)."""
    deleted = set().union(*(_record_keys(env, d) for d in removing)) - set().union(
        *(_record_keys(env, d) for d in reinstalling)
    )
    deleted -= written
    gone = {d.name for d in (*removing, *reinstalling)}
    names = {n for key in deleted for n in env.owners.get(key, ()) if n not in gone}
    return tuple(_nv(d) for d in env.distributions if d.name in names)


def _arrivals(env: Environment, installing: tuple[Distribution, ...]) -> dict[str, str]:
    """Key of each path a staged distribution installs a file at -> the staged file."""
    site = env.target.site_packages[0]
    return {
        env.keys(os.path.join(site, entry.path)): os.path.join(staged.site, entry.path)
        for staged in installing
        for entry in staged.records
    }


def _overwritten(
    env: Environment,
    after: Environment,
    removing: tuple[Distribution, ...],
    installing: tuple[Distribution, ...],
    written: Set[str],
) -> tuple[NameVersion, ...]:
    """Distributions that stay while arriving files replace bytes their RECORD lists."""
    leaving = {d.name for d in removing}
    arriving = {d.name for d in installing}
    names = {
        n
        for key in written
        for n in env.owners.get(key, ())
        if n not in leaving and n not in arriving
    }
    staying = {d.name for d in after.distributions}
    return tuple(_nv(d) for d in env.distributions if d.name in names & staying)


def _repairs(
    env: Environment, plan: Plan, removing: tuple[Distribution, ...]
) -> tuple[Distribution, ...]:
    """Distributions that stay and list a path the removal deletes: a broken need's file,
    or any other file (they would be left hollow, installed but missing part of themselves)."""
    removed = {d.name for d in removing}
    names: dict[str, None] = {n.name: None for n in plan.left_hollow}
    for b in plan.broken:
        for owner in b.provider_owners:
            if owner not in removed:
                names.setdefault(owner)
    return tuple(d for d in env.distributions if d.name in names)


def plan_removal(
    env: Environment,
    removing: tuple[Distribution, ...],
    *,
    repair: bool,
    check_requirements: bool = True,
) -> Plan:
    return plan_change(env, removing, (), repair=repair, check_requirements=check_requirements)


def plan_change(
    env: Environment,
    removing: tuple[Distribution, ...],
    installing: tuple[Distribution, ...],
    *,
    repair: bool,
    check_requirements: bool = True,
) -> Plan:
    """Plan uninstalling `removing` and installing `installing` (staged, see cudatx.stage);
    with `repair`, also reinstalling what the uninstall would leave hollow."""
    plan = _change(env, removing, installing, repair=repair, check_requirements=check_requirements)
    # RECORD entries that lead out of the environment are left alone (cudatx.confine).
    names = {p.name for p in plan.reinstall}
    touched = (*removing, *(d for d in env.distributions if d.name in names))
    notes = confine.note(confine.outside(touched, env.target.prefix))
    return plan.model_copy(update={"notes": plan.notes + notes}) if notes else plan


def _change(
    env: Environment,
    removing: tuple[Distribution, ...],
    installing: tuple[Distribution, ...],
    *,
    repair: bool,
    check_requirements: bool,
) -> Plan:
    after = simulate(env, removing, (), installing)
    plain = diff(env, after, removing, (), check_requirements, installing)
    fixes = _repairs(env, plain, removing)
    if not fixes:
        return plain
    after = simulate(env, removing, fixes, installing)
    repaired = diff(env, after, removing, fixes, check_requirements, installing)
    note = _bytes_note(env, fixes, removing)
    if repair:
        return repaired.model_copy(update={"notes": repaired.notes + note})
    return plain.model_copy(
        update={"repair": Repair(reinstall=repaired.reinstall, safe=repaired.safe)}
    )


def _bytes_note(
    env: Environment, fixes: tuple[Distribution, ...], removing: tuple[Distribution, ...]
) -> tuple[str, ...]:
    """Say so where a reinstall brings back bytes other than those on disk now."""
    from cudatx.facts import co_owned

    removing_names = {d.name for d in removing}
    fix_names = {d.name for d in fixes}
    others: dict[str, set[str]] = defaultdict(set)
    for c in co_owned(env):
        if c.effective_owner in removing_names and fix_names & {n for n, _ in c.owners}:
            others[c.effective_owner].add(c.path)
    return tuple(
        f"{len(paths)} shared paths now hold {owner}'s bytes; the reinstall restores the "
        "other owner's, which were simulated with the bytes on disk now"
        for owner, paths in others.items()
    )
