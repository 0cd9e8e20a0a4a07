"""CuPy 12 to 14, every `cupy-cuda<N>x`: what it loads before the modules that link CUDA
libraries by name.

CuPy's extension modules link the CUDA libraries by soname with no RPATH
(`cupy_backends/cuda/libs/cublas...so` needs `libcublas.so.12`); each is imported lazily,
when first used (`cupy_backends/cuda/libs/__init__.py` `__getattr__`, `cupy.cuda`'s lazy
attributes), so one that cannot load is a feature the user does not have, not a failing
`import cupy`. What makes their libraries findable differs by release, read here from the
installed source:

- CuPy 14 asks cuda-pathfinder for a library before importing the module that links it
  (`__getattr__` calls `load_nvidia_dynamic_lib(name)`; `cupy/_environment.py` and
  `cupy/cuda/__init__.py` for nvrtc, cuFFT, cuTENSOR, NCCL). cuda-pathfinder's own tables
  say, for each library, its sonames, its site-packages folders and its dependencies:
  `DESCRIPTOR_CATALOG` (cuda/pathfinder/_dynamic_libs/descriptor_catalog.py, 1.4 on) or
  the dictionaries of supported_nvidia_libs.py (`SUPPORTED_LINUX_SONAMES`,
  `SITE_PACKAGES_LIBDIRS_LINUX`, `DIRECT_DEPENDENCIES`, before). `load_nvidia_dynamic_lib`
  reuses a copy already loaded, loads the dependencies first, then the file found in the
  site folders (descriptor: each soname in each folder; before: `lib<name>.so`, else the
  first `lib<name>.so*` in sorted order), else dlopen of each soname (newest first, before
  1.4), and raises where none loads.
- CuPy 12 and 13 do not use cuda-pathfinder: `_environment._preload_library(lib)` loads only
  NCCL, cuTENSOR and cuDNN, by path, from the wheel of `nvidia-nccl-cu<N>` /
  `cutensor-cu<N>` (`_get_<lib>_from_wheel`: `dist.locate_file(f'nvidia/nccl/lib/libnccl.so.
  {version.split(".")[0]}')`, the version from cupy/.data/_wheel.json), warning and going
  on where that fails. Every other module finds its library only where something loaded it
  first (`import torch`), or by LD_LIBRARY_PATH and the system.

Each extension module of CuPy's distribution that links a library of those tables, or one
a wheel here ships, is a root after the loads that provide what it links
(cudatx.scan). A deviation: cudatx takes every module that links a library the table
knows as loaded through it, where CuPy names each.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterator, Sequence

from cudatx.discover.frameworks import FrameworkStep, SiteFiles, data, exists, register, text
from cudatx.discover.frameworks.model import (
    FrameworkLoads,
    HandLoad,
    Installed,
    RuntimeRoot,
    contexts_from_json,
)
from cudatx.discover.frameworks.source import Eval, Shape, assignment, functions, string, strings
from cudatx.models import Frozen

_LIBS = "cupy_backends/cuda/libs/__init__.py"
_CUDA = "cupy/cuda/__init__.py"
_ENVIRONMENT = "cupy/_environment.py"
_WHEEL = "cupy/.data/_wheel.json"
_CATALOG = "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py"
_SUPPORTED = "cuda/pathfinder/_dynamic_libs/supported_nvidia_libs.py"


def _uses_pathfinder(source: str) -> bool:
    """cupy_backends/cuda/libs/__init__.py: `__getattr__` loads the library through
    cuda-pathfinder before importing the module that links it."""
    getattr_fn = functions(ast.parse(source)).get("__getattr__")
    return getattr_fn is not None and "load_nvidia_dynamic_lib" in ast.unparse(getattr_fn)


# The trial's steps (cudatx.trial): CuPy's library modules, loaded through its own loader;
# and, where the trial's probe found a device, CuPy's GPU start.
_LOAD = "import cupy_backends.cuda.libs.{name}"

_GPU_START = """\
import cupy
x = cupy.ones((8, 8))
(x @ x).sum().item()
"""


class CupyReader:
    name = "cupy"
    markers: tuple[str, ...] = ("cupy/_environment.py",)

    def find(self, site: str, marker: str, owner: str, files: SiteFiles) -> Installed | None:
        sources = [_ENVIRONMENT]
        libs = os.path.join(site, _LIBS)
        if exists(files, libs):
            sources.append(_LIBS)
            try:
                pathfinder = _uses_pathfinder(text(files, libs))
            except (OSError, SyntaxError, ValueError):
                pathfinder = False
            if pathfinder:
                if exists(files, os.path.join(site, _CUDA)):
                    sources.append(_CUDA)
                # cuda-pathfinder's table: installed beside CuPy (its requirement).
                for table in (_CATALOG, _SUPPORTED):
                    if exists(files, os.path.join(site, table)):
                        sources.append(table)
                        break
        if exists(files, os.path.join(site, _WHEEL)):
            sources.append(_WHEEL)
        return Installed(
            reader=self.name,
            name="cupy",
            distribution=owner,
            site=site,
            package="cupy",
            sources=tuple(sources),
        )

    def read(self, found: Installed, texts: dict[str, str]) -> FrameworkLoads:
        contexts = contexts_from_json(data("cupy")["contexts"])
        roots: list[RuntimeRoot] = []
        if _LIBS in texts and _uses_pathfinder(texts[_LIBS]):
            if _CATALOG in texts:
                chains = parse_descriptor_catalog(texts[_CATALOG])
            elif _SUPPORTED in texts:
                chains = parse_supported_libs(texts[_SUPPORTED])
            else:
                raise Shape("CuPy loads through cuda-pathfinder, which is not installed beside it")
            table = chains.by_soname()
            for source in (_LIBS, _CUDA):
                for module, libname in lazy_loads(texts.get(source, "")):
                    if libname not in chains.by_name:
                        raise Shape(
                            f"CuPy asks cuda-pathfinder for {libname}, which it does not know"
                        )
                    roots.append(
                        RuntimeRoot(
                            path=module,
                            what=f"module {module}",
                            loads=chains.by_name[libname],
                            is_module=True,
                        )
                    )
        else:
            table = parse_environment(texts[_ENVIRONMENT], texts.get(_WHEEL))
        return FrameworkLoads(
            roots=tuple(roots),
            build_major=None,
            origin="",
            contexts=contexts,
            by_soname=table,
            optional_roots=True,
        )

    def steps(self, sites: Sequence[str], files: SiteFiles) -> Iterator[FrameworkStep]:
        for name in ("cublas", "cusolver", "cusparse", "curand", "cufft", "nvrtc"):
            yield FrameworkStep(
                f"CuPy's {name} module",
                f"cupy_backends/cuda/libs/{name}",
                _LOAD.format(name=name),
                "cupy",
            )
        yield FrameworkStep(
            "cupy's GPU start (a product on device 0)", "cupy", _GPU_START, "cupy", gpu=True
        )


# -- cuda-pathfinder ----------------------------------------------------------------------

_Spec = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]


class Pathfinder(Frozen, kw_only=False):
    """cuda-pathfinder's tables, as `load_nvidia_dynamic_lib(name)` uses them."""

    by_name: dict[str, tuple[HandLoad, ...]]  # what it loads for a name: dependencies first
    sonames: dict[str, tuple[str, ...]]  # name -> the sonames of that library

    def by_soname(self) -> dict[str, tuple[HandLoad, ...]]:
        out: dict[str, tuple[HandLoad, ...]] = {}
        for name, sonames in self.sonames.items():
            for soname in sonames:
                if name in self.by_name:
                    out.setdefault(soname, self.by_name[name])
        return out


def _chains(specs: dict[str, _Spec], skip: set[str]) -> Pathfinder:
    """What `load_nvidia_dynamic_lib` loads for each name: its dependencies first (each
    once), then the library. `specs`: name -> (names in a folder, folders, dependencies,
    sonames dlopened bare)."""

    def chain(name: str, seen: tuple[str, ...]) -> list[HandLoad]:
        if name not in specs or name in seen:
            raise Shape(f"a dependency cudatx cannot follow: {name}")
        in_folder, folders, deps, bare = specs[name]
        out = [load for dep in deps for load in chain(dep, (*seen, name))]
        load = HandLoad(
            in_folder,
            folders,
            "site",
            True,
            by_name=True,
            reuse_loaded=True,
            bare=() if bare == in_folder else bare,
        )
        return [*out, load]

    by_name = {name: tuple(dict.fromkeys(chain(name, ()))) for name in specs if name not in skip}
    return Pathfinder(by_name, {name: spec[3] for name, spec in specs.items()})


def parse_descriptor_catalog(source: str) -> Pathfinder:
    """cuda-pathfinder 1.4 on: `DESCRIPTOR_CATALOG`, a tuple of `DescriptorSpec(name=...,
    linux_sonames=..., site_packages_linux=..., dependencies=..., packaged_with=...)`."""
    specs: dict[str, _Spec] = {}
    driver: set[str] = set()
    for node in ast.parse(source).body:
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
            if "name" not in fields:
                raise Shape("a descriptor without a name")
            name = string(fields["name"])
            sonames = strings(fields["linux_sonames"]) if "linux_sonames" in fields else ()
            folders = (
                strings(fields["site_packages_linux"]) if "site_packages_linux" in fields else ()
            )
            deps = strings(fields["dependencies"]) if "dependencies" in fields else ()
            specs[name] = (sonames, folders, deps, sonames)
            if "packaged_with" in fields and string(fields["packaged_with"]) == "driver":
                driver.add(name)  # libcuda.so.1 and friends: the driver's (runtime.json)
    if not specs:
        raise Shape("no DESCRIPTOR_CATALOG")
    return _chains(specs, driver)


def _dicts(tree: ast.Module) -> dict[str, dict[str, tuple[str, ...]]]:
    """Module-level names bound to dicts of str -> tuple of str, `|` merges followed."""
    known: dict[str, dict[str, tuple[str, ...]]] = {}

    def value(node: ast.expr) -> dict[str, tuple[str, ...]]:
        if isinstance(node, ast.Dict):
            out = {}
            for key, item in zip(node.keys, node.values, strict=True):
                if key is None:
                    raise Shape("a dict that unpacks another")
                out[string(key)] = strings(item)
            return out
        if isinstance(node, ast.Name) and node.id in known:
            return known[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return value(node.left) | value(node.right)
        raise Shape(f"not a table cudatx reads: {ast.unparse(node)[:60]}")

    for node in tree.body:
        assigned = assignment(node)
        if assigned is None:
            continue
        target, bound = assigned
        if isinstance(target, ast.Name):
            try:
                known[target.id] = value(bound)
            except Shape:
                continue  # not a table of names (a tuple of library names, a flag)
    return known


def parse_supported_libs(source: str) -> Pathfinder:
    """cuda-pathfinder before 1.4: supported_nvidia_libs.py's dictionaries. A library is
    found in its site folders as `lib<name>.so`, else the first `lib<name>.so*` in sorted
    order (find_nvidia_dynamic_lib.py `_find_so_using_nvidia_lib_dirs`), else dlopened by
    each soname, newest first, then `lib<name>.so` (load_dl_linux.py
    `get_candidate_sonames`)."""
    tables = _dicts(ast.parse(source))
    try:
        sonames = tables["SUPPORTED_LINUX_SONAMES"]
        folders = tables["SITE_PACKAGES_LIBDIRS_LINUX"]
        deps = tables["DIRECT_DEPENDENCIES"]
    except KeyError as exc:
        raise Shape(f"supported_nvidia_libs.py has no {exc.args[0]}") from exc
    specs: dict[str, _Spec] = {}
    for name, names in sonames.items():
        in_folder: tuple[str, ...] = (f"lib{name}.so", f"lib{name}.so*")
        bare = (*reversed(names), f"lib{name}.so")
        specs[name] = (in_folder, folders.get(name, ()), deps.get(name, ()), bare)
    found = _chains(specs, set())
    return Pathfinder(found.by_name, dict(sonames))


def lazy_loads(source: str) -> list[tuple[str, str]]:
    """(module, library) for each module a package's `__getattr__` imports after asking
    cuda-pathfinder for a library (`load_nvidia_dynamic_lib`): the submodules a tuple names,
    `name` renamed where a branch says so (cupy_backends/cuda/libs/__init__.py), or one
    branch per attribute (`elif key == 'cufft'`, cupy/cuda/__init__.py)."""
    if not source:
        return []
    tree = ast.parse(source)
    func = functions(tree).get("__getattr__")
    if func is None or "load_nvidia_dynamic_lib" not in ast.unparse(func):
        return []
    param = func.args.args[0].arg if func.args.args else ""
    out: list[tuple[str, str]] = []
    tuples = {
        t.id: strings(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple | ast.List)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    for node in ast.walk(func):
        if not isinstance(node, ast.If):
            continue
        # The branch's own statements: an `elif` chain nests the next branch in `orelse`.
        branch = ast.Module(body=node.body, type_ignores=[])
        loaded = [
            c.args[0]
            for c in ast.walk(branch)
            if isinstance(c, ast.Call)
            and ast.unparse(c.func).endswith("load_nvidia_dynamic_lib")
            and len(c.args) == 1
        ]
        if not loaded:
            continue
        member = _member(node.test, param, tuples)
        if member is not None:  # `if ... name in _submodules:`: every name, renamed
            renames = _renames(branch, param, loaded[0])
            for name in member:
                module = _imported(branch, param, name) or _imported(func, param, name)
                if module is None:
                    raise Shape(f"no module imported after loading {name}")
                out.append((module, renames.get(name, name)))
            continue
        key = _equals(node.test, param)
        module = _imported(branch, param, key) if key is not None else None
        if module is not None and isinstance(loaded[0], ast.Constant):
            out.append((module, string(loaded[0])))
    if not out:
        raise Shape(
            "a __getattr__ that loads through cuda-pathfinder in a shape cudatx does not know"
        )
    return list(dict.fromkeys(out))


def _member(
    test: ast.expr, param: str, tuples: dict[str, tuple[str, ...]]
) -> tuple[str, ...] | None:
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id == param
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In)
            and isinstance(node.comparators[0], ast.Name)
            and node.comparators[0].id in tuples
        ):
            return tuples[node.comparators[0].id]
    return None


def _equals(test: ast.expr, param: str) -> str | None:
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == param
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
        and isinstance(test.comparators[0].value, str)
    ):
        return test.comparators[0].value
    return None


def _renames(block: ast.AST, param: str, variable: ast.expr) -> dict[str, str]:
    """`if name == 'cusparselt': pathfinder_name = 'cusparseLt'` in `block`."""
    if not isinstance(variable, ast.Name):
        return {}
    out = {}
    for node in ast.walk(block):
        key = _equals(node.test, param) if isinstance(node, ast.If) else None
        if key is None or not isinstance(node, ast.If):
            continue
        for stmt in node.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == variable.id
            ):
                out[key] = string(stmt.value)
    return out


def _imported(block: ast.AST, param: str, name: str) -> str | None:
    """The module the branch imports last, after the load: `import_module(f'pkg.{name}')`,
    `import_module('pkg.mod')` or `from pkg import mod`."""
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(block):
        module = None
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                module = arg.value
            elif isinstance(arg, ast.JoinedStr):
                parts = []
                for value in arg.values:
                    if isinstance(value, ast.Constant):
                        parts.append(str(value.value))
                    elif (
                        isinstance(value, ast.FormattedValue)
                        and isinstance(value.value, ast.Name)
                        and value.value.id == param
                    ):
                        parts.append(name)
                    else:
                        raise Shape("an import_module of an f-string cudatx cannot read")
                module = "".join(parts)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module = f"{node.module}.{node.names[0].name}"
        if module is not None and isinstance(node, ast.expr | ast.stmt):
            found.append((node.lineno, node.col_offset, module))
    return max(found)[2] if found else None


# -- CuPy's own preloads ------------------------------------------------------------------


def parse_environment(source: str, wheel: str | None) -> dict[str, tuple[HandLoad, ...]]:
    """CuPy 12 and 13: for each library `_preload_library` loads from a wheel
    (`_get_<lib>_from_wheel`), the file `dist.locate_file(...)` names on Linux, its version
    from cupy/.data/_wheel.json (no such file: CuPy preloads nothing)."""
    funcs = functions(ast.parse(source))
    if "_preload_library" not in funcs:
        raise Shape("cupy/_environment.py has no _preload_library")
    if wheel is None:
        return {}
    config = json.loads(wheel)
    if not isinstance(config, dict) or config.get("packaging") == "conda":
        return {}
    out: dict[str, tuple[HandLoad, ...]] = {}
    for lib, entry in config.items():
        func = funcs.get(f"_get_{lib}_from_wheel")
        if func is None or not isinstance(entry, dict) or "min_pypi_version" not in entry:
            continue  # cuDNN: only from ~/.cupy/cuda_lib, never from a wheel
        run = Eval(funcs, {"version": str(entry["min_pypi_version"]), "cuda": config["cuda"]})
        for node in ast.walk(func):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "locate_file"
                and len(node.args) == 1
            ):
                continue
            path = run.expr(node.args[0], {"version": str(entry["min_pypi_version"])})
            if not isinstance(path, str) or ".so" not in path or "\\" in path:
                continue  # the Windows branch
            folder, name = os.path.split(path)
            # Tried where the file is, a failure warned and passed over.
            out[name] = (HandLoad((name,), (folder,), "site", False),)
    return out


register(CupyReader())
