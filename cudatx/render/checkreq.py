"""check-requirements results: quiet when safe; the breaks, the lines and the fix when not."""

from __future__ import annotations

import json

from cudatx.documents import dump
from cudatx.planning.checkreq import FileCheck
from cudatx.render import plan as render_plan


def to_json(checks: list[FileCheck]) -> str:
    data = {"schema_version": 1, "files": [dump(c, mode="json") for c in checks]}
    return json.dumps(data, indent=2)


def to_text(checks: list[FileCheck], sites: tuple[str, ...]) -> str:
    lines: list[str] = []
    for check in checks:
        if check.plan.safe:
            continue
        verb = "syncing the environment to" if check.mode == "sync" else "installing"
        lines.append(f"{check.path}: {verb} this file would break loading")
        sonames = sorted(
            {b.soname for b in check.plan.broken}
            | {m.soname for m in check.plan.mixed}
            | {r.first_missing for r in check.plan.broken_roots}
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
        body = render_plan.to_text(check.plan, check.command, sites)
        lines += ["  " + ln for ln in body.rstrip("\n").splitlines()]
        lines += [f"  fix: {f}" for f in check.fix]
    return "\n".join(lines) + ("\n" if lines else "")
