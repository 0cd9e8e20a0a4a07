"""The output formats (`--format`): for each format, the module that writes each kind of
report in it.

A format is one module with a function per kind of report it writes, named as the kind
(KINDS): each takes that kind's report (the value its `cudatx.render.KIND.render` takes) and
returns the text, or a `Rendered` that also says how the printer shows it. A format writes
the kinds it has a function for: a command offers, in its `--format`, each format that writes
its kind (cudatx.cli.options.format_option). Adding one is that module and one `register`;
the built-in ones are registered below by name and imported only when a command asks which
formats there are.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple

# Each kind of report, the function name a format module writes it with: a plan (remove,
# install, sync), doctor's findings, why's answer, check-requirements' results, history's
# transactions, `history show`'s journal, `trace --list`'s records, the graph.
KINDS = ("plan", "doctor", "why", "checks", "history", "journal", "traces", "graph")


class Rendered(NamedTuple):
    """A report as a format wrote it, and how the printer (cudatx.cli.output.Output.show)
    shows it on stdout."""

    text: str
    paint: Callable[[str], str] | None = None  # colours it where colour is wanted (colour.py)
    verdict: bool = False  # its first line is its verdict: all that -q shows
    document: bool = False  # a document for machines (JSON): its bytes as written, unescaped


_FORMATS: dict[str, str | ModuleType] = {
    "text": "cudatx.render.formats.text",
    "json": "cudatx.render.formats.json",
    "dot": "cudatx.render.formats.dot",
    "graphml": "cudatx.render.formats.graphml",
    "mermaid": "cudatx.render.formats.mermaid",
}


def register(name: str, module: ModuleType) -> None:
    """Offer format `name`, written by `module`'s functions (one per kind it writes), in
    the `--format` of every command whose kind of report it writes."""
    if not any(hasattr(module, kind) for kind in KINDS):
        raise ValueError(f"{module.__name__} has a function for no kind of report ({KINDS})")
    _FORMATS[name] = module


def _module(name: str) -> ModuleType:
    module = _FORMATS[name]
    if isinstance(module, str):
        module = _FORMATS[name] = importlib.import_module(module)
    return module


def formats(kind: str) -> tuple[str, ...]:
    """The formats that write `kind`, in the order they were registered."""
    return tuple(name for name in _FORMATS if hasattr(_module(name), kind))


def render(kind: str, report: object, fmt: str) -> Rendered:
    """`report`, of kind `kind`, in format `fmt` (one of `formats(kind)`)."""
    if fmt not in _FORMATS or not hasattr(_module(fmt), kind):
        choices = ", ".join(formats(kind))
        raise ValueError(f"unknown {kind} format {fmt!r}; choose one of {choices}")
    written: Rendered | str = getattr(_module(fmt), kind)(report)
    return Rendered(written) if isinstance(written, str) else written
