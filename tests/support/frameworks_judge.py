"""The judge of the frameworks' slow tests: each framework's own load steps, run by the real
interpreter of an environment, no GPU needed.

- JAX's CUDA plugins (every `jax_plugins/xla_cuda*`): `_load_nvidia_libraries()`,
  `_import_extensions()` and `_check_cuda_versions(raise_on_first_error=True)` where the
  release has them (the device count and capabilities, which need a GPU, answered 0), then
  the plugin by path.
- onnxruntime's CUDA provider: `preload_dlls()` (in the "alone" context, where it exists),
  the shared provider library RTLD_GLOBAL, then the provider, RTLD_NOW, as ORT's provider
  bridge loads them.
- CuPy: each library module `cupy_backends.cuda.libs` lists, and `cupy.cuda.cufft`, as
  attributes (their `__getattr__` loads through cuda-pathfinder first, where CuPy does).

The driver's `libcuda.so.1` is absent here: a stub of that name defining every driver API
symbol the frameworks' libraries import is loaded first (cudatx never needs one). The
context "torch" runs `import torch` first; where that raises, every root fails there (the
process stops before reaching them).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from .cbuild import compile_lib

JUDGE = r"""
import ctypes, glob, importlib, importlib.util, json, os, sys

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
torch_failed = None
if sys.argv[2] == "torch":
    try:
        import torch  # noqa: F401
    except BaseException as exc:  # noqa: BLE001
        # The process stops at `import torch`: no root loads after it.
        torch_failed = "FAILED: import torch: " + ((str(exc).splitlines() or [""])[0])[:300]
site = glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages"))[0]
out = {}


def run(label, fn):
    if torch_failed is not None:
        out[label] = torch_failed
        return
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        out[label] = "FAILED: " + ((str(exc).splitlines() or [""])[0])[:300]
    else:
        out[label] = "ok"


def jax_plugin(name):
    def go():
        p = importlib.import_module(f"jax_plugins.{name}")
        if hasattr(p, "_load_nvidia_libraries"):
            p._load_nvidia_libraries()
        if hasattr(p, "_import_extensions"):
            p._import_extensions()
        if hasattr(p, "_check_cuda_versions"):
            if p.cuda_versions is None:
                raise RuntimeError("no _versions module")
            p.cuda_versions.cuda_device_count = lambda: 0
            p.cuda_versions.cuda_compute_capability = lambda d: 0
            p._check_cuda_versions(raise_on_first_error=True)
        ctypes.CDLL(str(p._get_library_path()))
    return go


for init in sorted(glob.glob(os.path.join(site, "jax_plugins", "xla_cuda*", "__init__.py"))):
    name = os.path.basename(os.path.dirname(init))
    run(f"jax_plugins/{name}'s XLA plugin", jax_plugin(name))


def ort():
    import onnxruntime
    if hasattr(onnxruntime, "preload_dlls") and sys.argv[2] == "alone":
        onnxruntime.preload_dlls()
    capi = os.path.join(os.path.dirname(onnxruntime.__file__), "capi")
    ctypes.CDLL(os.path.join(capi, "libonnxruntime_providers_shared.so"), mode=ctypes.RTLD_GLOBAL)
    ctypes.CDLL(os.path.join(capi, "libonnxruntime_providers_cuda.so"))


spec = importlib.util.find_spec("onnxruntime")
if spec is not None and spec.origin and os.path.exists(
    os.path.join(os.path.dirname(spec.origin), "capi", "libonnxruntime_providers_cuda.so")
):
    run("onnxruntime's CUDA provider", ort)

if os.path.exists(os.path.join(site, "cupy", "_environment.py")):
    import cupy_backends.cuda.libs as libs
    names = getattr(libs, "_submodules", ("cublas", "cusolver", "cusparse", "curand", "nccl"))
    for name in names:
        if glob.glob(os.path.join(os.path.dirname(libs.__file__), name + ".*so")):
            run(f"cupy's module cupy_backends.cuda.libs.{name}",
                lambda name=name: getattr(libs, name))
    import cupy.cuda
    run("cupy's module cupy.cuda.cufft", lambda: getattr(cupy.cuda, "cufft"))
print(json.dumps(out))
"""

# The contexts cudatx replays, by framework, for the judge's two processes.
CONTEXTS = {
    "alone": {
        "jax_plugins": "jax alone",
        "onnxruntime": "after `onnxruntime.preload_dlls()`",
        "cupy": "cupy alone",
    },
    "torch": {
        "jax_plugins": "after `import torch`",
        "onnxruntime": "after `import torch`",
        "cupy": "after `import torch`",
    },
}


def libcuda_stub(env: Path, folder: Path) -> Path:
    """A libcuda.so.1 defining every driver API symbol (`cu[A-Z]...`) the frameworks'
    libraries import."""
    (site,) = env.glob("lib/python3*/site-packages")
    files = [
        *site.glob("onnxruntime/capi/*.so"),
        *site.glob("jax_plugins/*/*.so"),
        *site.glob("jax_cuda*_plugin/*.so"),
    ]
    names: set[str] = set()
    for path in files:
        listed = subprocess.run(
            ["nm", "-D", "--undefined-only", str(path)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        names |= {
            line.split()[-1].split("@")[0]
            for line in listed.splitlines()
            if line.split() and re.match(r"cu[A-Z]", line.split()[-1])
        }
    source = "".join(f"int {n}(void) {{ return 0; }}\n" for n in sorted(names))
    return compile_lib(folder / "libcuda.so.1", soname="libcuda.so.1", source=source or None)


def judge(env: Path, stub: Path, context: str) -> dict[str, str]:
    """label -> "ok" or "FAILED: ..." for each framework root the judge loads, in a fresh
    interpreter of `env` ("alone", or "torch": after `import torch`)."""
    done = subprocess.run(
        [str(env / "bin" / "python"), "-c", JUDGE, str(stub), context],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise AssertionError(f"the judge itself failed: {done.stderr[-2000:]}")
    loaded: dict[str, str] = json.loads(lines[-1])
    return loaded


def context_of(label: str, context: str) -> str:
    """The context cudatx names for the judge's process `context`, for a root `label`."""
    return next(v for k, v in CONTEXTS[context].items() if label.startswith(k))


def predicted(plan: dict[str, Any]) -> set[tuple[str, str]]:
    """(root label, context) of every framework root a plan says stops loading."""
    out = {(r["framework"], r["context"]) for r in plan["broken_roots"] if r.get("framework")}
    out |= {(c["label"], c["context"]) for c in plan["contexts"] if c["after"] is not True}
    return out


def actual(
    before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]
) -> set[tuple[str, str]]:
    """(root label, context) of every root the judge loaded before and not after; not those
    of a process that stopped at `import torch` (the plan names torch's own break for that:
    see torch_breaks)."""
    return {
        (label, context_of(label, context))
        for context, verdicts in after.items()
        for label, verdict in verdicts.items()
        if before[context].get(label) == "ok"
        and verdict != "ok"
        and not verdict.startswith("FAILED: import torch:")
    }


def torch_breaks(after: dict[str, dict[str, str]]) -> bool:
    """Whether `import torch` itself failed in the judge's torch process."""
    return any(v.startswith("FAILED: import torch:") for v in after.get("torch", {}).values())


def torch_broken_in(plan: dict[str, Any]) -> bool:
    """Whether a plan says torch's own extension module stops loading."""
    return any("/torch/_C." in r["root"] for r in plan["broken_roots"])
