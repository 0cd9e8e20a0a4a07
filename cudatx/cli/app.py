"""The `cudatx` group, what every command shares at run time, and the entry point.

Each command parses its options, calls the core, renders, and returns an exit code; the
core never prints or exits. Core modules are imported inside each command so that `--help`
and `--version` stay quick (and import none of networkx, pydantic, the ELF library, sqlite3).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from cudatx import __version__, interrupts
from cudatx.cli.output import Output, settled
from cudatx.errors import CudatxError, ExitCode, one_line, printable

if TYPE_CHECKING:
    from cudatx.cli.options import Target
    from cudatx.discover.target import Query
    from cudatx.environment import Environment
    from cudatx.models import PythonTarget


class Invocation(NamedTuple):
    """The command line cudatx was started with (sys.argv, or main's argv from Python)."""

    argv: tuple[str, ...]
    # The output settings the command settled on (with_output), for `main`, which reports
    # an error after click's contexts are gone: filled once, as the command starts.
    said: list[Output]

    @property
    def command_line(self) -> str:
        return shlex.join(["cudatx", *self.argv])


def invocation() -> Invocation:
    found = click.get_current_context().find_object(Invocation)
    return found if found is not None else Invocation(tuple(sys.argv[1:]), [])


def with_output(command: click.Command) -> None:
    """Hand `command` its output settings as a value: --color, -q and -v, given before the
    subcommand or after it (cudatx.cli.output.settled), arrive as `out: Output`."""
    run = command.callback
    assert run is not None

    @functools.wraps(run)
    def started(*args: Any, color: str | None, quiet: int, verbose: int, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        out = settled(ctx)
        found = ctx.find_object(Invocation)
        if found is not None:
            found.said[:] = [out]
        return run(*args, out=out, **kwargs)

    command.callback = started


@contextlib.contextmanager
def scanned(target: Target, *, echo: bool = True, changes: bool = False) -> Iterator[Environment]:
    """The target, scanned with the cache and a progress bar for as long as the command
    runs; `echo`: say which environment on stderr, as uv does, before the scan (and its
    bar) starts. `changes`: the command will change the environment or run its interpreter
    (uv does): refused where another user can write them, unless --allow-other-writers
    (cudatx.trust); a command that only reads says so in a warning instead. Both refusals,
    and that of an interrupted transaction, come before the scan."""
    import time

    from cudatx.progress import Bar, wanted
    from cudatx.scan import scanning

    started = time.monotonic()
    query = target.asked()
    said = query.result()  # the interpreter's answer, which every scan of it reuses
    out = target.output
    if echo:
        out.info(f"Using Python {said.version} environment at: {said.prefix}")
    refuse_unfinished(out, said.prefix)
    _whose(out, said, query, changes=changes, accepted=target.allow_other_writers)
    stream = sys.stderr
    bar = None
    if wanted(stream, os.environ, disabled=bool(out.quiet) or not target.progress):
        bar = Bar(stream, colour=out.coloured(err=True))
    try:
        with scanning(
            query,
            ld_library_path=target.ld_library_path,
            use_cache=target.use_cache,
            progress=bar,
        ) as env:
            if bar is not None:
                bar.finish()
                bar = None
            cache = env.view.cache
            out.debug(
                f"scanned {sum(len(p) for p in env.libraries.values())} libraries and "
                f"{len(env.roots)} load roots in {time.monotonic() - started:.2f}s"
                + (
                    f"; scan cache {cache.folder}: {cache.hits} hits, {cache.misses} misses"
                    if cache is not None
                    else "; no scan cache"
                )
            )
            yield env
    finally:
        if bar is not None:
            bar.finish()


def refuse_unfinished(out: Output, prefix: str) -> None:
    """Every command that reads an environment first says, as an error whose fix is
    `cudatx rollback`, that a transaction left it half changed (Interrupted, exit 8): what it
    would say of a half-changed environment (a doctor's fix, a dry run's "safe") is wrong.
    One that is running now (it holds the lock, journal or not yet) is a warning naming its
    pid and command: the files may be mid-change."""
    import shlex

    from cudatx.errors import Interrupted, StoreError
    from cudatx.trust import lock_holder, unfinished_transactions

    try:
        found = unfinished_transactions(prefix)
    except StoreError as exc:
        out.warn(f"cannot tell whether a transaction was left unfinished: {exc.message}")
        found = None
    holder = lock_holder(prefix)
    if holder is not None:
        if found:
            txn, state, command = found[-1]
            what = f"transaction {txn} is running ({holder}: {command or '?'}; {state})"
        else:
            what = f"a transaction is running ({holder}; nothing recorded yet)"
        out.warn(f"{what}: the environment's files may be mid-change, so what is read may change")
        return
    if not found:
        return
    # Read again: one that ended between the journal's read and the lock's is not interrupted.
    if not unfinished_transactions(prefix):
        return
    txn, state, _ = found[-1]
    raise Interrupted(
        f"transaction {txn} was interrupted ({state}) and left the environment half changed; "
        f"run `cudatx rollback --python {shlex.quote(prefix)}` to complete it before anything else"
    )


def _whose(out: Output, said: PythonTarget, query: Query, *, changes: bool, accepted: bool) -> None:
    """Refuse a change of an environment others can write (cudatx.trust), or say of one a
    command only reads that others can write it, and as whom its interpreter ran."""
    from cudatx.trust import refuse_other_writers, target_writers

    found = target_writers(said)
    if changes:
        refuse_other_writers(found, accepted=accepted, what="deletes or writes")
    elif found and not accepted:
        ran = ""
        if query.run_as is not None:
            ran = f"; its interpreter was run as uid {query.run_as[0]}, not as root"
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        out.warn(
            f"{found[0]}{more}: another user can write this environment{ran}; a change of it "
            "is refused unless --allow-other-writers"
        )


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    invoke_without_command=True,
    epilog="\b\nExamples:\n  cudatx doctor --python .venv\n"
    "  cudatx remove 'nvidia-*-cu13' --dry-run\n"
    "\b\nEnvironment:\n  NO_COLOR, FORCE_COLOR, CLICOLOR_FORCE  colour under --color auto\n"
    "  CUDATX_CACHE_DIR   where the scan cache lives [default: ~/.cache/cudatx]\n"
    "  CUDATX_DEBUG=1     a traceback for an internal error\n"
    "  CUDATX_DPKG_ADMINDIR  the dpkg database system owners come from [default: /var/lib/dpkg]\n"
    "  CUDATX_QUERY_TIMEOUT  seconds the target Python has to answer [default: 60]",
)
@click.version_option(__version__, "-V", "--version", prog_name="cudatx")
@click.pass_context
def cli(ctx: click.Context, color: str | None, quiet: int, verbose: int) -> int:
    """Plan and check package changes in CUDA Python environments before they break loading."""
    found = ctx.find_object(Invocation)
    if found is not None:
        # Before the subcommand's own options are read: an error in them (a usage error)
        # is still said as `cudatx --color ...` asked.
        found.said[:] = [settled(ctx)]
    if ctx.invoked_subcommand is None:
        # Bare `cudatx`: the help, as pip prints it (exit 0), not a usage error.
        settled(ctx).help(ctx.get_help())
    return 0


_OUTPUT_LINES = 40


def _said(run: Invocation) -> Output:
    """The printer of a run that ended: as its command settled it, else (it ended before a
    command started) the defaults."""
    return run.said[-1] if run.said else Output()


def main(argv: list[str] | None = None) -> None:
    """Entry point: every refusal is one line on stderr and a documented exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    run = Invocation(tuple(args), [])
    # SIGTERM and SIGHUP end cudatx as ^C does: every cleanup on the way out runs.
    interrupts.install()
    try:
        code = cli.main(args=args, prog_name="cudatx", standalone_mode=False, obj=run)
    except CudatxError as exc:
        if exc.output.strip():
            # What a failing command said (--verify's output), before the one line of why;
            # its end, where a traceback says what went wrong.
            # Each line escaped as the printer escapes: the command's output is not cudatx's.
            said = [printable(line) for line in exc.output.rstrip("\n").splitlines()]
            if len(said) > _OUTPUT_LINES:
                _said(run).echo(f"... ({len(said) - _OUTPUT_LINES} lines before)", err=True)
            _said(run).echo("\n".join(said[-_OUTPUT_LINES:]), err=True)
        _said(run).error(exc.message)
        sys.exit(int(exc.exit_code))
    except click.exceptions.Abort:
        _said(run).echo("cudatx: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        _said(run).error(exc.format_message())
        sys.exit(ExitCode.USAGE if exc.exit_code == 2 else exc.exit_code)
    except KeyboardInterrupt:
        _said(run).echo("cudatx: interrupted", err=True)
        sys.exit(130)
    except interrupts.Terminated as exc:
        _said(run).echo(f"cudatx: terminated ({exc.name})", err=True)
        sys.exit(interrupts.exit_code(exc))
    except Exception as exc:  # a bug: say so in one line; the traceback only on request
        if os.environ.get("CUDATX_DEBUG"):
            raise
        _said(run).echo(
            f"cudatx: internal error: {type(exc).__name__}: {one_line(str(exc))} "
            "(set CUDATX_DEBUG=1 for a traceback)",
            err=True,
        )
        sys.exit(int(ExitCode.INTERNAL))
    sys.exit(code if isinstance(code, int) else 0)
