"""The seed's aftermath, as small real wheels: four twins, hollowed by one uninstall.

A fake CUDA 12 torch whose extension needs four libraries through one RPATH folder per
component, as the cu128 builds do: libcudnn.so.9, libnccl.so.2, libcusparseLt.so.0 and
libnvshmem_host.so.3. Each comes in a `-cu12` and a `-cu13` wheel that install the same
paths with other bytes (design.md section 2). :func:`aftermath` installs torch with the
cu12 four, the cu13 four over them, then uninstalls the cu13 four with real uv: the cu12
four stay installed, every one of them hollow, and `import torch._C` fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudatx.discover.catalog import load_catalog

from .cbuild import compile_extension, compile_lib, ext_suffix
from .venvs import make_venv, uv_install, uv_uninstall
from .wheels import build_wheel

TORCH_VERSION_PY = b"""\
__version__ = '2.9.1+cu128'
cuda = '12.8'
hip = None
"""

# (folder, soname, distribution stem, cu12 version, cu13 version)
COMPONENTS = (
    ("nvidia/cudnn/lib", "libcudnn.so.9", "nvidia-cudnn", "9.10.2.21", "9.13.0.50"),
    ("nvidia/nccl/lib", "libnccl.so.2", "nvidia-nccl", "2.27.5", "2.28.3"),
    ("nvidia/cusparselt/lib", "libcusparseLt.so.0", "nvidia-cusparselt", "0.7.1", "0.8.0"),
    ("nvidia/nvshmem/lib", "libnvshmem_host.so.3", "nvidia-nvshmem", "3.3.20", "3.3.24"),
)
CU12 = tuple(f"{stem}-cu12" for _, _, stem, _, _ in COMPONENTS)
CU13 = tuple(f"{stem}-cu13" for _, _, stem, _, _ in COMPONENTS)
# Where each cuDNN finds the cuBLASLt and NVRTC its sub-libraries dlopen (readelf -d of the
# real wheels' libcudnn_adv.so.9), and the CUDA 12 wheels that ship them beside torch.
RUNPATH = {
    "cu12": "$ORIGIN:$ORIGIN/../../cublas/lib:$ORIGIN/../../cuda_nvrtc/lib",
    "cu13": "$ORIGIN:$ORIGIN/../../cu13/lib",
}
CUDA12 = (
    ("nvidia-cublas-cu12", "12.8.4.1", "nvidia/cublas/lib/libcublasLt.so.12"),
    ("nvidia-cuda-nvrtc-cu12", "12.8.93", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"),
)


@dataclass(frozen=True)
class TwinWheels:
    folder: Path
    torch: Path
    cu12: tuple[Path, ...]
    cu13: tuple[Path, ...]
    cuda12: tuple[Path, ...]  # cuBLASLt and NVRTC for CUDA 12, which cuDNN 12 dlopens


def _source(file_name: str, build: str) -> str:
    symbol = "cudatx_" + file_name.replace(".", "_")
    return (
        f'const char twin_build[] = "{file_name} fixture, {build}";\n'
        f"int {symbol}(void) {{ return (int)sizeof(twin_build); }}\n"
    )


def build_twin_world(root: Path, torch_init: bytes = b"") -> TwinWheels:
    """Wheels for the fake torch and both builds of the four components: real ELF files
    (cuDNN with the sub-libraries it dlopens, cudatx/data/runtime.json), real RECORDs.
    `torch_init`: the fake torch's `__init__.py` (empty: `import torch` loads nothing; the
    trial's tests give it `from torch._C import *`, as the real one loads its extension)."""
    out = root / "wheels"
    catalog = load_catalog()
    wheels: dict[str, list[Path]] = {"cu12": [], "cu13": []}
    libs12: list[Path] = []
    for folder, soname, stem, v12, v13 in COMPONENTS:
        loads, _ = catalog.known_loads(soname, None)
        for tag, version in (("cu12", v12), ("cu13", v13)):
            files: dict[str, bytes | Path] = {}
            for name in [soname, *loads]:
                files[f"{folder}/{name}"] = compile_lib(
                    root / tag / name,
                    soname=name,
                    runpath=RUNPATH[tag],
                    source=_source(name, f"built for CUDA {tag[2:]}"),
                )
            wheels[tag].append(build_wheel(out, f"{stem}-{tag}", version, files))
        libs12.append(root / "cu12" / soname)
    rpath = ":".join(f"$ORIGIN/../{folder}" for folder, *_ in COMPONENTS)
    c_ext = compile_extension(root / "torch", "_C", needed=libs12, rpath=rpath)
    torch = build_wheel(
        out,
        "torch",
        "2.9.1",
        {
            "torch/__init__.py": torch_init,
            "torch/version.py": TORCH_VERSION_PY,
            f"torch/_C{ext_suffix()}": c_ext,
        },
        requires=[
            f'{stem}-cu12=={v12}; platform_system == "Linux"' for _, _, stem, v12, _ in COMPONENTS
        ],
    )
    cuda12 = tuple(
        build_wheel(
            out,
            name,
            version,
            {member: compile_lib(root / name / Path(member).name, soname=Path(member).name)},
        )
        for name, version, member in CUDA12
    )
    return TwinWheels(out, torch, tuple(wheels["cu12"]), tuple(wheels["cu13"]), cuda12)


def healthy(wheels: TwinWheels, venv: Path) -> Path:
    """A new venv at `venv` with the fake torch and its cu12 four."""
    venv = make_venv(venv)
    uv_install(venv, [wheels.torch, *wheels.cu12, *wheels.cuda12])
    return venv


def contaminated(wheels: TwinWheels, venv: Path) -> Path:
    """healthy(), then the cu13 four installed over the cu12 four (they win the bytes)."""
    venv = healthy(wheels, venv)
    uv_install(venv, list(wheels.cu13))
    return venv


def aftermath(wheels: TwinWheels, venv: Path) -> Path:
    """contaminated(), then a plain `uv pip uninstall` of the cu13 four: the cu12 four stay
    installed and hollow."""
    venv = contaminated(wheels, venv)
    uv_uninstall(venv, list(CU13))
    return venv
