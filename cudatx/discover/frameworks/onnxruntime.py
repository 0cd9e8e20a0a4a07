"""onnxruntime-gpu: its CUDA provider, every release with one (1.17 on).

The provider, `onnxruntime/capi/libonnxruntime_providers_cuda.so`, is dlopened by path once
a session asks for CUDA (ORT's provider bridge, from the folder of its Python module; from
1.28 `_get_cuda_plugin_ep_library_path()` names it, and `import onnxruntime` registers it).
ORT loads `libonnxruntime_providers_shared.so` from the same folder with RTLD_GLOBAL first,
for the symbols the provider binds to (`Provider_GetHost`). The provider's DT_NEEDED names
the CUDA libraries; its DT_RUNPATH is `$ORIGIN` or none, so they are
found only where something loaded them first, or by LD_LIBRARY_PATH and the system:

- from 1.21, `preload_dlls()` loads `_get_nvidia_dll_paths(is_windows=False)` by path from
  `<package>/..` where the file exists, else by bare name, every failure printed and
  swallowed. `_get_nvidia_dll_paths` branches on the build's CUDA major (`cuda_version` of
  capi/build_and_package_info.py): it is evaluated here with a small interpreter of
  constant expressions (cudatx.discover.frameworks.source.Eval), never executed. An early
  `return` of preload_dlls that the build's cuda_version decides (1.21: only a CUDA 12
  build preloads) is evaluated too.
- before 1.21 there is no preload_dlls: the provider loads after `import torch` (whose
  preloads map the same libraries), or where LD_LIBRARY_PATH or the system has them; the
  build's CUDA major is then its DT_NEEDED's (cudatx.analysis.cuda).

A CPU build (no provider file) is no framework here.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence

from cudatx.discover.frameworks import FrameworkStep, SiteFiles, data, exists, register
from cudatx.discover.frameworks.model import (
    FrameworkLoads,
    HandLoad,
    Installed,
    RuntimeRoot,
    contexts_from_json,
)
from cudatx.discover.frameworks.source import Eval, Shape, functions, module_string

_BUILD_INFO = "onnxruntime/capi/build_and_package_info.py"


# The trial's step (cudatx.trial): `preload_dlls()` where it exists, then the CUDA provider
# loaded as the provider bridge loads it. No GPU start: onnxruntime's needs a model to run.
_LOAD = """\
import ctypes, os, onnxruntime
preload = getattr(onnxruntime, 'preload_dlls', None)
if preload is not None:
    preload()
capi = os.path.join(os.path.dirname(onnxruntime.__file__), 'capi')
provider = os.path.join(capi, 'libonnxruntime_providers_cuda.so')
if os.path.exists(provider):
    ctypes.CDLL(os.path.join(capi, 'libonnxruntime_providers_shared.so'), mode=ctypes.RTLD_GLOBAL)
    ctypes.CDLL(provider)
"""


class OnnxruntimeReader:
    name = "onnxruntime"
    markers: tuple[str, ...] = ("onnxruntime/__init__.py",)

    def find(self, site: str, marker: str, owner: str, files: SiteFiles) -> Installed | None:
        if not exists(files, os.path.join(site, "onnxruntime", data("onnxruntime")["provider"])):
            return None  # a CPU build
        sources = ["onnxruntime/__init__.py"]
        if exists(files, os.path.join(site, _BUILD_INFO)):
            sources.append(_BUILD_INFO)
        return Installed(
            reader=self.name,
            name="onnxruntime",
            distribution=owner,
            site=site,
            package="onnxruntime",
            sources=tuple(sources),
        )

    def read(self, found: Installed, texts: dict[str, str]) -> FrameworkLoads:
        info = texts.get(_BUILD_INFO, "")
        cuda_version = module_string(info, "cuda_version") if info else None
        head = (cuda_version or "").split(".")[0]
        major = int(head) if head.isdigit() else None
        funcs = functions(ast.parse(texts["onnxruntime/__init__.py"]))
        provider = _provider(funcs)
        contexts = data("onnxruntime")["contexts"]
        # The provider bridge loads the shared provider library, RTLD_GLOBAL, from the
        # provider's folder before any provider (provider_bridge_ort.cc).
        shared = (f"{os.path.dirname(provider)}/{os.path.basename(data('onnxruntime')['shared'])}",)
        if "preload_dlls" not in funcs:
            root = RuntimeRoot(path=provider, what="CUDA provider", loads=(), first=shared)
            return FrameworkLoads(
                roots=(root,),
                build_major=major,
                origin="",
                contexts=contexts_from_json(contexts["without"]),
            )
        loads = _preloads(funcs, cuda_version or "")
        root = RuntimeRoot(path=provider, what="CUDA provider", loads=loads, first=shared)
        return FrameworkLoads(
            roots=(root,),
            build_major=major,
            origin="",
            contexts=contexts_from_json(contexts["preload_dlls"]),
        )

    def steps(self, sites: Sequence[str], files: SiteFiles) -> Iterator[FrameworkStep]:
        yield FrameworkStep(
            "onnxruntime's preload_dlls() and CUDA provider", "onnxruntime", _LOAD, "onnxruntime"
        )


def _preloads(funcs: dict[str, ast.FunctionDef], cuda_version: str) -> tuple[HandLoad, ...]:
    """What `preload_dlls()` loads on Linux with its defaults, for this build."""
    if "_get_nvidia_dll_paths" not in funcs:
        raise Shape("preload_dlls without _get_nvidia_dll_paths")
    preload = funcs["preload_dlls"]
    run = Eval(funcs, {"cuda_version": cuda_version, "cuda": True, "cudnn": True})
    if _returns_early(preload, run):
        return ()
    every = run.call("_get_nvidia_dll_paths", [False], {"cuda": True, "cudnn": True})
    if not isinstance(every, list):
        raise Shape("_get_nvidia_dll_paths returns no list")
    # preload_dlls loads each `os.path.join(base_directory, *relative_path)` where it is a
    # file, base_directory being `directory or ".."` from the package: its site folder.
    if '".."' not in ast.unparse(preload).replace("'", '"'):
        raise Shape('preload_dlls does not load from the package\'s ".."')
    loads = []
    for relative in every:
        if not isinstance(relative, tuple) or not all(isinstance(p, str) for p in relative):
            raise Shape("a DLL path of other than strings")
        *folder, name = relative
        # A missing or failing one is printed, never raised: every load is best effort, by
        # path, then by bare name.
        loads.append(HandLoad((name,), ("/".join(folder),), "beside", False, by_name=True))
    return tuple(loads)


def _returns_early(func: ast.FunctionDef, run: Eval) -> bool:
    """Whether one of the function's top-level `if <test>: ... return` returns for this
    build, its test evaluated on cuda_version, cuda and cudnn (a test that names anything
    else is passed over: it does not decide on the build)."""
    for node in func.body:
        if not isinstance(node, ast.If) or not node.body:
            continue
        if not isinstance(node.body[-1], ast.Return):
            continue
        try:
            taken = run.expr(node.test, {})
        except Shape:
            continue
        if taken:
            return True
    return False


def _provider(funcs: dict[str, ast.FunctionDef]) -> str:
    """The provider, relative to the site folder: as `_get_cuda_plugin_ep_library_path`
    joins it where there is one, else where the provider bridge looks."""
    func = funcs.get("_get_cuda_plugin_ep_library_path")
    if func is None:
        return f"onnxruntime/{data('onnxruntime')['provider']}"
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
    return f"onnxruntime/{folders[0]}/{names[0]}"


register(OnnxruntimeReader())
