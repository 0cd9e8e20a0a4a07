"""Requires-Dist that do not hold: what `pip check` reports, with markers evaluated for the
target interpreter (extras nobody asked for do not apply)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from cudatx.cache import remembered
from cudatx.discover.dists import applicable_requirements
from cudatx.environment import Environment
from cudatx.loader.fileview import OverlayView
from cudatx.models import Distribution
from cudatx.names import canonical_name

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

# (canonical name, requirement text, specifier) of one distribution's applicable
# Requires-Dist, parsed once per plan: marker evaluation is most of their cost.
Parsed = tuple[tuple[str, str, "SpecifierSet"], ...]


def parsed(
    dist: Distribution,
    markers: dict[str, str],
    memo: dict[str, Parsed],
    extras: tuple[str, ...] = (),
) -> Parsed:
    """`extras`: those of `dist` taken as installed (Environment.extras)."""
    found = memo.get(dist.metadata_dir)
    if found is None:
        found = memo[dist.metadata_dir] = tuple(
            (canonical_name(r.name), str(r), r.specifier)
            for r in applicable_requirements(dist, markers, extras)
        )
    return found


def why_unmet(name: str, specifier: SpecifierSet, versions: dict[str, str]) -> str | None:
    if name not in versions:
        return "is not installed"
    if not specifier:
        return None
    from packaging.version import InvalidVersion, Version  # cudatx.names

    try:
        met = specifier.contains(Version(versions[name]), prereleases=True)
    except InvalidVersion:
        met = True  # a legacy version string: packaging cannot compare it, nor can we
    return None if met else f"is installed at {versions[name]}"


# The name a Requires-Dist line starts with (PEP 508), read without parsing the line.
_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def naming(dist: Distribution, names: set[str]) -> Distribution:
    """`dist` with only the Requires-Dist lines that may name one of `names` (a line whose
    name cannot be read this way is kept, to be parsed)."""

    def may_name(text: str) -> bool:
        match = _NAME.match(text)
        return match is None or canonical_name(match.group(1)) in names

    return replace(dist, requires=tuple(filter(may_name, dist.requires)))


def unmet(env: Environment, memo: dict[str, Parsed] | None = None) -> dict[tuple[str, str], str]:
    """(dist, requirement) -> why, for every applicable Requires-Dist not met now.

    Parsing and evaluating every Requires-Dist of a torch environment takes 30 ms, the same
    on every run of the same installed set: the answer is kept in the scan cache, keyed by
    that set (names, versions, metadata folders, Requires-Dist lines) and the markers."""
    memo = {} if memo is None else memo
    markers = env.target.markers

    def facts() -> object:
        dists = [[d.name, d.version, d.metadata_dir, *d.requires] for d in env.distributions]
        return [sorted(markers.items()), *dists, sorted((env.extras or {}).items())]

    def compute() -> dict[tuple[str, str], str]:
        versions = {d.name: d.version for d in env.distributions}
        out: dict[tuple[str, str], str] = {}
        for dist in env.distributions:
            extras = (env.extras or {}).get(dist.name, ())
            for name, text, specifier in parsed(dist, markers, memo, extras):
                why = why_unmet(name, specifier, versions)
                if why is not None:
                    out[(dist.name, text)] = why
        return out

    # A plan's environment after (an OverlayView) keeps its answer apart: under the same key
    # it would push out the environment's own, which every warm run reads.
    planned = isinstance(env.view, OverlayView)
    return remembered(
        env.view.cache,
        "unmet",
        env.target.prefix + (" (planned)" if planned else ""),
        facts,
        compute,
        read=lambda rows: {(d, r): why for d, r, why in rows},
        write=lambda out: [[*k, v] for k, v in out.items()],
    )
