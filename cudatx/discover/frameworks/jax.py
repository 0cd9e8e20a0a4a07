"""JAX's CUDA plugins: `jax_plugins/xla_cuda<N>/__init__.py`, every CUDA major, jax 0.4.26 on.

JAX imports every `jax_plugins.*` package and calls its `initialize()`
(jax/_src/xla_bridge.py `discover_pjrt_plugins`). For a CUDA plugin (`xb.register_plugin(
'cuda', ...)`), read from the plugin's own `__init__.py` of each release:

1. `_load_nvidia_libraries()` (0.6 on): `_load("cu13", ["libcudart.so.13"])` imports
   `nvidia.<module>` and `ctypes.cdll.LoadLibrary(<its __path__[0]>/lib/<name>)`, swallowing
   every failure. Before 0.6 there is no such step.
2. `cuda_plugin_extension` and `_versions` are imported from the first of the packages a
   `for pkg_name in [...]` loop names (`jax_cuda12_plugin`, then `jaxlib.cuda`): at module
   level before 0.7, in `_import_extensions()` since. Their DT_NEEDED are system libraries;
   their DT_RPATH names `$ORIGIN/../nvidia/<component>/lib` folders.
3. The version check: each `_version_check("cuDNN", cuda_versions.cudnn_get_version, ...)`
   calls a lazy stub of `_versions`, which dlopens the component's library by bare name
   through `_versions`' own DT_RPATH (TSL's dso_loader) and raises "Unable to load cuDNN"
   when that fails. `initialize()` calls `_check_cuda_versions(raise_on_first_error=True)`
   from 0.6 on; before, the check is jax's own (jax/_src/xla_bridge.py), run when JAX makes
   its CUDA client, and is read from there. A check commented out is not made.
4. `_get_library_path()` names `xla_cuda_plugin.so`, which `register_plugin` dlopens by path
   (its DT_NEEDED: system libraries). Its own stubs open the CUDA libraries by name through
   its DT_RPATH when the client is made (with a GPU): each is checked where a file of that
   name is installed (the plan then sees it stop loading), never required.

The sonames the stubs open are in no file (TSL makes them from the build's versions):
cudatx/data/frameworks/jax.json lists them per CUDA major, by component; the major is the
one the plugin package is named for (`xla_cuda12`). A major it does not list, or a shape
this reader does not know, is reported as not modelled.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence

from cudatx.discover.frameworks import FrameworkStep, SiteFiles, data, exists, register, text
from cudatx.discover.frameworks.model import (
    FrameworkLoads,
    HandLoad,
    Installed,
    ModuleStep,
    Open,
    RuntimeRoot,
    contexts_from_json,
)
from cudatx.discover.frameworks.source import Shape, body, functions, string, strings

_XLA_BRIDGE = "jax/_src/xla_bridge.py"


def _major(package: str) -> int | None:
    """12 for jax_plugins/xla_cuda12: the CUDA major JAX names the plugin package for."""
    tail = package.rsplit("cuda", 1)[-1] if "cuda" in package else ""
    return int(tail) if tail.isdigit() else None


def _registers_cuda(tree: ast.Module) -> bool:
    """`xb.register_plugin('cuda', ...)` somewhere in the plugin's code."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_plugin"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "cuda"
        ):
            return True
    return False


# The trial's steps (cudatx.trial): the plugin taken up to its loading of the NVIDIA
# libraries (its `initialize()` then checks versions against a device it cannot find without
# a GPU); and, where the trial's probe found a device, JAX's GPU start. JAX takes most of a
# GPU's memory at start unless told not to; the GPU starts run beside each other.
_LOAD = """\
import importlib
m = importlib.import_module('jax_plugins.{name}')
load = getattr(m, '_load_nvidia_libraries', None)
if load is not None:
    load()
"""

_GPU_START = """\
import os
os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
import jax, jax.numpy as jnp
jax.devices('gpu')
x = jax.device_put(jnp.ones((8, 8)), jax.devices('gpu')[0])
(x @ x).block_until_ready()
"""


class JaxReader:
    name = "jax"
    markers: tuple[str, ...] = ("jax_plugins/*/__init__.py",)

    def find(self, site: str, marker: str, owner: str, files: SiteFiles) -> Installed | None:
        package = os.path.relpath(os.path.dirname(marker), site)
        try:
            tree = ast.parse(text(files, marker))
        except (OSError, SyntaxError, ValueError):
            return None
        if not _registers_cuda(tree):
            return None  # another platform's plugin: it loads no NVIDIA library
        sources = [f"{package}/__init__.py"]
        if "_check_cuda_versions" not in functions(tree) and exists(
            files, os.path.join(site, _XLA_BRIDGE)
        ):
            sources.append(_XLA_BRIDGE)  # before 0.6: jax's own version check
        return Installed(
            reader=self.name,
            name=package,
            distribution=owner,
            site=site,
            package=package,
            sources=tuple(sources),
        )

    def read(self, found: Installed, texts: dict[str, str]) -> FrameworkLoads:
        major = _major(found.package)
        stubs = data("jax")["stubs"].get(str(major))
        if stubs is None:
            raise Shape(f"no library names known for CUDA {major} (jax.json)")
        tree = ast.parse(texts[found.sources[0]])
        funcs = functions(tree)
        loads = _hand_loads(funcs) if "_load_nvidia_libraries" in funcs else ()
        packages = _extension_packages(tree)
        checked = _checked(funcs.get("_check_cuda_versions"))
        if checked is None and len(found.sources) > 1:
            checked = _checked(
                functions(ast.parse(texts[found.sources[1]])).get("_check_cuda_versions")
            )
        components = []
        for function in checked or ():
            component = data("jax")["checks"].get(function)
            if component is None or component not in stubs:
                raise Shape(f"a version check cudatx does not know: {function}")
            components.append(component)
        fallbacks = data("jax")["fallbacks"]

        def opened(component: str) -> Open:
            return Open(tuple(stubs[component]), tuple(fallbacks.get(component, ())))

        opens = tuple(opened(c) for c in components)
        modules = (
            ModuleStep(
                modules=tuple(f"{p}._versions" for p in packages),
                opens=opens,
                why="JAX's version check",
            ),
            ModuleStep(modules=tuple(f"{p}.cuda_plugin_extension" for p in packages)),
        )
        optional = tuple(opened(c) for c in stubs if c not in components)
        root = RuntimeRoot(
            path=f"{found.package}/{_plugin_file(funcs)}",
            what="XLA plugin",
            loads=loads,
            modules=modules,
            optional_runtime=optional,
        )
        return FrameworkLoads(
            roots=(root,),
            build_major=major,
            origin="",
            contexts=contexts_from_json(data("jax")["contexts"]),
        )

    def steps(self, sites: Sequence[str], files: SiteFiles) -> Iterator[FrameworkStep]:
        for major in (12, 13):
            yield FrameworkStep(
                f"JAX's CUDA {major} plugin loads its NVIDIA libraries",
                f"jax_plugins/xla_cuda{major}",
                _LOAD.format(name=f"xla_cuda{major}"),
                "jax",
            )
        yield FrameworkStep(
            "jax's GPU start (its GPU devices, a product on one)",
            "jax_plugins",
            _GPU_START,
            "jax",
            gpu=True,
        )


def _hand_loads(funcs: dict[str, ast.FunctionDef]) -> tuple[HandLoad, ...]:
    """`_load_nvidia_libraries`: a list of `_load(module, [names])`, each loading
    <nvidia.module's folder>/lib/<name> and swallowing what fails."""
    one = funcs.get("_load")
    if one is None:
        raise Shape("_load_nvidia_libraries without _load")
    shown = ast.unparse(one).replace('"', "'")
    if "import_module" not in shown or "'lib'" not in shown:
        raise Shape("_load does not import nvidia.<module> and load from its lib folder")
    loads = []
    for node in body(funcs["_load_nvidia_libraries"]):
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "_load"
            and len(call.args) == 2
        ):
            raise Shape(f"a statement other than _load(...): {ast.unparse(node)}")
        module = string(call.args[0])
        for name in strings(call.args[1]):
            loads.append(HandLoad((name,), (f"nvidia/{module}/lib",), "package", required=False))
    return tuple(loads)


def _extension_packages(tree: ast.Module) -> tuple[str, ...]:
    """The packages `cuda_plugin_extension` (and `_versions`) are imported from, in the
    order tried: the list of `for pkg_name in [...]` around `import_module(f'{pkg_name}.
    cuda_plugin_extension')`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.For) or not isinstance(node.iter, ast.List | ast.Tuple):
            continue
        if "cuda_plugin_extension" in ast.unparse(node):
            return strings(node.iter)
    raise Shape("no list of packages cuda_plugin_extension is imported from")


def _checked(func: ast.FunctionDef | None) -> list[str] | None:
    """The `cuda_versions.<x>_get_version` functions `_check_cuda_versions` calls through
    `_version_check`, in order (None where there is no such function)."""
    if func is None:
        return None
    found = []
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "_version_check"
            and len(node.args) >= 2
        ):
            getter = node.args[1]
            if not isinstance(getter, ast.Attribute):
                raise Shape(f"a version check of other than cuda_versions.X: {ast.unparse(node)}")
            found.append((node.lineno, getter.attr))
    return [name for _, name in sorted(found)]


def _plugin_file(funcs: dict[str, ast.FunctionDef]) -> str:
    """`_get_library_path`: `pathlib.Path(__file__).resolve().parent / 'xla_cuda_plugin.so'`."""
    func = funcs.get("_get_library_path")
    for part in ast.walk(func) if func is not None else ():
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Div):
            right = part.right
            if isinstance(right, ast.Constant) and isinstance(right.value, str):
                return right.value
    raise Shape("_get_library_path names no plugin file")


register(JaxReader())
