"""A world the model is blind to: a package that `ctypes.CDLL`s another distribution's
library by a name it computes at run time, which no reader of its source follows.

`blindpkg/__init__.py` builds the library's file name from pieces joined and reversed at
import time; the library itself (`libhidden.so`) ships in the distribution `hiddenlib`.
cudatx's model sees no edge from blindpkg to hiddenlib (no DT_NEEDED, no preload list, no
soname-shaped string), so it calls removing hiddenlib safe; the real interpreter's import of
blindpkg fails without it. Also one pure wheel, `extra`, to install.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .cbuild import compile_lib
from .venvs import make_venv, uv_install
from .wheels import build_wheel

BLIND_INIT = b"""\
import ctypes
import os

# The name is made at run time: no reader of this file can know it.
_name = "lib" + "neddih"[::-1] + ".so"
_here = os.path.dirname(os.path.abspath(__file__))
_lib = ctypes.CDLL(os.path.join(os.path.dirname(_here), "hiddenlib", _name))
"""


# An onnxruntime whose import loads nothing and whose preload_dlls() loads hiddenlib's
# library by a computed name: only the framework's load step (its reader's trial step,
# cudatx.trial.steps) sees it.
ORT_INIT = b"""\
import ctypes
import os


def preload_dlls():
    here = os.path.dirname(os.path.abspath(__file__))
    name = "lib" + "neddih"[::-1] + ".so"
    ctypes.CDLL(os.path.join(os.path.dirname(here), "hiddenlib", name), mode=ctypes.RTLD_GLOBAL)
"""


@dataclass(frozen=True)
class BlindWheels:
    folder: Path
    blind: Path
    hidden: Path
    extra: Path
    onnxruntime: Path


def build_blind_world(root: Path) -> BlindWheels:
    out = root / "wheels"
    lib = compile_lib(root / "libhidden.so", soname="libhidden.so")
    hidden = build_wheel(
        out, "hiddenlib", "1.0", {"hiddenlib/__init__.py": b"", "hiddenlib/libhidden.so": lib}
    )
    blind = build_wheel(out, "blindpkg", "1.0", {"blindpkg/__init__.py": BLIND_INIT})
    extra = build_wheel(out, "extra", "2.0", {"extra/__init__.py": b"VALUE = 2\n"})
    ort = build_wheel(
        out,
        "onnxruntime-gpu",
        "1.20.0",
        {"onnxruntime/__init__.py": ORT_INIT, "onnxruntime/capi/__init__.py": b""},
    )
    return BlindWheels(out, blind, hidden, extra, ort)


def blind_env(wheels: BlindWheels, venv: Path, python: str | None = None) -> Path:
    """blindpkg with the hiddenlib it loads blindly (`python`: the interpreter of the venv)."""
    venv = make_venv(venv) if python is None else make_venv(venv, python)
    uv_install(venv, [wheels.blind, wheels.hidden])
    return venv
