"""`cudatx trace`: what a run recorded, and the records kept, as text and as JSON."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from cudatx.discover.traces import Trace
from cudatx.documents import dump
from cudatx.errors import one_line
from cudatx.render import as_text
from cudatx.render.formats import Rendered
from cudatx.render.formats import render as written

SCHEMA_VERSION = 1


class Report(NamedTuple):
    """The trace records kept for the environment at `prefix`."""

    traces: tuple[Trace, ...]
    prefix: str


def render(report: Report, fmt: str) -> Rendered:
    """`cudatx trace --list` in format `fmt` (cudatx.render.formats)."""
    return written("traces", report, fmt)


def recorded(trace: Trace) -> str:
    """The line said on stderr once the command has run and its record is written."""
    record = trace.record
    processes = len(record.processes)
    return one_line(
        f"Traced `{record.command_line}` (exit {record.exit_code}): {record.mapped()} objects "
        f"mapped by {processes} process{'es' * (processes != 1)} of the environment, "
        f"{len(record.files)} of them its files; recorded as trace {record.id} "
        "(`cudatx trace --list`)"
    )


def _state(trace: Trace) -> str:
    return "fresh" if trace.stale is None else "stale"


def to_text(traces: tuple[Trace, ...], prefix: str) -> str:
    if not traces:
        return as_text([f"No traced runs recorded for {prefix}."])
    lines = []
    for t in traces:
        r = t.record
        lines.append(
            f"{r.id}  {r.when}  exit {r.exit_code}  {r.mapped()} loads  {_state(t)}  "
            f"{r.command_line}"
        )
        if t.stale is not None:
            lines.append(f"  stale: {t.stale}; not counted")
    return as_text(lines)


def summary(trace: Trace) -> dict[str, Any]:
    """One record as `trace --list --json` and a plan's `traces` give it."""
    r = trace.record
    return {
        "id": r.id,
        "created": r.created,
        "command": list(r.command),
        "cwd": r.cwd,
        "exit_code": r.exit_code,
        "ld_library_path": r.ld_library_path,
        "stale": trace.stale,
        "path": trace.path,
        "files": len(r.files),
        "others": r.others,
        "processes": [dump(p, mode="json") for p in r.processes],
    }


def to_json(traces: tuple[Trace, ...], prefix: str) -> str:
    document = {
        "schema_version": SCHEMA_VERSION,
        "prefix": prefix,
        "traces": [summary(t) for t in traces],
    }
    return json.dumps(document, indent=2) + "\n"
