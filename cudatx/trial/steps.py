"""Each modelled framework's own load steps that need no GPU, run by the trial's judge as
the tests judge them (tests/torch/test_frameworks_env.py): what a framework does with the
NVIDIA libraries before it ever asks the driver for a device; and, only where the driver
reports a device (GPU_PROBE), each framework's real GPU start (GPU_STEPS).

Each step is a snippet run by the environment's interpreter (`python -B -c`); it runs only
where the module it starts from is installed (`needs`), and a step that fails both before and after
the change is no break of the change. torch needs none of its own: its import is its load
step (torch/__init__.py preloads the NVIDIA libraries, then loads torch._C).

Kept minimal: JAX's plugin is taken up to its loading of the NVIDIA libraries (its
`initialize()` then checks versions against a device it cannot find here); onnxruntime's
`preload_dlls()` and its CUDA provider library; CuPy's library modules, loaded through its
own loader; a loader compiled into a library (TSL's, in TensorFlow: cudatx.discover.
frameworks.tsl), its own exported GPU check called with ctypes in the library the reader
finds (`compiled_steps`: found in the environment being judged, not named here).
"""

from __future__ import annotations

import glob as globbing
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cudatx.discover.frameworks import data, readers
from cudatx.loader.fileview import FileView


@dataclass(frozen=True)
class Step:
    label: str  # as the plan names the check
    # what must be installed for the step to run: a module's path under a site folder,
    # without its suffix (a package folder, a .py file or an extension module)
    needs: str
    code: str  # Python source, run with `python -B -c`
    # run only where the GPU probe (GPU_PROBE) found a device: the framework's real GPU start
    gpu: bool = False


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


# Each framework's real GPU start, run only where GPU_PROBE found a device (never on CI): what
# a user's first GPU call does with the NVIDIA libraries, beyond what an import loads. Labels
# are `<top-level module>'s GPU start (...)` (GPU_START): the verdict reads the module from
# them. JAX and TensorFlow take most of a GPU's memory at start unless told not to; the steps
# run beside each other. onnxruntime's needs a model to run: none is run.
GPU_START = "'s GPU start ("

_TORCH_GPU = """\
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

_TF_GPU = """\
import os
os.environ.setdefault('TF_FORCE_GPU_ALLOW_GROWTH', 'true')
import tensorflow as tf
if not tf.test.is_built_with_cuda():
    raise SystemExit(0)  # a CPU build has no GPU start to judge
if not tf.config.list_physical_devices('GPU'):
    raise SystemExit('Cannot dlopen some GPU libraries: tensorflow lists no GPU')
"""

_JAX_GPU = """\
import os
os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
import jax, jax.numpy as jnp
jax.devices('gpu')
x = jax.device_put(jnp.ones((8, 8)), jax.devices('gpu')[0])
(x @ x).block_until_ready()
"""

_CUPY_GPU = """\
import cupy
x = cupy.ones((8, 8))
(x @ x).sum().item()
"""

GPU_STEPS: tuple[Step, ...] = (
    Step(
        f"torch{GPU_START}CUDA init, a cuBLAS product, a cuDNN convolution)",
        "torch",
        _TORCH_GPU,
        True,
    ),
    Step(f"tensorflow{GPU_START}its GPU device list)", "tensorflow", _TF_GPU, True),
    Step(f"jax{GPU_START}its GPU devices, a product on one)", "jax_plugins", _JAX_GPU, True),
    Step(f"cupy{GPU_START}a product on device 0)", "cupy", _CUPY_GPU, True),
)


def gpu_start_module(label: str) -> str | None:
    """The top-level module a GPU start step's label names; None for any other label."""
    return label.partition("'s ")[0] if GPU_START in label else None


# Whether this machine has a GPU the environment's code can use: the driver's own answer
# (libcuda.so.1, found as the environment's interpreter finds it; cuInit, cuDeviceGetCount),
# printed as a count, or the reason none is usable as its error.
GPU_PROBE = """\
import ctypes
try:
    cuda = ctypes.CDLL('libcuda.so.1')
except OSError as exc:
    raise SystemExit(str(exc))
rc = cuda.cuInit(0)
if rc != 0:
    raise SystemExit(f'cuInit(0) returned CUDA error {rc}')
count = ctypes.c_int(0)
rc = cuda.cuDeviceGetCount(ctypes.byref(count))
if rc != 0 or count.value < 1:
    raise SystemExit(f'cuDeviceGetCount found {count.value} devices (CUDA error {rc})')
print(count.value)
"""


# TSL's check returns an absl::Status: non-trivially copyable, so returned through a hidden
# pointer, the first argument on x86-64 (System V ABI); one word, 1 for OK (an inlined
# code), else a pointer to the failure (0: an older tsl::Status's null state, OK too).
_TSL = """\
import ctypes, sys
lib = ctypes.CDLL({path!r})
status = ctypes.create_string_buffer(64)
getattr(lib, {symbol!r})(status)
if int.from_bytes(status.raw[:8], sys.byteorder) > 1:
    raise SystemExit('Cannot dlopen some GPU libraries: ' + {what!r})
"""
_X86_64 = 62  # e_machine EM_X86_64: the ABI the call above assumes


def compiled_steps(sites: Sequence[str]) -> Iterator[Step]:
    """One step per loader compiled into a library installed in `sites` (the reader's own
    `find`, on the files as they are in the environment judged)."""
    reader = readers()["tsl"]
    view = FileView(None)
    for site in sites:
        for marker in reader.markers:
            for found_at in sorted(view.glob(os.path.join(globbing.escape(site), marker))):
                found = reader.find(site, found_at, "", view)
                if found is None:
                    continue
                path = os.path.join(site, found.loader)
                info = view.probe(path).info
                if info is None or info.machine != _X86_64:
                    continue
                what = f"TSL's GPU check in {found.loader} failed; it would run on the CPU"
                yield Step(
                    f"{found.name}'s GPU check (TSL's DSO loader in {found.loader})",
                    found.loader,
                    _TSL.format(path=path, symbol=str(data("tsl")["exports"]), what=what),
                )
