"""Install and sync plans: uv's dry run, staged, then simulated by the planner."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from cudatx.errors import NotInEnvironment
from cudatx.models import Distribution
from cudatx.plan import Plan, plan_change
from cudatx.scan import Environment
from cudatx.stage import ask_uv, stage
from cudatx.uvrun import UvFailed


@dataclass(frozen=True)
class Proposal:
    plan: Plan
    removing: tuple[Distribution, ...]  # installed distributions uv would uninstall
    # (distribution as staged, its uv spec): the site is the (deleted) staging folder; the
    # spec pins exactly what the dry run chose, for the install that applies the plan
    installing: tuple[tuple[Distribution, str], ...]


def propose(
    env: Environment,
    uv: str,
    command: str,
    args: Sequence[str],
    uv_options: Sequence[str],
    *,
    repair: bool,
    check_requirements: bool,
) -> Proposal:
    """Plan `uv pip COMMAND ARGS` (install or sync) for `env`, changing nothing in it."""
    asked = ask_uv(uv, env.target.prefix, command, [*uv_options, *args])
    removing = []
    for name, version in asked.leaving:
        dist = env.distribution(name)
        if dist is None:
            raise NotInEnvironment(f"uv would uninstall {name}=={version}, which is not installed")
        removing.append(dist)
    with tempfile.TemporaryDirectory(prefix="cudatx-stage-") as folder:
        site = env.target.site_packages[0]
        installing = stage(uv, env.target.prefix, site, asked.arriving, folder, uv_options)
        missing = {a.name for a in asked.arriving} - {d.name for d in installing}
        if missing:
            raise UvFailed(f"uv staged no distribution for {', '.join(sorted(missing))}")
        plan = plan_change(
            env,
            tuple(removing),
            installing,
            repair=repair,
            check_requirements=check_requirements,
        )
    specs = {a.name: a.spec for a in asked.arriving}
    return Proposal(plan, tuple(removing), tuple((d, specs[d.name]) for d in installing))
