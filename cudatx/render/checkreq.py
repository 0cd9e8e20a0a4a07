"""check-requirements results: quiet when safe; the breaks, the lines and the fix when not."""

from __future__ import annotations

import json
from typing import NamedTuple

from cudatx.codec import plain
from cudatx.errors import one_line
from cudatx.names import counted
from cudatx.planning.checkreq import Check, FileCheck
from cudatx.planning.conflicts import Brought, Conflict, culprits
from cudatx.render import as_text
from cudatx.render import plan as render_plan
from cudatx.render.formats import Rendered
from cudatx.render.formats import render as written


class Report(NamedTuple):
    """check-requirements' results as shown: one check per file, and the site folders its
    paths are shown under."""

    checks: list[FileCheck]
    sites: tuple[str, ...]


def render(report: Report, fmt: str) -> Rendered:
    """The results in format `fmt` (cudatx.render.formats)."""
    return written("checks", report, fmt)


def to_json(checks: list[FileCheck]) -> str:
    data = {"schema_version": 1, "files": [plain(c) for c in checks]}
    return json.dumps(data, indent=2)


def _brought(b: Brought, indent: str, path: str) -> list[str]:
    head = f"{indent}{b.name} {b.version}"
    if not b.lines:
        return [f"{head}: the file does not list it or what requires it"]
    out = []
    for ln in b.lines:
        via = "" if b.direct else f", which requires {b.name}"
        where = f"line {ln.line}" + ("" if ln.source == path else f" of {ln.source}")
        out.append(f"{head} <- {where} ({ln.state}): {ln.text}{via}")
    return out


def _conflict(c: Conflict, path: str) -> list[str]:
    lines = [f"  {c.message}"]
    blamed = culprits(c.first, c.second)
    for b in (*blamed, *(x for x in (c.first, c.second) if x not in blamed)):
        lines += _brought(b, "    ", path)
    return lines


def _headline(check: FileCheck) -> str:
    if check.check == Check.ENVIRONMENT:
        verb = "syncing the environment to" if check.mode == "sync" else "installing"
        return f"{check.path}: {verb} this file would break loading"
    fresh = "into an empty environment "
    if check.plan is not None and not check.plan.safe:
        return f"{check.path}: installing this file {fresh}would break loading"
    return f"{check.path}: installing this file {fresh}would write the same paths twice"


def to_text(checks: list[FileCheck], sites: tuple[str, ...]) -> str:
    lines: list[str] = []
    for check in checks:
        if check.safe:
            continue
        lines.append(_headline(check))
        plan = check.plan
        if plan is not None and not plan.safe:
            sonames = sorted(
                {b.soname for b in plan.broken}
                | {m.soname for m in plan.mixed}
                | {r.first_missing for r in plan.broken_roots}
            )
            if sonames:
                lines.append(f"  broken: {', '.join(sonames)}")
        for b in check.blame:
            if b.line is None:
                lines.append(f"  {b.change} {b.name}: the file does not list it")
                continue
            if not check.committed:
                state = "not in git"
            else:
                state = "this change" if b.edited else "unchanged since the last commit"
            lines.append(f"  {b.change} {b.name} <- line {b.line} ({state}): {b.text}")
        for brought in check.brought:
            lines += _brought(brought, "  ", check.path)
        if plan is not None and not plan.safe:
            body = render_plan.to_text(plan, check.command, sites)
            lines += ["  " + ln for ln in body.rstrip("\n").splitlines()]
        for conflict in check.conflicts:
            lines += _conflict(conflict, check.path)
        lines += [f"  fix: {f}" for f in check.fix]
    return as_text(lines)


def summary(check: FileCheck) -> str:
    """One line on how a check without an environment read its wheels' RECORDs."""
    by_source: dict[str, int] = {}
    for w in check.wheels:
        by_source[w.source] = by_source.get(w.source, 0) + 1
    moved = sum(w.transferred for w in check.wheels)
    said = ", ".join(
        f"{n} from {s}" if s != "file" else f"{n} from files" for s, n in by_source.items()
    )
    count = len(check.wheels)
    head = f"{check.path}: {counted(count, 'wheel')} for Python {check.python}"
    return one_line(head + (f" ({said}; {moved / 1e6:.1f} MB transferred)" if check.wheels else ""))
