"""`cudatx doctor` as text (the verdict, then each finding with why, what it breaks and the
fix) and as JSON."""

from __future__ import annotations

from cudatx.analysis.doctor import DoctorReport, DoctorTrial
from cudatx.analysis.problems import Problem, Severity
from cudatx.codec import document
from cudatx.errors import json_text
from cudatx.names import counted
from cudatx.render import as_text
from cudatx.render.formats import Rendered
from cudatx.render.formats import render as written
from cudatx.render.plan import gpu_lines

_CONSEQUENCES = 6  # lines under one finding; --json lists them all


def render(report: DoctorReport, fmt: str) -> Rendered:
    """The findings in format `fmt` (cudatx.render.formats)."""
    return written("doctor", report, fmt)


def to_json(report: DoctorReport) -> str:
    return json_text(document(report))


def _problem(problem: Problem) -> list[str]:
    lines = [f"{problem.severity.value}: {problem.what}", f"  why: {problem.why}"]
    shown = problem.consequences[:_CONSEQUENCES]
    lines += [f"  so: {line}" for line in shown]
    if len(problem.consequences) > len(shown):
        lines.append(f"  so: ... and {len(problem.consequences) - len(shown)} more (--json)")
    if problem.fix:
        lines.append(f"  fix: {problem.fix}")
    return lines


def to_text(report: DoctorReport) -> str:
    lines: list[str] = [report.verdict]
    if report.problems:
        lines.append("")
    for severity in (Severity.ERROR, Severity.WARNING):
        for problem in report.problems:
            if problem.severity is severity:
                lines.extend(_problem(problem))
    if len(report.fixes) > 1:
        lines.append("fixes, in order:")
        lines += [f"  {fix}" for fix in report.fixes]
    if report.system_provided:
        lines.append("system driver (never from a wheel): " + ", ".join(report.system_provided))
    if report.unprovided:
        names = [u.name for u in report.unprovided]
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        lines.append(
            f"note: {counted(len(names), 'name')} in .rodata strings "
            f"{'do' if len(names) != 1 else 'does'} not load here (optional run-time "
            f"loads: {shown}); `cudatx why NAME` says who names them, --strict counts them"
        )
    for note in report.notes:
        lines.append(f"note: {note}")
    if report.trial is not None:
        lines += _trial(report.trial)
    counts = (
        "no problems"
        if not report.problems
        else (f"{counted(report.errors, 'error')}, {counted(report.warnings, 'warning')}")
    )
    lines.append(counts)
    return as_text(lines)


def _trial(trial: DoctorTrial) -> list[str]:
    lines = [f"Trial (imports in {trial.shadow}; {trial.seconds:.1f} s):"]
    if not trial.failing:
        lines.append(f"  every one of {trial.checks} checks works (imports, load steps, commands)")
    for f in trial.failing:
        mark = "known to the model" if f.known else "UNKNOWN to the model"
        lines.append(f"  x {f.check} fails ({mark}): {f.error}")
    return lines + gpu_lines(trial.gpu)
