"""The frameworks' own steps a trial runs beside the imports, as each framework's reader
declares them (cudatx.discover.frameworks, `FrameworkReader.steps`): what a framework does
with the NVIDIA libraries before it ever asks the driver for a device; and, only where the
driver reports a device (GPU_PROBE), each framework's real GPU start.

Each step carries the framework it belongs to (`FrameworkStep.framework`): the trial's
verdict (cudatx.trial.verdict) and doctor's (cudatx.trial.doctor) pair it with the model's
breaks by that, never by its label.
"""

from __future__ import annotations

from collections.abc import Sequence

from cudatx.discover.frameworks import FrameworkStep, trial_steps
from cudatx.loader.fileview import FileView


def framework_steps(sites: Sequence[str]) -> tuple[FrameworkStep, ...]:
    """Every registered reader's steps, on the files as they are in the environment judged
    (the GPU-free ones first, then the GPU starts)."""
    return trial_steps(sites, FileView(None))


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
