"""Commands that look and change nothing: why, doctor, graph."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cudatx.cli.app import scanned
from cudatx.cli.options import (
    Target,
    TrialRequest,
    format_option,
    strict_option,
    target_options,
    trial_options,
)
from cudatx.errors import ExitCode, UsageError

if TYPE_CHECKING:
    import networkx as nx


@click.command()
@click.argument("query", metavar="SONAME|PATH")
@target_options
@format_option("why", "the answer")
def why(query: str, target: Target, fmt: str) -> int:
    """Why a library is (or is not) found: who needs it, where the loader looked, what it took."""
    from cudatx.analysis.why import explain
    from cudatx.render import why as render

    with scanned(target) as env:
        report = render.Report(explain(env, query), env.target.site_packages, target.output.verbose)
        target.output.show(render.render(report, fmt))
    return 0


_DOCTOR_TRIAL = (
    "Also import every top-level package in a fresh interpreter, with each framework's "
    "load steps, in a shadow of the environment (-B: nothing is written to it), and name "
    "each import that fails, marked known or unknown to the model. This RUNS THE "
    "ENVIRONMENT'S CODE: never without this flag, and never as root on an environment "
    "another user can write."
)


@click.command()
@target_options
@strict_option
@trial_options(_DOCTOR_TRIAL)
@format_option("doctor", "the findings")
def doctor(
    target: Target,
    strict: bool,
    trial: TrialRequest | None,
    fmt: str,
) -> int:
    """What is already wrong here, by root cause, and the commands that cure it: libraries
    that cannot load, hollow or co-owned packages, mixed CUDA majors, unmet requirements.
    Exit 1 when there is an error (with --trial: or a check that fails)."""
    from dataclasses import replace

    from cudatx.analysis.doctor import diagnose
    from cudatx.render import doctor as render

    with scanned(target) as env:
        report = diagnose(env, strict=strict)
        if trial is not None:
            from cudatx.cli.change import trial_options_shown, trial_said
            from cudatx.trial.doctor import judge_as_is

            with trial_options_shown(trial, target, quiet=fmt != "text") as options:
                judged = judge_as_is(env, options)
            report = replace(report, trial=judged)
            target.output.debug(trial_said(target, judged.sandbox))
    target.output.show(render.render(report, fmt))
    failing = report.trial is not None and bool(report.trial.failing)
    return ExitCode.FINDINGS if report.errors or failing else 0


_PICTURES = ("svg", "png")


def _find_dot(fmt: str) -> str:
    """Graphviz's `dot`, looked up before the scan: a one-line error where it is missing."""
    import shutil

    dot = shutil.which("dot")
    if dot is None:
        raise UsageError(
            f"--format {fmt} needs Graphviz's `dot` on PATH (e.g. apt install graphviz); "
            "--format dot prints what it would draw"
        )
    return dot


def _picture(dot: str, dot_text: str, fmt: str) -> bytes:
    import subprocess

    done = subprocess.run([dot, f"-T{fmt}"], input=dot_text.encode(), capture_output=True)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"dot -T{fmt} failed: {said[-1] if said else done.returncode}")
    return done.stdout


_MAX_RADIUS = 4


def _fitting(graph: nx.MultiDiGraph, name: str, requires: bool) -> nx.MultiDiGraph:
    """The part around `name` of the largest radius (1 to _MAX_RADIUS) whose text fits the
    terminal's height (`LINES`, else the terminal's, else 40), as `less` shows a screen; at
    least radius 1, however long."""
    import shutil

    from cudatx.analysis.graph import around
    from cudatx.render.graph import render

    rows = shutil.get_terminal_size((100, 40)).lines
    best = around(graph, name, 1, requires=requires)
    for radius in range(2, _MAX_RADIUS + 1):
        wider = around(graph, name, radius, requires=requires)
        if len(wider) == len(best) or render(wider, "text").text.count("\n") > rows:
            break
        best = wider
    return best


@click.command()
@target_options
@format_option(
    "graph",
    "the graph",
    ", as DOT, GraphML or Mermaid, or drawn by Graphviz's dot as SVG or PNG",
    extra=_PICTURES,
)
@click.option(
    "--around",
    "around_name",
    metavar="NAME",
    default=None,
    help="Only the part around a distribution, soname or file (path or basename), with the "
    "co-owners of its files and the providers of what it needs.",
)
@click.option(
    "--radius",
    type=click.IntRange(min=0),
    default=None,
    help="With --around: how many edges away to go, in either direction [default: the "
    f"largest, up to {_MAX_RADIUS}, whose text fits the terminal's height, at least 1].",
)
@click.option(
    "--requires",
    "with_requires",
    is_flag=True,
    help="With --around: follow Requires-Dist edges too (they reach what never loads).",
)
def graph(
    target: Target,
    fmt: str,
    around_name: str | None,
    radius: int | None,
    with_requires: bool,
) -> int:
    """The environment as a graph: distributions, ELF files and sonames, with their owns,
    needs, resolves and requires edges."""
    from cudatx.analysis.graph import around, build_graph
    from cudatx.render.graph import render

    # One format unless --format says otherwise: `cudatx graph | less` shows what the
    # terminal shows (it printed 354 KB of JSON when the format followed isatty).
    dot = _find_dot(fmt) if fmt in _PICTURES else ""
    with scanned(target) as env:
        result = build_graph(env)
    if around_name is not None:
        if radius is None:
            result = _fitting(result, around_name, with_requires)
        else:
            result = around(result, around_name, radius, requires=with_requires)
    if fmt in _PICTURES:
        target.output.picture(_picture(dot, render(result, "dot").text, fmt))
    else:
        # Through the printer, for its escapes (a JSON graph holds none raw: json.dumps
        # writes ASCII): a file's name and a distribution's are data from outside.
        target.output.show(render(result, fmt))
    return 0
