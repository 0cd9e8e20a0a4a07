"""The planner: what removing, installing or upgrading distributions would break, before
anything is touched, and the repair that would restore what co-owners lose.

The environment is simulated after the change (cudatx.planning.simulate) and the two are
compared (cudatx.planning.diff). Where the removal deletes paths that a distribution which
stays lists too, reinstalling that distribution is simulated as well (`--repair`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from cudatx.analysis.ownership import co_owned
from cudatx.discover.confinement import Outside, outside
from cudatx.environment import Environment
from cudatx.models import Distribution
from cudatx.planning.diff import diff
from cudatx.planning.models import Plan, Repair
from cudatx.planning.simulate import simulate


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
    """Plan uninstalling `removing` and installing `installing` (staged, see cudatx.planning.stage);
    with `repair`, also reinstalling what the uninstall would leave hollow."""
    plan = _change(env, removing, installing, repair=repair, check_requirements=check_requirements)
    # RECORD entries that lead out of the environment are left alone (cudatx.txn.confine).
    names = {p.name for p in plan.reinstall}
    touched = (*removing, *(d for d in env.distributions if d.name in names))
    notes = _outside_note(outside(touched, env.target.prefix))
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


def _outside_note(found: Iterable[Outside]) -> tuple[str, ...]:
    """One line per distribution, for the plan's notes."""
    by_dist: dict[str, list[str]] = {}
    for item in found:
        by_dist.setdefault(item.distribution, []).append(item.entry)
    return tuple(
        f"{name}'s RECORD lists {len(entries)} paths outside the environment; cudatx never "
        f"deletes, saves or restores them: {', '.join(repr(e) for e in entries[:5])}"
        + (", ..." if len(entries) > 5 else "")
        for name, entries in sorted(by_dist.items())
    )
