"""Colour for the text reports, as uv colours its own: verdicts green or red, severities
red and yellow, what leaves red and what arrives green.

Pure functions from plain text to text with ANSI styles, applied by the CLI only where
colour is wanted (cudatx.cli.output): every renderer stays a plain-text function, and a
report reads the same with colour stripped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import click

# (pattern, style): the pattern's first group is styled, the rest of the line kept.
Rule = tuple[str, Callable[[str], str]]


def _style(**styles: object) -> Callable[[str], str]:
    def apply(text: str) -> str:
        return click.style(text, **styles)  # type: ignore[arg-type]

    return apply


_GREEN = _style(fg="green", bold=True)
_RED = _style(fg="red", bold=True)
_YELLOW = _style(fg="yellow", bold=True)
_CYAN = _style(fg="cyan")
_BOLD = _style(bold=True)
_DIM = _style(dim=True)

_LEAVING = (r"^( - .*)$", _style(fg="red"))
_ARRIVING = (r"^( \+ .*)$", _style(fg="green"))
_CHANGING = (r"^( [~!] .*)$", _style(fg="yellow"))

_PLAN: list[Rule] = [
    (r"^(Safe)(?::|$)", _GREEN),
    (r"^(Unsafe)(?::|$)", _RED),
    _LEAVING,
    _ARRIVING,
    _CHANGING,
    (r"^(Would break|Would leave requirements unmet|Would mix CUDA majors)", _RED),
    (r"^(Would (?:uninstall|install|change|reinstall|rebind|leave hollow|overwrite))", _BOLD),
    (r"^(Suggested:)", _CYAN),
    (r"^(note:)", _DIM),
]

_DOCTOR: list[Rule] = [
    (r"^(No problems):", _GREEN),
    (r"^(\d+ errors?):", _RED),
    (r"^(Nothing fails to load\.)", _YELLOW),
    (r"^(error):", _RED),
    (r"^(warning):", _YELLOW),
    (r"^(  fix:)", _CYAN),
    (r"^(note:)", _DIM),
    (r"^(no problems)$", _GREEN),
]

_WHY: list[Rule] = [
    (r"^(\S.*? (?:not found|system driver|error)\b.*)$", _RED),
    (r"^(\S.*? =>) ", _BOLD),
    (r"^(\s+->) ", _GREEN),
]

_SUMMARY: list[Rule] = [
    (r"^(Uninstalled|Installed|Reinstalled) ", _BOLD),
    _LEAVING,
    _ARRIVING,
    _CHANGING,
    (r"^(Undo with:)", _CYAN),
    (r"^(Applied as transaction \S+;)", _GREEN),
]

_HISTORY: list[Rule] = [(r"^(\S+)  ", _BOLD)]


def _paint(rules: list[Rule]) -> Callable[[str], str]:
    compiled: list[tuple[re.Pattern[str], Callable[[str], str]]] = []

    def paint(text: str) -> str:
        # Compiled on the first call: output to a pipe or a file is never painted, and the
        # 27 patterns took 3 ms of every run that imported this module.
        if not compiled:
            compiled.extend((re.compile(pattern), style) for pattern, style in rules)
        out = []
        for line in text.split("\n"):
            for pattern, style in compiled:
                match = pattern.search(line)
                if match is not None:
                    line = line[: match.start(1)] + style(match.group(1)) + line[match.end(1) :]
                    break
            out.append(line)
        return "\n".join(out)

    return paint


plan = _paint(_PLAN)
doctor = _paint(_DOCTOR)
why = _paint(_WHY)
summary = _paint(_SUMMARY)
history = _paint(_HISTORY)
