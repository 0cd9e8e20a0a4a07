"""Commands that change an environment: remove, install, sync (each --dry-run too)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import click

from cudatx.cli.app import invocation, scanned
from cudatx.cli.options import (
    ChangeRequest,
    F,
    Target,
    TrialRequest,
    UvSource,
    change_options,
    no_deps_option,
    planning,
    target_options,
    trial_options,
    uv_options,
)
from cudatx.cli.output import Steps, confirm
from cudatx.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from cudatx.environment import Environment
    from cudatx.models import SandboxUsed
    from cudatx.planning.change import Planning, Proposal
    from cudatx.trial.run import TrialOptions


def _command_words(
    command: str, args: tuple[str, ...], *options: tuple[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """The cudatx words a plan's suggestion repeats, without --dry-run."""
    words = [command, *args]
    for flag, values in options:
        for value in values:
            words += [flag, value]
    return tuple(words)


def _for_machines(request: ChangeRequest) -> bool:
    """Whether the plan is printed for a program to read (any format but text): then no
    line on stderr says where a wait or an apply is."""
    return request.fmt != "text"


def _planning(request: ChangeRequest, source: UvSource, target: Target) -> Planning:
    return planning(
        source,
        target.output,
        repair=request.repair,
        check_requirements=request.check_requirements,
        strict=request.strict,
        quiet_waits=_for_machines(request) or not target.progress,
    )


def tried(
    env: Environment,
    proposal: Proposal,
    trial: TrialRequest | None,
    source: UvSource,
    target: Target,
    uv_options: tuple[str, ...] | None = None,
    *,
    quiet: bool = False,
) -> Proposal:
    """The proposal, its plan judged by a trial where one is asked (cudatx.trial); uv gets
    `uv_options` (uv's words: a requirements file's own options too), else the command
    line's. The trial runs confined as the command's probe (`target.sandbox`) allows, and
    -v says how; at a terminal a line says where it is (not where `quiet`)."""
    if trial is None:
        return proposal
    from dataclasses import replace

    from cudatx.trial.run import run_trial
    from cudatx.trial.verdict import compare
    from cudatx.uv import find_uv

    words = source.options if uv_options is None else uv_options
    with trial_options_shown(trial, target, quiet=quiet) as options:
        ran = run_trial(env, proposal.change, find_uv(source.uv), words, options)
    target.output.debug(trial_said(target, ran.sandbox))
    plan = compare(proposal.plan, ran, env.target.site_packages)
    return replace(proposal, plan=plan)


@contextlib.contextmanager
def trial_options_shown(
    trial: TrialRequest, target: Target, *, quiet: bool
) -> Iterator[TrialOptions]:
    """The trial's options, with a line on a terminal that says where it is while the
    block runs it (cudatx.cli.output.Output.ticking): not where `quiet` (a report for
    machines: --json), under -q or --no-progress."""
    from cudatx.render.trial import step
    from cudatx.trial.run import TrialOptions

    with target.output.ticking("Trial", disabled=quiet or not target.progress) as say:
        yield TrialOptions(
            commands=trial.commands,
            methods=trial.methods,
            sandbox=target.sandbox,
            progress=lambda told: say(step(told)),
        )


def trial_said(target: Target, used: SandboxUsed | None) -> str:
    """The -v line of a trial: the guarantee its code ran under (cudatx.sandbox)."""
    probed = target.sandbox()
    return probed.said(used.writable if used is not None else (), what="the trial's sandbox")


def _carry_out(
    env: Environment,
    proposal: Proposal,
    words: tuple[str, ...],
    target: Target,
    request: ChangeRequest,
    source: UvSource,
    trial: TrialRequest | None = None,
) -> int:
    """Show a plan (judged by a trial where asked: before anything is touched); for a dry
    run, its verdict; otherwise confirm and apply it."""
    from cudatx.analysis.commands import cudatx_line
    from cudatx.render import colour
    from cudatx.render import plan as render

    out = target.output
    if trial is not None:
        out.info(
            "cudatx: --trial: making the change in a shadow of the environment and importing "
            "every package before and after (this runs the environment's code)"
        )
    proposal = tried(env, proposal, trial, source, target, quiet=_for_machines(request))
    plan = proposal.plan
    command = cudatx_line(env, words, uv=source.options.args())
    out.show(render.render(render.Report(plan, command, env.target.site_packages), request.fmt))
    if request.dry_run:
        return 0 if plan.safe else ExitCode.FINDINGS
    # Imported only to apply: a dry run, the pre-commit hook's case, reads nothing of txn.
    from cudatx.render import apply as render_apply
    from cudatx.scan import scan
    from cudatx.txn.apply import ApplyOptions, apply_change, refuse_unsafe

    refuse_unsafe(plan, force=request.force, as_json=request.fmt == "json")
    if not request.yes:
        if not sys.stdin.isatty():
            raise UsageError("not a terminal: pass --yes to apply the plan")
        confirm("Proceed?")
    steps = Steps(out, disabled=_for_machines(request) or not target.progress)
    options = ApplyOptions(
        uv=source.uv,
        uv_options=source.options,
        verify=request.verify,
        ignore_running=request.ignore_running,
        strict_running=request.strict_running,
        force=request.force,
        allow_other_writers=target.allow_other_writers,
        break_system_packages=request.break_system_packages,
        command=invocation().command_line,
        warn=out.warn,
        note=out.debug,
        remark=lambda message: out.info(f"cudatx: note: {message}"),
        sandbox=target.sandbox,
        progress=steps,
    )
    # The rescan asks the interpreter nothing: its answer is the target's, and the sys.path
    # the site folders' files make is read again (an apply can add or remove a .pth file).
    query = target.asked()
    try:
        applied = apply_change(
            env,
            proposal,
            options,
            lambda: scan(query, ld_library_path=env.ld_library_path, cache=env.view.cache),
        )
    finally:
        steps.end()
    text = render_apply.summary(applied, env.target.prefix)
    if out.quiet:
        text = text.splitlines()[-1] + "\n"  # the transaction and its undo, as a verdict
    out.echo(text, err=True, nl=False, paint=colour.summary)
    return 0


def _refuse_externally_managed(
    target: Target, request: ChangeRequest, source: UvSource
) -> UvSource:
    """A Python its distributor manages (PEP 668) is refused, by a dry run too, as uv refuses
    it, before the scan and before anything is written under its prefix. With
    --break-system-packages the source says so to uv: every uv cudatx runs for the change
    (the staging, the apply, the trial's, a repair's) gets uv's flag (cudatx.uv.pip_argv
    gives it to the commands that take it)."""
    from dataclasses import replace

    from cudatx.discover.target import refuse_externally_managed

    refuse_externally_managed(target.asked().result(), allowed=request.break_system_packages)
    if not request.break_system_packages:
        return source
    return source._replace(options=replace(source.options, break_system_packages=True))


def _refuse_busy(target: Target, request: ChangeRequest) -> None:
    """An apply while another transaction holds the environment's lock is Busy at once,
    before the scan and the plan (a probe: the apply takes the lock for real). A dry run
    only reads: it is planned, with a warning that the files may be mid-change."""
    if not request.dry_run:
        from cudatx.txn.store import refuse_busy

        refuse_busy(target.asked().result().prefix)


def _refuse_if_interrupted(env: Environment, request: ChangeRequest) -> None:
    """An apply starts only on an environment no interrupted transaction left half-changed
    (a dry run only reads, and imports nothing of txn)."""
    if not request.dry_run:
        from cudatx.txn.rollback import refuse_if_interrupted_at

        refuse_if_interrupted_at(env.target.prefix)


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
@trial_options()
@uv_options
@target_options
def remove(
    specs: tuple[str, ...],
    requirement_files: tuple[str, ...],
    target: Target,
    request: ChangeRequest,
    source: UvSource,
    trial: TrialRequest | None,
) -> int:
    """Remove distributions, safely: SPEC is a name, a glob over names ('nvidia-*-cu13'), or
    cuda:N (every distribution whose libraries are CUDA N builds). Shows the plan first;
    applies it through uv with a snapshot that `cudatx rollback` restores. With --dry-run:
    exit 0 when safe, 1 when something that loads now would stop loading."""
    from cudatx.planning.change import propose_removal

    target.require_environment()
    source = _refuse_externally_managed(target, request, source)
    _refuse_busy(target, request)
    # A dry run only reads, unless its repairs stage wheels: uv runs the interpreter.
    changes = not request.dry_run or request.repair
    with scanned(target, changes=changes) as env:
        _refuse_if_interrupted(env, request)
        how = _planning(request, source, target)
        proposal = propose_removal(env, specs, requirement_files, how)
        words = _command_words("remove", specs, ("-r", requirement_files))
        return _carry_out(env, proposal, words, target, request, source, trial)


def _propose_and_carry_out(
    uv_command: str,
    args: tuple[str, ...],
    words: tuple[str, ...],
    target: Target,
    request: ChangeRequest,
    source: UvSource,
    trial: TrialRequest | None,
    replacing: tuple[str, ...] = (),
) -> int:
    from cudatx.planning.change import propose

    target.require_environment()
    source = _refuse_externally_managed(target, request, source)
    _refuse_busy(target, request)
    # Even a dry run: uv runs the environment's interpreter to resolve.
    with scanned(target, changes=True) as env:
        _refuse_if_interrupted(env, request)
        how = _planning(request, source, target)
        proposal = propose(env, uv_command, args, how, replacing)
        return _carry_out(env, proposal, words, target, request, source, trial)


@click.command()
@click.argument("specs", nargs=-1, metavar="SPEC...")
@_requirement_option("Install what a requirements file names (as `uv pip install -r`).")
@click.option(
    "--replacing",
    "replacing",
    multiple=True,
    metavar="SPEC",
    help="Also uninstall these installed distributions, in the same transaction (a twin "
    "whose files the arriving ones would write over: nvidia-cudnn-cu12 for "
    "nvidia-cudnn-cu13). Repeatable; names and globs as `cudatx remove` takes them.",
)
@change_options
@trial_options()
@no_deps_option
@uv_options
@target_options
def install(
    specs: tuple[str, ...],
    requirement_files: tuple[str, ...],
    replacing: tuple[str, ...],
    target: Target,
    request: ChangeRequest,
    source: UvSource,
    trial: TrialRequest | None,
) -> int:
    """Install or upgrade distributions, safely: what `uv pip install SPEC...` would do,
    staged and simulated first (files written over shared paths change their bytes), then
    applied with a snapshot that `cudatx rollback` restores. With --dry-run: exit 0 when
    safe, 1 when something that loads now would stop loading or mix CUDA majors."""
    if not specs and not requirement_files:
        raise UsageError("nothing to install: give at least one SPEC or -r FILE")
    args = (*specs, *(a for f in requirement_files for a in ("-r", f)))
    words = _command_words("install", specs, ("-r", requirement_files), ("--replacing", replacing))
    return _propose_and_carry_out("install", args, words, target, request, source, trial, replacing)


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@change_options
@trial_options()
@no_deps_option
@uv_options
@target_options
def sync(
    files: tuple[str, ...],
    target: Target,
    request: ChangeRequest,
    source: UvSource,
    trial: TrialRequest | None,
) -> int:
    """Make the environment match requirements or pylock files exactly, safely: what
    `uv pip sync FILE...` would do (uninstall what they do not list, install and upgrade
    what they pin), staged and simulated first, then applied with a snapshot."""
    words = _command_words("sync", files)
    return _propose_and_carry_out("sync", files, words, target, request, source, trial)
