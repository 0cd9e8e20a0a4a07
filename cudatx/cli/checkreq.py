"""`cudatx check-requirements`: the pre-commit hook's command."""

from __future__ import annotations

import click

import cudatx.cli.output as output
from cudatx.cli.app import scanned
from cudatx.cli.options import (
    UvSource,
    json_option,
    no_deps_option,
    planning,
    strict_option,
    target_options,
    uv_options,
)
from cudatx.errors import EnvironmentNotFound, ExitCode


@click.command("check-requirements")
@click.argument("files", nargs=-1, metavar="FILE...")
@click.option(
    "--extra",
    "extras",
    metavar="NAME",
    multiple=True,
    help="Optional dependencies to include (pyproject.toml, uv.lock, pylock.toml).",
)
@click.option(
    "--mode",
    type=click.Choice(["auto", "sync", "install"]),
    default="auto",
    show_default=True,
    help="sync: the file is the whole environment (uv pip sync); install: uv pip install "
    "-r; auto: sync for lock files and for pins that list every installed distribution "
    "(now or as committed).",
)
@click.option(
    "--require-env",
    is_flag=True,
    help="Fail (exit 3) when there is no environment to check, instead of skipping.",
)
@strict_option
@no_deps_option
@uv_options
@target_options
@json_option("the results")
def check_requirements(
    files: tuple[str, ...],
    extras: tuple[str, ...],
    mode: str,
    require_env: bool,
    strict: bool,
    python: str | None,
    ld_library_path: str | None,
    as_json: bool,
    source: UvSource,
) -> int:
    """Would bringing the environment in line with FILE break loading? For requirements
    files, pyproject.toml, uv.lock and pylock.toml: a file that pins every installed
    distribution (or a lock) means `uv pip sync`, any other `uv pip install -r`. Changes
    nothing. Quiet and exit 0 when safe; exit 1 with the broken libraries, the line
    responsible (against the committed version, where git tracks the file) and the fix."""
    from cudatx.discover.target import hook_target
    from cudatx.planning.checkreq import check_file
    from cudatx.render import checkreq as render
    from cudatx.render import colour

    if not files:
        return 0
    chosen = hook_target(python)
    if chosen is None:
        message = (
            "no environment to check (pass --python, in a pre-commit hook through its args, "
            "or create .venv)"
        )
        if require_env:
            raise EnvironmentNotFound(message)
        click.echo(f"cudatx: {message}; skipped", err=True)
        return 0
    how = planning(source, repair=False, check_requirements=True, strict=strict)
    # uv runs the environment's interpreter to resolve: refused where others can write it.
    with scanned(chosen, ld_library_path, echo=False, changes=True) as env:
        checks = [check_file(env, f, how, extras=extras, mode=mode) for f in files]
    if as_json:
        click.echo(render.to_json(checks))
    else:
        output.report(render.to_text(checks, env.target.site_packages), paint=colour.plan)
    return 0 if all(c.plan.safe for c in checks) else ExitCode.FINDINGS
