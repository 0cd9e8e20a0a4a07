"""A toy output format, added as docs/architecture.md says a format is added: this one module,
with a function for each kind of report it writes (here only `plan`), and one
`cudatx.render.formats.register("toy", toyformat)` (tests/cli/test_formats.py)."""

from __future__ import annotations

from cudatx.render import plan as render_plan


def plan(report: render_plan.Report) -> str:
    """The plan as one line: its verdict and what it removes."""
    p = report.plan
    removed = " ".join(f"{r.name}=={r.version}" for r in p.remove)
    return f"toy: {'safe' if p.safe else 'unsafe'}: remove {removed or 'nothing'}\n"
