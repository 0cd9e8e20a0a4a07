"""Which distributions a SPEC names: a name, a glob over names, `cuda:N`, or `-r FILE`."""

from __future__ import annotations

import fnmatch

from cudatx.analysis.cuda import cuda_major_of_dist
from cudatx.discover.owners import by_prefix, owner_of
from cudatx.environment import Environment
from cudatx.errors import NotInEnvironment, UsageError
from cudatx.models import Distribution
from cudatx.names import canonical_name

_GLOB = set("*?[")


def _cuda(env: Environment, spec: str) -> list[Distribution]:
    text = spec.partition(":")[2]
    if not text.isdigit():
        raise UsageError(f"{spec}: expected cuda:N with N a CUDA major, e.g. cuda:12")
    major = int(text)
    out = []
    for dist in env.distributions:
        classified = cuda_major_of_dist(env, dist)
        if classified is not None and classified.major == major:
            out.append(dist)
    return out


def _one(env: Environment, spec: str) -> list[Distribution]:
    if spec.lower().startswith("cuda:"):
        return _cuda(env, spec)
    owner = by_prefix(spec)
    if owner is not None:  # an owner's record by the owner's own name (`conda:cudnn`)
        wanted = spec[len(owner.prefix) :].lower()
        return [
            d
            for d in env.distributions
            if d.package is not None and d.package.name == wanted and owner_of(d) is owner
        ]
    if _GLOB & set(spec):
        # Names compare canonical (PEP 503), so the pattern is lowered and its separators
        # unified the same way; the glob characters themselves survive.
        pattern = spec.lower().replace("_", "-").replace(".", "-")
        return [d for d in env.distributions if fnmatch.fnmatchcase(d.name, pattern)]
    name = canonical_name(spec)
    found = [d for d in env.distributions if d.name == name]
    # A name no wheel has may be another owner's package's (conda's `cudnn`): found, so that
    # it is refused with that owner's command rather than called absent.
    return found or [
        d for d in env.distributions if d.package is not None and d.package.name == spec.lower()
    ]


def select(
    env: Environment, specs: tuple[str, ...], requirement_files: tuple[str, ...] = ()
) -> tuple[Distribution, ...]:
    """The distributions to act on, in installed order; a SPEC matching nothing is an error."""
    wanted = list(specs)
    if requirement_files:
        # Imported only for -r: 10 ms of a start-up that a pre-commit hook pays every commit.
        from cudatx.planning.reqfiles import read_requirements
    for path in requirement_files:  # entries whose markers do not hold for the target are out
        read = read_requirements(path, markers=env.target.markers)
        wanted += [pin.name for pin in read.entries]
    if not wanted and requirement_files:
        listed = ", ".join(requirement_files)
        raise UsageError(f"nothing to remove: {listed} lists nothing that applies to this target")
    if not wanted:
        raise UsageError("nothing to remove: give at least one SPEC or -r FILE")
    chosen: dict[str, Distribution] = {}
    for spec in wanted:
        matched = _one(env, spec)
        if not matched:
            raise NotInEnvironment(f"{spec} matches no installed distribution", path=spec)
        for dist in matched:
            chosen.setdefault(dist.name, dist)
    return tuple(d for d in env.distributions if d.name in chosen)
