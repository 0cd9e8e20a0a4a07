"""Model and trial side by side: the plan's verdict for each top-level package beside what
the real interpreter did in the shadow, and every disagreement named as such.

A real break (worked before the change, fails after) makes the plan unsafe whatever the
model said. Where the model expected a break the trial did not see, the model's evidence
says why: a load only a run makes (a framework's run-time root, a library dlopened at run
time) is one no import exercises, and only a GPU run would show it.
"""

from __future__ import annotations

import os
from dataclasses import replace

from cudatx.discover.imports import imports_of
from cudatx.models import Evidence
from cudatx.planning.models import Plan, Trial, TrialCheck
from cudatx.trial.judge import Stepped
from cudatx.trial.run import Judged, TrialRun

_RUN_TIME = (Evidence.DLOPEN, Evidence.DLOPEN_STRING, Evidence.OBSERVED)


def top_of(path: str, sites: tuple[str, ...]) -> str | None:
    """The top-level module a file under a site folder belongs to."""
    for site in sites:
        rel = os.path.relpath(path, site)
        if not rel.startswith(os.pardir):
            return rel.split(os.sep)[0].partition(".")[0]
    return None


def model_breaks(
    plan: Plan, sites: tuple[str, ...], stepped: frozenset[str] = frozenset()
) -> dict[str, bool]:
    """Top-level module -> whether every reason the model has for its break is a load only a
    run makes (True) or not (False); modules the model says stay whole are absent. A
    framework's root that a step of the trial judges (`stepped`: the GPU-free steps'
    frameworks, cudatx.trial.judge.Stepped) is that step's break, not its package's
    import's: a package's import never runs a GPU check compiled into its library (TSL's),
    the step does."""
    out: dict[str, bool] = {}

    def add(top: str | None, run_time: bool) -> None:
        if top:
            out[top] = out.get(top, True) and run_time

    judged = set()  # the roots a step judges
    for broken_root in plan.broken_roots:
        label = (broken_root.framework or "").lower()
        if label and any(word in label for word in stepped):
            judged.add(broken_root.root)
            continue
        add(top_of(broken_root.root, sites), broken_root.framework is not None)
    for edge in plan.broken:
        for root in edge.roots:
            if root not in judged:
                add(top_of(root, sites), edge.evidence in _RUN_TIME)
    for loss in plan.losses:
        for module in loss.imports:
            add(module.partition(".")[0], False)
    return out


def _source_of(module: str, sites: tuple[str, ...]) -> str | None:
    for site in sites:
        for path in (os.path.join(site, module, "__init__.py"), os.path.join(site, f"{module}.py")):
            if os.path.isfile(path):
                return path
    return None


def through_imports(
    breaks: dict[str, bool], modules: list[str], sites: tuple[str, ...]
) -> dict[str, bool]:
    """The model's breaks, carried along what each module imports as it is imported (read
    from its source, cudatx.discover.imports): a package that imports another at module
    level breaks where the other's import breaks."""
    out = dict(breaks)
    imports = {}
    for module in modules:
        path = _source_of(module, sites)
        imports[module] = imports_of(path, None) if path is not None else ()
    changed = True
    while changed:
        changed = False
        for module, names in imports.items():
            if module in out:
                continue
            hit = [n for n in names if n in out and n != module]
            if hit:
                out[module] = all(out[n] for n in hit)
                changed = True
    return out


def _framework_root_breaks(plan: Plan, word: str) -> bool:
    """Whether a broken root of the plan is a framework's whose label holds `word`."""
    return any(word in (r.framework or "").lower() for r in plan.broken_roots)


def _gpu_start_breaks(plan: Plan, module: str, modelled: dict[str, bool]) -> bool:
    """The model's verdict on a GPU start: its package breaks by any reason the model has,
    the loads only a run makes included (what a GPU start makes), or a framework root of
    its package does (judged by a GPU-free step too)."""
    return module in modelled or _framework_root_breaks(plan, module)


def _step_breaks(plan: Plan, step: Stepped | None, modelled: dict[str, bool]) -> bool:
    """The model's verdict on a framework's step: a GPU start's by its package
    (_gpu_start_breaks), any other's by its framework's roots."""
    if step is None:
        return False
    if step.gpu:
        return _gpu_start_breaks(plan, step.framework, modelled)
    return _framework_root_breaks(plan, step.framework)


def _trial_verdict(label: str, before: Judged, after: Judged) -> tuple[str, str | None]:
    was, now = before.outcomes.get(label), after.outcomes.get(label)
    if now is None:
        return "removed", None
    if was is None:  # arrives with the change
        return ("loads", None) if now.ok else ("breaks", now.error)
    if was.ok and now.ok:
        return "loads", None
    if was.ok:
        return "breaks", now.error
    if now.ok:
        return "fixed", None
    return "failed before", now.error


def compare(plan: Plan, run: TrialRun, sites: tuple[str, ...]) -> Plan:
    """The plan with its trial section; unsafe where the trial saw a real break."""
    shade = run.shadow
    after = run.after
    if after is None:
        trial = Trial(
            method=shade.method,
            shadow=shade.describe(),
            shadow_seconds=shade.seconds,
            bytes_copied=shade.bytes_copied,
            uv_seconds=run.uv_seconds,
            judge_seconds=run.before.seconds,
            checks=0,
            breaks=0,
            roots=(),
            disagreements=(),
            error=run.error,
            sandbox=run.sandbox,
            gpu=run.before.gpu or None,
        )
        note = f"the trial could not make the change in the shadow: {run.error}"
        return replace(plan, trial=trial, safe=False, notes=(*plan.notes, note))
    owners = {**run.before.owners, **after.owners}
    labels = dict.fromkeys([*run.before.outcomes, *after.outcomes])
    modules = [x.removeprefix("import ") for x in labels if x.startswith("import ")]
    steps = {**run.before.steps, **after.steps}
    stepped = frozenset(s.framework for s in steps.values() if not s.gpu)
    modelled = through_imports(model_breaks(plan, sites, stepped), modules, sites)
    rows: list[TrialCheck] = []
    for label in labels:
        verdict, error = _trial_verdict(label, run.before, after)
        module = label.removeprefix("import ") if label.startswith("import ") else None
        if label.startswith("--trial-cmd"):
            model = "not modelled"
        elif module is not None:
            model = "breaks" if module in modelled else "loads"
        else:
            model = "breaks" if _step_breaks(plan, steps.get(label), modelled) else "loads"
        if model == "loads" and verdict == "failed before":
            # The model judges the change: "no break from it", which is not "it loads" of a
            # check that failed before the change (doctor's finding, the plan's preexisting).
            model = "unchanged"
        disagreement = None
        if verdict == "breaks" and model != "breaks":
            disagreement = f"the model missed: {label} fails: {error}"
        elif model == "breaks" and verdict in ("loads", "fixed"):
            disagreement = f"the model expected a break the trial did not see: {label} works"
            if module is not None and modelled.get(module):
                disagreement += "; only a GPU run would show it (a load made at run time)"
        rows.append(
            TrialCheck(
                check=label,
                dists=owners.get(module or "", ()),
                model=model,
                trial=verdict,
                error=error,
                disagreement=disagreement,
            )
        )
    breaks = sum(r.trial == "breaks" for r in rows)
    trial = Trial(
        method=shade.method,
        shadow=shade.describe(),
        shadow_seconds=shade.seconds,
        bytes_copied=shade.bytes_copied,
        uv_seconds=run.uv_seconds,
        judge_seconds=run.before.seconds + after.seconds,
        checks=len(after.outcomes),
        breaks=breaks,
        roots=tuple(rows),
        disagreements=tuple(r.disagreement for r in rows if r.disagreement),
        sandbox=run.sandbox,
        gpu=after.gpu or run.before.gpu or None,
        before_kept=run.before_kept,
    )
    return replace(plan, trial=trial, safe=plan.safe and not breaks)
