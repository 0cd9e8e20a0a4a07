"""The text format: what a person reads, coloured where colour is wanted (cudatx.render.colour);
a report whose first line is its verdict shows that line alone under -q."""

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

# Each report's renderer is imported as the report is written: asking which formats there
# are (a command's --format) imports this module, not every report's.


def plan(report: render_plan.Report) -> Rendered:
    from cudatx.render import colour
    from cudatx.render.plan import to_text

    return Rendered(to_text(report.plan, report.command, report.sites), colour.plan, verdict=True)


def doctor(report: DoctorReport) -> Rendered:
    from cudatx.render import colour
    from cudatx.render.doctor import to_text

    return Rendered(to_text(report), colour.doctor, verdict=True)


def why(report: render_why.Report) -> Rendered:
    from cudatx.render import colour
    from cudatx.render.why import to_text

    text = to_text(report.answer, report.sites, report.verbose)
    return Rendered(text, colour.why, verdict=True)


def checks(report: render_checks.Report) -> Rendered:
    from cudatx.render import colour
    from cudatx.render.checkreq import to_text

    return Rendered(to_text(report.checks, report.sites), colour.plan, verdict=True)


def history(report: render_history.Report) -> Rendered:
    from cudatx.render import colour
    from cudatx.render.history import to_text

    return Rendered(to_text(report.journals, report.prefix), colour.history)


def journal(report: Journal) -> Rendered:
    from cudatx.render import colour
    from cudatx.render.history import show

    return Rendered(show(report), colour.summary)


def traces(report: render_trace.Report) -> Rendered:
    from cudatx.render.trace import to_text

    return Rendered(to_text(report.traces, report.prefix))


def graph(report: nx.MultiDiGraph) -> Rendered:
    from cudatx.render.graph import to_text

    return Rendered(to_text(report))
