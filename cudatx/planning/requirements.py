"""Requires-Dist before and after a change: which stop being met, and which never were."""

from __future__ import annotations

from cudatx.analysis.requirements import Parsed, naming, parsed, unmet, why_unmet
from cudatx.environment import Environment
from cudatx.planning.models import RequirementBroken


def requirements_diff(env: Environment, after: Environment) -> list[RequirementBroken]:
    """Requirements met before and not after. (Those unmet before are doctor's findings:
    cudatx.analysis.broken.)

    After the change, only what can have changed is evaluated again: the requirements of
    arriving distributions, and those naming a distribution that leaves or changes version.
    """
    markers = env.target.markers
    memo: dict[str, Parsed] = {}
    old = {d.name: d.version for d in env.distributions}
    new = {d.name: d.version for d in after.distributions}
    changed = {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)}
    before = unmet(env, memo)
    staying = {d.metadata_dir for d in env.distributions}
    broken = []
    for dist in after.distributions:
        stays = dist.metadata_dir in staying and dist.name not in changed
        # What stays is met or not as before, but where it names what changed.
        reading = naming(dist, changed) if stays else dist
        # The extras taken as installed before the change stay asked for after it.
        extras = (env.extras or {}).get(dist.name, ())
        for name, text, specifier in parsed(reading, markers, {} if stays else memo, extras):
            if (dist.name, text) in before:
                continue
            if why_unmet(name, specifier, new) is not None:
                broken.append(RequirementBroken(dist=dist.name, requirement=text))
    return broken
