"""The progress bar the CLI draws on stderr while a slow (cold) scan runs.

Only on a terminal, never before half a second has gone by (a warm run finishes first and
shows nothing), never with --no-progress or TERM=dumb, and without colour under NO_COLOR
(no-color.org: NO_COLOR turns off colour, not output). stdout is never written to, so
--json output stays clean.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TextIO

import click

DELAY_S = 0.5
_EVERY_S = 0.05  # redraw at most this often
_WIDTH = 24


def wanted(stream: TextIO, environ: Mapping[str, str], *, disabled: bool) -> bool:
    if disabled or environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


class Bar:
    """A scan's progress callback: (what, done, total)."""

    def __init__(self, stream: TextIO, *, colour: bool) -> None:
        self._stream = stream
        self._colour = colour
        self._start = time.monotonic()
        self._drawn = 0.0
        self._width = 0  # characters on the line now

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._start < DELAY_S or now - self._drawn < _EVERY_S:
            return
        self._drawn = now
        filled = _WIDTH * done // total if total > 0 else 0
        bar = "#" * filled
        if self._colour:
            bar = click.style(bar, fg="cyan")
        counts = f" {done}/{total}" if total > 1 else ""
        line = f"cudatx: {what} [{bar}{'-' * (_WIDTH - filled)}]{counts}"
        visible = len(click.unstyle(line))
        self._stream.write("\r" + line + " " * max(0, self._width - visible))
        self._stream.flush()
        self._width = visible

    def finish(self) -> None:
        """Clear the line, if anything was drawn."""
        if self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0


TICK_S = 1.0  # how often a wait's line says its time again


class Ticker:
    """One line on a terminal for a wait that prints nothing of its own (uv installing from
    its cache, a trial's imports): what is being waited on, drawn at once, then again in
    place every second with the seconds gone by (`cudatx: Reinstalling 1 package... 7s`),
    and whenever what it says changes. A thread of its own redraws it; `say` and `stop`
    may come from any thread. Cut to the terminal's width: a line that wraps cannot be
    redrawn in place.

    uv's own progress bars are not passed through: uv draws them (indicatif) only when its
    stderr is a terminal, and off one says only "Downloading X (size)" and "Building X"
    (astral-sh/uv#11165), which a wait on uv shows (cudatx.cli.output.Output.waiting).
    cudatx reads uv's stderr through a pipe for the error it reports; at a terminal (a pty)
    uv colours and wraps that text to the width, and cudatx reads it (cudatx.uv._answer)."""

    def __init__(self, stream: TextIO, text: str) -> None:
        import shutil
        import threading

        self._stream = stream
        self._text = text
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._columns = shutil.get_terminal_size().columns
        self._draw()
        self._thread = threading.Thread(target=self._tick, name="cudatx-ticker", daemon=True)
        self._thread.start()

    def _draw(self) -> None:
        with self._lock:
            if self._stopped.is_set():
                return
            took = int(time.monotonic() - self._start)
            line = self._text + (f" {took}s" if took >= 1 else "")
            self._stream.write("\r\x1b[K" + line[: max(1, self._columns - 1)])
            self._stream.flush()

    def _tick(self) -> None:
        while not self._stopped.wait(TICK_S):
            self._draw()

    def say(self, text: str) -> None:
        """What the wait is on now."""
        if text != self._text:
            self._text = text
            self._draw()

    def stop(self) -> None:
        """No more redraws; the line stays as drawn, for its owner to end."""
        with self._lock:
            self._stopped.set()
        self._thread.join()
