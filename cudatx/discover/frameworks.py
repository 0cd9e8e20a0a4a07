"""What frameworks other than torch load by hand, read from their installed source.

torch's preload reader (cudatx.discover.preloads) is one instance of a general idea: a
framework's Python code loads NVIDIA libraries with ctypes before the library that needs
them, and that list is written in its source. This module reads three more, with `ast`
(never importing or running them):

- JAX's CUDA plugin, `jax_plugins/xla_cuda13/__init__.py`: `_load_nvidia_libraries()` is a
  list of `_load("cu13", ["libcudart.so.13"])` calls; `_load` imports `nvidia.<module>` and
  `ctypes.cdll.LoadLibrary(<its __path__[0]>/lib/<name>)`, swallowing every failure. Then
  `_get_library_path()` names `xla_cuda_plugin.so`, which `xb.register_plugin` dlopens by
  path: a run-time root whose DT_NEEDED names only system libraries and whose lazy stubs
  dlopen the CUDA libraries by name through its RPATH (the table's "runtime").
- onnxruntime-gpu, `onnxruntime/__init__.py`: `preload_dlls()` loads
  `_get_nvidia_dll_paths(is_windows=False)` by path from `<package>/../nvidia/...` where the
  file exists, else by bare name, every failure printed and swallowed; the provider
  `capi/libonnxruntime_providers_cuda.so` (`_get_cuda_plugin_ep_library_path`) is dlopened by
  path once a session asks for CUDA. `_get_nvidia_dll_paths` branches on the build's CUDA
  major (`capi/build_and_package_info.py` `cuda_version`): it is evaluated here with a
  small interpreter of constant expressions (`_Eval`), never executed.
- CuPy, through cuda-pathfinder: `cuda/pathfinder/_dynamic_libs/descriptor_catalog.py`
  `DESCRIPTOR_CATALOG` gives each library's sonames (in preference order), its site-packages
  folders and its dependencies; `load_nvidia_dynamic_lib` (load_nvidia_dynamic_lib.py
  `_load_lib_no_cache`) looks in the site folders, reuses a copy already loaded, loads the
  dependencies first, then the file by path, else dlopen of each soname. CuPy asks it for a
  library before importing the module that links it (`cupy_backends/cuda/libs/__init__.py`
  `__getattr__`).

A source of a shape a reader does not know is reported, and the shipped table of that
release is used instead (cudatx/data/loadlists.json "frameworks"), saying why.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from cudatx.cache import file_key, memo_file
from cudatx.discover.catalog import (
    Framework,
    FrameworkLoads,
    HandLoad,
    RuntimeRoot,
    framework_loads_from_json,
    framework_loads_to_json,
)
from cudatx.reading import MAX_METADATA, read_bounded

if TYPE_CHECKING:
    from cudatx.cache import ScanCache


class Shape(Exception):
    """The source does not have the shape a reader knows."""


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _string(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise Shape(f"not a string constant: {ast.unparse(node)}")


def _strings(node: ast.expr) -> tuple[str, ...]:
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_string(e) for e in node.elts)
    raise Shape(f"not a tuple of strings: {ast.unparse(node)}")


def _body(func: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of `func` after its docstring."""
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[1:]
    return body


# -- JAX ----------------------------------------------------------------------------------


def parse_jax_plugin(text: str, filename: str = "__init__.py") -> tuple[tuple[HandLoad, ...], str]:
    """(what `_load_nvidia_libraries` loads, the plugin file `_get_library_path` names)."""
    functions = _functions(ast.parse(text, filename=filename))
    loads_fn = functions.get("_load_nvidia_libraries")
    one = functions.get("_load")
    if loads_fn is None or one is None:
        raise Shape("no _load_nvidia_libraries and _load")
    # `_load(module, libraries)`: import nvidia.<module>, then <__path__[0]>/lib/<name>.
    shown = ast.unparse(one)
    if "import_module" not in shown or "'lib'" not in shown.replace('"', "'"):
        raise Shape("_load does not import nvidia.<module> and load from its lib folder")
    loads = []
    for node in _body(loads_fn):
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "_load"
            and len(call.args) == 2
        ):
            raise Shape(f"a statement other than _load(...): {ast.unparse(node)}")
        module = _string(call.args[0])
        for name in _strings(call.args[1]):
            loads.append(HandLoad((name,), (f"nvidia/{module}/lib",), "package", required=False))
    plugin = None
    path_fn = functions.get("_get_library_path")
    for part in ast.walk(path_fn) if path_fn is not None else ():
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Div):
            right = part.right
            if isinstance(right, ast.Constant) and isinstance(right.value, str):
                plugin = right.value  # pathlib.Path(__file__).resolve().parent / '<name>'
                break
    if plugin is None:
        raise Shape("_get_library_path names no plugin file")
    return tuple(loads), plugin


# -- onnxruntime --------------------------------------------------------------------------


class _Eval:
    """Constant expressions of one module, with its functions called as written.

    Enough of Python to run `_get_nvidia_dll_paths` and its helpers on known arguments:
    constants, names, f-strings, tuples and lists, `and`/`or`/`not`, comparisons, `x if c
    else y`, subscripts, `int()`, `str.split/isdigit/startswith`, and calls of the module's
    own functions (assignments, `if`, `return`). Anything else is a Shape: the shipped table
    is used.
    """

    def __init__(self, functions: dict[str, ast.FunctionDef], names: dict[str, object]):
        self.functions = functions
        self.names = names
        self.depth = 0

    def call(self, name: str, args: list[object], kwargs: dict[str, object]) -> object:
        func = self.functions.get(name)
        if func is None or self.depth > 8:
            raise Shape(f"a call cudatx cannot follow: {name}")
        params = [a.arg for a in func.args.args]
        local: dict[str, object] = dict(zip(params, args, strict=False))
        defaults = func.args.defaults
        for param, default in zip(params[len(params) - len(defaults) :], defaults, strict=True):
            local.setdefault(param, self.expr(default, {}))
        local.update(kwargs)
        if set(local) - set(params):
            raise Shape(f"{name} called with unknown arguments")
        self.depth += 1
        try:
            done, value = self.run(_body(func), local)
        finally:
            self.depth -= 1
        return value if done else None

    def run(self, body: list[ast.stmt], local: dict[str, object]) -> tuple[bool, object]:
        for node in body:
            if isinstance(node, ast.Return):
                return True, None if node.value is None else self.expr(node.value, local)
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if not isinstance(target, ast.Name):
                    raise Shape("an assignment to something other than a name")
                local[target.id] = self.expr(node.value, local)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    local[node.target.id] = self.expr(node.value, local)
            elif isinstance(node, ast.If):
                branch = node.body if self.expr(node.test, local) else node.orelse
                done, value = self.run(branch, local)
                if done:
                    return done, value
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring or a bare constant
            else:
                raise Shape(f"a statement cudatx does not evaluate: {type(node).__name__}")
        return False, None

    def expr(self, node: ast.expr, local: dict[str, object]) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            if node.id in self.names:
                return self.names[node.id]
            raise Shape(f"an unknown name: {node.id}")
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.FormattedValue) and value.format_spec is None:
                    parts.append(str(self.expr(value.value, local)))
                elif isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                else:
                    raise Shape("an f-string with a format")
            return "".join(parts)
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e, local) for e in node.elts)
        if isinstance(node, ast.List):
            return [self.expr(e, local) for e in node.elts]
        if isinstance(node, ast.BoolOp):
            is_and = isinstance(node.op, ast.And)
            result: object = is_and
            for value in node.values:
                result = self.expr(value, local)
                if bool(result) is not is_and:
                    return result
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.expr(node.operand, local)
        if isinstance(node, ast.IfExp):
            chosen = node.body if self.expr(node.test, local) else node.orelse
            return self.expr(chosen, local)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return _compare(
                node.ops[0], self.expr(node.left, local), self.expr(node.comparators[0], local)
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.expr(node.left, local), self.expr(node.right, local)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            raise Shape("an addition of other than lists or strings")
        if isinstance(node, ast.Subscript):
            seq = self.expr(node.value, local)
            index = self.expr(node.slice, local)
            if isinstance(seq, tuple | list | str) and isinstance(index, int):
                return seq[index]
            raise Shape("a subscript cudatx does not evaluate")
        if isinstance(node, ast.Call):
            return self._call(node, local)
        raise Shape(f"an expression cudatx does not evaluate: {type(node).__name__}")

    def _call(self, node: ast.Call, local: dict[str, object]) -> object:
        args = [self.expr(a, local) for a in node.args]
        kwargs = {k.arg: self.expr(k.value, local) for k in node.keywords if k.arg}
        if len(kwargs) != len(node.keywords):
            raise Shape("a call with **kwargs")
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "int" and len(args) == 1 and isinstance(args[0], str | int):
                try:
                    return int(args[0])
                except ValueError as exc:
                    raise Shape(f"int() of {args[0]!r}") from exc
            return self.call(func.id, args, kwargs)
        if isinstance(func, ast.Attribute):
            owner = self.expr(func.value, local)
            if isinstance(owner, str) and func.attr in ("split", "isdigit", "startswith"):
                method: Callable[..., object] = getattr(owner, func.attr)
                return method(*args, **kwargs)
        raise Shape(f"a call cudatx does not evaluate: {ast.unparse(node)}")


def _compare(op: ast.cmpop, left: object, right: object) -> bool:
    if isinstance(op, ast.Eq):
        return left == right
    if isinstance(op, ast.NotEq):
        return left != right
    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, str | tuple | list):
        found = left in right
        return found if isinstance(op, ast.In) else not found
    if isinstance(left, int) and isinstance(right, int):
        if isinstance(op, ast.GtE):
            return left >= right
        if isinstance(op, ast.Gt):
            return left > right
        if isinstance(op, ast.Lt):
            return left < right
        if isinstance(op, ast.LtE):
            return left <= right
    raise Shape("a comparison cudatx does not evaluate")


def _module_string(text: str, name: str) -> str | None:
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id == name:
                return _string(node.value)
    return None


def parse_onnxruntime(init_text: str, build_info_text: str) -> FrameworkLoads:
    """What `preload_dlls()` loads on Linux and the provider it is for, for the build's CUDA
    major (`cuda_version` of capi/build_and_package_info.py)."""
    cuda_version = _module_string(build_info_text, "cuda_version")
    if not cuda_version:
        raise Shape("build_and_package_info.py has no cuda_version (a CPU build)")
    functions = _functions(ast.parse(init_text))
    if "preload_dlls" not in functions or "_get_nvidia_dll_paths" not in functions:
        raise Shape("no preload_dlls and _get_nvidia_dll_paths")
    run = _Eval(functions, {"cuda_version": cuda_version})
    every = run.call("_get_nvidia_dll_paths", [False], {"cuda": True, "cudnn": True})
    cudnn_only = run.call("_get_nvidia_dll_paths", [False], {"cuda": False, "cudnn": True})
    if not isinstance(every, list) or not isinstance(cudnn_only, list):
        raise Shape("_get_nvidia_dll_paths returns no list")
    preload = functions["preload_dlls"]
    # preload_dlls loads each `os.path.join(base_directory, *relative_path)` where it is a
    # file, base_directory being `directory or ".."` from the package: its site folder.
    if '".."' not in ast.unparse(preload).replace("'", '"'):
        raise Shape('preload_dlls does not load from the package\'s ".."')
    loads = []
    for relative in every:
        if not isinstance(relative, tuple) or not all(isinstance(p, str) for p in relative):
            raise Shape("a DLL path of other than strings")
        *folder, name = relative
        # A missing or failing one is printed, never raised (the `optional` set only
        # silences the message): every load is best effort, by path, then by bare name.
        loads.append(HandLoad((name,), ("/".join(folder),), "beside", False, by_name=True))
    provider = _provider(functions)
    major = int(cuda_version.split(".")[0]) if cuda_version.split(".")[0].isdigit() else None
    root = RuntimeRoot(path=f"onnxruntime/{provider}", what="CUDA provider", loads=tuple(loads))
    return FrameworkLoads(roots=(root,), build_major=major, origin="")


def _provider(functions: dict[str, ast.FunctionDef]) -> str:
    """capi/libonnxruntime_providers_cuda.so, as _get_cuda_plugin_ep_library_path joins it."""
    func = functions.get("_get_cuda_plugin_ep_library_path")
    if func is None:
        raise Shape("no _get_cuda_plugin_ep_library_path")
    names = [
        n.value
        for n in ast.walk(func)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and n.value.startswith("lib")
        and n.value.endswith(".so")
    ]
    folders = [
        a.value
        for n in ast.walk(func)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "os.path.join"
        for a in n.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str)
    ]
    if len(names) != 1 or len(folders) != 1:
        raise Shape("the provider's folder and Linux file name are not one each")
    return f"{folders[0]}/{names[0]}"


# -- cuda-pathfinder (CuPy) ---------------------------------------------------------------


def parse_pathfinder(text: str) -> dict[str, tuple[HandLoad, ...]]:
    """soname -> what `load_nvidia_dynamic_lib` loads for it: its dependencies first (each
    once), then the library, from DESCRIPTOR_CATALOG."""
    specs: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}
    packaged: dict[str, str] = {}
    for node in ast.parse(text).body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if not (isinstance(target, ast.Name) and target.id == "DESCRIPTOR_CATALOG"):
            continue
        if not isinstance(value, ast.Tuple):
            raise Shape("DESCRIPTOR_CATALOG is not a tuple")
        for call in value.elts:
            if not isinstance(call, ast.Call):
                raise Shape("a descriptor other than DescriptorSpec(...)")
            fields = {k.arg: k.value for k in call.keywords if k.arg}
            name = _string(fields["name"]) if "name" in fields else None
            if name is None:
                raise Shape("a descriptor without a name")
            sonames = _strings(fields["linux_sonames"]) if "linux_sonames" in fields else ()
            folders = (
                _strings(fields["site_packages_linux"]) if "site_packages_linux" in fields else ()
            )
            deps = _strings(fields["dependencies"]) if "dependencies" in fields else ()
            specs[name] = (sonames, folders, deps)
            packaged[name] = _string(fields["packaged_with"]) if "packaged_with" in fields else ""
    if not specs:
        raise Shape("no DESCRIPTOR_CATALOG")

    def chain(name: str, seen: tuple[str, ...]) -> list[HandLoad]:
        if name not in specs or name in seen:
            raise Shape(f"a dependency cudatx cannot follow: {name}")
        sonames, folders, deps = specs[name]
        out = [load for dep in deps for load in chain(dep, (*seen, name))]
        # load_with_system_search: dlopen of each soname where no site folder holds one.
        return [*out, HandLoad(sonames, folders, "site", True, by_name=True, reuse_loaded=True)]

    out: dict[str, tuple[HandLoad, ...]] = {}
    for name, (sonames, _, _) in specs.items():
        if packaged[name] == "driver":
            continue  # libcuda.so.1 and friends: the driver's (cudatx/data/runtime.json)
        loads = tuple(dict.fromkeys(chain(name, ())))
        for soname in sonames:
            out.setdefault(soname, loads)
    return out


def parse_cupy_uses_pathfinder(text: str) -> None:
    """cupy_backends/cuda/libs/__init__.py: `__getattr__` loads the library through
    cuda-pathfinder before importing the module that links it."""
    functions = _functions(ast.parse(text))
    getattr_fn = functions.get("__getattr__")
    if getattr_fn is None or "load_nvidia_dynamic_lib" not in ast.unparse(getattr_fn):
        raise Shape("cupy_backends.cuda.libs does not load through cuda-pathfinder")


# -- reading the installed source --------------------------------------------------------

_PARSED: dict[tuple[object, ...], FrameworkLoads] = {}


def _read(paths: list[str], real: Callable[[str], str]) -> list[str]:
    return [read_bounded(real(p), MAX_METADATA).decode("utf-8") for p in paths]


def _parse(framework: Framework, texts: list[str], package_dir: str) -> FrameworkLoads:
    if framework.reader == "jax":
        loads, plugin = parse_jax_plugin(texts[0])
        major = _major_of_package(framework.package)
        root = RuntimeRoot(path=f"{framework.package}/{plugin}", what="XLA plugin", loads=loads)
        return FrameworkLoads(roots=(root,), build_major=major, origin="")
    if framework.reader == "onnxruntime":
        return parse_onnxruntime(texts[0], texts[1])
    if framework.reader == "cupy":
        parse_cupy_uses_pathfinder(texts[0])
        table = parse_pathfinder(texts[1])
        return FrameworkLoads(roots=(), build_major=None, origin="", by_soname=table)
    raise Shape(f"no reader {framework.reader}")


def _major_of_package(package: str) -> int | None:
    """13 for jax_plugins/xla_cuda13: the CUDA major the plugin package is named for."""
    digits = "".join(c for c in package.rsplit("cuda", 1)[-1] if c.isdigit())
    return int(digits) if digits else None


def read_framework(
    framework: Framework,
    site: str,
    version: str,
    cache: ScanCache | None = None,
    real: Callable[[str], str] = str,
) -> FrameworkLoads:
    """What the installed framework loads by hand: read from its source where the reader
    knows its shape, else the shipped table of that release (saying why), else nothing.
    `real` maps a path to the file holding its bytes (a staged file, in a simulation)."""
    paths = [os.path.join(site, s) for s in framework.sources]
    package_dir = os.path.join(site, framework.package)
    reason = "no reader for this framework"
    if framework.reader is not None and paths:
        try:
            read = _cached(framework, paths, package_dir, cache, real)
            return replace(read, origin="read from " + ", ".join(paths))
        except (OSError, SyntaxError, ValueError, KeyError, TypeError, Shape) as exc:
            reason = f"{exc}"
    release = ".".join(version.split("+")[0].split(".")[:2])
    table = framework.releases.get(release)
    if table is None:
        return FrameworkLoads(
            roots=(),
            build_major=None,
            origin=f"no load list for {framework.distribution} {release} ({reason})",
        )
    return replace(table, origin=f"shipped table for {framework.distribution} {release} ({reason})")


def _cached(
    framework: Framework,
    paths: list[str],
    package_dir: str,
    cache: ScanCache | None,
    real: Callable[[str], str],
) -> FrameworkLoads:
    states = [os.stat(real(p)) for p in paths]
    seen: tuple[object, ...] = (framework.name, *paths, *(file_key(st) for st in states))
    if seen in _PARSED:
        return _PARSED[seen]
    parsed = memo_file(
        cache if len(states) == 1 else None,  # an entry is one file's
        f"framework {framework.name}",
        states[0],
        lambda: _parse(framework, _read(paths, real), package_dir),
        load=lambda text: framework_loads_from_json(json.loads(text)),
        dump=lambda found: json.dumps(framework_loads_to_json(found)),
    )
    _PARSED[seen] = parsed
    return parsed
