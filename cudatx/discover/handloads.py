"""Libraries a package loads by path, read from its Python source with `ast` (never run).

Many packages load a library of their own before importing the extension module that needs
it: `ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libfoo.so"))`,
`torch.ops.load_library(path)`, and wrappers built around them (torchaudio's
`_load_lib("libtorchaudio")`). The extension's DT_NEEDED then resolves to the object already
loaded (glibc matches a needed name against the sonames of loaded objects,
elf/dl-load.c `_dl_map_object`), although no search path would find it.

This module models the call, not the package. The calls it knows: `ctypes.CDLL`,
`ctypes.PyDLL`, `ctypes.cdll.LoadLibrary`, `ctypes.pydll.LoadLibrary` (under any alias), and
the library-loading functions a package of cudatx/data/loadlists.json declares as its own
(`load_functions`: `torch.ops.load_library`, `torch.classes.load_library`); a function of
the package whose body makes one with an argument built from its parameters is a wrapper,
and each call of it is a load too. The path is evaluated with a small interpreter of what
such code is made of: `__file__`, `__name__`, string constants, f-strings,
`os.path.join/dirname/abspath/realpath/normpath/basename`, `pathlib.Path` and its `/`,
`.parent`, `.resolve()`, `glob.glob`, `importlib.resources.files/path/as_file`, `os.name`,
`sys.platform`, `platform.system()`, `sys.version_info`, module-level names (of this module
or one it imports from), `if` branches it can decide, and the package's own functions called
with known arguments. A path it cannot evaluate, or one of several it cannot choose between
(bitsandbytes picks its library by the CUDA version torch reports at run time), is reported
as not read.

Each load is read as its module runs (`at_import`): at module level, or in a function called
there. A load that only a function not called at import makes (llvmlite's library, loaded on
first use) is read too, as not at import. A load inside `try` whose handler catches the
failure is `swallowed`.

Deviations: a branch whose test cannot be decided is taken both ways; a context manager of
the module's own whose constructor takes one path passes that path through (`with
_suppress_cleanup_errors(path) as p`); loops are read once with their variable unknown.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cudatx.cache import file_key, memo, settled
from cudatx.models import Frozen
from cudatx.reading import MAX_METADATA, read_bounded

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

_LOADERS = ("CDLL", "PyDLL")  # ctypes classes whose constructor dlopens
_LOAD_METHODS = ("LoadLibrary",)  # ctypes.cdll / ctypes.pydll


class LoadCalls:
    """The calls that load a library by path beyond ctypes': packages' own functions, by
    dotted name, each with the package it belongs to, which is imported first
    (cudatx.discover.catalog.LoadList.load_functions: torch.ops.load_library), and the
    words that name a loader, looked for before a module is parsed. Made once per scan."""

    def __init__(self, functions: Mapping[str, str]) -> None:
        self.functions = dict(functions)  # dotted name -> its package
        self.names = tuple(self.functions)
        self.packages = tuple(dict.fromkeys(self.functions.values()))
        words = dict.fromkeys(
            (*_LOADERS, *_LOAD_METHODS, *(f.rpartition(".")[2] for f in self.functions))
        )
        self.loader_names = frozenset(words)
        self._words = tuple(word.encode() for word in words)
        self._pattern = re.compile(rb"\b(?:" + b"|".join(map(re.escape, self._words)) + rb")\b")

    def named_in(self, text: bytes) -> bool:
        """Whether `text` names a loader: a look for the words first (at C speed: a module
        that names none, most of them, is passed over without the pattern's scan of every
        position), then the pattern."""
        return any(word in text for word in self._words) and self._pattern.search(text) is not None


_DEPTH = 6


class HandLoaded(Frozen, kw_only=False):
    """One library a package's code loads by path."""

    path: str  # the file it loads, absolute
    by: str  # the .py file whose code makes the load (or calls the wrapper that does)
    line: int
    at_import: bool  # made as its module is imported
    swallowed: bool  # inside a try whose handler catches the failure
    after: str  # the package imported first ("torch": torch.ops.load_library), or ""


class Unread(Frozen, kw_only=False):
    """A load whose path cudatx cannot evaluate, or cannot choose among several."""

    by: str
    line: int
    what: str  # the call as written, and why


class PackageLoads(Frozen, kw_only=False):
    loads: tuple[HandLoaded, ...] = ()
    unread: tuple[Unread, ...] = ()


# -- values --------------------------------------------------------------------------------


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


class _Path(Frozen, kw_only=False):
    """A pathlib.Path value (kept apart from str for `.parent` and `/`)."""

    text: str


class _Module(Frozen, kw_only=False):
    """An imported module, by dotted name (`os.path`, `importlib.resources`)."""

    name: str


class _Func(Frozen, kw_only=False):
    """A function of the package: its module and definition."""

    module: _Source
    node: ast.FunctionDef


class _Class(Frozen, kw_only=False):
    module: _Source
    node: ast.ClassDef


class _Choice(Frozen, kw_only=False):
    """One of several values, which cannot be told apart before run time."""

    options: tuple[object, ...]


class _Pattern(Frozen, kw_only=False):
    """A string with parts unknown before run time, as a glob (`libfoo_*.so`)."""

    glob: str


def _text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, _Path):
        return value.text
    return None


def _choice(values: list[object]) -> object:
    unique: list[object] = []
    for value in values:
        for option in value.options if isinstance(value, _Choice) else (value,):
            if not any(option is u or (type(option) is type(u) and option == u) for u in unique):
                unique.append(option)
    if len(unique) == 1:
        return unique[0]
    return _Choice(tuple(unique))


# -- the package's sources ----------------------------------------------------------------


@dataclass(eq=False)
class _Source:
    """One module of the package."""

    path: str
    name: str  # dotted
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    defs: dict[str, ast.FunctionDef | ast.ClassDef] = field(default_factory=dict)
    assigns: dict[str, list[ast.expr]] = field(default_factory=dict)

    @classmethod
    def parse(cls, path: str, name: str, text: bytes) -> _Source:
        tree = ast.parse(text)
        out = cls(path, name, tree)
        package = name if path.endswith("/__init__.py") else name.rpartition(".")[0]
        for node in _module_level(tree.body):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        out.imports[alias.asname] = alias.name
                    else:
                        top = alias.name.partition(".")[0]
                        out.imports[top] = top
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    out.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                out.defs[node.name] = node
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out.assigns.setdefault(target.id, []).append(node.value)
            elif (
                isinstance(node, ast.AnnAssign)
                and node.value is not None
                and isinstance(node.target, ast.Name)
            ):
                out.assigns.setdefault(node.target.id, []).append(node.value)
        return out


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run when the module runs (blocks included, function bodies not)."""
    for node in body:
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _module_level([child])
            elif isinstance(child, ast.ExceptHandler):
                yield from _module_level(child.body)


class _Package:
    """The modules of one distribution, parsed when asked for."""

    def __init__(
        self,
        files: dict[str, str],
        read: Callable[[str], bytes],
        version: tuple[int, int],
        resolve: Callable[[str], str | None],
        globbed: Callable[[str], list[str]],
    ) -> None:
        self.files = files  # dotted module name -> path
        self.read = read
        self.version = version
        self.resolve = resolve  # dotted name -> a package folder anywhere on sys.path
        self.globbed = globbed  # the files a pattern matches, sorted
        self._parsed: dict[str, _Source | None] = {}

    def module(self, name: str) -> _Source | None:
        if name not in self._parsed:
            path = self.files.get(name)
            parsed = None
            if path is not None:
                try:
                    parsed = _Source.parse(path, name, self.read(path))
                except (OSError, SyntaxError, ValueError, RecursionError):
                    parsed = None
            self._parsed[name] = parsed
        return self._parsed[name]

    def folder_of(self, dotted: str) -> str | None:
        path = self.files.get(dotted)
        if path is not None and path.endswith("/__init__.py"):
            return os.path.dirname(path)
        return self.resolve(dotted)


# -- evaluation -----------------------------------------------------------------------------


@dataclass
class _Frame:
    source: _Source
    local: dict[str, object]
    at_import: bool
    swallowed: bool
    depth: int
    line: int = 0  # the line of the call that made this frame (for a wrapper's loads)
    by: str = ""  # the file of that call


class _Reader:
    """Walks a module as it runs, recording the loads it makes."""

    def __init__(self, package: _Package, calls: LoadCalls) -> None:
        self.package = package
        self.calls = calls
        self.loads: list[HandLoaded] = []
        self.unread: list[Unread] = []
        self.reached: set[int] = set()  # id() of function definitions run with arguments
        self.wrappers: set[int] = set()  # functions whose loads depend on their parameters

    # statements

    def run(self, body: list[ast.stmt], frame: _Frame) -> list[object]:
        """Run `body`; the values it returns (every `return` reached)."""
        returns: list[object] = []
        for node in body:
            if isinstance(node, ast.Return):
                returns.append(UNKNOWN if node.value is None else self.expr(node.value, frame))
                return returns
            if isinstance(node, ast.Assign):
                value = self.expr(node.value, frame)
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        frame.local[target.id] = value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                if isinstance(node.target, ast.Name):
                    frame.local[node.target.id] = self.expr(node.value, frame)
            elif isinstance(node, ast.Expr):
                self.expr(node.value, frame)
            elif isinstance(node, ast.If):
                taken = self.expr(node.test, frame)
                if isinstance(taken, bool | int | str):
                    returns += self.run(node.body if taken else node.orelse, frame)
                else:
                    returns += self._both(node, frame)
            elif isinstance(node, ast.Try):
                swallowed = frame.swallowed
                frame.swallowed = swallowed or self._catches(node)
                returns += self.run(node.body, frame)
                frame.swallowed = swallowed
                returns += self.run(node.orelse, frame)
                returns += self.run(node.finalbody, frame)
            elif isinstance(node, ast.With):
                for item in node.items:
                    value = self._context(item.context_expr, frame)
                    if isinstance(item.optional_vars, ast.Name):
                        frame.local[item.optional_vars.id] = value
                returns += self.run(node.body, frame)
            elif isinstance(node, ast.For):
                if isinstance(node.target, ast.Name):
                    frame.local[node.target.id] = UNKNOWN
                returns += self.run(node.body, frame)
        return returns

    def _both(self, node: ast.If, frame: _Frame) -> list[object]:
        """A branch whose test cannot be decided: both ways, each name then one of the
        values the two gave it."""
        before = dict(frame.local)
        returns = self.run(node.body, frame)
        taken = frame.local
        frame.local = dict(before)
        returns += self.run(node.orelse, frame)
        other = frame.local
        frame.local = {
            name: _choice([taken.get(name, UNKNOWN), other.get(name, UNKNOWN)])
            for name in {*taken, *other}
        }
        return returns

    def _catches(self, node: ast.Try) -> bool:
        """Whether a handler catches what a failed dlopen raises (OSError, from ctypes;
        torch.ops.load_library raises it as it is) and does not raise again."""
        for handler in node.handlers:
            if any(isinstance(n, ast.Raise) for n in ast.walk(ast.Module(handler.body, []))):
                continue
            if handler.type is None:
                return True
            names = [ast.unparse(t) for t in ast.walk(handler.type) if isinstance(t, ast.Name)]
            if any(
                n in ("Exception", "BaseException", "OSError", "EnvironmentError") for n in names
            ):
                return True
        return False

    def _context(self, node: ast.expr, frame: _Frame) -> object:
        """What `with X as v` binds: importlib.resources.path's path, as_file's argument, a
        one-argument context manager of the module's own passing its path through."""
        if isinstance(node, ast.Call) and len(node.args) == 1:
            func = self.expr(node.func, frame)
            if isinstance(func, _Class) and any(
                isinstance(n, ast.FunctionDef) and n.name == "__enter__" for n in func.node.body
            ):
                return self._context(node.args[0], frame)
        return self.expr(node, frame)

    # expressions

    def expr(self, node: ast.expr, frame: _Frame) -> object:
        try:
            return self._expr(node, frame)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, RecursionError):
            return UNKNOWN

    def _expr(self, node: ast.expr, frame: _Frame) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id, frame)
        if isinstance(node, ast.Attribute):
            return self._attribute(self.expr(node.value, frame), node.attr)
        if isinstance(node, ast.Call):
            return self._call(node, frame)
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node, frame)
        if isinstance(node, ast.BinOp):
            return self._binop(node, frame)
        if isinstance(node, ast.IfExp):
            taken = self.expr(node.test, frame)
            if isinstance(taken, _Unknown | _Choice | _Pattern):
                return _choice([self.expr(node.body, frame), self.expr(node.orelse, frame)])
            return self.expr(node.body if taken else node.orelse, frame)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node, frame)
        if isinstance(node, ast.BoolOp):
            values = [self.expr(v, frame) for v in node.values]
            if any(isinstance(v, _Unknown | _Choice | _Pattern) for v in values):
                return UNKNOWN
            if isinstance(node.op, ast.And):
                return all(values)
            return next((v for v in values if v), values[-1])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = self.expr(node.operand, frame)
            return UNKNOWN if isinstance(value, _Unknown | _Choice | _Pattern) else not value
        if isinstance(node, ast.Tuple | ast.List):
            return tuple(self.expr(e, frame) for e in node.elts)
        if isinstance(node, ast.Dict):
            keys = [self.expr(k, frame) if k is not None else UNKNOWN for k in node.keys]
            if any(not isinstance(k, str) for k in keys):
                return UNKNOWN
            return {k: self.expr(v, frame) for k, v in zip(keys, node.values, strict=True)}
        if isinstance(node, ast.Subscript):
            value = self.expr(node.value, frame)
            index = self.expr(node.slice, frame)
            if isinstance(value, dict) and isinstance(index, str):
                return value.get(index, UNKNOWN)
            if isinstance(value, tuple | str) and isinstance(index, int | slice):
                return value[index]
            return UNKNOWN
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self.expr(p, frame) for p in (node.lower, node.upper)]
            if all(p is None or isinstance(p, int) for p in parts):
                return slice(*parts)
        return UNKNOWN

    def _name(self, name: str, frame: _Frame) -> object:
        if name in frame.local:
            return frame.local[name]
        return self._global(frame.source, name, frame.depth)

    def _global(self, source: _Source, name: str, depth: int) -> object:
        if name == "__file__":
            return source.path
        if name == "__name__":
            return source.name
        if name in source.defs:
            node = source.defs[name]
            return (
                _Func(source, node) if isinstance(node, ast.FunctionDef) else _Class(source, node)
            )
        if name in source.assigns and depth < _DEPTH:
            top = _Frame(source, {}, False, False, depth + 1)
            return _choice([self.expr(v, top) for v in source.assigns[name]])
        if name in source.imports:
            return self._imported(source.imports[name], depth)
        # Modules a package may use without importing them by that name, and builtins.
        known = ("os", "sys", "ctypes", "glob", "platform", "str")
        return _Module(name) if name in known else UNKNOWN

    def _imported(self, dotted: str, depth: int) -> object:
        """A name imported from a module: the package's own function or constant, or a
        module (`os.path`, `ctypes`)."""
        if dotted in self.package.files:
            return _Module(dotted)
        head, _, attr = dotted.rpartition(".")
        source = self.package.module(head) if head else None
        if source is not None and depth < _DEPTH:
            return self._global(source, attr, depth + 1)
        return _Module(dotted)

    def _attribute(self, value: object, attr: str) -> object:
        if isinstance(value, _Module):
            dotted = f"{value.name}.{attr}"
            constants: dict[str, object] = {
                "os.name": "posix",
                "os.sep": "/",
                "os.path.sep": "/",
                "sys.platform": "linux",
                "sys.version_info": (*self.package.version, 0),
            }
            if dotted in constants:
                return constants[dotted]
            if dotted in self.package.files:
                return _Module(dotted)  # a submodule (`torchaudio._extension`)
            source = self.package.module(value.name)
            if source is not None:
                return self._global(source, attr, 0)
            return _Module(dotted)
        if isinstance(value, _Path):
            if attr == "parent":
                return _Path(os.path.dirname(value.text))
            if attr == "name":
                return os.path.basename(value.text)
        if isinstance(value, str | _Path | dict | tuple):
            return (value, attr)  # a bound method, called below
        return UNKNOWN

    def _fstring(self, node: ast.JoinedStr, frame: _Frame) -> object:
        parts: list[str] = []
        unknown = False
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            inner = self.expr(value.value, frame) if isinstance(value, ast.FormattedValue) else None
            text = _text(inner) if not isinstance(inner, int) else str(inner)
            if text is None:
                parts.append("*")
                unknown = True
            else:
                parts.append(text)
        joined = "".join(parts)
        return _Pattern(joined) if unknown else joined

    def _binop(self, node: ast.BinOp, frame: _Frame) -> object:
        left, right = self.expr(node.left, frame), self.expr(node.right, frame)
        if isinstance(node.op, ast.Div) and isinstance(left, _Path):
            text = _text(right)
            if text is not None:
                return _Path(os.path.join(left.text, text))
            if isinstance(right, _Pattern):
                return _Pattern(os.path.join(left.text, right.glob))
        if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
            return left + right
        return UNKNOWN

    def _compare(self, node: ast.Compare, frame: _Frame) -> object:
        left, right = self.expr(node.left, frame), self.expr(node.comparators[0], frame)
        if isinstance(left, _Unknown | _Choice | _Pattern) or isinstance(
            right, _Unknown | _Choice | _Pattern
        ):
            return UNKNOWN
        op = node.ops[0]
        try:
            if isinstance(op, ast.Eq):
                return bool(left == right)
            if isinstance(op, ast.NotEq):
                return bool(left != right)
            if isinstance(op, ast.In) and isinstance(right, tuple | str | dict):
                return left in right
            if isinstance(op, ast.GtE):
                return bool(left >= right)  # type: ignore[operator]
            if isinstance(op, ast.Lt):
                return bool(left < right)  # type: ignore[operator]
        except TypeError:
            return UNKNOWN
        return UNKNOWN

    def _call(self, node: ast.Call, frame: _Frame) -> object:
        shown = ast.unparse(node.func)
        func = self.expr(node.func, frame)
        args = [self.expr(a, frame) for a in node.args]
        if self._is_load(node, func, shown):
            self._load(node, args[0] if args else UNKNOWN, frame, shown)
            return UNKNOWN
        if isinstance(func, _Func):
            return self._step(func, node, args, frame)
        if isinstance(func, _Module):
            return self._library(func.name, args)
        if isinstance(func, tuple) and len(func) == 2 and isinstance(func[1], str):
            return self._method(func[0], func[1], args)
        return UNKNOWN

    def _is_load(self, node: ast.Call, func: object, shown: str) -> bool:
        if isinstance(func, _Module):
            name = func.name
            if name in self.calls.functions:
                return True
            head, _, attr = name.rpartition(".")
            if attr in _LOADERS and head.endswith("ctypes"):
                return True
            if attr in _LOAD_METHODS and head.split(".")[-1] in ("cdll", "pydll"):
                return True
        return shown.endswith(self.calls.names)

    def _after(self, node: ast.Call, frame: _Frame, shown: str) -> str:
        """The package a load imports first: the one whose own function makes it (a call
        written as its dotted name, or a name bound to it or to anything of that package);
        "" for ctypes'."""
        for function, package in self.calls.functions.items():
            if shown.endswith(function):
                return package
        func = self.expr(node.func, frame)
        if not isinstance(func, _Module):
            return ""
        return next((p for p in self.calls.packages if func.name.startswith(f"{p}.")), "")

    def _library(self, name: str, args: list[object]) -> object:
        """The standard library functions a path is built with."""
        texts = [_text(a) for a in args]
        known = all(t is not None for t in texts)
        strs = [t for t in texts if t is not None]
        if name in ("os.path.join", "posixpath.join") and known and strs:
            return os.path.join(*strs)
        folding = ("os.path.dirname", "os.path.abspath", "os.path.realpath", "os.path.normpath")
        if name in folding and known and len(strs) == 1:
            if name.endswith("dirname"):
                return os.path.dirname(strs[0])
            return os.path.normpath(strs[0])  # the paths here are absolute already
        if name == "os.path.basename" and known and len(strs) == 1:
            return os.path.basename(strs[0])
        if name.endswith(("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath")) or name in (
            "Path",
            "PurePath",
        ):
            if known and strs:
                return _Path(os.path.join(*strs))
            if len(args) == 1 and isinstance(args[0], _Pattern):
                return args[0]
        if name in ("str", "os.fspath") and len(args) == 1:
            return texts[0] if texts[0] is not None else args[0]
        if name == "platform.system":
            return "Linux"
        if name in ("glob.glob", "glob.iglob") and len(args) == 1 and texts[0] is not None:
            return tuple(self.package.globbed(texts[0]))
        if name.endswith("resources.files") and len(args) == 1 and isinstance(args[0], str):
            folder = self.package.folder_of(args[0])
            return _Path(folder) if folder else UNKNOWN
        if (
            name.endswith("resources.path")
            and len(args) == 2
            and isinstance(args[0], str)
            and texts[1] is not None
        ):
            folder = self.package.folder_of(args[0])
            return _Path(os.path.join(folder, texts[1])) if folder else UNKNOWN
        if name.endswith(("importlib.resources.as_file", "resources.as_file")) and args:
            return args[0]
        return UNKNOWN

    def _method(self, value: object, attr: str, args: list[object]) -> object:
        if isinstance(value, _Path):
            if attr in ("resolve", "absolute", "expanduser"):
                return value
            if attr == "joinpath" and all(_text(a) is not None for a in args):
                return _Path(os.path.join(value.text, *[_text(a) or "" for a in args]))
        if isinstance(value, dict) and attr == "get" and args and isinstance(args[0], str):
            return value.get(args[0], args[1] if len(args) > 1 else None)
        if isinstance(value, str):
            if attr in ("rpartition", "partition", "split", "rsplit") and all(
                isinstance(a, str) for a in args
            ):
                return tuple(getattr(value, attr)(*args))
            simple = ("startswith", "endswith", "replace", "lower", "upper", "strip")
            if attr in simple and all(isinstance(a, str | tuple) for a in args):
                return getattr(value, attr)(*args)
        return UNKNOWN

    def _step(self, func: _Func, node: ast.Call, args: list[object], frame: _Frame) -> object:
        """A call of the package's own function: run its body with the arguments bound."""
        if frame.depth >= _DEPTH:
            return UNKNOWN
        params = [a.arg for a in func.node.args.args]
        local: dict[str, object] = {p: UNKNOWN for p in params}
        defaults = func.node.args.defaults
        for param, default in zip(params[len(params) - len(defaults) :], defaults, strict=True):
            local[param] = self.expr(default, frame)
        local.update(zip(params, args, strict=False))
        for keyword in node.keywords:
            if keyword.arg in local:
                local[keyword.arg] = self.expr(keyword.value, frame)
        self.reached.add(id(func.node))
        inner = _Frame(
            func.module,
            local,
            frame.at_import,
            frame.swallowed,
            frame.depth + 1,
            frame.line or node.lineno,
            frame.by or frame.source.path,
        )
        returns = self.run(func.node.body, inner)
        return _choice(returns) if returns else None

    def _load(self, node: ast.Call, arg: object, frame: _Frame, shown: str) -> None:
        by = frame.by or frame.source.path
        line = frame.line or node.lineno
        after = self._after(node, frame, shown)
        text = _text(arg)
        if text is not None and "/" not in text:
            return  # ctypes.CDLL("libc.so.6"): dlopen's search, not a file of the package's
        if text is not None:
            self.loads.append(
                HandLoaded(
                    os.path.normpath(text), by, line, frame.at_import, frame.swallowed, after
                )
            )
            return
        if isinstance(arg, _Unknown) and frame.depth > 0 and not frame.line:
            return  # a wrapper read on its own: its calls say what it loads
        options = [arg] if not isinstance(arg, _Choice) else list(arg.options)
        files: list[str] = []
        own = False  # some option is a file (or pattern) of a known place
        complete = True
        for option in options:
            if isinstance(option, _Pattern):
                files += self.package.globbed(option.glob)
                own = True
            elif _text(option) is not None:
                text = _text(option) or ""
                if "/" not in text:
                    return  # a bare name: dlopen's search, not a file of the package's own
                files.append(os.path.normpath(text))
                own = True
            elif isinstance(option, tuple):
                files += [t for t in (_text(o) for o in option) if t]
                own = own or bool(option)
            else:
                complete = False
        if complete and len(set(files)) == 1:
            self.loads.append(
                HandLoaded(files[0], by, line, frame.at_import, frame.swallowed, after)
            )
            return
        if not own:
            # Nothing of the path is known: a library found by name (ctypes.util.
            # find_library, a user's setting), not a file of the package's own.
            return
        said = ast.unparse(node)
        why = f"one of {len(set(files))} files" if complete else "one of several files"
        self.unread.append(Unread(by, line, f"{said[:120]}: {why}, chosen at run time"))


def _globbed(pattern: str) -> list[str]:
    return sorted(glob.glob(pattern))


# -- reading a distribution ----------------------------------------------------------------


def read_hand_loads(
    site: str,
    py_files: list[str],
    version: tuple[int, int],
    resolve: Callable[[str], str | None],
    calls: LoadCalls,
    real: Callable[[str], str] = str,
    globbed: Callable[[str], list[str]] | None = None,
) -> PackageLoads:
    """What the modules of one distribution (`py_files`, relative to `site`) load by path.
    `resolve` finds a package folder on sys.path by its dotted name (for
    importlib.resources of another distribution's package). `calls`: the packages' own
    library-loading functions, besides ctypes'. `real` and `globbed` answer
    for the files as a change would leave them (a planned install's staged bytes, and the
    files a pattern would match then); by default, the files as they are."""
    files = {_dotted(rel): os.path.join(site, rel) for rel in py_files}
    texts: dict[str, bytes] = {}

    def read(path: str) -> bytes:
        if path not in texts:
            texts[path] = read_bounded(real(path), MAX_METADATA)
        return texts[path]

    direct = []
    for name, path in files.items():
        try:
            if calls.named_in(read(path)):
                direct.append(name)
        except OSError:
            continue
    if not direct:
        return PackageLoads()
    package = _Package(files, read, version, resolve, globbed or _globbed)
    reader = _Reader(package, calls)
    # The functions that load: their names, to find the modules that call them.
    names = set()
    for name in direct:
        source = package.module(name)
        if source is None:
            continue
        for node in ast.walk(source.tree):
            if isinstance(node, ast.ClassDef):
                # A special method is called by Python, not by its name: `__init__` runs
                # where the class is called (numba's driver loads in one; taking the name
                # had every module with a `super().__init__(` read).
                if any(
                    isinstance(item, ast.FunctionDef)
                    and _is_special(item.name)
                    and _loads_in(item, read(files[name]), calls)
                    for item in node.body
                ):
                    names.add(node.name)
            elif (
                isinstance(node, ast.FunctionDef)
                and not _is_special(node.name)
                and _loads_in(node, read(files[name]), calls)
            ):
                names.add(node.name)
    callers = set(direct)
    if names:
        # A call, not a definition of another function of the same name.
        pattern = re.compile(
            rb"(?<!def )\b(?:" + b"|".join(re.escape(n.encode()) for n in names) + rb")\s*\("
        )
        called = [n.encode() for n in names]
        for name, path in files.items():
            try:
                text = read(path)
                if any(n in text for n in called) and pattern.search(text):
                    callers.add(name)
            except OSError:
                continue
    for name in sorted(callers):
        source = package.module(name)
        if source is not None:
            _guarded(reader, source, source.tree.body, _Frame(source, {}, True, False, 0))
    # Functions no module-level code reached: their loads are made later, if ever.
    for name in sorted(direct):
        source = package.module(name)
        if source is None:
            continue
        for node in ast.walk(source.tree):
            if (
                isinstance(node, ast.FunctionDef)
                and id(node) not in reader.reached
                and _loads_in(node, read(files[name]), calls)
            ):
                local: dict[str, object] = {a.arg: UNKNOWN for a in node.args.args}
                _guarded(reader, source, node.body, _Frame(source, local, False, False, 1))
    loads = tuple(dict.fromkeys(reader.loads))
    # A load made at import supersedes the same one read from a function on its own.
    at_import = {(ld.path, ld.by) for ld in loads if ld.at_import}
    loads = tuple(ld for ld in loads if ld.at_import or (ld.path, ld.by) not in at_import)
    return PackageLoads(loads, tuple(dict.fromkeys(reader.unread)))


def _is_special(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _loads_in(node: ast.FunctionDef, text: bytes, calls: LoadCalls) -> bool:
    """Whether the function's code names a loader (_WORDS): a name, an attribute or an
    import of it. Its own lines are looked at first (most name none); a mention in a
    docstring or a string is no call: scipy's `quad` shows `ctypes.CDLL` in its docstring,
    and taking it for a loader had every module that calls `quad` read (3.5 s)."""
    lines = text.splitlines()[node.lineno - 1 : node.end_lineno]
    if not calls.named_in(b"\n".join(lines)):
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            named = sub.id
        elif isinstance(sub, ast.Attribute):
            named = sub.attr
        elif isinstance(sub, ast.alias):
            named = sub.asname or sub.name.rpartition(".")[2]
        else:
            continue
        if named in calls.loader_names:
            return True
    return False


def _guarded(reader: _Reader, source: _Source, body: list[ast.stmt], frame: _Frame) -> None:
    """Run `body`; code the interpreter trips over is said as not read, never raised."""
    try:
        reader.run(body, frame)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        reader.unread.append(Unread(source.path, 0, f"code cudatx cannot follow ({exc})"))


def _dotted(rel: str) -> str:
    """`torchaudio/_extension/__init__.py` -> `torchaudio._extension`."""
    stem = rel[: -len(".py")]
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    return stem.replace("/", ".")


def loads_to_json(loads: PackageLoads) -> str:
    return json.dumps(
        {
            "loads": [
                [ld.path, ld.by, ld.line, ld.at_import, ld.swallowed, ld.after]
                for ld in loads.loads
            ],
            "unread": [[u.by, u.line, u.what] for u in loads.unread],
        }
    )


def loads_from_json(text: str) -> PackageLoads:
    data = json.loads(text)
    return PackageLoads(
        tuple(
            HandLoaded(str(p), str(b), int(n), bool(a), bool(s), _package(t))
            for p, b, n, a, s, t in data["loads"]
        ),
        tuple(Unread(str(b), int(n), str(w)) for b, n, w in data["unread"]),
    )


def _package(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("a package of the wrong type")  # the flag of an older cudatx
    return value


def cached_hand_loads(
    key: str,
    state: os.stat_result | None,
    cache: ScanCache | None,
    compute: Callable[[], PackageLoads],
) -> PackageLoads:
    """`compute()`, kept in the scan cache under `key` for as long as the distribution's
    RECORD (`state`) stays the same: its .py files change only with it."""
    if state is None:
        return compute()
    keep = settled(state)  # see cache.RACY_NS
    return memo(
        cache,
        "hand loads",
        key,
        ":".join(file_key(state)),
        compute,
        load=loads_from_json,
        dump=lambda found: loads_to_json(found) if keep else None,
    )
