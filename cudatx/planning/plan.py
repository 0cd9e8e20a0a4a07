"""The planner: what removing, installing or upgrading distributions would break, before
anything is touched, and the repair that would restore what co-owners lose.

The environment is simulated after the change (cudatx.planning.simulate) and the two are
compared (cudatx.planning.diff). Where the removal deletes paths that a distribution which
stays lists too, reinstalling that distribution is simulated as well (`--repair`), with the
bytes of its own wheel, staged as uv would reinstall it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import replace

from cudatx.analysis.ownership import Ownership, foreign_record
from cudatx.discover.confinement import Withheld, withheld
from cudatx.discover.owners import owner_of
from cudatx.environment import Environment
from cudatx.models import Distribution, Frozen
from cudatx.names import counted
from cudatx.planning.diff import diff
from cudatx.planning.models import Plan, Repair, arriving_of, name_version
from cudatx.planning.simulate import kept_entries, record_keys, simulate
from cudatx.uv import UvFailed

Stager = Callable[[tuple[Distribution, ...]], tuple[Distribution, ...]]
"""Stages the wheels of installed distributions (cudatx.planning.stage): their copies as
uv would reinstall them, `site` the staging folder; raises UvFailed when one cannot be had."""


class PlanOptions(Frozen, kw_only=False):
    repair: bool = False  # also reinstall what the change leaves hollow
    check_requirements: bool = True  # unmet Requires-Dist count in the verdict
    strict: bool = False  # weak evidence (strings in .rodata) counts in the verdict too
    # uv's --no-deps: the arriving distributions' own Requires-Dist are the user's to meet
    no_deps: bool = False
    stage: Stager | None = None  # how a repair gets the bytes it reinstalls


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
    # uv cannot reinstall what conda installed: _foreign_notes says how conda would.
    return tuple(d for d in env.distributions if d.name in names and foreign_record(env, d) is None)


def _foreign_notes(env: Environment, plan: Plan) -> tuple[str, ...]:
    """For each package of an owner cudatx does not change (conda's) the change leaves
    hollow: cudatx does not repair it; its owner's own command restores its files."""
    out = []
    for left in plan.left_hollow:
        dist = env.distribution(left.name)
        record = foreign_record(env, dist) if dist is not None else None
        if record is None:
            continue
        owner = owner_of(record)
        command = owner.command(env.target.prefix, "install", [record], exact=True)
        out.append(
            f"{left.name} {left.version} would be left hollow; cudatx never changes "
            f"{owner.name}'s packages: after the change, {command} restores its files"
        )
    return tuple(out)


def plan_change(
    env: Environment,
    removing: tuple[Distribution, ...],
    installing: tuple[Distribution, ...],
    options: PlanOptions,
) -> Plan:
    """Plan uninstalling `removing` and installing `installing` (staged, see
    cudatx.planning.stage); with `options.repair`, also reinstalling what the uninstall
    would leave hollow."""
    plan = _change(env, removing, installing, options)
    # RECORD entries uv is not given (outside, a folder, empty...) are named (cudatx.txn.confine).
    names = {p.name for p in plan.reinstall}
    touched = (*removing, *(d for d in env.distributions if d.name in names))
    notes = _withheld_note(withheld(touched, env.target.prefix)) + _foreign_notes(env, plan)
    notes += _kept_note(env, removing)
    return replace(plan, notes=plan.notes + notes) if notes else plan


def _change(
    env: Environment,
    removing: tuple[Distribution, ...],
    installing: tuple[Distribution, ...],
    options: PlanOptions,
) -> Plan:
    checks, strict = options.check_requirements, options.strict
    no_deps = options.no_deps
    after = simulate(env, removing, (), installing)
    plain = diff(env, after, removing, (), checks, installing, strict=strict, no_deps=no_deps)
    plain = _with_replacement(env, plain, removing, installing, options)
    fixes = _repairs(env, plain, removing)
    if not fixes:
        return plain
    if not options.repair:
        # A suggestion: checked here only where the bytes the reinstall restores are the
        # ones on disk now; otherwise `--repair` stages the wheels and checks it.
        if _restores_other_bytes(env, fixes, removing):
            return replace(
                plain, repair=Repair(reinstall=tuple(map(name_version, fixes)), safe=None)
            )
        after = simulate(env, removing, fixes, installing)
        repaired = diff(
            env, after, removing, fixes, checks, installing, strict=strict, no_deps=no_deps
        )
        again = tuple(map(name_version, repaired.reinstall))
        return replace(plain, repair=Repair(reinstall=again, safe=repaired.safe))
    if options.stage is None:
        raise ValueError("a repair needs a way to stage the wheels it reinstalls")
    try:
        staged = options.stage(fixes)
    except UvFailed as exc:
        names = ", ".join(f"{d.name}=={d.version}" for d in fixes)
        note = f"the repair reinstalls {names}, whose wheels cannot be had: {exc.message}"
        return replace(
            plain,
            safe=False,
            reinstall=tuple(map(arriving_of, fixes)),
            notes=(*plain.notes, note),
        )
    # A reinstall is an uninstall and an install of the staged copy: its bytes, not the
    # ones on disk, are what the loader meets afterwards.
    after = simulate(env, (*removing, *fixes), (), (*installing, *staged))
    return diff(
        env,
        after,
        removing,
        fixes,
        checks,
        installing,
        restaged=staged,
        strict=strict,
        no_deps=no_deps,
    )


def _with_replacement(
    env: Environment,
    plan: Plan,
    removing: tuple[Distribution, ...],
    installing: tuple[Distribution, ...],
    options: PlanOptions,
) -> Plan:
    """Where arriving files would leave distributions that stay holding other bytes (a
    twin installed over its twin: the seed's mess began so), the plan that uninstalls them
    in the same transaction, suggested only where it is safe."""
    twins = {x.name for x in plan.losses if x.other_bytes}
    if not installing or not twins:
        return plan
    more = tuple(d for d in env.distributions if d.name in twins)
    gone = (*removing, *more)
    after = simulate(env, gone, (), installing)
    checks, strict, no_deps = options.check_requirements, options.strict, options.no_deps
    replaced = diff(env, after, gone, (), checks, installing, strict=strict, no_deps=no_deps)
    if not replaced.safe:
        return plan
    return replace(plan, replacing=tuple(map(name_version, more)))


def _restores_other_bytes(
    env: Environment, fixes: tuple[Distribution, ...], removing: tuple[Distribution, ...]
) -> bool:
    """Whether a fix's reinstall would put back other bytes than those on disk: a path it
    shares with what leaves holds bytes its RECORD does not name."""
    own = Ownership(env)
    leaving = set().union(*(record_keys(env, d) for d in removing))
    for fix in fixes:
        for entry in fix.records:
            key = env.keys(os.path.join(fix.site, entry.path))
            if key in leaving and own.matches(key, entry) is False:
                return True
    return False


def _kept_note(env: Environment, removing: tuple[Distribution, ...]) -> tuple[str, ...]:
    """One line per distribution whose shared files, of the same bytes, cudatx keeps."""
    notes = []
    for name, entries in sorted(kept_entries(env, removing).items()):
        listed = sorted(entries)
        named = ", ".join(listed[:3]) + (", ..." if len(listed) > 3 else "")
        notes.append(
            f"{name}'s RECORD lists {_paths(listed)} that a distribution staying here lists "
            f"with the same bytes ({named}): cudatx keeps them, where `uv pip uninstall` "
            "alone would delete them for both"
        )
    return tuple(notes)


def _paths(entries: list[str]) -> str:
    return f"{counted(len(entries), 'path')}"


def _withheld_note(found: Iterable[Withheld]) -> tuple[str, ...]:
    """One line per distribution and reason, for the plan's notes."""
    by_dist: dict[tuple[str, str], list[str]] = {}
    for item in found:
        by_dist.setdefault((item.distribution, item.reason), []).append(item.entry)
    notes = []
    for (name, reason), entries in sorted(by_dist.items()):
        named = ", ".join(repr(e) for e in entries[:5]) + (", ..." if len(entries) > 5 else "")
        if reason == "outside the environment":
            notes.append(
                f"{name}'s RECORD lists {_paths(entries)} outside the environment; cudatx "
                f"never deletes, saves or restores them: {named}"
            )
        else:
            notes.append(
                f"{name}'s RECORD lists {_paths(entries)} cudatx never lets uv delete "
                f"({reason}): {named}"
            )
    return tuple(notes)
