"""torch: what its __init__.py preloads with ctypes, and its trial steps.

`_load_global_deps` loads `torch/lib/libtorch_global_deps.so` with RTLD_GLOBAL. What follows
has had six shapes between torch 2.4 and 2.14, read here with `ast` (never importing torch):

- the *normal path* (that load worked): nothing (2.4, 2.5); nvrtc and nvJitLink once
  `nvidia/cuda_runtime/lib/libcudart.so` is mapped (2.6 to 2.8), nvrtc-builtins too once any
  `libcudart.so` is (2.9); the whole list (2.10 to 2.13: the first missing one ends it, since
  it is required and the ValueError is swallowed); the whole list best effort (2.14:
  `required=False`, missing ones skipped). A library found but failing to load ends the list
  on every release (`except Exception: pass` around it).
- the *except path* (the load raised OSError naming a CUDA library): every entry of
  `cuda_libs` required (a dict in the handler before 2.10, a list of pairs in
  `_preload_cuda_deps(err)` since; `cufile` added only for CUDA >= 12 in 2.7 and 2.8), nvtx
  optional from 2.9, then libtorch_global_deps again. A missing or failing one makes
  `import torch` fail.
- the *search*: every sys.path entry in order, the first with any match wins and its first
  match is taken (glob's own order); the patterns are read from `_get_cuda_dep_paths` (2.7+)
  or the per-library function (before: only entries that hold `nvidia/`, and in 2.6 the
  second pattern only where the first found nothing).

The per-library function is `_preload_cuda_deps(lib_folder, lib_name)` before 2.10 and
`_preload_cuda_lib` since, when `_preload_cuda_deps(err)` became the list's owner: they are
told apart by their arguments. A shape this reader does not know is reported, and the
shipped table of that release is used instead (cudatx/data/loadlists.json).

This reader declares that it reads a package's preloads (`read_preloads`, a
cudatx.discover.frameworks.PreloadReader): cudatx.discover.preloads asks it for the package
whose load list (cudatx/data/loadlists.json) names it, falls back to that table, and the
preloads are replayed as the "torch" step of a context (cudatx.loader.roots). It finds no
framework of the kind the others read (no `markers`). Its GPU-free trial step is its import,
which the trial runs for every top-level package; its GPU start is declared here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from cudatx.discover.catalog import PreloadEntry, Preloads
from cudatx.discover.frameworks import FrameworkStep, SiteFiles, register
from cudatx.discover.frameworks.model import FrameworkLoads, Installed
from cudatx.discover.frameworks.source import Shape, assignment, string
from cudatx.models import Frozen

# The names torch's search functions give their arguments, as pattern placeholders.
_NAMES = {"path": "{entry}", "lib_folder": "{folder}", "lib_name": "{glob}"}
_LIST = "cuda_libs"


def _arg_names(func: ast.FunctionDef) -> list[str]:
    return [a.arg for a in func.args.args]


def _default(func: ast.FunctionDef, name: str) -> object:
    """The default value of parameter `name` (a constant), or True where it has none: a
    searcher without `required` raises for every missing library."""
    args = func.args.args
    defaults = func.args.defaults
    offset = len(args) - len(defaults)
    for index, arg in enumerate(args):
        if arg.arg == name and index >= offset:
            value = defaults[index - offset]
            return value.value if isinstance(value, ast.Constant) else None
    return True


def _called(node: ast.AST, name: str) -> ast.Call | None:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        if isinstance(call.func, ast.Name) and call.func.id == name:
            return call
    return None


class _Source(Frozen, kw_only=False):
    """The functions of torch/__init__.py that preloading involves."""

    searcher: ast.FunctionDef  # one library: (lib_folder, lib_name[, required])
    owner: ast.FunctionDef | None  # 2.10+: `_preload_cuda_deps(err[, required])`, the list's
    paths: ast.FunctionDef  # where the glob patterns are: _get_cuda_dep_paths, or searcher
    global_deps: ast.FunctionDef  # _load_global_deps

    @classmethod
    def of(cls, tree: ast.Module) -> _Source:
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        searcher = owner = None
        for name in ("_preload_cuda_lib", "_preload_cuda_deps"):
            func = functions.get(name)
            if func is None:
                continue
            names = _arg_names(func)
            if names[:2] == ["lib_folder", "lib_name"] and searcher is None:
                searcher = func
            elif names[:1] == ["err"]:
                owner = func
        if searcher is None:
            raise Shape("no function preloading one library (lib_folder, lib_name)")
        if "_load_global_deps" not in functions:
            raise Shape("no function _load_global_deps")
        paths = functions.get("_get_cuda_dep_paths", searcher)
        return cls(searcher, owner, paths, functions["_load_global_deps"])


# -- the search ----------------------------------------------------------------------------


def _join(node: ast.expr, local: dict[str, ast.expr]) -> list[str]:
    """The parts of an os.path.join(...) call as pattern text, local variables expanded."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "os.path.join":
        return [p for arg in node.args for p in _join(arg, local)]
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return [_NAMES[node.id]]
    if isinstance(node, ast.Name) and node.id in local:
        return _join(local[node.id], local)
    if isinstance(node, ast.JoinedStr):
        out = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name):
                out.append("{cuda_major}")  # f"cu{maj_cuda_version}" (2.9+)
            else:
                raise Shape("unknown f-string part")
        return ["".join(out)]
    return [string(node)]


def _search(func: ast.FunctionDef) -> tuple[tuple[str, ...], bool, bool]:
    """(patterns in the order torch concatenates them, whether an entry without an `nvidia`
    folder is skipped, whether later patterns are tried only when the first found nothing)."""
    local: dict[str, ast.expr] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            value = node.value
            joined = isinstance(value, ast.Call) and ast.unparse(value.func) == "os.path.join"
            if isinstance(target, ast.Name) and joined:
                local[target.id] = value
    found: list[tuple[int, int, str]] = []
    fallback = False
    guarded: set[int] = set()  # glob calls under `if not <found so far>:`
    for node in ast.walk(func):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.UnaryOp)
            and isinstance(node.test.op, ast.Not)
        ):
            guarded |= {id(n) for n in ast.walk(node)}
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "glob.glob"):
            continue
        if len(node.args) != 1:
            raise Shape("glob.glob of something other than one path")
        pattern = "/".join(_join(node.args[0], local))
        if not pattern.startswith("{entry}/"):
            raise Shape(f"a pattern not under a sys.path entry: {pattern}")
        found.append((node.lineno, node.col_offset, pattern))
        fallback |= id(node) in guarded
    if not found:
        raise Shape("no glob patterns")
    # torch tries the patterns in source order; ast.walk is breadth-first.
    patterns = tuple(pattern for *_, pattern in sorted(found))
    needs_nvidia = any(
        isinstance(node, ast.Call) and ast.unparse(node.func) == "os.path.exists"
        for node in ast.walk(func)
    )
    return patterns, needs_nvidia, fallback


# -- the list ------------------------------------------------------------------------------


def _min_cuda(tests: list[ast.expr]) -> int | None:
    """The CUDA major an addition to the list needs, from the `if`s around it: `cuda_version
    is not None` (any CUDA build: 0) and `t_major >= 12` (2.7, 2.8)."""
    need: int | None = None
    for test in tests:
        for node in ast.walk(test):
            if not isinstance(node, ast.Compare) or len(node.ops) != 1:
                continue
            op, right = node.ops[0], node.comparators[0]
            if isinstance(op, ast.IsNot) and isinstance(right, ast.Constant):
                need = max(need or 0, 0)
            elif isinstance(op, ast.GtE) and isinstance(right, ast.Constant):
                if not isinstance(right.value, int):
                    raise Shape("a CUDA version compared with a non-integer")
                need = max(need or 0, right.value)
            elif isinstance(op, ast.Gt) and isinstance(right, ast.Constant):
                if not isinstance(right.value, int):
                    raise Shape("a CUDA version compared with a non-integer")
                need = max(need or 0, right.value + 1)
            else:
                raise Shape(f"an addition to {_LIST} under a test cudatx cannot read")
    return need


def _built(scope: list[ast.stmt]) -> ast.expr | None:
    """The value `cuda_libs` is first assigned in `scope`."""
    for node in scope:
        assigned = assignment(node)
        if assigned is not None and isinstance(assigned[0], ast.Name) and assigned[0].id == _LIST:
            return assigned[1]
    return None


def _list(scope: list[ast.stmt]) -> list[tuple[str, str, int | None]]:
    """(folder, glob, CUDA major it needs) of `cuda_libs`, in order, as built in `scope`."""
    entries: list[tuple[str, str, int | None]] = []
    seen = False

    def visit(statements: list[ast.stmt], tests: list[ast.expr]) -> None:
        nonlocal seen
        for node in statements:
            if isinstance(node, ast.If):
                visit(node.body, [*tests, node.test])
                continue
            value: ast.expr | None = None
            target: ast.expr | None = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            if target is None or value is None:
                continue
            if isinstance(target, ast.Name) and target.id == _LIST:
                seen = True
                if isinstance(value, ast.Dict):
                    for key, item in zip(value.keys, value.values, strict=True):
                        if key is None:
                            raise Shape(f"{_LIST} unpacks another mapping")
                        entries.append((string(key), string(item), None))
                elif isinstance(value, ast.List):
                    for item in value.elts:
                        if not isinstance(item, ast.Tuple) or len(item.elts) != 2:
                            raise Shape(f"{_LIST} holds something other than pairs")
                        entries.append((string(item.elts[0]), string(item.elts[1]), None))
                else:
                    raise Shape(f"{_LIST} is neither a dict nor a list")
            elif (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id == _LIST
            ):
                entries.append((string(target.slice), string(value), _min_cuda(tests)))

    visit(scope, [])
    if not seen:
        raise Shape(f"no {_LIST}")
    return entries


# -- the calls -----------------------------------------------------------------------------


class _Calls:
    """The libraries a block of statements preloads, in order, with `required` as passed."""

    def __init__(self, source: _Source) -> None:
        self.source = source
        self.gate: str | None = None

    def _required(self, call: ast.Call, func: ast.FunctionDef, bound: dict[str, object]) -> bool:
        for keyword in call.keywords:
            if keyword.arg == "required":
                if isinstance(keyword.value, ast.Constant):
                    return bool(keyword.value.value)
                if isinstance(keyword.value, ast.Name) and keyword.value.id in bound:
                    return bool(bound[keyword.value.id])
                raise Shape("a `required` cudatx cannot read")
        if len(call.args) > 2:
            raise Shape("`required` passed by position")
        return bool(_default(func, "required"))

    def of(
        self,
        statements: list[ast.stmt],
        scope: list[ast.stmt],
        bound: dict[str, object],
    ) -> Iterator[PreloadEntry]:
        """`scope`: where `cuda_libs` is built, for a loop over it; `bound`: the owner's
        parameters as the call binds them."""
        searcher, owner = self.source.searcher, self.source.owner
        for node in statements:
            if isinstance(node, ast.Try):
                yield from self.of(node.body, scope, bound)
                continue
            if isinstance(node, ast.If):
                gate = self._gate(node)
                if gate is not None:
                    self.gate = gate
                    continue
                if any(self.of(node.body, scope, bound)):
                    raise Shape("a preload under a test cudatx cannot read")
                continue
            if isinstance(node, ast.For):
                yield from self._loop(node, scope, bound)
                continue
            call = _called(node, searcher.name)
            if call is not None:
                if len(call.args) < 2:
                    raise Shape(f"{searcher.name} called without a folder and a name")
                folder, pattern = string(call.args[0]), string(call.args[1])
                yield PreloadEntry(folder, pattern, self._required(call, searcher, bound))
                continue
            call = _called(node, owner.name) if owner is not None else None
            if owner is not None and call is not None:
                params = _arg_names(owner)
                binding: dict[str, object] = {p: _default(owner, p) for p in params}
                for keyword in call.keywords:
                    if keyword.arg in binding and isinstance(keyword.value, ast.Constant):
                        binding[keyword.arg] = keyword.value.value
                yield from self.of(owner.body, owner.body, binding)

    def _gate(self, node: ast.If) -> str | None:
        """`if "libcudart.so" not in _maps: return`: the text a mapped path must hold."""
        test = node.test
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.NotIn)
            and isinstance(test.left, ast.Constant)
            and isinstance(test.left.value, str)
            and any(isinstance(n, ast.Return) for n in node.body)
        ):
            return test.left.value
        return None

    def _loop(
        self, node: ast.For, scope: list[ast.stmt], bound: dict[str, object]
    ) -> Iterator[PreloadEntry]:
        iterated = ast.unparse(node.iter)
        if iterated not in (_LIST, f"{_LIST}.items()"):
            return  # a loop over something else preloads nothing
        # `for folder, name in cuda_libs` over a dict would unpack its keys, and
        # `cuda_libs.items()` of a list fails: torch pairs a dict with .items() (before 2.10)
        # and a list of pairs with a plain loop (since).
        if (iterated == _LIST) != isinstance(_built(scope), ast.List):
            raise Shape(f"{_LIST} is looped over as it is not built")
        calls = [c for n in node.body if (c := _called(n, self.source.searcher.name))]
        if len(calls) != 1:
            raise Shape(f"a loop over {_LIST} that cudatx cannot read")
        call = calls[0]
        required = self._required(call, self.source.searcher, bound)
        for folder, pattern, need in _list(scope):
            yield PreloadEntry(folder, pattern, required, need)


def _global_deps_try(func: ast.FunctionDef) -> ast.Try:
    """The `try:` of the function's own body whose first statement loads
    libtorch_global_deps with a mode (RTLD_GLOBAL); nested functions (2.4's split build
    loads its libraries in one of its own) are not it."""
    for node in func.body:
        if isinstance(node, ast.Try) and node.body and isinstance(node.body[0], ast.Expr):
            first = node.body[0].value
            if (
                isinstance(first, ast.Call)
                and ast.unparse(first.func) == "ctypes.CDLL"
                and any(k.arg == "mode" for k in first.keywords)
            ):
                return node
    raise Shape("no try: ctypes.CDLL(<global deps>, mode=...) in _load_global_deps")


def parse_torch_init(text: str, filename: str = "torch/__init__.py") -> Preloads:
    """The preloads of one torch/__init__.py; raises SyntaxError, ValueError or Shape."""
    tree = ast.parse(text, filename=filename)
    source = _Source.of(tree)
    search, needs_nvidia, fallback = _search(source.paths)
    attempt = _global_deps_try(source.global_deps)
    if len(attempt.handlers) != 1:
        raise Shape("the global deps load has other than one except clause")
    handler = attempt.handlers[0].body
    normal_calls = _Calls(source)
    normal = tuple(normal_calls.of(attempt.body[1:], attempt.body, {}))
    failed = tuple(_Calls(source).of(handler, handler, {}))
    if not failed:
        raise Shape("nothing preloaded when the global deps fail to load")
    # The except path's first check: re-raise unless the error names one of the list's
    # libraries (`lib.split(".")[0] in err.args[0]`).
    scope = source.owner.body if source.owner is not None else handler
    stems = tuple(dict.fromkeys(pattern.split(".", 1)[0] for _, pattern, _ in _list(scope)))
    return Preloads(
        normal=normal,
        gate=normal_calls.gate if normal else None,
        entries=failed,
        error_stems=stems,
        search=search,
        nvidia_folder_required=needs_nvidia,
        fallback_only_if_empty=fallback,
        origin="",
    )


# torch's GPU start, where the trial's probe found a device: CUDA init, a cuBLAS product
# and a cuDNN convolution.
_GPU_START = """\
import torch
if torch.version.cuda is None:
    raise SystemExit(0)  # a CPU or ROCm build has no CUDA start to judge
torch.cuda.init()
x = torch.ones(8, 8, device='cuda')
(x @ x).sum().item()
image = torch.ones(1, 1, 8, 8, device='cuda')
torch.nn.functional.conv2d(image, torch.ones(1, 1, 3, 3, device='cuda')).sum().item()
if torch.backends.cudnn.version() is None:
    raise SystemExit('torch finds no cuDNN')
"""


class TorchReader:
    name = "torch"
    markers: tuple[str, ...] = ()  # its preloads are asked for by its load list instead

    def find(self, site: str, marker: str, owner: str, files: SiteFiles) -> Installed | None:
        return None

    def read(self, found: Installed, texts: dict[str, str]) -> FrameworkLoads:
        raise Shape("torch's preloads are read by read_preloads")

    def read_preloads(self, text: str, filename: str) -> Preloads:
        return parse_torch_init(text, filename)

    def steps(self, sites: Sequence[str], files: SiteFiles) -> Iterator[FrameworkStep]:
        yield FrameworkStep(
            "torch's GPU start (CUDA init, a cuBLAS product, a cuDNN convolution)",
            "torch",
            _GPU_START,
            "torch",
            gpu=True,
        )


register(TorchReader())
