"""Each modelled framework's own load steps that need no GPU, run by the trial's judge as
the tests judge them (tests/torch/test_frameworks_env.py): what a framework does with the
NVIDIA libraries before it ever asks the driver for a device.

Each step is a snippet run by the environment's interpreter (`python -B -c`); it runs only
where the module it starts from is installed (`needs`), and a step that fails both before and after
the change is no break of the change. torch needs none of its own: its import is its load
step (torch/__init__.py preloads the NVIDIA libraries, then loads torch._C).

Kept minimal: JAX's plugin is taken up to its loading of the NVIDIA libraries (its
`initialize()` then checks versions against a device it cannot find here); onnxruntime's
`preload_dlls()` and its CUDA provider library; CuPy's library modules, loaded through its
own loader.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    label: str  # as the plan names the check
    # what must be installed for the step to run: a module's path under a site folder,
    # without its suffix (a package folder, a .py file or an extension module)
    needs: str
    code: str  # Python source, run with `python -B -c`


_JAX = """\
import importlib
m = importlib.import_module('jax_plugins.{name}')
load = getattr(m, '_load_nvidia_libraries', None)
if load is not None:
    load()
"""

_ORT = """\
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

_CUPY = "import cupy_backends.cuda.libs.{name}"

STEPS: tuple[Step, ...] = (
    *(
        Step(
            f"JAX's CUDA {major} plugin loads its NVIDIA libraries",
            f"jax_plugins/xla_cuda{major}",
            _JAX.format(name=f"xla_cuda{major}"),
        )
        for major in (12, 13)
    ),
    Step("onnxruntime's preload_dlls() and CUDA provider", "onnxruntime", _ORT),
    *(
        Step(f"CuPy's {name} module", f"cupy_backends/cuda/libs/{name}", _CUPY.format(name=name))
        for name in ("cublas", "cusolver", "cusparse", "curand", "cufft", "nvrtc")
    ),
)
