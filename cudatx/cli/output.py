"""How cudatx talks, as uv does: `--color auto|always|never`, `-q`, `-v`/`-vv`.

Colour follows uv and no-color.org: `--color always|never` decides; under `auto` (the
default) a non-empty NO_COLOR turns it off, a non-empty FORCE_COLOR or CLICOLOR_FORCE (other
than "0") turns it on, TERM=dumb turns it off, and otherwise each stream gets colour only
when it is a terminal. JSON is never coloured: it is for machines, and its bytes must not
depend on where stdout goes.

The options are accepted before and after the subcommand (`cudatx -q remove ...` and
`cudatx remove ... -q`), as uv's global options are: each context parses its own, and
`settled` adds them up into one `Output` as the command starts, which is handed down as a
value (as uv hands down its Printer); nothing is kept in click's context or a global.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

import click

from cudatx.errors import one_line, printable

if TYPE_CHECKING:
    from cudatx.progress import Ticker
    from cudatx.render.formats import Rendered

COLOR_CHOICES = ("auto", "always", "never")


def colour_wanted(choice: str, environ: Mapping[str, str], stream: TextIO) -> bool:
    """Whether to colour what goes to `stream` (uv's rules; see the module docstring)."""
    if choice != "auto":
        return choice == "always"
    if environ.get("NO_COLOR"):
        return False
    if any(environ.get(name, "0") not in ("", "0") for name in ("FORCE_COLOR", "CLICOLOR_FORCE")):
        return True
    if environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


# What uv says on stderr while it downloads or builds, off a terminal too ("Downloading
# torch (846.0MiB)", "Building foo==1.0"): what a wait shows while it lasts.
_UV_PROGRESS = re.compile(r"^(Downloading|Building) \S")


class Output(NamedTuple):
    """How this run talks (--color, -q, -v), and the ways it does: the printer a command is
    handed."""

    color: str = "auto"
    quiet: int = 0
    verbose: int = 0

    def coloured(self, err: bool = False) -> bool:
        stream = sys.stderr if err else sys.stdout
        return colour_wanted(self.color, os.environ, stream)

    def echo(
        self,
        text: str,
        *,
        err: bool = False,
        nl: bool = True,
        paint: Callable[[str], str] | None = None,
    ) -> None:
        """Print `text`; `paint` (a render.colour function) colours it where colour is
        wanted. Whatever control character is still in it (a value from outside that its
        renderer did not escape) is shown escaped first, so that only cudatx's own styles,
        painted after, reach the terminal."""
        text = printable(text)
        if paint is not None and self.coloured(err):
            text = paint(text)
        click.echo(text, err=err, nl=nl, color=self.coloured(err))

    def report(self, text: str, *, paint: Callable[[str], str] | None = None) -> None:
        """A report whose first line is its verdict (a plan, doctor, why): all of it, or under
        -q the verdict alone."""
        if self.quiet and text:
            text = text.split("\n", 1)[0] + "\n"
        if text:
            self.echo(text, nl=False, paint=paint)

    def show(self, rendered: Rendered) -> None:
        """A report as its format wrote it (cudatx.render.formats), on stdout: a document
        for machines byte for byte; any other escaped and painted (echo), and cut to its
        verdict under -q where its first line is one (report)."""
        if rendered.document:
            click.echo(rendered.text, nl=False)
        elif rendered.verdict:
            self.report(rendered.text, paint=rendered.paint)
        else:
            self.echo(rendered.text, nl=False, paint=rendered.paint)

    def help(self, text: str) -> None:
        """A command's help, as click prints it for --help: cudatx's own words, as they are
        (the `\\b` that keeps a paragraph unwrapped is in them)."""
        click.echo(text)

    def picture(self, data: bytes) -> None:
        """A drawing (graph's SVG or PNG), its bytes as they are, on stdout."""
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    def info(self, message: str) -> None:
        """A line for the person watching (which environment, what was done), on stderr; -q
        drops it."""
        if not self.quiet:
            self.echo(one_line(message), err=True)  # one line: a value in it cannot add one

    def debug(self, message: str, level: int = 1) -> None:
        """A line shown only under -v (level 1) or -vv (level 2), on stderr."""
        if self.verbose >= level:
            self.echo(f"cudatx: {one_line(message)}", err=True)

    def _label(self, word: str, fg: str, err: bool) -> str:
        return click.style(word, fg=fg, bold=True) if self.coloured(err) else word

    def warn(self, message: str) -> None:
        if self.quiet:
            return
        label = self._label("warning", "yellow", err=True)
        said = one_line(message)  # before the label's colour (see echo); one line, as info
        click.echo(f"cudatx: {label}: {said}", err=True, color=self.coloured(err=True))

    def error(self, message: str) -> None:
        """`cudatx: error: MESSAGE` on stderr, in one line: why cudatx stopped (-q keeps it)."""
        label = self._label("error", "red", err=True)
        click.echo(f"cudatx: {label}: {one_line(message)}", err=True, color=self.coloured(err=True))

    @contextlib.contextmanager
    def _ticker(self, what: str, disabled: bool) -> Iterator[Ticker | None]:
        """`cudatx: WHAT...` on stderr with its seconds added in place as it lasts
        (cudatx.progress.Ticker), ended with its time (or `failed after` it); None where
        nothing is shown: off a terminal, under -q, --json or --no-progress (`disabled`)."""
        import time

        from cudatx.progress import Ticker, wanted
        from cudatx.render.apply import duration

        if not wanted(sys.stderr, os.environ, disabled=disabled or bool(self.quiet)):
            yield None
            return
        what = one_line(what)
        ticker = Ticker(sys.stderr, f"cudatx: {what}...")
        started = time.monotonic()
        ended = "failed after"
        try:
            yield ticker
            ended = "done in"
        finally:
            ticker.stop()
            took = duration(time.monotonic() - started)
            sys.stderr.write(f"\r\x1b[Kcudatx: {what}: {ended} {took}\n")
            sys.stderr.flush()

    @contextlib.contextmanager
    def waiting(self, what: str, *, disabled: bool = False) -> Iterator[Callable[[str], None]]:
        """A wait on uv a person at a terminal sees (`_ticker`): what it yields is told uv's
        stderr lines as they come: a download or a build among them is the line until the
        next (`cudatx: Downloading torch (846.0MiB)...`); the wait's own words end it."""
        with self._ticker(what, disabled) as ticker:

            def heard(line: str) -> None:
                if ticker is not None and _UV_PROGRESS.match(line):
                    ticker.say(f"cudatx: {one_line(line)}...")  # uv's words: what an index served

            yield heard

    @contextlib.contextmanager
    def ticking(self, what: str, *, disabled: bool = False) -> Iterator[Callable[[str], None]]:
        """A wait that prints nothing of its own (a trial's imports) as a person at a
        terminal sees it (`_ticker`), saying what the block tells the function it gets
        (`Trial, before the change: importing 12/40: torch`)."""
        with self._ticker(what, disabled) as ticker:
            yield (
                (lambda text: None)
                if ticker is None
                else (lambda text: ticker.say(f"cudatx: {one_line(text)}..."))
            )


def settled(ctx: click.Context) -> Output:
    """The output settings of this run: each context's --color, -q and -v, outermost first.
    An option given before the subcommand and again after it: the later one counts, and
    counts add up (`-v remove -v` is -vv), as uv's do."""
    chain = []
    at: click.Context | None = ctx
    while at is not None:
        chain.append(at)
        at = at.parent
    now = Output()
    for each in reversed(chain):
        color = each.params.get("color")
        if color is not None:
            now = now._replace(color=color)
        now = now._replace(
            quiet=now.quiet + (each.params.get("quiet") or 0),
            verbose=now.verbose + (each.params.get("verbose") or 0),
        )
    return now


def output_params() -> list[click.Option]:
    """--color, -q and -v, as new Option objects (one set per command that takes them); a
    command's callback receives them through `settled` (cudatx.cli.with_output)."""
    return [
        click.Option(
            ["--color"],
            type=click.Choice(COLOR_CHOICES),
            default=None,
            help="Colour the output [default: auto: only on a terminal; NO_COLOR turns it "
            "off, FORCE_COLOR or CLICOLOR_FORCE on].",
        ),
        click.Option(
            ["-q", "--quiet"],
            count=True,
            help="Print only the result and errors (a report's verdict line): no progress, "
            "warnings or narration.",
        ),
        click.Option(
            ["-v", "--verbose"],
            count=True,
            help="Say more: what the scan read and took from its cache, every search the "
            "loader made; -vv: uv's own output too.",
        ),
    ]


class Steps:
    """Each phase of an apply as a line on stderr, only on a terminal (never under -q,
    --no-progress or --json): drawn as it starts, its seconds added in place while it lasts
    (uv prints nothing off a terminal while it installs: cudatx.progress.Ticker), ended
    with its time; under -vv uv's own output after each uv step, anywhere."""

    def __init__(self, out: Output, *, disabled: bool) -> None:
        from cudatx.progress import wanted

        self.out = out
        self.shown = not out.quiet and wanted(sys.stderr, os.environ, disabled=disabled)
        self.open: Any = None  # the started phase's Ticker, its line not yet ended

    def __call__(self, phase: Any) -> None:
        from cudatx.progress import Ticker
        from cudatx.render.apply import step

        if self.shown:
            line = one_line(step(phase))
            self._stop()
            if phase.done:
                # The phase's start line, rewritten in place with its time.
                sys.stderr.write("\r\x1b[K" + line + "\n")
                sys.stderr.flush()
            else:
                self.open = Ticker(sys.stderr, line)
        if phase.done and phase.output.strip() and self.out.verbose >= 2:
            self.end()
            self.out.echo(phase.output.rstrip("\n"), err=True)  # uv's words, escaped

    def _stop(self) -> bool:
        ticking, self.open = self.open, None
        if ticking is not None:
            ticking.stop()
        return ticking is not None

    def end(self) -> None:
        if self._stop():
            sys.stderr.write("\n")
            sys.stderr.flush()


def confirm(question: str) -> None:
    """Ask on stderr; an answer of no (the default) raises Declined. ^C stays an interrupt."""
    from cudatx.errors import Declined

    if not click.confirm(printable(question), default=False, err=True):
        raise Declined("declined: nothing was changed")
