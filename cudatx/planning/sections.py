"""Which sections of a plan say why it is unsafe, and which suggestion makes it safe: one
place, read by the renderer (cudatx.render.plan prints these headings) and by the refusal
of an unsafe plan (cudatx.txn.apply.refuse_unsafe names them), so the two cannot disagree.
"""

from __future__ import annotations

from typing import NamedTuple

from cudatx.planning.models import Plan

# The headings the text of a plan prints (cudatx.render.plan.to_text), each with the JSON
# key that holds the same facts.
BREAK = "Would break"
CONTEXTS = "Frameworks' contexts"
AT_RISK = "May fail at run time"
UNMET = "Would leave requirements unmet"
MIXED = "Would mix CUDA majors"
HOLLOW = "Would leave hollow"
OVERWRITE = "Would overwrite"
TRIAL = "Trial"
NOTE = "note"


class Section(NamedTuple):
    heading: str  # as the text prints it, at the start of its line
    key: str  # the key of the JSON plan that holds it


def unsafe_sections(plan: Plan) -> tuple[Section, ...]:
    """The sections a plan prints that make it unsafe, in the order it prints them; none
    for a safe plan. A plan unsafe for a reason only a note gives (a repair whose wheels
    cannot be had) names its notes."""
    if plan.safe:
        return ()
    found: list[Section] = []
    if plan.broken or plan.broken_roots:
        found.append(Section(BREAK, "broken"))
    if any(c.breaks for c in plan.contexts):
        found.append(Section(CONTEXTS, "contexts"))
    if plan.strict and plan.at_risk:
        found.append(Section(AT_RISK, "at_risk"))
    if plan.requirements_broken:
        found.append(Section(UNMET, "requirements_broken"))
    if plan.mixed:
        found.append(Section(MIXED, "mixed"))
    # a loss of headers, docs or data only counts with --strict (cudatx.planning.diff)
    counted = [x for x in plan.losses if x.code or plan.strict]
    if any(x.missing for x in counted):
        found.append(Section(HOLLOW, "losses"))
    if any(x.other_bytes for x in counted):
        found.append(Section(OVERWRITE, "losses"))
    if plan.trial is not None and (plan.trial.breaks or plan.trial.error is not None):
        found.append(Section(TRIAL, "trial"))
    if not found and plan.notes:
        found.append(Section(NOTE, "notes"))
    return tuple(found)


def repair_suggested(plan: Plan) -> bool:
    """Whether the plan suggests `--repair`: where its check found the repair safe, or could
    not check it without staging the wheels (the dry run it suggests checks it); never where
    the repair is known not to help."""
    return plan.repair is not None and plan.repair.safe is not False


def making_safe(plan: Plan) -> str | None:
    """The options the plan itself says make it safe (`--replacing X`, checked safe;
    `--repair`, checked safe), as words; a repair the plan could not check is said as one
    its dry run checks. None where the plan suggests nothing."""
    if plan.replacing:
        return " ".join(f"--replacing {p.name}" for p in plan.replacing) + " makes it safe"
    if plan.repair is not None and plan.repair.safe:
        return "--repair makes it safe"
    if repair_suggested(plan):
        return "--repair may make it safe (`--dry-run --repair` checks it)"
    return None
