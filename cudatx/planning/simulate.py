"""The environment after a change, simulated: nothing on disk is touched.

Every path the removed distributions' RECORDs list is gone, co-owned paths included,
because that is what uv and pip delete; every file an arriving distribution writes holds
its staged bytes (cudatx.planning.stage), because uv writes over whatever is there. The
loader's replay then runs again on that view.
"""

from __future__ import annotations

import dataclasses
import os

from cudatx.discover.sitewalk import extension_roots
from cudatx.environment import Environment, Owners
from cudatx.loader.fileview import OverlayView
from cudatx.models import Distribution
from cudatx.planning.stage import relocate
from cudatx.scan import load_roots


def record_keys(env: Environment, dist: Distribution) -> set[str]:
    keys = {env.keys(os.path.join(dist.site, e.path)) for e in dist.records}
    keys.add(env.keys(dist.metadata_dir))
    return keys


def arriving_files(site: str, installing: tuple[Distribution, ...]) -> dict[str, str]:
    """Where each staged distribution's files land (`site`: uv's install site) -> the staged
    file that holds their bytes. The planner simulates with it; the transaction saves what
    is there before uv writes."""
    return {
        os.path.join(site, entry.path): os.path.join(staged.site, entry.path)
        for staged in installing
        for entry in staged.records
    }


def arrivals(env: Environment, installing: tuple[Distribution, ...]) -> dict[str, str]:
    """arriving_files, keyed as the environment keys paths."""
    site = env.target.install_site
    return {env.keys(path): real for path, real in arriving_files(site, installing).items()}


def simulate(
    env: Environment,
    removed: tuple[Distribution, ...],
    restored: tuple[Distribution, ...] = (),
    arriving: tuple[Distribution, ...] = (),
) -> Environment:
    """The environment after uninstalling `removed`, then reinstalling `restored`, then
    installing `arriving` (staged distributions: their `site` is the staging folder)."""
    gone: set[str] = set()
    for dist in removed:
        gone |= record_keys(env, dist)
    for dist in restored:
        gone -= record_keys(env, dist)
    site = env.target.install_site
    landing = arrivals(env, arriving)
    gone -= landing.keys()
    names = {d.name for d in removed} - {d.name for d in restored}
    remaining = tuple(d for d in env.distributions if d.name not in names)
    remaining += tuple(relocate(d, site) for d in arriving)
    roots = [r for r in env.roots if env.keys(r) not in gone]
    known = {env.keys(r) for r in roots}
    roots += [
        r
        for r in extension_roots(landing, env.target, env.view.inits, env.view.needed)
        if env.keys(r) not in known
    ]
    after = dataclasses.replace(
        env,
        distributions=remaining,
        # Arrivals change who lists which path: index afresh. Otherwise the scan's index,
        # less what leaves.
        owners=Owners(remaining, env.keys) if arriving else env.owners.without(frozenset(names)),
        roots=tuple(roots),
    )
    view = OverlayView(env.view, frozenset(gone), env.keys, landing)
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
