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
from cudatx.errors import CudatxError, ExitCode

if TYPE_CHECKING:
    from cudatx.environment import Environment


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
def scanned(
    python: str | None, ld_library_path: str | None, *, echo: bool = True
) -> Iterator[Environment]:
    """The target, scanned with the cache and a progress bar for as long as the command
    runs; `echo`: say which environment on stderr, as uv does."""
    from cudatx.progress import Bar, wanted
    from cudatx.scan import scanning

    ctx = click.get_current_context()
    stream = sys.stderr
    bar = None
    if wanted(stream, os.environ, disabled=bool(ctx.meta.get("cudatx.no_progress"))):
        bar = Bar(stream, colour=not os.environ.get("NO_COLOR"))
    query = ctx.meta.pop("cudatx.query", None)
    if ctx.meta.get("cudatx.query_for") != python:
        query = None  # started for another interpreter than the one chosen since
    try:
        with scanning(
            python,
            ld_library_path=ld_library_path,
            use_cache=not ctx.meta.get("cudatx.no_cache"),
            progress=bar,
            query=query,
        ) as env:
            if bar is not None:
                bar.finish()
                bar = None
            if echo:
                click.echo(
                    f"Using Python {env.target.version} environment at: {env.target.prefix}",
                    err=True,
                )
            yield env
    finally:
        if bar is not None:
            bar.finish()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cudatx")
def cli() -> None:
    """Plan and check package changes in CUDA Python environments before they break loading."""


def one_line(message: str) -> str:
    """A message as one line: a newline or carriage return in a name or an argument it
    quotes is shown escaped, so no second line can pass for cudatx's own."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def main(argv: list[str] | None = None) -> None:
    """Entry point: every refusal is one line on stderr and a documented exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = cli.main(
            args=args, prog_name="cudatx", standalone_mode=False, obj=Invocation(tuple(args))
        )
    except CudatxError as exc:
        click.echo(f"cudatx: error: {one_line(exc.message)}", err=True)
        sys.exit(int(exc.exit_code))
    except click.exceptions.Abort:
        click.echo("cudatx: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"cudatx: error: {one_line(exc.format_message())}", err=True)
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
