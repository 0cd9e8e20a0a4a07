"""Requires-Dist before and after a change: which stop being met, and which never were."""

from __future__ import annotations

import hashlib
import json
import re

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudatx.discover.dists import applicable_requirements
from cudatx.environment import Environment
from cudatx.models import Distribution
from cudatx.planning.models import RequirementBroken

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


def requirements_diff(
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
