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
