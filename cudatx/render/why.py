"""`cudatx why` as text (libtree's spirit: the answer first, then why) and as JSON."""

from __future__ import annotations

from typing import NamedTuple

from cudatx.analysis.why import Owner, Route, WhyReport
from cudatx.codec import document
from cudatx.discover.owners import by_key
from cudatx.errors import json_text
from cudatx.models import Attempt, Evidence, How, Outcome, Status
from cudatx.names import counted
from cudatx.paths import display_path
from cudatx.render import as_text
from cudatx.render.formats import Rendered
from cudatx.render.formats import render as written

_MAX_NEEDERS = 8  # the JSON lists them all


class Report(NamedTuple):
    """why's answer as shown: the answer, the site folders its paths are shown under, and
    how much of it (-v: every needer and every search)."""

    answer: WhyReport
    sites: tuple[str, ...]
    verbose: int = 0


def render(report: Report, fmt: str) -> Rendered:
    """The answer in format `fmt` (cudatx.render.formats)."""
    return written("why", report, fmt)


def to_json(report: WhyReport) -> str:
    return json_text(document(report))


class _Paths:
    """Paths relative to their site folder. Given as the loader opened them, they are not
    folded (`a/link/../b` is where the loader looked: the search lines show that); a file
    found is shown by its key instead, its folders resolved (`Route.file`, `Needer.file`),
    which --json keeps beside the opened path."""

    def __init__(self, sites: tuple[str, ...]) -> None:
        self.sites = sites

    def __call__(self, path: str | None) -> str:
        return display_path(path, self.sites, resolve=False)


def _major(route: Route) -> str:
    return f"CUDA {route.cuda_major}" if route.cuda_major is not None else "no CUDA major known"


def answer(report: WhyReport, sites: tuple[str, ...]) -> str:
    """The first line: the file the loader maps, whose bytes they are, their CUDA major,
    and how it was found (or why nothing is)."""
    short = _Paths(sites)
    if report.answer is None:
        return f"{report.query}: nothing in this environment loads it"
    route = report.routes[report.answer]
    needers = len(route.needed_by)
    if route.status is not Status.RESOLVED:
        count = f"{counted(needers, 'object')}"
        line = f"{short(route.name)} {route.status.value} for {count}: {route.detail}"
        if route.system_package is not None:  # the file that would have to change
            line += f" ({short(route.file)} is from {route.system_package})"
        return line
    owner = route.effective_owner
    if owner is not None:
        whose = f"bytes of {owner.name} {owner.version}"
    elif route.owners:
        whose = "bytes that match no RECORD listing it"
    elif route.system_package is not None:
        whose = f"from {route.system_package}"
    else:
        whose = "listed by no distribution"
    found = _found_by(route, short)
    if route.needed_by:
        first = route.needed_by[0]
        more = f" and {needers - 1} more" if needers > 1 else ""
        found += f", for {short(first.file or first.object)}{more} ({first.evidence})"
    name = report.query if report.kind == "soname" else short(route.name)
    return f"{name} => {short(route.file)} ({whose}, {_major(route)}); by {found}"


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


def _route(route: Route, short: _Paths, verbose: int) -> list[str]:
    lines = []
    limit = None if verbose else _MAX_NEEDERS
    if route.status is Status.RESOLVED:
        lines.append(f"{short(route.name)} => {short(route.file)}")
        if route.path is not None and route.path != route.file:
            lines.append(f"  opened as  {short(route.path)}")
        lines.append(f"  found by   {_found_by(route, short)}")
        if route.source_distributions:
            lines[-1] += f" [{_owners(route.source_distributions)}]"
        lines.append(f"  listed by  {_owners(route.owners)}")
        if route.system_package is not None:
            lines.append(
                f"  from       {route.system_package} (the system's; cudatx never changes it)"
            )
        if route.effective_owner is not None and len(route.owners) > 1:
            owner = route.effective_owner
            hashes = by_key(owner.kind).hashes
            lines.append(f"  bytes of   {owner.name} {owner.version} (its {hashes} hash matches)")
        if route.cuda_major is not None:
            lines.append(f"  built for  CUDA {route.cuda_major} ({route.cuda_reason})")
    else:
        lines.append(f"{short(route.name)} {route.status.value}: {route.detail}")
        if route.system_package is not None:
            lines.append(
                f"  from       {route.system_package} (the system's; cudatx never changes it)"
            )
    for index, needer in enumerate(route.needed_by[:limit]):
        head = "  needed by  " if index == 0 else "             "
        who = short(needer.file or needer.object)
        lines.append(
            f"{head}{who} [{_owners(needer.distributions)}] ({needer.role or needer.evidence})"
        )
    if limit is not None and len(route.needed_by) > limit:
        lines.append(f"             ... and {len(route.needed_by) - limit} more (-v, --json)")
    wanted = route.wanted[:limit]
    for want in wanted:
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
    if len(route.wanted) > len(wanted):
        lines.append(f"  ... and {len(route.wanted) - len(wanted)} more wanting versions (-v)")
    # The search as done for the first needer; under -v for every needer.
    for needer in route.needed_by[: None if verbose else 1]:
        if not needer.attempts:
            continue
        lines.append(f"  search, as done for {short(needer.file or needer.object)}:")
        width = max(len(_how(a.how, a.source, short)) for a in needer.attempts)
        lines.extend(_attempt_line(a, short, width) for a in needer.attempts)
    return lines


def to_text(report: WhyReport, sites: tuple[str, ...], verbose: int = 0) -> str:
    """The answer in one line, then each route in detail (every needer and every search
    under `verbose`)."""
    short = _Paths(sites)
    shown = {r.file for r in report.routes if r.file}  # FileFact paths are keyed the same way
    lines: list[str] = [answer(report, sites)]
    for route in report.routes:
        lines.append("")
        lines.extend(_route(route, short, verbose))
    unused = [f for f in report.files if f.path not in shown]
    if unused and report.routes:
        lines.append("")
    for fact in unused:
        lines.append(f"  file {short(fact.path)} [{_owners(fact.owners)}]")
    return as_text(lines)
