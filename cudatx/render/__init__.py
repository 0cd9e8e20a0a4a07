"""Renderers: pure functions from report models to text. They never print.

Every renderer lays its report out as a list of lines, each an element, and ends them with
`as_text`: each element is escaped there as one line of data (cudatx.errors.one_line), so
whatever a value from outside holds (a RECORD path, a name, a version, uv's or an index's
words, a requirements line) neither acts on a terminal nor adds a line that passes for
cudatx's own. A renderer's own text holds no control character: escaping the whole line
escapes exactly the values in it.
"""

from __future__ import annotations

from collections.abc import Iterable

from cudatx.errors import one_line


def as_text(lines: Iterable[str]) -> str:
    """The lines as text, each escaped as one line and ended by a line break."""
    return "".join(one_line(line) + "\n" for line in lines)
