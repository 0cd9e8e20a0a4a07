"""What torch's __init__.py preloads with ctypes, read from the installed source.

torch 2.14 (torch/__init__.py) keeps the list in `_preload_cuda_deps` as
`cuda_libs = [(folder, glob), ...]` plus an optional nvtx call, and locates each entry in
`_get_cuda_dep_paths` with `glob.glob(os.path.join(path, "nvidia", lib_folder, "lib",
lib_name))` and friends, over every sys.path entry, taking the first entry that has any
match. This module reads those two functions with `ast` (never importing torch); when their
shape is not the one it knows, it falls back to the shipped table for the release and says so.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cudatx.cache import file_key
from cudatx.discover.catalog import LoadList, PreloadEntry

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

_NAMES = {"path": "{entry}", "lib_folder": "{folder}", "lib_name": "{glob}"}


@dataclass(frozen=True)
class Preloads:
    entries: tuple[PreloadEntry, ...]
    search: tuple[str, ...]
    origin: str  # where the list came from, for `why` and `doctor`


class _Shape(Exception):
    """The source does not have the shape this reader knows."""


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise _Shape(f"no function {name}")


def _string(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise _Shape("not a string constant")


def _entries(func: ast.FunctionDef) -> list[PreloadEntry]:
    entries: list[PreloadEntry] = []
    for node in ast.walk(func):
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and target.id == "cuda_libs":
            if not isinstance(value, ast.List):
                raise _Shape("cuda_libs is not a list")
            for item in value.elts:
                if not isinstance(item, ast.Tuple) or len(item.elts) != 2:
                    raise _Shape("cuda_libs holds something other than pairs")
                # `required` is what the except path of _load_global_deps asks (the default,
                # True); the ordinary path calls with required=False and ignores it.
                entries.append(PreloadEntry(_string(item.elts[0]), _string(item.elts[1]), True))
    for node in ast.walk(func):
        call = node if isinstance(node, ast.Call) else None
        if call and isinstance(call.func, ast.Name) and call.func.id == "_preload_cuda_lib":
            constant = all(isinstance(a, ast.Constant) for a in call.args)
            if len(call.args) == 2 and constant:  # the optional nvtx entry
                required = any(
                    k.arg == "required" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in call.keywords
                )
                entries.append(PreloadEntry(_string(call.args[0]), _string(call.args[1]), required))
    if not entries:
        raise _Shape("no cuda_libs list")
    return entries


def _part(node: ast.expr) -> str:
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.JoinedStr):
        out = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name):
                out.append("{cuda_major}")
            else:
                raise _Shape("unknown f-string part")
        return "".join(out)
    return _string(node)


def _search(func: ast.FunctionDef) -> list[str]:
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "glob.glob"):
            continue
        (joined,) = node.args
        if not (isinstance(joined, ast.Call) and ast.unparse(joined.func) == "os.path.join"):
            raise _Shape("glob.glob of something other than os.path.join")
        pattern = "/".join(_part(arg) for arg in joined.args)
        found.append((node.lineno, node.col_offset, pattern))
    if not found:
        raise _Shape("no glob patterns")
    # torch concatenates the matches in source order; ast.walk is breadth-first.
    return [pattern for *_, pattern in sorted(found)]


# torch/__init__.py parsed, by file state: a plan reads it once per replay, and parsing its
# 3,000 lines took 50 ms. Across runs the scan cache keeps the result.
_PARSED: dict[tuple[str, str, str], tuple[tuple[PreloadEntry, ...], tuple[str, ...]]] = {}


def _read_torch(
    source: str, cache: ScanCache | None
) -> tuple[tuple[PreloadEntry, ...], tuple[str, ...]]:
    """(entries, search patterns) of torch's source; raises OSError, SyntaxError, _Shape."""
    st = os.stat(source)
    memo = (source, *file_key(st))
    if memo in _PARSED:
        return _PARSED[memo]
    text = cache.get_file("preloads", st) if cache is not None else None
    try:
        if text is None:
            raise ValueError("not stored")
        stored = json.loads(text)
        entries = tuple(PreloadEntry(str(f), str(p), bool(r)) for f, p, r in stored["entries"])
        search = tuple(str(p) for p in stored["search"])
    except (TypeError, KeyError, ValueError):
        if text is not None and cache is not None:
            cache.invalid()
        with open(source, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=source)
        entries = tuple(_entries(_function(tree, "_preload_cuda_deps")))
        search = tuple(_search(_function(tree, "_get_cuda_dep_paths")))
        if cache is not None:
            rows = [[e.folder, e.pattern, e.required] for e in entries]
            cache.put_file("preloads", st, json.dumps({"entries": rows, "search": search}))
    _PARSED[memo] = entries, search
    return entries, search


def read_preloads(
    load_list: LoadList,
    package_dir: str,
    version: str,
    cache: ScanCache | None = None,
    real: Callable[[str], str] = str,
) -> Preloads:
    """`real` maps a path to the file holding its bytes (a staged file, in a simulation)."""
    source = os.path.join(package_dir, "__init__.py")
    reason = "no reader for this package"
    if load_list.reader == "torch":
        try:
            entries, search = _read_torch(real(source), cache)
            return Preloads(entries, search, f"read from {source}")
        except (OSError, SyntaxError, ValueError, _Shape) as exc:
            reason = f"{source}: {exc}"
    release = ".".join(version.split("+")[0].split(".")[:2])
    known = sorted(load_list.releases, key=lambda r: tuple(int(x) for x in r.split(".")))
    chosen = release if release in load_list.releases else (known[-1] if known else None)
    if chosen is None:
        return Preloads((), load_list.search, f"no load list ({reason})")
    return Preloads(
        load_list.releases[chosen],
        load_list.search,
        f"shipped table for {load_list.distribution} {chosen} ({reason})",
    )
