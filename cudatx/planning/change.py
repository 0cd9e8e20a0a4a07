"""A proposed change, planned: what the planner hands the transaction.

`remove` selects installed distributions; `install` and `sync` ask uv's dry run what would
leave and arrive, stage the arrivals, and simulate with their bytes. Either way the result
is one :class:`Proposal`: the plan (what it would break) and the :class:`Change` that
carries it out.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import field, replace

from cudatx.analysis.ownership import foreign_record
from cudatx.discover.confinement import escaping_metadata
from cudatx.discover.dists import reinstall_spec
from cudatx.discover.owners import grouped
from cudatx.environment import Environment
from cudatx.errors import ForeignOwned, NotInEnvironment, UnsafePaths
from cudatx.models import Distribution, Frozen
from cudatx.names import counted
from cudatx.planning import building, sources
from cudatx.planning.models import Arriving, Plan
from cudatx.planning.plan import PlanOptions, plan_change
from cudatx.planning.selection import select
from cudatx.planning.simulate import kept_entries
from cudatx.planning.stage import Arrival, ask_uv, stage
from cudatx.uv import (
    ALLOW_BUILD,
    UvFailed,
    UvOptions,
    UvStep,
    change_steps,
    find_uv,
    reinstall_flags,
)

Heard = Callable[[str], None]  # told each line uv writes on stderr, as it writes it


def _deaf(line: str) -> None:
    """Hears nothing: a wait no one is shown."""


def find_uv_default() -> str:
    """The uv package's binary."""
    return find_uv(None)


class Change(Frozen, kw_only=False):
    """What uv will be asked to do, in this order: uninstall, install, reinstall."""

    removing: tuple[Distribution, ...]  # installed distributions uv uninstalls
    # (distribution as staged, its uv spec): the site is the (deleted) staging folder; the
    # spec pins exactly what the dry run chose, for the install that applies the plan
    installing: tuple[tuple[Distribution, str], ...] = ()
    reinstalling: tuple[Distribution, ...] = ()  # installed, reinstalled --no-deps (repair)
    # RECORD entries of `removing` that uv is not given, by distribution: paths a staying
    # distribution lists with the same hash (cudatx.planning.simulate.kept_entries)
    kept: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def staged(self) -> tuple[Distribution, ...]:
        return tuple(dist for dist, _ in self.installing)


def uv_steps(
    uv: str,
    prefix: str,
    change: Change,
    options: UvOptions | Sequence[str],
    install_flags: Sequence[str] = (),
) -> list[UvStep]:
    """The uv commands that carry `change` out for the environment at `prefix`, in order:
    uninstall, install pinned with --no-deps, then each reinstall (cudatx.uv.change_steps).
    The apply (cudatx.txn.apply) runs these; the trial (cudatx.trial) runs them in its
    shadow. `install_flags` go to every install."""
    return change_steps(
        uv,
        prefix,
        [d.name for d in change.removing],
        [spec for _, spec in change.installing],
        [(d.name, reinstall_spec(d)) for d in change.reinstalling],
        options,
        install_flags,
    )


class Proposal(Frozen, kw_only=False):
    plan: Plan
    change: Change


def _with_repairs(env: Environment, plan: Plan, change: Change) -> Proposal:
    """The plan's reinstalls (with --repair), as the installed distributions they are."""
    names = {p.name for p in plan.reinstall}
    reinstalling = tuple(d for d in env.distributions if d.name in names)
    kept = kept_entries(env, change.removing)
    return Proposal(plan, Change(change.removing, change.installing, reinstalling, kept))


class Planning(Frozen, kw_only=False):
    """How to plan: the verdict's options, and where uv finds the wheels a plan stages."""

    options: PlanOptions = field(default_factory=PlanOptions)
    uv: Callable[[], str] = find_uv_default  # the uv binary, looked up when first needed
    uv_options: tuple[str, ...] = ()  # uv's words for where wheels come from
    # Each wait on uv (resolving, staging: downloads), told as it starts and ends, so that a
    # person at a terminal sees within a second what a plan waits for (the CLI's
    # cudatx.cli.output.waiting); what it yields is told each line uv writes on stderr as
    # the wait goes on (its "Downloading torch (846.0MiB)"). By default nothing is told.
    waiting: Callable[[str], AbstractContextManager[Heard]] = lambda what: nullcontext(_deaf)

    @property
    def allow_build(self) -> bool:
        """--allow-build: sdists, local folders and VCS checkouts may be built (run)."""
        return ALLOW_BUILD in self.uv_options


def _options(
    env: Environment, planning: Planning, folder: str, told: dict[str, Arriving]
) -> PlanOptions:
    """The planning's options, with repairs staging the reinstalled wheels under `folder`;
    where each one's bytes come from is put in `told`, by name."""

    def stage_reinstalls(fixes: tuple[Distribution, ...]) -> tuple[Distribution, ...]:
        from concurrent.futures import ThreadPoolExecutor  # see propose()

        wanted = [Arrival(d.name, reinstall_spec(d)) for d in fixes]
        if not planning.allow_build:
            unbuilt = building.unbuilt_specs(a.spec for a in wanted)
            building.refuse([*unbuilt, *building.unbuilt_settings(env.target.markers)])
        prefix, site = env.target.prefix, env.target.install_site
        into = os.path.join(folder, "repair")
        uv, options = planning.uv(), planning.uv_options
        with (
            planning.waiting(f"Staging {counted(len(wanted), 'reinstall')} with uv") as heard,
            ThreadPoolExecutor(max_workers=1) as pool,
        ):
            # uv's resolver says where the bytes come from while the staging runs.
            asked = pool.submit(sources.ask, uv, prefix, [a.spec for a in wanted], options)
            # As the apply reinstalls each (uv_steps): uv reads a local wheel again.
            again = [w for a in wanted for w in reinstall_flags(a.name)]
            staged = stage(uv, prefix, site, wanted, into, options, heard=heard, flags=again)
        missing = {d.name for d in fixes} - {d.name for d in staged}
        if missing:
            raise UvFailed(f"uv staged no distribution for {', '.join(sorted(missing))}")
        told.update((d.name, sources.decided(asked.result(), d)) for d in staged)
        return staged

    return replace(planning.options, stage=stage_reinstalls)


def refuse_foreign(env: Environment, leaving: Sequence[Distribution], arriving: str = "") -> None:
    """Raise ForeignOwned where uv would uninstall (or replace, `arriving` its new spec) what
    an owner cudatx does not change installed (cudatx.discover.owners): conda records, or
    Python packages whose metadata a conda record lists. One line names them all (of the
    first such owner) and the one command of that owner that does it."""
    found: dict[str, tuple[Distribution, Distribution]] = {}  # record name -> (asked, record)
    for dist in leaving:
        record = foreign_record(env, dist)
        if record is not None:
            found.setdefault(record.name, (dist, record))
    if not found:
        return
    owner, records = next(iter(grouped(r for _, r in found.values()).items()))
    said = []
    for dist, record in found.values():
        if record not in records:
            continue  # another owner's: said when this one's are out of the way
        meta = os.path.relpath(record.metadata_dir, env.target.prefix)
        mine = f"{record.display_name} {record.version} ({meta})"
        said.append(mine if dist is record else f"{dist.display_name} {dist.version}, of {mine}")
    if arriving:
        command = owner.command(env.target.prefix, "install", records, exact=False)
        verb = f"uv would replace it with {arriving}; to change it, run"
    else:
        command = owner.command(env.target.prefix, "remove", records, exact=False)
        verb = f"to remove {'it' if len(records) == 1 else 'them'}, run"
    were = "was" if len(said) == 1 else "were"
    raise ForeignOwned(
        f"{_listed(said)} {were} installed by {owner.name}: cudatx applies changes through uv "
        f"only and never changes {owner.name}'s packages; {verb}: {command}{owner.command_note}",
        path=records[0].metadata_dir,
    )


def refuse_escaping(dists: Sequence[Distribution], prefix: str) -> None:
    """Refuse (UnsafePaths) a change to distributions whose metadata folder is a symlink
    leading outside the environment: uninstalling, saving and rolling back would act on what
    it leads to (cudatx.discover.confinement.escaping_metadata). Said before anything is
    touched; the apply says it again under its lock."""
    found = escaping_metadata(dists, prefix)
    if found:
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        raise UnsafePaths(
            f"{found[0]}{more} is a symlink leading outside the environment; cudatx will not "
            "uninstall through it (replace it with the folder it stands for, or remove it)",
            path=found[0].split(" -> ")[0],
        )


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def propose_removal(
    env: Environment,
    specs: tuple[str, ...],
    requirement_files: tuple[str, ...],
    planning: Planning,
) -> Proposal:
    """Plan removing what SPECs and -r files name (cudatx.planning.selection); what conda
    installed is refused (ForeignOwned)."""
    chosen = select(env, specs, requirement_files)
    refuse_foreign(env, chosen)
    refuse_escaping(chosen, env.target.prefix)
    told: dict[str, Arriving] = {}
    with tempfile.TemporaryDirectory(prefix="cudatx-stage-") as folder:
        plan = plan_change(env, chosen, (), _options(env, planning, folder, told))
    return _with_repairs(env, sources.annotated(plan, told), Change(chosen))


def propose(
    env: Environment,
    command: str,
    args: Sequence[str],
    planning: Planning,
    replacing: tuple[str, ...] = (),
) -> Proposal:
    """Plan `uv pip COMMAND ARGS` (install or sync) for `env`, changing nothing in it;
    `replacing`: SPECs of installed distributions uninstalled in the same transaction (a
    twin that installs the same paths, which would otherwise stay holding the other's
    bytes)."""
    if not planning.allow_build:
        # Before uv is asked: uv builds an editable even under --no-build, and what a
        # `no-binary` setting names, of a file or of uv's configuration (planning.building).
        markers = env.target.markers
        unbuilt = building.unbuilt_args(command, args, markers)
        building.refuse([*unbuilt, *building.unbuilt_settings(markers)])
    uv = planning.uv()
    with planning.waiting(f"Resolving with uv (uv pip {command} --dry-run)") as heard:
        asked = ask_uv(uv, env.target.prefix, command, args, planning.uv_options, heard)
    if not planning.allow_build:
        building.refuse(building.unbuilt_specs(a.spec for a in asked.arriving))
    removing = list(select(env, replacing, ())) if replacing else []
    refuse_foreign(env, removing)
    for name, version in asked.leaving:
        dist = env.distribution(name)
        if dist is None:
            raise NotInEnvironment(f"uv would uninstall {name}=={version}, which is not installed")
        refuse_foreign(env, [dist], next((a.spec for a in asked.arriving if a.name == name), ""))
        if dist not in removing:
            removing.append(dist)
    refuse_escaping(removing, env.target.prefix)
    # Imported where uv stages: a plan that stages nothing does not pay for it (nor for
    # logging, which concurrent.futures imports; 10% of a warm `remove --dry-run`'s imports).
    from concurrent.futures import ThreadPoolExecutor

    with tempfile.TemporaryDirectory(prefix="cudatx-stage-") as folder:
        site = env.target.install_site
        into = os.path.join(folder, "install")
        what = f"Staging {counted(len(asked.arriving), 'distribution')} with uv (it downloads what "
        prefix, options = env.target.prefix, planning.uv_options
        pinned = [a.spec for a in asked.arriving]
        with (
            planning.waiting(what + "its cache lacks)") as heard,
            ThreadPoolExecutor(max_workers=1) as pool,
        ):
            # uv's resolver says where the bytes come from while the staging runs.
            where = pool.submit(sources.ask, uv, prefix, pinned, options)
            installing = stage(uv, prefix, site, asked.arriving, into, options, heard)
        missing = {a.name for a in asked.arriving} - {d.name for d in installing}
        if missing:
            raise UvFailed(f"uv staged no distribution for {', '.join(sorted(missing))}")
        told = {d.name: sources.decided(where.result(), d) for d in installing}
        plan = plan_change(env, tuple(removing), installing, _options(env, planning, folder, told))
        plan = sources.annotated(plan, told)
    specs = {a.name: a.spec for a in asked.arriving}
    change = Change(tuple(removing), tuple((d, specs[d.name]) for d in installing))
    return _with_repairs(env, plan, change)
