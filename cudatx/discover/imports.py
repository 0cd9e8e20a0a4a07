"""Which packages a package imports as it is imported: its `__init__.py`'s module-level
imports, read with `ast` (never run).

An extension module is imported after every `__init__.py` above it has run. When one of
them imports torch at module level (functorch, torchvision, any package built on torch), the
extension loads in a process where torch's own import has already happened, its preloads
included (cudatx.loader.roots).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from cudatx.cache import Unkept, file_key, memo_file

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

_PREFILTER = re.compile(rb"^[ \t]*(?:import|from)[ \t]", re.M)
_MEMO: dict[tuple[str, str, str], tuple[str, ...]] = {}


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that may run when the module runs: every block of a compound statement
    (if, try, with, for, a class body, which runs when the class is defined), but not a
    function's body."""
    for node in body:
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _module_level([child])
            elif isinstance(child, ast.ExceptHandler | ast.match_case):
                yield from _module_level(child.body)


def imported_top_levels(source: bytes) -> tuple[str, ...]:
    """The top-level packages a module imports at module level, in order (absolute imports
    only: `import torch.nn`, `from torch import x` give `torch`)."""
    if not _PREFILTER.search(source):
        return ()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return ()  # Python would fail to import it too; nothing is imported before that
    found: dict[str, None] = {}
    for node in _module_level(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.setdefault(alias.name.partition(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.setdefault(node.module.partition(".")[0])
    return tuple(found)


def imports_of(
    init_py: str, cache: ScanCache | None, real: Callable[[str], str] = str
) -> tuple[str, ...]:
    """imported_top_levels of the file at `init_py` (() when it cannot be read), once per
    file state, and across runs through the scan cache."""
    path = real(init_py)
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return ()
    seen = (path, *file_key(st))
    found = _MEMO.get(seen)
    if found is not None:
        return found

    def compute() -> tuple[str, ...]:
        try:
            with open(path, "rb") as handle:
                return imported_top_levels(handle.read())
        except OSError:
            raise Unkept(()) from None

    found = memo_file(
        cache, "imports", st, compute, load=lambda text: tuple(text.split()), dump=" ".join
    )
    _MEMO[seen] = found
    return found
