"""The `cudatx` group, what every command shares at run time, and the entry point.

Each command parses its options, calls the core, renders, and returns an exit code; the
core never prints or exits. Core modules are imported inside each command so that `--help`
and `--version` stay quick (and import none of networkx, pydantic, the ELF library, sqlite3).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import click

from cudatx import __version__
from cudatx.errors import CudatxError, ExitCode, one_line

if TYPE_CHECKING:
    from cudatx.cli.options import Target
    from cudatx.discover.target import Query
    from cudatx.environment import Environment
    from cudatx.models import PythonTarget


class Invocation(NamedTuple):
    """The command line cudatx was started with (sys.argv, or main's argv from Python)."""

    argv: tuple[str, ...]

    @property
    def command_line(self) -> str:
        return shlex.join(["cudatx", *self.argv])


def invocation() -> Invocation:
    found = click.get_current_context().find_object(Invocation)
    return found if found is not None else Invocation(tuple(sys.argv[1:]))


@contextlib.contextmanager
def scanned(target: Target, *, echo: bool = True, changes: bool = False) -> Iterator[Environment]:
    """The target, scanned with the cache and a progress bar for as long as the command
    runs; `echo`: say which environment on stderr, as uv does, before the scan (and its
    bar) starts. `changes`: the command will change the environment or run its interpreter
    (uv does): refused where another user can write them, unless --allow-other-writers
    (cudatx.trust); a command that only reads says so in a warning instead. Both refusals,
    and that of an interrupted transaction, come before the scan."""
    import time

    import cudatx.cli.output as output
    from cudatx.progress import Bar, wanted
    from cudatx.scan import scanning

    started = time.monotonic()
    query = target.asked()
    said = query.result()  # the interpreter's answer, which every scan of it reuses
    if echo:
        output.info(f"Using Python {said.version} environment at: {said.prefix}")
    refuse_unfinished(said.prefix)
    _whose(said, query, changes=changes, accepted=target.allow_other_writers)
    stream = sys.stderr
    bar = None
    quiet = bool(target.output.quiet)
    if wanted(stream, os.environ, disabled=quiet or not target.progress):
        bar = Bar(stream, colour=output.coloured(err=True))
    try:
        with scanning(
            target.python,
            ld_library_path=target.ld_library_path,
            use_cache=target.use_cache,
            progress=bar,
            query=query,
        ) as env:
            if bar is not None:
                bar.finish()
                bar = None
            cache = env.view.cache
            output.debug(
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


def refuse_unfinished(prefix: str) -> None:
    """Every command that reads an environment first says, as an error whose fix is
    `cudatx rollback`, that a transaction left it half changed (Interrupted, exit 8): what it
    would say of a half-changed environment (a doctor's fix, a dry run's "safe") is wrong.
    One that is running now (it holds the lock) is a warning: what is read may change."""
    import shlex

    import cudatx.cli.output as output
    from cudatx.errors import Interrupted, StoreError
    from cudatx.trust import transaction_running, unfinished_transactions

    try:
        found = unfinished_transactions(prefix)
    except StoreError as exc:
        output.warn(f"cannot tell whether a transaction was left unfinished: {exc.message}")
        return
    if not found:
        return
    txn, state = found[-1]
    if transaction_running(prefix):
        output.warn(f"transaction {txn} is running ({state}): what is read here may change")
        return
    raise Interrupted(
        f"transaction {txn} was interrupted ({state}) and left the environment half changed; "
        f"run `cudatx rollback --python {shlex.quote(prefix)}` to complete it before anything else"
    )


def _whose(said: PythonTarget, query: Query, *, changes: bool, accepted: bool) -> None:
    """Refuse a change of an environment others can write (cudatx.trust), or say of one a
    command only reads that others can write it, and as whom its interpreter ran."""
    import cudatx.cli.output as output
    from cudatx.trust import refuse_other_writers, target_writers

    found = target_writers(said)
    if changes:
        refuse_other_writers(found, accepted=accepted, what="deletes or writes")
    elif found and not accepted:
        ran = ""
        if query.run_as is not None:
            ran = f"; its interpreter was run as uid {query.run_as[0]}, not as root"
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        output.warn(
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
def cli(ctx: click.Context) -> int:
    """Plan and check package changes in CUDA Python environments before they break loading."""
    if ctx.invoked_subcommand is None:
        # Bare `cudatx`: the help, as pip prints it (exit 0), not a usage error.
        click.echo(ctx.get_help())
    return 0


_OUTPUT_LINES = 40


def _error(message: str) -> None:
    from cudatx.cli.output import coloured, error_label

    click.echo(f"cudatx: {error_label()}: {one_line(message)}", err=True, color=coloured(err=True))


def main(argv: list[str] | None = None) -> None:
    """Entry point: every refusal is one line on stderr and a documented exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = cli.main(
            args=args, prog_name="cudatx", standalone_mode=False, obj=Invocation(tuple(args))
        )
    except CudatxError as exc:
        if exc.output.strip():
            # What a failing command said (--verify's output), before the one line of why;
            # its end, where a traceback says what went wrong.
            said = exc.output.rstrip("\n").splitlines()
            if len(said) > _OUTPUT_LINES:
                click.echo(f"... ({len(said) - _OUTPUT_LINES} lines before)", err=True)
            click.echo("\n".join(said[-_OUTPUT_LINES:]), err=True)
        _error(exc.message)
        sys.exit(int(exc.exit_code))
    except click.exceptions.Abort:
        click.echo("cudatx: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        _error(exc.format_message())
        sys.exit(ExitCode.USAGE if exc.exit_code == 2 else exc.exit_code)
    except KeyboardInterrupt:
        click.echo("cudatx: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug: say so in one line; the traceback only on request
        if os.environ.get("CUDATX_DEBUG"):
            raise
        click.echo(
            f"cudatx: internal error: {type(exc).__name__}: {one_line(str(exc))} "
            "(set CUDATX_DEBUG=1 for a traceback)",
            err=True,
        )
        sys.exit(int(ExitCode.INTERNAL))
    sys.exit(code if isinstance(code, int) else 0)
