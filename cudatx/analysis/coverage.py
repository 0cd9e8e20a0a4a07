"""What cudatx does not read: a distribution that requires NVIDIA wheels and loads them by a
route no model here covers.

A distribution D that requires a wheel W shipping libraries under `nvidia/` (Requires-Dist,
its markers and installed extras applied) uses W's libraries somehow. cudatx vouches for a
plan only where it models how: a library of W is named by something cudatx reads of D (the
DT_NEEDED or .rodata names of D's files; torch's preload list; a framework reader's loads,
version checks and tables; a library D's code loads by path). Where none of W's libraries is
named so, D loads W by a route cudatx does not read (a subprocess, a path built at run time,
a table no reader knows): doctor and a plan that changes W say so, "not modelled: D ...;
plans cannot vouch for its run-time loads". Silence is never coverage.
"""

from __future__ import annotations

import fnmatch
import os

from cudatx.analysis import optional
from cudatx.analysis.frameworks import not_modelled, read_notes, run_of
from cudatx.discover.dists import applicable_requirements, installed_extras
from cudatx.environment import Environment
from cudatx.models import Distribution
from cudatx.names import canonical_name
from cudatx.paths import is_library_name


def _nvidia_libraries(dist: Distribution) -> tuple[str, ...]:
    """The file names of the shared libraries `dist` installs under `nvidia/`."""
    return tuple(
        os.path.basename(e.path)
        for e in dist.records
        if e.path.startswith("nvidia/") and is_library_name(os.path.basename(e.path))
    )


def _named_by(env: Environment, dist: Distribution) -> tuple[set[str], tuple[str, ...]]:
    """(names, glob patterns) of the libraries what cudatx reads of `dist` names."""
    names: set[str] = set()
    patterns: list[str] = []
    for entry in dist.records:
        if not is_library_name(os.path.basename(entry.path)):
            continue
        path = os.path.join(dist.site, entry.path)
        info = env.view.probe(path).info
        if info is not None:
            names.update(info.needed)
            names.update(env.view.strings(path))
    for context in env.contexts:
        if context.load_list.distribution == dist.name:
            pre = context.preloads
            patterns += [e.pattern for e in (*pre.normal, *pre.entries)]
    for run in env.frameworks:
        if dist.name not in (run.framework.distribution, *run.companions):
            continue
        for load in run.root.loads:
            names.update(load.names)
            names.update(load.sonames)
        for module in run.modules:
            names.update(n for opened in module.opens for n in opened)
        names.update(n for opened in (*run.runtime, *run.optional_runtime) for n in opened)
        names.update(os.path.basename(p) for p in run.first)
    for found, loads in env.framework_reads:
        if found.distribution == dist.name and loads.by_soname:
            names.update(loads.by_soname)
            names.update(n for chain in loads.by_soname.values() for ld in chain for n in ld.names)

    def owned(path: str) -> bool:
        """Whether `dist`'s RECORD lists `path` (the owners' index: keying each of torch's
        13,000 rows to ask of a handful of files was a fifth of a warm doctor)."""
        return dist.name in env.owners.get(env.keys(path), ())

    names.update(os.path.basename(h.path) for h in env.hand_loads if owned(h.by))
    # And what the replay of its roots resolved, its libraries' own needs included (JAX's
    # version check opens libcusparse.so.12, which needs libnvJitLink.so.12).
    for result in (*env.loads, *env.context_loads):
        owner = run_of(env, result)
        mine = owned(result.root) or (
            owner is not None and dist.name in (owner.framework.distribution, *owner.companions)
        )
        if mine:
            names.update(os.path.basename(r.path) for r in result.resolutions if r.path)
    return names, tuple(patterns)


def _searched(env: Environment, nvidia: dict[str, tuple[str, ...]]) -> dict[str, set[str]]:
    """distribution -> the NVIDIA wheels (of `nvidia`) whose library folders the DT_RUNPATH
    or DT_RPATH of one of its libraries names ($ORIGIN expanded): it means to load from
    them, whatever its requirements say (a library opened by bare name from its code
    searches there: glibc elf/dl-load.c)."""
    folders: dict[str, str] = {}
    for dist in env.distributions:
        if dist.name in nvidia:
            for e in dist.records:
                if e.path.startswith("nvidia/") and is_library_name(os.path.basename(e.path)):
                    folder = os.path.dirname(os.path.join(dist.site, e.path))
                    folders.setdefault(os.path.normpath(folder), dist.name)
    out: dict[str, set[str]] = {}
    if not folders:
        return out
    for dist in env.distributions:
        if dist.name in nvidia:
            continue
        for e in dist.records:
            if not is_library_name(os.path.basename(e.path)):
                continue
            path = os.path.join(dist.site, e.path)
            info = env.view.probe(path).info
            search = info and (info.runpath or info.rpath)
            if not search:
                continue
            origin = os.path.dirname(path)
            for part in search.split(":"):
                where = part.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
                wheel = folders.get(os.path.normpath(where))
                if wheel is not None:
                    out.setdefault(dist.name, set()).add(wheel)
    return out


def unmodelled(env: Environment, changing: frozenset[str] | None = None) -> list[str]:
    """The notes: one per distribution that requires NVIDIA wheels it loads by a route
    cudatx does not read (with `changing`, only for those wheels among them)."""
    nvidia = {d.name: libs for d in env.distributions if (libs := _nvidia_libraries(d))}
    if changing is not None:
        nvidia = {n: libs for n, libs in nvidia.items() if n in changing}
    if not nvidia:
        return []
    taken = installed_extras(
        env.distributions, env.target.markers, frozenset(d.name for d in env.distributions)
    )
    searched = _searched(env, nvidia)
    # a framework its reader found and could not read has its own note (`read_notes`)
    said = {found.distribution for found, loads in env.framework_reads if not loads.read}
    out = []
    for dist in env.distributions:
        if not (dist.requires or dist.name in searched) or not dist.records:
            continue
        if dist.name in said:
            continue
        if any(e.path.startswith("nvidia/") for e in dist.records):
            continue  # an NVIDIA wheel itself (nvidia-cuda-nvcc requires nvidia-nvvm)
        if (
            changing is not None
            and dist.name not in searched
            and not any(
                name.split("-")[0] in line.lower() for line in dist.requires for name in nvidia
            )
        ):
            continue  # no Requires-Dist names what changes: nothing to parse
        # Every extra whose requirements are all installed counts here, whoever asked for
        # it: `tensorflow[and-cuda]` names its NVIDIA wheels only behind its extra, and no
        # installer records the extra (cudatx.discover.dists.installed_extras).
        extras = taken.get(dist.name, ())
        required = {
            canonical_name(r.name)
            for r in applicable_requirements(dist, env.target.markers, extras)
        }
        wheels = [w for w in sorted(required | searched.get(dist.name, set())) if w in nvidia]
        if not wheels:
            continue
        names, patterns = _named_by(env, dist)
        unread = [
            w
            for w in wheels
            if not any(
                lib in names or any(fnmatch.fnmatchcase(lib, p) for p in patterns)
                for lib in nvidia[w]
            )
        ]
        if unread:
            out.append(
                not_modelled(
                    dist.name,
                    f"it {'requires' if set(unread) <= required else 'uses'} "
                    f"{', '.join(unread)}, and loads none of "
                    f"{'its' if len(unread) == 1 else 'their'} libraries by a route cudatx "
                    "reads",
                )
            )
    return out


def notes(env: Environment) -> list[str]:
    """Doctor's notes of what is not loaded or not read: the modules no import loads that
    fail (cudatx.analysis.optional), and the distributions loaded by routes not read."""
    return [*optional.notes(env), *unmodelled(env)]


def plan_notes(env: Environment, changing: frozenset[str]) -> list[str]:
    """A plan's notes: where the change takes away or replaces a distribution that ships
    shared libraries, each framework or load by path cudatx could not read, and each
    distribution that requires one of the changing NVIDIA wheels by a route not read."""
    ships = any(
        is_library_name(os.path.basename(e.path))
        for d in env.distributions
        if d.name in changing
        for e in d.records
    )
    if not ships:
        return []
    unread = [n for n in read_notes(env) if n.startswith("not modelled: ")]
    return [*unread, *unmodelled(env, changing)]
