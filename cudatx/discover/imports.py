"""Which packages a package imports as it is imported: its `__init__.py`'s module-level
imports, read with `ast` (never run).

An extension module is imported after every `__init__.py` above it has run. When one of
them imports torch at module level (functorch, torchvision, any package built on torch), the
extension loads in a process where torch's own import has already happened, its preloads
included (cudatx.loader.roots).
"""

from __future__ import annotations

import ast
import collections
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from cudatx.cache import Unkept, file_key, memo_file
from cudatx.models import Frozen

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


# -- the static import closure --------------------------------------------------------------


class Closure(Frozen, kw_only=False):
    """What `import TOP` runs, read statically: the modules (dotted names) its `__init__.py`
    imports at module level, and theirs, in the same top-level package."""

    required: frozenset[str]  # imported on every path (an ImportError there fails the import)
    optional: frozenset[str]  # imported under `try: ... except ImportError`
    files: tuple[tuple[str, str], ...]  # (path, state) of every file read: what it rests on


def _imports_in(tree: ast.Module, name: str, is_package: bool) -> Iterator[tuple[str, bool]]:
    """(dotted module, optional) for each module-level import of module `name`. An import
    under `try` whose handlers catch ImportError (or anything) is optional; one in a
    function, or behind a module `__getattr__`, is not read (it runs later, if ever)."""
    package = name if is_package else name.rpartition(".")[0]

    def visit(body: list[ast.stmt], optional: bool) -> Iterator[tuple[str, bool]]:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    for end in range(1, len(parts) + 1):  # each package's __init__ runs
                        yield ".".join(parts[:end]), optional
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                    base = ".".join([*parts, base] if base else parts)
                if base:
                    parts = base.split(".")
                    for end in range(1, len(parts) + 1):
                        yield ".".join(parts[:end]), optional
                    for alias in node.names:  # `from pkg import mod`: a submodule, maybe
                        if alias.name != "*":
                            yield f"{base}.{alias.name}", optional
            elif isinstance(node, ast.Try):
                caught = any(
                    h.type is None
                    or any(
                        isinstance(t, ast.Name)
                        and t.id
                        in ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")
                        for t in ast.walk(h.type)
                    )
                    for h in node.handlers
                )
                yield from visit(node.body, optional or caught)
                for handler in node.handlers:
                    yield from visit(handler.body, optional)
                yield from visit(node.orelse, optional)
                yield from visit(node.finalbody, optional)
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        yield from visit([child], optional)

    yield from visit(tree.body, False)


def import_closure(
    top: str, entry: str, real: Callable[[str], str] = str, limit: int = 20_000
) -> Closure:
    """The static closure of `import TOP`, TOP a package or module directly in the sys.path
    entry `entry`. Modules of other top-level packages are not followed (their own
    closures say what they import). An extension module is a leaf: what its own init
    imports is not read (Cython's cimports) and is not counted."""
    required: set[str] = set()
    optional: set[str] = set()
    files: list[tuple[str, str]] = []
    queue: list[tuple[str, bool]] = [(top, False)]
    while queue and len(files) < limit:
        name, is_optional = queue.pop()
        if name in required or (is_optional and name in optional):
            continue
        (required if not is_optional else optional).add(name)
        read = _read_module(name, entry, real)
        if read is None:
            continue
        files.append(read[0])
        for module, opt in read[1]:
            if module.split(".")[0] == top.split(".")[0]:
                queue.append((module, is_optional or opt))
    return Closure(frozenset(required), frozenset(optional - required), tuple(files))


def requires(
    top: str,
    dotted: str,
    entry: str,
    real: Callable[[str], str] = str,
    limit: int = 20_000,
    follow: tuple[str, ...] = (),
) -> tuple[bool, tuple[tuple[str, str], ...]]:
    """Whether `dotted` is in import_closure(top, entry).required, and the (path, state) of
    every file read to tell; `follow`: other top-level packages whose modules the closure
    goes into too (a companion, shipped in `top`'s wheel and imported by it: Companion).

    The closure's required imports are followed breadth first, and the search stops at the
    first module that imports `dotted` on them: `torch._C` is told from torch/__init__.py
    alone, where the whole closure of torch reads 1,551 files (4.4 s). Only a module outside
    the required part reads all of that part."""
    if dotted == top:
        return True, ()
    packages = {top.split(".")[0], *follow}
    files: list[tuple[str, str]] = []
    seen = {top}
    queue = collections.deque([top])
    while queue and len(files) < limit:
        read = _read_module(queue.popleft(), entry, real)
        if read is None:
            continue
        files.append(read[0])
        for module, optional in read[1]:
            if optional or module in seen or module.split(".")[0] not in packages:
                continue
            if module == dotted:
                return True, tuple(files)
            seen.add(module)
            queue.append(module)
    return False, tuple(files)


def _read_module(
    name: str, entry: str, real: Callable[[str], str]
) -> tuple[tuple[str, str], list[tuple[str, bool]]] | None:
    """((path, state), its module-level imports) of module `name`'s source in `entry`, its
    package's `__init__.py` or its own `.py`; None where neither reads (an extension module,
    a namespace package, a file Python could not compile either)."""
    relative = name.replace(".", "/")
    for path, is_package in (
        (os.path.join(entry, relative, "__init__.py"), True),
        (os.path.join(entry, relative + ".py"), False),
    ):
        try:
            st = os.stat(real(path))
            with open(real(path), "rb") as handle:
                tree = ast.parse(handle.read())
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        return (path, ":".join(file_key(st))), list(_imports_in(tree, name, is_package))
    return None


# -- companions: a top-level package another one of the same wheel imports ----------------


class Companion(Frozen, kw_only=False):
    """A top-level package shipped in the wheel of another that imports it: nvfuser in
    torch 2.0's wheel (torch/_prims_common imports `nvfuser._C`), cupy_backends in CuPy's.
    Its modules are loaded in the importer's process, after what the importer's import has
    loaded (torch's preloads, a package's own ctypes loads), not in a fresh one."""

    package: str  # the companion's folder, absolute: "<site>/nvfuser"
    importer: str  # the importing package's folder: "<site>/torch"
    at: tuple[tuple[str, int], ...]  # (file, line) of the first import of it in each file


def companions(
    site: str, rows: Iterable[str], real: Callable[[str], str] = str
) -> tuple[Companion, ...]:
    """The companions among the regular packages (`<top>/__init__.py`) a distribution's
    RECORD rows list at the top of `site`: each pair (companion, importer) where a module of
    the importer imports the companion anywhere (module level, a function, a try), read with
    `ast` from the files a textual search picks, and no module of the companion imports the
    importer. Packages that import each other are peers, each a user's import: torch and
    functorch (functorch/__init__.py imports torch first), cupy and cupyx."""
    tops: dict[str, list[str]] = {}
    for row in rows:
        head, sep, rest = row.partition("/")
        if sep and head.isidentifier():
            tops.setdefault(head, []).append(rest)
    tops = {t: files for t, files in tops.items() if "__init__.py" in files}
    if len(tops) < 2:
        return ()
    wheel = _Wheel(site, tops, real)
    # Packages that import each other are peers: whether each imports the other is known at
    # its first import found, so a pair is read whole only where it is one-way (torch 2.14's
    # torch and functorch import each other from hundreds of files; parsing every one of
    # them was most of a cold plan).
    imports = {
        (importer, top): bool(wheel.imports(importer, top, first=True))
        for importer in sorted(tops)
        for top in sorted(tops)
        if top != importer
    }
    return tuple(
        Companion(
            os.path.join(site, top),
            os.path.join(site, importer),
            tuple(sorted(wheel.imports(importer, top, first=False).items())),
        )
        for (importer, top), found in imports.items()
        if found and not imports[(top, importer)]
    )


class _Wheel:
    """The top-level packages of one wheel's RECORD, their files read once and parsed only
    where a line looks like an import of the package asked about."""

    def __init__(self, site: str, tops: dict[str, list[str]], real: Callable[[str], str]):
        self.site = site
        self.tops = tops
        self.real = real
        self._sources: dict[str, dict[str, bytes]] = {}
        self._parsed: dict[str, list[tuple[str, int]]] = {}

    def imports(self, importer: str, top: str, *, first: bool) -> dict[str, int]:
        """file -> the line of its first import of `top`, for the files of `importer` that
        import it anywhere (module level, a function, a try); with `first`, the first such
        file only. Only a file with an import statement naming `top` can import it (`from
        nvfuser import`, `import os, nvfuser`); `ast` then drops the lines that only look
        like imports (in a string). Deviation: an import continued onto the next line with a
        backslash before the name is not seen."""
        pattern = re.compile(
            rb"^[ \t]*(?:from[ \t]+" + re.escape(top).encode() + rb"\b"
            rb"|import[ \t][^\n#]*\b" + re.escape(top).encode() + rb"\b)",
            re.M,
        )
        name = top.encode()
        out: dict[str, int] = {}
        for path, source in self._files(importer).items():
            if name not in source or not pattern.search(source):
                continue
            if path not in self._parsed:
                self._parsed[path] = list(_imports_anywhere(source))
            lines = [line for name, line in self._parsed[path] if name == top]
            if lines:
                out[path] = min(lines)
                if first:
                    break
        return out

    def _files(self, importer: str) -> dict[str, bytes]:
        """The `.py` files of `importer` that name another top at all, by path (the
        importer's own name is in nearly every file of it: torch's 2,000 `import torch`)."""
        if importer not in self._sources:
            # a substring test (memmem in C): a regex over torch's 2,000 files took 0.4 s
            others = [t.encode() for t in sorted(self.tops) if t != importer]
            kept: dict[str, bytes] = {}
            for rest in self.tops[importer]:
                if not rest.endswith(".py"):
                    continue
                path = os.path.join(self.site, importer, rest)
                try:
                    with open(self.real(path), "rb") as handle:
                        source = handle.read()
                except OSError:
                    continue
                if any(other in source for other in others):
                    kept[path] = source
            self._sources[importer] = kept
        return self._sources[importer]


def _imports_anywhere(source: bytes) -> Iterator[tuple[str, int]]:
    """(top-level package, line) of each absolute import in a module, wherever it is."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.partition(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.partition(".")[0], node.lineno
