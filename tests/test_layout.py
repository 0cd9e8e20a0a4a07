"""The package tree is the pipeline (docs/architecture.md): imports go down it, in no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cudatx"

# Stages in pipeline order. A module may import its own stage, any earlier one, and the
# shared modules; scan.py composes discovery, ELF and the loader with analysis/cuda.py (the
# replay needs a loaded object's CUDA major), so it sits between analysis and planning.
ORDER = (
    "shared",
    "discover",
    "elf",
    "loader",
    "environment",
    "analysis",
    "scan",
    "planning",
    "txn",
    "trial",
    "render",
    "demo",
    "cli",
)
SHARED = {
    "errors",
    "models",
    "codec",
    "documents",
    "names",
    "paths",
    "digest",
    "reading",
    "cache",
    "progress",
    "uv",
    "trust",
    "interrupts",
    "sandbox",
    "__init__",
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _stage(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "shared"
    if parts[1] == "__main__":  # `python -m cudatx`: the command line
        return "cli"
    if parts[1] in SHARED:
        return "shared"
    return parts[1]


def _imports(path: Path, *, with_type_checking: bool) -> set[str]:
    """cudatx modules `path` imports (function-level imports too, since they run)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped: set[int] = set()
    if not with_type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            ):
                skipped |= {id(n) for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("cudatx")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cudatx"):
            assert node.module is not None
            found.add(node.module)
            # `from cudatx.txn import store`: a module, not a name in the package
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if _path_of(sub) is not None:
                    found.add(sub)
    return found


def _path_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _graph(*, with_type_checking: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        graph[module] = {m for m in _imports(path, with_type_checking=with_type_checking)}
    return graph


def test_no_import_cycle() -> None:
    # Imports under `if TYPE_CHECKING:` never run: they are how two modules name each
    # other's types without a cycle at import time.
    graph = _graph(with_type_checking=False)
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other == node or other not in graph:
                continue
            if state.get(other) == 1:
                cycles.append([*stack[stack.index(other) :], other])
            elif other not in state:
                visit(other)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []


def test_imports_go_down_the_pipeline() -> None:
    upward = []
    for module, imported in _graph(with_type_checking=True).items():
        rank = ORDER.index(_stage(module))
        for other in sorted(imported):
            if ORDER.index(_stage(other)) > rank:
                upward.append(f"{module} imports {other}")
    assert upward == []


def test_every_stage_is_a_package_of_the_tree() -> None:
    stages = {_stage(_module(p)) for p in PACKAGE.rglob("*.py")}
    assert stages == set(ORDER)


_UV_SUBCOMMANDS = {"install", "uninstall", "sync", "compile"}


def _spells_uv_pip(words: list[ast.expr]) -> bool:
    """`"pip"` followed by one of uv's pip subcommands among `words` (a list, a tuple, a
    call's arguments); `-m pip` is pip's own command line, not uv's."""
    texts = [w.value if isinstance(w, ast.Constant) else None for w in words]
    for at, text in enumerate(texts):
        after = texts[at + 1 :]
        if text == "pip" and texts[at - 1 : at] != ["-m"] and _UV_SUBCOMMANDS & set(after):
            return True
    return False


def test_only_uv_py_spells_uvs_pip_command_lines() -> None:
    """One module builds uv's command lines (cudatx/uv.py), so that the trial, the apply and
    the staging run what it builds, and nothing else: no other module writes `"pip",
    "install"` (uninstall, sync, compile) or calls pip_argv, the builders' own start."""
    builder = PACKAGE / "uv.py"
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == builder:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            words: list[ast.expr] = []
            if isinstance(node, ast.List | ast.Tuple):
                words = list(node.elts)
            elif isinstance(node, ast.Call):
                words = list(node.args)
                called = node.func
                name = called.attr if isinstance(called, ast.Attribute) else None
                if isinstance(called, ast.Name):
                    name = called.id
                if name == "pip_argv":
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} calls pip_argv")
            if _spells_uv_pip(words):
                assert isinstance(node, ast.expr)
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)[:60]}")
    assert spelled == []


# A framework's knowledge lives in its reader (cudatx/discover/frameworks) and its data
# (cudatx/data): code elsewhere asks the registry, so a new framework is one module.
_FRAMEWORKS = re.compile(r"torch|jax|onnxruntime|cupy|tensorflow|\btsl\b", re.IGNORECASE)
# Outside the readers, a name may appear only: in the built-in demo (a fake torch
# environment, compiled from cudatx/demo/c), in the CLI's help examples, and as `torch_cuda`,
# a key of the JSON output (a plan's `mixed` rows, doctor's report) that must not change.
_FRAMEWORK_HOMES = ("discover/frameworks/", "demo/", "cli/__init__.py")
_OUTPUT_KEYS = {"torch_cuda"}


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the string constants that are docstrings."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _words(node: ast.AST) -> list[str]:
    """The names a node spells in code: a name, an attribute, a parameter, a definition, a
    keyword, an import, a string."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute | ast.keyword):
        return [node.attr] if isinstance(node, ast.Attribute) else [node.arg or ""]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


def test_framework_names_only_in_the_readers() -> None:
    """Code that names a framework outside its reader (comments and docstrings may cite
    one: an upstream source, an example). It found 75 names in 12 modules before torch's
    knowledge moved to its reader and to data."""
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(_FRAMEWORK_HOMES):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if id(node) in docs:
                continue
            for word in _words(node):
                if word not in _OUTPUT_KEYS and _FRAMEWORKS.search(word):
                    line = getattr(node, "lineno", 0)
                    named.append(f"{relative}:{line} {word[:60]}")
    assert named == []
