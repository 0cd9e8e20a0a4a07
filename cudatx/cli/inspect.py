"""Commands that look and change nothing: why, doctor, graph."""

from __future__ import annotations

import click

from cudatx.cli.app import scanned
from cudatx.cli.options import json_option, strict_option, target_options
from cudatx.errors import ExitCode


@click.command()
@click.argument("query", metavar="SONAME|PATH")
@target_options
@json_option("the answer")
def why(query: str, python: str | None, ld_library_path: str | None, as_json: bool) -> int:
    """Why a library is (or is not) found: who needs it, where the loader looked, what it took."""
    from cudatx.analysis.why import explain
    from cudatx.render import why as render

    with scanned(python, ld_library_path) as env:
        report = explain(env, query)
        if as_json:
            click.echo(render.to_json(report))
        else:
            click.echo(render.to_text(report, env.target.site_packages), nl=False)
    return 0


@click.command()
@target_options
@strict_option
@json_option("the findings")
def doctor(python: str | None, ld_library_path: str | None, strict: bool, as_json: bool) -> int:
    """What is already wrong here, by root cause, and the commands that cure it: libraries
    that cannot load, hollow or co-owned packages, mixed CUDA majors, unmet requirements.
    Exit 1 when there is an error."""
    from cudatx.analysis.doctor import diagnose
    from cudatx.render import doctor as render

    with scanned(python, ld_library_path) as env:
        report = diagnose(env, strict=strict)
    click.echo(render.to_json(report) if as_json else render.to_text(report), nl=as_json)
    return ExitCode.FINDINGS if report.errors else 0


@click.command()
@target_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "dot", "graphml", "mermaid"]),
    default="json",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--around",
    "around_name",
    metavar="NAME",
    default=None,
    help="Only the part around a distribution, soname or file (path or basename).",
)
@click.option(
    "--radius",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="With --around: how many edges away to go, in either direction.",
)
def graph(
    python: str | None, ld_library_path: str | None, fmt: str, around_name: str | None, radius: int
) -> int:
    """The environment as a graph: distributions, ELF files and sonames, with their owns,
    needs, resolves and requires edges."""
    from cudatx.analysis.graph import around, build_graph
    from cudatx.render.graph import render

    with scanned(python, ld_library_path) as env:
        result = build_graph(env)
    if around_name is not None:
        result = around(result, around_name, radius)
    click.echo(render(result, fmt), nl=False)
    return 0
