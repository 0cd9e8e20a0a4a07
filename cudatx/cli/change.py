"""Commands that change an environment: remove, install, sync (each --dry-run too)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from cudatx.cli.app import invocation, scanned
from cudatx.cli.options import (
    ChangeRequest,
    F,
    UvSource,
    change_options,
    no_deps_option,
    planning,
    target_options,
    uv_options,
)
from cudatx.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from cudatx.environment import Environment
    from cudatx.planning.change import Planning, Proposal


def _command_words(
    command: str, args: tuple[str, ...], *options: tuple[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """The cudatx command a plan's suggestion repeats, without --dry-run."""
    words = ["cudatx", command, *args]
    for flag, values in options:
        for value in values:
            words += [flag, value]
    return tuple(words)


def _suggestion(words: tuple[str, ...], env: Environment, source: UvSource) -> str:
    """`words` as a command that can be pasted anywhere: the environment it was planned for
    and where uv found wheels come with it, every word shell-quoted."""
    return shlex.join([*words, "--python", env.target.prefix, *source.options.args()])


def _planning(request: ChangeRequest, source: UvSource) -> Planning:
    return planning(
        source,
        repair=request.repair,
        check_requirements=request.check_requirements,
        strict=request.strict,
    )


def _carry_out(
    env: Environment,
    proposal: Proposal,
    words: tuple[str, ...],
    python: str | None,
    request: ChangeRequest,
    source: UvSource,
) -> int:
    """Show a plan; for a dry run, its verdict; otherwise confirm and apply it."""
    from cudatx.render import plan as render
    from cudatx.scan import scan
    from cudatx.txn.apply import ApplyOptions, apply_change, refuse_unsafe

    plan = proposal.plan
    if request.as_json:
        click.echo(render.to_json(plan))
    else:
        command = _suggestion(words, env, source)
        click.echo(render.to_text(plan, command, env.target.site_packages), nl=False)
    if request.dry_run:
        return 0 if plan.safe else ExitCode.FINDINGS
    refuse_unsafe(plan, force=request.force)
    if not request.yes:
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to apply the plan")
        click.confirm("Proceed?", abort=True, err=True)
    options = ApplyOptions(
        uv=source.uv,
        uv_options=source.options,
        verify=request.verify,
        ignore_running=request.ignore_running,
        strict_running=request.strict_running,
        force=request.force,
        command=invocation().command_line,
        warn=lambda message: click.echo(f"cudatx: warning: {message}", err=True),
    )
    txn = apply_change(
        env,
        proposal,
        options,
        lambda: scan(python, ld_library_path=env.ld_library_path, cache=env.view.cache),
    )
    click.echo(f"Applied as transaction {txn}; `cudatx rollback` undoes it.", err=True)
    return 0


def _requirement_option(help_text: str) -> Callable[[F], F]:
    return click.option(
        "-r",
        "--requirement",
        "requirement_files",
        metavar="FILE",
        multiple=True,
        help=help_text,
    )


@click.command()
@click.argument("specs", nargs=-1, metavar="SPEC...")
@_requirement_option("Remove the distributions named in a requirements file.")
@change_options
@uv_options
@target_options
def remove(
    specs: tuple[str, ...],
    requirement_files: tuple[str, ...],
    python: str | None,
    ld_library_path: str | None,
    request: ChangeRequest,
    source: UvSource,
) -> int:
    """Remove distributions, safely: SPEC is a name, a glob over names ('nvidia-*-cu13'), or
    cuda:N (every distribution whose libraries are CUDA N builds). Shows the plan first;
    applies it through uv with a snapshot that `cudatx rollback` restores. With --dry-run:
    exit 0 when safe, 1 when something that loads now would stop loading."""
    from cudatx.discover.target import require_environment
    from cudatx.planning.change import propose_removal
    from cudatx.txn.rollback import refuse_if_interrupted_at

    require_environment(python)
    with scanned(python, ld_library_path) as env:
        if not request.dry_run:
            refuse_if_interrupted_at(env.target.prefix)
        proposal = propose_removal(env, specs, requirement_files, _planning(request, source))
        words = _command_words("remove", specs, ("-r", requirement_files))
        return _carry_out(env, proposal, words, python, request, source)


def _propose_and_carry_out(
    uv_command: str,
    args: tuple[str, ...],
    words: tuple[str, ...],
    python: str | None,
    ld_library_path: str | None,
    request: ChangeRequest,
    source: UvSource,
) -> int:
    from cudatx.discover.target import require_environment
    from cudatx.planning.change import propose
    from cudatx.txn.rollback import refuse_if_interrupted_at

    require_environment(python)
    with scanned(python, ld_library_path) as env:
        if not request.dry_run:
            refuse_if_interrupted_at(env.target.prefix)
        proposal = propose(env, uv_command, args, _planning(request, source))
        return _carry_out(env, proposal, words, python, request, source)


@click.command()
@click.argument("specs", nargs=-1, metavar="SPEC...")
@_requirement_option("Install what a requirements file names (as `uv pip install -r`).")
@change_options
@no_deps_option
@uv_options
@target_options
def install(
    specs: tuple[str, ...],
    requirement_files: tuple[str, ...],
    python: str | None,
    ld_library_path: str | None,
    request: ChangeRequest,
    source: UvSource,
) -> int:
    """Install or upgrade distributions, safely: what `uv pip install SPEC...` would do,
    staged and simulated first (files written over shared paths change their bytes), then
    applied with a snapshot that `cudatx rollback` restores. With --dry-run: exit 0 when
    safe, 1 when something that loads now would stop loading or mix CUDA majors."""
    if not specs and not requirement_files:
        raise UsageError("nothing to install: give at least one SPEC or -r FILE")
    args = (*specs, *(a for f in requirement_files for a in ("-r", f)))
    words = _command_words("install", specs, ("-r", requirement_files))
    return _propose_and_carry_out("install", args, words, python, ld_library_path, request, source)


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@change_options
@no_deps_option
@uv_options
@target_options
def sync(
    files: tuple[str, ...],
    python: str | None,
    ld_library_path: str | None,
    request: ChangeRequest,
    source: UvSource,
) -> int:
    """Make the environment match requirements or pylock files exactly, safely: what
    `uv pip sync FILE...` would do (uninstall what they do not list, install and upgrade
    what they pin), staged and simulated first, then applied with a snapshot."""
    words = _command_words("sync", files)
    return _propose_and_carry_out("sync", files, words, python, ld_library_path, request, source)
