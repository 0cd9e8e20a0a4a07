"""The JSON format: a document for machines, the same bytes at a terminal and in a pipe
(never coloured, never cut by -q), each ending with a line break."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudatx.render.formats import Rendered

if TYPE_CHECKING:
    import networkx as nx

    from cudatx.analysis.doctor import DoctorReport
    from cudatx.render import checkreq as render_checks
    from cudatx.render import history as render_history
    from cudatx.render import plan as render_plan
    from cudatx.render import trace as render_trace
    from cudatx.render import why as render_why
    from cudatx.txn.journal import Journal

# Imported as a report is written, as in cudatx.render.formats.text.


def plan(report: render_plan.Report) -> Rendered:
    from cudatx.render.plan import to_json

    return Rendered(to_json(report.plan) + "\n", document=True)


def doctor(report: DoctorReport) -> Rendered:
    from cudatx.render.doctor import to_json

    return Rendered(to_json(report) + "\n", document=True)


def why(report: render_why.Report) -> Rendered:
    from cudatx.render.why import to_json

    return Rendered(to_json(report.answer) + "\n", document=True)


def checks(report: render_checks.Report) -> Rendered:
    from cudatx.render.checkreq import to_json

    return Rendered(to_json(report.checks) + "\n", document=True)


def history(report: render_history.Report) -> Rendered:
    from cudatx.render.history import to_json

    return Rendered(to_json(report.journals, report.prefix), document=True)


def journal(report: Journal) -> Rendered:
    from cudatx.render.history import show_json

    return Rendered(show_json(report), document=True)


def traces(report: render_trace.Report) -> Rendered:
    from cudatx.render.trace import to_json

    return Rendered(to_json(report.traces, report.prefix), document=True)


def graph(report: nx.MultiDiGraph) -> Rendered:
    from cudatx.render.graph import to_json

    # As the graph's other formats write theirs: no line break at its end, and through the
    # printer's escapes (json.dumps leaves DEL raw, which the printer shows escaped).
    return Rendered(to_json(report))
