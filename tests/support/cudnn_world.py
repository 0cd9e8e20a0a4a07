"""The cu12/cu13 cuDNN story of design.md section 1, as small real wheels.

A fake CUDA 13 torch whose extension needs libcudnn.so.9 through its RPATH, and the cu12 and
cu13 cuDNN wheels, which install the same paths with other bytes (each built "for" its CUDA
major). Shared by the doctor, install and check-requirements tests, with the venvs of
:func:`install_cudnn_world`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudatx.discover.catalog import load_catalog

from .cbuild import compile_extension, compile_lib, ext_suffix
from .venvs import make_venv, uv_install
from .wheels import build_wheel

CUDNN_DIR = "nvidia/cudnn/lib"
CUDNN = f"{CUDNN_DIR}/libcudnn.so.9"
CU12 = "nvidia-cudnn-cu12"
CU13 = "nvidia-cudnn-cu13"
CU12_VERSION = "9.10.2.21"
CU13_VERSION = "9.24.0.43"

TORCH_VERSION = b"""\
from typing import Optional

__version__ = '2.14.1+cu130'
debug = False
cuda: Optional[str] = '13.0'
hip: Optional[str] = None
"""


def _cudnn_source(file_name: str, build: str) -> str:
    # Different bytes (and size) per build: the two wheels' files must differ.
    symbol = "cudatx_" + file_name.replace(".", "_")
    return (
        f'const char cudnn_build[] = "{file_name} fixture, {build}";\n'
        f"int {symbol}(void) {{ return (int)sizeof(cudnn_build); }}\n"
    )


@dataclass(frozen=True)
class Wheels:
    folder: Path
    cudnn12: Path
    cudnn13: Path
    others: tuple[Path, ...]  # torch and the CUDA 13 libraries cuDNN's sub-libraries load


def build_cudnn_world(root: Path) -> Wheels:
    """Wheels for a fake CUDA 13 torch, both cuDNN wheels (the same paths, other bytes) and
    the CUDA 13 libraries cuDNN's sub-libraries load: real ELF files, real RECORDs."""
    out = root / "wheels"
    # libcudnn.so.9 and the sub-libraries it dlopens (cudatx/data/runtime.json), as both
    # cuDNN wheels ship them: the same paths.
    loads, _ = load_catalog().known_loads("libcudnn.so.9", None)
    cudnn: dict[str, dict[str, bytes | Path]] = {}
    for tag, build in (("cu12", "built for CUDA 12"), ("cu13", "built for CUDA 13.0")):
        files: dict[str, bytes | Path] = {}  # build_wheel's type
        for name in ["libcudnn.so.9", *loads]:
            files[f"{CUDNN_DIR}/{name}"] = compile_lib(
                root / tag / name,
                soname=name,
                runpath="$ORIGIN",
                source=_cudnn_source(name, build),
            )
        cudnn[tag] = files
    cudnn12_lib, cudnn13_lib = (root / tag / "libcudnn.so.9" for tag in ("cu12", "cu13"))
    assert cudnn12_lib.read_bytes() != cudnn13_lib.read_bytes()
    # CUDA 13 toolkit wheels: no -cu13 suffix, one shared folder.
    cublaslt = compile_lib(root / "cu13lib/libcublasLt.so.13", soname="libcublasLt.so.13")
    nvrtc = compile_lib(root / "cu13lib/libnvrtc.so.13", soname="libnvrtc.so.13")
    c_ext = compile_extension(
        root / "torch",
        "_C",
        needed=[cudnn13_lib, cublaslt, nvrtc],
        rpath="$ORIGIN/../nvidia/cudnn/lib:$ORIGIN/../nvidia/cu13/lib",
    )
    torch = build_wheel(
        out,
        "torch",
        "2.14.1",
        {
            "torch/__init__.py": b"",
            "torch/version.py": TORCH_VERSION,
            f"torch/_C{ext_suffix()}": c_ext,
        },
        requires=[
            f'nvidia-cudnn-cu13=={CU13_VERSION}; platform_system == "Linux"',
            'nvidia-cublas==13.1.0.3; platform_system == "Linux"',
            'nvidia-cuda-nvrtc==13.0.88; platform_system == "Linux"',
        ],
    )
    return Wheels(
        folder=out,
        cudnn12=build_wheel(out, CU12, CU12_VERSION, cudnn["cu12"]),
        cudnn13=build_wheel(out, CU13, CU13_VERSION, cudnn["cu13"]),
        others=(
            torch,
            build_wheel(
                out, "nvidia-cublas", "13.1.0.3", {"nvidia/cu13/lib/libcublasLt.so.13": cublaslt}
            ),
            build_wheel(
                out, "nvidia-cuda-nvrtc", "13.0.88", {"nvidia/cu13/lib/libnvrtc.so.13": nvrtc}
            ),
        ),
    )


def install_cudnn_world(wheels: Wheels, venv: Path, *, cu12_last: bool = False) -> Path:
    """A new venv at `venv` with the fake torch, the cu13 cuDNN and the CUDA 13 libraries;
    with `cu12_last`, then the cu12 cuDNN over them (another `uv pip install --no-deps`): the
    last one installed wins the shared paths' bytes."""
    venv = make_venv(venv)
    uv_install(venv, [wheels.cudnn13, *wheels.others])
    if cu12_last:
        uv_install(venv, [wheels.cudnn12])
    return venv
