"""`cudatx why` as text (libtree's spirit: the answer first, then why) and as JSON."""

from __future__ import annotations

from cudatx.analysis.why import Owner, Route, WhyReport
from cudatx.models import Attempt, Evidence, How, Outcome, Status
from cudatx.paths import display_path

_MAX_NEEDERS = 8  # the JSON lists them all


def to_json(report: WhyReport) -> str:
    return report.model_dump_json(indent=2)


class _Paths:
    """Paths as the loader opened them, relative to their site folder: never folded, since
    `a/link/../b` is where the loader looked."""

    def __init__(self, sites: tuple[str, ...]) -> None:
        self.sites = sites

    def __call__(self, path: str | None) -> str:
        return display_path(path, self.sites, resolve=False)


def _owners(owners: tuple[Owner, ...]) -> str:
    return ", ".join(f"{o.name} {o.version}" for o in owners) if owners else "no distribution"


def _how(how: How | None, source: str | None, short: _Paths) -> str:
    if how is None:
        return "-"
    return how.value if source is None else f"{how.value} of {short(source)}"


def _found_by(route: Route, short: _Paths) -> str:
    text = _how(route.how, route.source, short)
    if route.earlier is not None:
        first = route.earlier
        if first.evidence is Evidence.PRELOAD:
            text += f" (preloaded by {short(first.needed_by)})"
            if route.detail:
                text += f"; {route.detail}"
        else:
            text += (
                f" (mapped earlier for {short(first.needed_by)}"
                f" via {_how(first.how, first.source, short)})"
            )
    return text


def _attempt_line(a: Attempt, short: _Paths, width: int) -> str:
    label = _how(a.how, a.source, short)
    outcome = a.outcome.value + (f" ({a.detail})" if a.detail else "")
    marker = "->" if a.outcome is Outcome.FOUND else "  "
    return f"    {marker} {label:<{width}}  {short(a.path)}  {outcome}"


def _shown(route: Route) -> str | None:
    """The path as the loader opened it, unless it holds `..`: then the file it reached."""
    if route.path is not None and ".." not in route.path.split("/"):
        return route.path
    return route.file


def _route(route: Route, short: _Paths) -> list[str]:
    lines = []
    if route.status is Status.RESOLVED:
        lines.append(f"{short(route.name)} => {short(_shown(route))}")
        lines.append(f"  found by   {_found_by(route, short)}")
        if route.source_distributions:
            lines[-1] += f" [{_owners(route.source_distributions)}]"
        lines.append(f"  listed by  {_owners(route.owners)}")
    else:
        lines.append(f"{short(route.name)} {route.status.value}: {route.detail}")
    for index, needer in enumerate(route.needed_by[:_MAX_NEEDERS]):
        head = "  needed by  " if index == 0 else "             "
        lines.append(
            f"{head}{short(needer.object)} [{_owners(needer.distributions)}] ({needer.evidence})"
        )
    if len(route.needed_by) > _MAX_NEEDERS:
        lines.append(f"             ... and {len(route.needed_by) - _MAX_NEEDERS} more (--json)")
    for want in route.wanted:
        what = f"versions {', '.join(want.versions)}"
        if want.symbols:
            what += f" and {want.symbols} symbol{'s' if want.symbols != 1 else ''} of them"
        if want.missing:
            verdict = f"this file lacks {', '.join(want.missing[:4])}"
            if len(want.missing) > 4:
                verdict += f" and {len(want.missing) - 4} more"
        else:
            verdict = "this file has them" if want.has_all else "this file has the versions"
        lines.append(f"  {short(want.object)} wants {what}: {verdict}")
        for other in want.elsewhere:
            lines.append(f"    {short(other)} has them all")
    first = route.needed_by[0] if route.needed_by else None
    if first is not None and first.attempts:
        lines.append(f"  search, as done for {short(first.object)}:")
        width = max(len(_how(a.how, a.source, short)) for a in first.attempts)
        lines.extend(_attempt_line(a, short, width) for a in first.attempts)
    return lines


def to_text(report: WhyReport, sites: tuple[str, ...]) -> str:
    short = _Paths(sites)
    shown = {r.file for r in report.routes if r.file}  # FileFact paths are keyed the same way
    lines: list[str] = []
    for route in report.routes:
        if lines:
            lines.append("")
        lines.extend(_route(route, short))
    if not report.routes:
        lines.append(f"{report.query}: nothing in this environment loads it")
    unused = [f for f in report.files if f.path not in shown]
    if unused and report.routes:
        lines.append("")
    for fact in unused:
        lines.append(f"  file {short(fact.path)} [{_owners(fact.owners)}]")
    return "\n".join(lines) + "\n"
