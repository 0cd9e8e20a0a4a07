"""`cudatx check-requirements`: the pre-commit hook's command."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cudatx import interrupts
from cudatx.cli.app import scanned
from cudatx.cli.options import (
    Target,
    TrialRequest,
    UvSource,
    format_option,
    hook_target_options,
    no_deps_option,
    planning,
    strict_option,
    trial_options,
    uv_options,
)
from cudatx.errors import CudatxError, EnvironmentNotFound, ExitCode

if TYPE_CHECKING:
    from collections.abc import Callable

    from cudatx.discover.target import Query
    from cudatx.environment import Environment
    from cudatx.planning.change import Planning, Proposal
    from cudatx.planning.models import Plan


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
    "(now or as committed), or such a freeze less leaves nothing requires.",
)
@click.option(
    "--require-env",
    is_flag=True,
    help="Fail (exit 3) when there is no environment to check, instead of checking the "
    "file's wheels alone.",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Plan installing FILE into an empty environment of the target interpreter (the "
    "environment's, else the one `uv venv` picks) and judge its loads, besides checking its "
    "wheels' paths; an existing environment is not compared.",
)
@click.option(
    "--index-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Without an environment: the wall-clock limit on each request cudatx makes to an "
    "index for a wheel's RECORD (default 60); past it, uv downloads the wheel.",
)
@click.option(
    "--index-deadline",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Without an environment: the wall-clock limit on all of one file's waits on "
    "indexes together, uv's resolution and downloads included (default 300); past it, one "
    "line and exit 13.",
)
@strict_option
@trial_options()
@no_deps_option
@uv_options
@hook_target_options
@format_option("checks", "the results")
def check_requirements(
    files: tuple[str, ...],
    extras: tuple[str, ...],
    mode: str,
    require_env: bool,
    fresh: bool,
    index_timeout: float | None,
    index_deadline: float | None,
    strict: bool,
    trial: TrialRequest | None,
    target: Target,
    fmt: str,
    source: UvSource,
) -> int:
    """Would bringing the environment in line with FILE break loading? For requirements
    files, pyproject.toml, uv.lock and pylock.toml: a file that pins every installed
    distribution (or a lock) means `uv pip sync`, any other `uv pip install -r`. Changes
    nothing. Quiet and exit 0 when safe; exit 1 with the broken libraries, the line
    responsible (against the committed version, where git tracks the file) and the fix.

    With no environment (CI, a fresh clone), the file alone: the wheels uv resolves it to
    (nothing built) and their RECORDs, so that two distributions writing one path with
    different bytes are refused; --fresh also plans the whole install into an empty
    environment."""
    from cudatx.discover.target import hook_target
    from cudatx.uv import find_uv

    if not files:
        return 0
    # Without --python, the discovery the command's target made already (and asked); none
    # under pre-commit (hook_target_options), whose VIRTUAL_ENV is its own.
    asked = target.query if target.python is None else None
    chosen = hook_target(target.python, asked=asked)
    # Under pre-commit, a --python folder that is not there (the hook's `.venv` on CI, in a
    # fresh clone) is no environment: said in the one line that says what is checked instead.
    missing = target.python if chosen is None else None
    # Discovery found the environment cudatx runs from (its venv active, say): not a target
    # (cudatx.discover.target.own_environment); the line saying what is checked names it.
    # (asked for where it is said, once uv is making the empty environment: a fallback
    # interpreter's answer need not hold that up)
    own = functools.partial(_own_prefix, asked if chosen is None and missing is None else None)
    if chosen is None and require_env:
        if missing is not None:
            raise EnvironmentNotFound(f"no such environment: {missing}")
        raise EnvironmentNotFound(
            "no environment to check (pass --python, in a pre-commit hook through its args, "
            "or create .venv)"
        )
    out = target.output
    # Planning is imported with the whole planning code: without an environment, only once
    # uv is making the empty one (_without_environment).
    how = functools.partial(
        planning,
        source,
        out,
        repair=False,
        check_requirements=True,
        strict=strict,
        quiet_waits=fmt != "text" or not target.progress,
    )
    if chosen is None or fresh:
        if trial is not None:
            out.info("cudatx: --trial: no environment to make the change in; no trial run")
        return _without_environment(
            files,
            chosen,
            target,
            how,
            uv=find_uv(source.uv),
            missing=missing,
            own=own,
            extras=extras,
            mode=mode,
            fresh=fresh,
            fmt=fmt,
            waits=(index_timeout, index_deadline),
        )
    # Imported here: without an environment (the hook on CI) uv makes the empty one while
    # the planning code is imported (_without_environment).
    from cudatx.planning.checkreq import check_file
    from cudatx.render import checkreq as render

    # uv runs the environment's interpreter to resolve: refused where others can write it.
    # The environment the hook names (pre-commit's VIRTUAL_ENV is never it): asked anew
    # only where it is not the one the target asked about.
    if chosen != target.python and not target.answered_for(chosen):
        target = target.retarget(chosen)
    with scanned(target, echo=False, changes=True) as env:
        judge = None
        if trial is not None:
            judge = _trial_judge(env, trial, source, target, quiet=fmt != "text")
        planned = how()
        checks = [check_file(env, f, planned, extras=extras, mode=mode, judge=judge) for f in files]
    out.show(render.render(render.Report(checks, env.target.site_packages), fmt))
    return 0 if all(c.safe for c in checks) else ExitCode.FINDINGS


def _own_prefix(asked: Query | None) -> str | None:
    """The prefix discovery found, where it is the environment cudatx runs from."""
    from cudatx.discover.target import own_environment

    if asked is None:
        return None
    try:
        prefix = asked.result().prefix
    except CudatxError:
        return None
    return prefix if own_environment(prefix) else None


def _trial_judge(
    env: Environment, trial: TrialRequest, source: UvSource, target: Target, *, quiet: bool
) -> Callable[[Proposal, tuple[str, ...]], Plan]:
    """A trial of each file's proposal (cudatx.trial), with uv's options and the file's;
    `quiet`: no line says where it is (the results are printed for machines)."""
    from cudatx.cli.change import tried

    def judge(proposal: Proposal, uv_options: tuple[str, ...]) -> Plan:
        return tried(env, proposal, trial, source, target, uv_options, quiet=quiet).plan

    return judge


def _without_environment(
    files: tuple[str, ...],
    chosen: str | None,
    target: Target,
    planned: Callable[[], Planning],
    *,
    uv: str,
    missing: str | None,
    own: Callable[[], str | None],
    extras: tuple[str, ...],
    mode: str,
    fresh: bool,
    fmt: str,
    waits: tuple[float | None, float | None],
) -> int:
    """The file alone, in an empty environment made for the check: of the interpreter of
    `chosen` (an environment), else of the one `uv venv` picks here. `missing`: the
    --python folder that is not there, named in the line that says what is checked; `own()`:
    the environment cudatx runs from, which discovery found and which is not a target."""
    from concurrent.futures import ThreadPoolExecutor

    from cudatx.discover.target import find_target, locate_interpreter
    from cudatx.uv import cache_dir, run_uv, venv_argv

    out = target.output
    base = None
    if chosen is not None:
        base = os.fspath(locate_interpreter(chosen, os.environ, Path.cwd())[0])
    # The pool is left (its uv calls waited for) before the folder is removed.
    with interrupts.temporary_folder("cudatx-fresh-") as folder, ThreadPoolExecutor(2) as pool:
        venv = os.path.join(folder, "venv")
        # uv makes the empty environment and names its cache while the planning code is
        # imported (0.13 s and 0.1 s of a warm hook on torch, one after the other).
        made = pool.submit(run_uv, uv, venv_argv(venv, base))
        named = pool.submit(cache_dir, uv)
        from cudatx.cache import open_cache
        from cudatx.planning.checkreq import Wheels, check_conflicts, check_fresh
        from cudatx.planning.lazyzip import Deadlines
        from cudatx.render import checkreq as render

        how = planned()
        index_timeout, index_deadline = waits
        deadlines = Deadlines(
            index_timeout or Deadlines().request_s, index_deadline or Deadlines().check_s
        )

        made.result()
        uv_cache = named.result()
        names = ", ".join(files)
        nothing = f"no such environment: {missing}" if missing else "no environment to check"
        if (ours := own()) is not None:
            nothing += f" ({ours} is cudatx's own environment: --python {ours} checks it)"
        if fresh:
            with scanned(target.retarget(venv), echo=False) as env:
                out.info(
                    f"cudatx: {nothing + ': ' if missing else ''}--fresh: planning {names} "
                    "into an empty Python "
                    f"{env.target.version} environment, and checking its wheels' paths"
                )
                wheels = Wheels(uv_cache, env.view.cache, deadlines)
                checks = [check_fresh(env, f, how, wheels, extras=extras, mode=mode) for f in files]
                sites = env.target.site_packages
        else:
            said = find_target(venv)
            out.info(
                f"cudatx: {nothing}: checking the wheels {names} resolves to "
                f"for Python {said.version} for paths two of them write with different "
                "bytes (--fresh plans the whole install)"
            )
            cache = open_cache() if target.use_cache else None
            try:
                wheels = Wheels(uv_cache, cache, deadlines)
                checks = [
                    check_conflicts(said, f, how, wheels, extras=extras, mode=mode) for f in files
                ]
            finally:
                if cache is not None:
                    cache.close()
            sites = said.site_packages
    for check in checks:
        out.info(f"cudatx: {render.summary(check)}")
    out.show(render.render(render.Report(checks, sites), fmt))
    return 0 if all(c.safe for c in checks) else ExitCode.FINDINGS
