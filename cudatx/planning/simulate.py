"""The environment after a change, simulated: nothing on disk is touched.

Every path the removed distributions' RECORDs list is gone, co-owned paths included,
because that is what uv and pip delete, but for those a staying distribution lists with the
same hash, which cudatx keeps (kept_entries); every file an arriving distribution writes holds
its staged bytes (cudatx.planning.stage), because uv writes over whatever is there. The
loader's replay then runs again on that view.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

from cudatx.discover.catalog import load_catalog
from cudatx.discover.sitewalk import extension_roots
from cudatx.environment import Environment, Owners
from cudatx.loader.fileview import OverlayView
from cudatx.models import Distribution, RecordEntry
from cudatx.planning.stage import relocate
from cudatx.scan import arriving_hand_loads, load_roots


def kept_entries(env: Environment, removing: Iterable[Distribution]) -> dict[str, frozenset[str]]:
    """RECORD entries of the distributions that leave which a removal leaves in place, by
    distribution: a path a distribution that stays lists too, with the same hash. Its bytes
    are the staying one's as much as the leaving one's, so deleting it takes a file from a
    package that stays and gives nothing back (a namespace `__init__.py` many wheels ship;
    the pure-Python files of opencv-python and opencv-python-headless). uv and pip delete
    it all the same (uv issue #15238); cudatx withholds it from the RECORD it hands uv
    (cudatx.txn.confine), as it withholds entries that lead outside.

    A path whose hashes differ is not kept: the bytes there may be the leaving one's (the
    objection that closed uv's PR), and the staying one is told as a loss."""
    leaving = {d.name for d in removing}
    staying: dict[str, Distribution] = {}
    out: dict[str, frozenset[str]] = {}
    for dist in removing:
        kept = []
        for entry in dist.records:
            if not entry.hash_digest:
                continue
            key = env.keys(os.path.join(dist.site, entry.path))
            others = [n for n in env.owners.get(key, ()) if n not in leaving]
            for name in others:
                other = staying.get(name) or env.distribution(name)
                if other is None:
                    continue
                staying[name] = other
                if _listed_with(env, other, key, entry):
                    kept.append(entry.path)
                    break
        if kept:
            out[dist.name] = frozenset(kept)
    return out


def _listed_with(env: Environment, dist: Distribution, key: str, entry: RecordEntry) -> bool:
    """Whether `dist`'s RECORD lists the path `key` with `entry`'s hash."""
    digest = (entry.hash_digest or "").rstrip("=")
    return any(
        e.hash_algorithm == entry.hash_algorithm
        and (e.hash_digest or "").rstrip("=") == digest
        and env.keys(os.path.join(dist.site, e.path)) == key
        for e in dist.records
        if os.path.basename(e.path) == os.path.basename(entry.path)
    )


def kept_keys(env: Environment, removing: Iterable[Distribution]) -> frozenset[str]:
    """kept_entries, as the environment keys paths."""
    by_name = {d.name: d for d in removing}
    return frozenset(
        env.keys(os.path.join(by_name[name].site, path))
        for name, paths in kept_entries(env, by_name.values()).items()
        for path in paths
    )


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
    gone -= kept_keys(env, removed)
    for dist in restored:
        gone -= record_keys(env, dist)
    site = env.target.install_site
    landing = arrivals(env, arriving)
    gone -= landing.keys()
    names = {d.name for d in removed} - {d.name for d in restored}
    installed = tuple(relocate(d, site) for d in arriving)
    remaining = (*(d for d in env.distributions if d.name not in names), *installed)
    roots = [r for r in env.roots if env.keys(r) not in gone]
    known = {env.keys(r) for r in roots}
    roots += [
        r
        for r in extension_roots(
            landing, env.target, env.view.inits, env.view.needed, load_catalog().core_libraries
        )
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
    if arriving:
        after = arriving_hand_loads(after, installed, view)
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
