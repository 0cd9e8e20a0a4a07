"""`cudatx doctor` as text (grouped by severity, each with why and fix) and as JSON."""

from __future__ import annotations

from cudatx.analysis.doctor import DoctorReport, Problem, Severity


def to_json(report: DoctorReport) -> str:
    return report.model_dump_json(indent=2)


def _problem(problem: Problem) -> list[str]:
    lines = [f"{problem.severity.value}: {problem.what}", f"  why: {problem.why}"]
    if problem.fix:
        lines.append(f"  fix: {problem.fix}")
    return lines


def to_text(report: DoctorReport) -> str:
    lines: list[str] = []
    for severity in (Severity.ERROR, Severity.WARNING):
        for problem in report.problems:
            if problem.severity is severity:
                lines.extend(_problem(problem))
    if report.system_provided:
        lines.append("system driver (never from a wheel): " + ", ".join(report.system_provided))
    if report.unprovided:
        names = [u.name for u in report.unprovided]
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        lines.append(
            f"note: {len(names)} names in .rodata strings are provided by nothing here "
            f"(optional run-time loads: {shown}); `cudatx why NAME` says who names them"
        )
    for note in report.notes:
        lines.append(f"note: {note}")
    verdict = (
        "no problems"
        if not report.problems
        else (
            f"{report.errors} error{'s' * (report.errors != 1)}, "
            f"{report.warnings} warning{'s' * (report.warnings != 1)}"
        )
    )
    lines.append(verdict)
    return "\n".join(lines) + "\n"
