"""`doctor --trial`: the trial's judge on the environment as it is, nothing changed and
nothing written (the imports run in a shadow, with -B), each failing check beside what the
model knows of it.
"""

from __future__ import annotations

from cudatx.analysis.doctor import DoctorTrial, TrialFailure
from cudatx.analysis.ownership import hollow
from cudatx.environment import Environment
from cudatx.trial.run import TrialOptions, run_trial
from cudatx.trial.verdict import top_of


def _known(env: Environment) -> tuple[set[str], set[str], set[str]]:
    """What the model says fails now: top-level modules whose import root fails, the
    frameworks whose run-time roots fail, and the hollow distributions."""
    sites = env.target.site_packages
    tops: set[str] = set()
    frameworks: set[str] = set()
    for load in env.loads:
        if load.ok or load.trace is not None:
            continue
        if load.framework is not None:
            frameworks.add(load.framework.lower())
        else:
            top = top_of(load.root, sites)
            if top:
                tops.add(top)
    return tops, frameworks, {h.name for h in hollow(env)}


def judge_as_is(env: Environment, options: TrialOptions) -> DoctorTrial:
    ran = run_trial(env, None, None, (), options)
    tops, frameworks, hollowed = _known(env)
    failing = []
    for label, outcome in ran.before.outcomes.items():
        if outcome.ok:
            continue
        module = label.removeprefix("import ") if label.startswith("import ") else None
        owners = ran.before.owners.get(module or "", ())
        if module is not None:
            known = module in tops or any(d in hollowed for d in owners)
        else:
            # a framework's step (a GPU start's is its package's module): known where the
            # model says that module's import or that framework's roots fail now
            step = ran.before.steps.get(label)
            word = step.framework if step is not None else None
            known = word is not None and (word in tops or any(word in f for f in frameworks))
        failing.append(TrialFailure(check=label, dists=owners, error=outcome.error, known=known))
    return DoctorTrial(
        method=ran.shadow.method,
        shadow=ran.shadow.describe(),
        shadow_seconds=ran.shadow.seconds,
        seconds=ran.before.seconds,
        checks=len(ran.before.outcomes),
        failing=tuple(failing),
        unknown=sum(not f.known for f in failing),
        sandbox=ran.sandbox,
        gpu=ran.before.gpu or None,
    )
