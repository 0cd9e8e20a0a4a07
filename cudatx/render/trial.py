"""A trial as a person at a terminal watches it: the line that says where it is."""

from __future__ import annotations

from cudatx.trial.told import TrialStep


def step(told: TrialStep) -> str:
    """`Trial, before the change: importing 12/40: torch` (the oldest still running)."""
    head = "Trial" if told.judging == "as is" else f"Trial, {told.judging} the change"
    if told.stage == "shadow":
        return f"{head}: making a shadow of the environment"
    if told.stage == "uv":
        return f"{head}: changing the shadow: {told.done + 1}/{told.total}: {told.what}"
    if told.what.startswith("import "):
        return f"{head}: importing {told.done}/{told.total}: {told.what.removeprefix('import ')}"
    if not told.what:
        return f"{head}: checked {told.done}/{told.total}"
    return f"{head}: checking {told.done}/{told.total}: {told.what}"
