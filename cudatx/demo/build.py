"""Build, offline and inside one folder, an environment that shows the cu12/cu13 trap, and a
plug-in only a run loads.

The trap README.md opens with, made of tiny real libraries installed by real uv: a CUDA 12.8
"torch" (a stand-in that says so, whose ``__init__.py`` preloads NVIDIA libraries as torch
2.14's does) with ``nvidia-cuda-runtime-cu12``, ``nvidia-cublas-cu12`` and
``nvidia-cudnn-cu12``, then, in a second install as a serving stack would do,
``nvidia-cudnn-cu13``. Both cuDNN wheels list the eight files of ``nvidia/cudnn/lib/``
(``libcudnn.so.9`` and the seven sub-libraries it dlopens); the second install wrote its
CUDA 13 bytes there, so the CUDA 12 torch now loads a CUDA 13 cuDNN without a word, and
uninstalling ``nvidia-cudnn-cu13`` would delete the files ``nvidia-cudnn-cu12`` still lists.
The same second install brings a serving stack, ``cudatx-demo-serve``, whose Python code
loads the library of an optional plug-in, ``cudatx-demo-plugin`` (a library-only wheel, as the
NVIDIA wheels are), by a path put together at run time from what the request asks for: no
scan can see that load, a traced run (`cudatx trace`) does.

Everything is written under ``workdir``:

- ``build/``: the compiled objects (absent when the prebuilt copies are used),
- ``wheels/``: the seven wheels,
- ``venv/``: the environment,
- ``uv-cache/``, ``tmp/``: uv's cache and the tools' TMPDIR, so nothing persists elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cudatx.demo.errors import DemoError
from cudatx.demo.libs import (
    CUDNN_FILES,
    CompileFailed,
    DemoLibraries,
    compile_libraries,
    last_line,
    prebuilt_libraries,
)
from cudatx.demo.wheelfile import write_wheel
from cudatx.uv import local_install_argv

__all__ = [
    "COOWNED_PATH",
    "COOWNED_PATHS",
    "DEMO_WHEELS",
    "PLUGIN",
    "PLUGIN_WORKLOAD",
    "DemoEnv",
    "DemoWheel",
    "build_demo",
]

CUDNN_LIB = "nvidia/cudnn/lib"
COOWNED_PATH = f"{CUDNN_LIB}/libcudnn.so.9"
# What both cuDNN wheels list: libcudnn.so.9 and its sub-libraries.
COOWNED_PATHS = tuple(f"{CUDNN_LIB}/{name}" for name in CUDNN_FILES)
_UV_TIMEOUT_S = 300.0

_TORCH_VERSION_PY = """\
# cudatx demo stand-in for torch 2.8.0+cu128 (not PyTorch): the fields tools read.
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.8.0+cu128'
debug = False
cuda: Optional[str] = '12.8'
git_version = 'cudatx-demo'
hip: Optional[str] = None
xpu: Optional[str] = None
"""


# torch 2.14's loader code (torch/__init__.py, _load_global_deps and what it calls), in the
# shape torch's reader reads (cudatx.discover.frameworks.torch); {cuda_libs} is the list and
# {header} a first comment line. It does not import torch._C, so that `import torch` alone
# shows what the preload maps. The tests use it too, with lists of their own.
TORCH_INIT_TEMPLATE = """\
# {header}
from __future__ import annotations

import ctypes
import glob
import os
import platform
import sys


def _get_cuda_dep_paths(path: str, lib_folder: str, lib_name: str) -> list[str]:
    from torch.version import cuda as cuda_version

    nvidia_lib_paths = glob.glob(os.path.join(path, "nvidia", lib_folder, "lib", lib_name))
    if cuda_version is not None:
        maj_cuda_version = cuda_version.split(".")[0]
        nvidia_lib_paths += glob.glob(
            os.path.join(path, "nvidia", f"cu{maj_cuda_version}", "lib", lib_name)
        )
    lib_paths = glob.glob(os.path.join(path, lib_folder, "lib", lib_name))
    return nvidia_lib_paths + lib_paths


def _preload_cuda_lib(lib_folder: str, lib_name: str, required: bool = True) -> None:
    if platform.system() != "Linux":
        raise AssertionError(f"Should only be called on Linux, got {platform.system()}")
    lib_path = None
    for path in sys.path:
        candidate_lib_paths = _get_cuda_dep_paths(path, lib_folder, lib_name)
        if candidate_lib_paths:
            lib_path = candidate_lib_paths[0]
            break
    if not lib_path and required:
        raise ValueError(f"{lib_name} not found in the system path {sys.path}")
    if lib_path:
        ctypes.CDLL(lib_path)


def _preload_cuda_deps(err: OSError | None = None, required: bool = True) -> None:
{cuda_libs}
    if err is not None and not [
        lib for _, lib in cuda_libs if lib.split(".", 1)[0] in err.args[0]
    ]:
        raise err
    for lib_folder, lib_name in cuda_libs:
        _preload_cuda_lib(lib_folder, lib_name, required=required)
    _preload_cuda_lib("nvtx", "libnvToolsExt.so.*[0-9]", required=False)


def _load_global_deps() -> None:
    if platform.system() == "Windows":
        return
    here = os.path.abspath(__file__)
    global_deps_lib_path = os.path.join(os.path.dirname(here), "lib", "libtorch_global_deps.so")
    try:
        ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)
        try:
            with open("/proc/self/maps") as f:
                _maps = f.read()
            if "libcudart.so" not in _maps:
                return
            _preload_cuda_deps(required=False)
        except Exception:
            pass
    except OSError as err:
        _preload_cuda_deps(err)
        ctypes.CDLL(global_deps_lib_path, mode=ctypes.RTLD_GLOBAL)


_load_global_deps()
del _load_global_deps
"""


def torch_init_py(cuda_libs: str, header: str) -> str:
    """TORCH_INIT_TEMPLATE with its list (an indented `cuda_libs = ...` block) filled in."""
    return TORCH_INIT_TEMPLATE.replace("{cuda_libs}", cuda_libs).replace("{header}", header)


_TORCH_INIT_PY = torch_init_py(
    """\
    cuda_libs: list[tuple[str, str]] = [
        ("cublas", "libcublasLt.so.*[0-9]"),
        ("cublas", "libcublas.so.*[0-9]"),
        ("cudnn", "libcudnn.so.*[0-9]"),
    ]""",
    "cudatx demo stand-in for torch 2.8.0+cu128 (not PyTorch), with torch 2.14's loader code.",
)


# Every demo wheel's version carries this local label (PEP 440 `+local`), which no index
# gives a wheel of these names. The demo reuses real names and versions (nvidia-cudnn-cu12
# 9.10.2.21 is torch 2.8's pin), and where uv's cache holds the registry's wheel of the same
# name==version it prefers it to the demo's, even with `--offline --find-links DIR`: uv
# still reads the default index from its cache, and of two wheels of one version picks the
# one with the more specific platform tag (a manylinux wheel over the demo's py3-none-any;
# seen with uv 0.13.9, the quick start's repair then reinstalled the registry's bytes). A
# reinstall asks for `name==version` (cudatx.discover.dists.reinstall_spec), and `==` with a
# local label matches that label only, so no other build can stand in for a demo wheel.
DEMO_LABEL = "cudatxdemo"


def _demo_version(public: str) -> str:
    """`9.10.2.21` -> `9.10.2.21+cudatxdemo`; `2.8.0+cu128` -> `2.8.0+cu128.cudatxdemo`."""
    return f"{public}.{DEMO_LABEL}" if "+" in public else f"{public}+{DEMO_LABEL}"


@dataclass(frozen=True)
class DemoWheel:
    name: str
    version: str  # the public version a registry would give; `wheel_version` is the demo's
    summary: str
    requires: tuple[str, ...] = ()

    @property
    def wheel_version(self) -> str:
        """The version the demo's wheel carries: the public one with DEMO_LABEL."""
        return _demo_version(self.version)


TORCH = DemoWheel(
    "torch",
    "2.8.0+cu128",
    "cudatx demo stand-in for torch 2.8.0+cu128 (CUDA 12.8); not PyTorch",
    ("nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12", "nvidia-cublas-cu12"),
)
CUDA_RUNTIME_CU12 = DemoWheel(
    "nvidia-cuda-runtime-cu12",
    "12.8.90",
    "cudatx demo stand-in for the CUDA 12.8 runtime; not NVIDIA code",
)
CUBLAS_CU12 = DemoWheel(
    "nvidia-cublas-cu12",
    "12.8.4.1",
    "cudatx demo stand-in for cuBLAS 12.8 (CUDA 12); not NVIDIA code",
)
CUDNN_CU12 = DemoWheel(
    "nvidia-cudnn-cu12",
    "9.10.2.21",
    "cudatx demo stand-in for cuDNN 9.10.2 for CUDA 12; not NVIDIA code",
    ("nvidia-cublas-cu12",),
)
CUDNN_CU13 = DemoWheel(
    "nvidia-cudnn-cu13",
    "9.13.0.50",
    "cudatx demo stand-in for cuDNN 9.13.0 for CUDA 13; not NVIDIA code",
)
PLUGIN = DemoWheel(
    "cudatx-demo-plugin",
    "1.0",
    "cudatx demo stand-in for a serving plug-in's library (no Python code of its own)",
    ("nvidia-cublas-cu12",),
)
SERVE = DemoWheel(
    "cudatx-demo-serve",
    "1.0",
    "cudatx demo stand-in for a serving stack that loads a plug-in when a request needs it",
)
DEMO_WHEELS = (TORCH, CUDA_RUNTIME_CU12, CUBLAS_CU12, CUDNN_CU12, CUDNN_CU13, PLUGIN, SERVE)
# The training stack, installed first; the serving stack, its cuDNN and plug-in come second.
FIRST_INSTALL = (TORCH, CUDA_RUNTIME_CU12, CUBLAS_CU12, CUDNN_CU12)
SECOND_INSTALL = (CUDNN_CU13, PLUGIN, SERVE)

PLUGIN_PACKAGE = "cudatx_demo_plugin"
SERVE_PACKAGE = "cudatx_demo_serve"
# The serving stack's loader: the plug-in's path is put together from what the request asks
# for, so that nothing a scan reads names it (only a run, `cudatx trace`, shows the load).
# The plug-in is optional, as plug-ins are: the serving stack does not require it.
_SERVE_INIT_PY = """\
# cudatx demo stand-in for a serving stack's Python side (not NVIDIA code).
import ctypes
import os


def load(kind: str) -> int:
    \"\"\"Load the plug-in `kind`, as serving code does when the first request needs it.\"\"\"
    site = os.path.dirname(os.path.dirname(__file__))
    path = os.path.join(site, f"cudatx_demo_{kind}", f"libdemo_{kind}.so")
    return ctypes.CDLL(path).cudatx_demo_plugin_answer()
"""
# The workload `cudatx demo` traces: what serving a first request runs.
PLUGIN_WORKLOAD = f'import {SERVE_PACKAGE}; {SERVE_PACKAGE}.load("plugin")'


@dataclass(frozen=True)
class DemoEnv:
    """The environment built: its folder, its interpreter, and what was done, in order."""

    venv: Path
    python: Path
    story: tuple[str, ...]
    wheels: Path  # the folder of the demo's wheels, where a repair finds them


def _cudnn_files(libs: DemoLibraries, major: int) -> dict[str, bytes]:
    return {f"{CUDNN_LIB}/{name}": data for name, data in libs.cudnn(major).items()}


def _wheel_files(libs: DemoLibraries) -> dict[DemoWheel, dict[str, bytes]]:
    return {
        TORCH: {
            "torch/__init__.py": _TORCH_INIT_PY.encode(),
            "torch/version.py": _TORCH_VERSION_PY.encode(),
            "torch/lib/libtorch_global_deps.so": libs.read("torch_global_deps"),
            "torch/lib/libtorch_cuda.so": libs.read("torch_cuda"),
            "torch/_C.abi3.so": libs.read("torch_c"),
        },
        CUDA_RUNTIME_CU12: {"nvidia/cuda_runtime/lib/libcudart.so.12": libs.read("cudart")},
        CUBLAS_CU12: {
            "nvidia/cublas/lib/libcublasLt.so.12": libs.read("cublaslt"),
            "nvidia/cublas/lib/libcublas.so.12": libs.read("cublas"),
        },
        CUDNN_CU12: _cudnn_files(libs, 12),
        CUDNN_CU13: _cudnn_files(libs, 13),
        PLUGIN: {f"{PLUGIN_PACKAGE}/libdemo_plugin.so": libs.read("plugin")},
        SERVE: {f"{SERVE_PACKAGE}/__init__.py": _SERVE_INIT_PY.encode()},
    }


def _uv_env(workdir: Path) -> dict[str, str]:
    """The caller's environment without uv/pip settings; caches and temp files in workdir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME"):
        env.pop(name, None)
    env.update(
        UV_CACHE_DIR=os.fspath(workdir / "uv-cache"),
        UV_NO_CONFIG="1",
        UV_NO_PROJECT="1",
        UV_PYTHON_DOWNLOADS="never",
        UV_NO_PROGRESS="1",
        TMPDIR=os.fspath(workdir / "tmp"),
    )
    return env


def _run_uv(argv: Sequence[str], what: str, *, cwd: Path, env: Mapping[str, str]) -> None:
    cmd = tuple(argv)
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=False,
            cwd=cwd,
            env=dict(env),
            timeout=_UV_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DemoError(f"{what} failed: {exc}", command=cmd) from exc
    if proc.returncode != 0:
        raise DemoError(
            f"{what} failed: {last_line(proc.stderr or proc.stdout)}",
            command=cmd,
            stderr=proc.stderr,
        )


def _find_uv() -> str:
    try:
        from uv import find_uv_bin

        return os.fspath(find_uv_bin())
    except (ImportError, FileNotFoundError) as exc:
        raise DemoError(f"uv not found: {exc}") from exc


def _libraries(workdir: Path, compiler: str | None) -> tuple[DemoLibraries, str]:
    """Compile, or fall back to the prebuilt copies; also the story line saying which."""
    if compiler == "none":
        libs = prebuilt_libraries()
        return libs, f"used the demo's tiny libraries {libs.origin} (no compiler asked for)"
    try:
        libs = compile_libraries(workdir / "build", compiler=compiler, tmp_dir=workdir / "tmp")
    except CompileFailed as failed:
        try:
            libs = prebuilt_libraries()
        except DemoError as exc:
            raise DemoError(
                f"{failed.message}: {failed.last_line}; and {exc.message}", stderr=failed.stderr
            ) from exc
        return libs, f"{failed.message} ({failed.last_line}): used the copies {libs.origin}"
    return libs, (
        f"{libs.origin}: libcudart.so.12, libcublasLt.so.12, libcublas.so.12, two builds of "
        "libcudnn.so.9 and its seven sub-libraries (CUDA 12: needs libcublas.so.12, names "
        "libcublasLt.so.12; CUDA 13: names libcublasLt.so.13), torch/lib/"
        "libtorch_global_deps.so, torch/lib/libtorch_cuda.so, torch/_C.abi3.so"
    )


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise DemoError(f"expected one site-packages folder in {venv}", path=os.fspath(venv))
    return found[0]


def _spec(wheels: Sequence[DemoWheel]) -> str:
    return ", ".join(f"{w.name} {w.wheel_version}" for w in wheels)


def build_demo(
    workdir: Path,
    *,
    uv: str | None = None,
    compiler: str | None = None,
) -> DemoEnv:
    """Build the trap environment in ``workdir`` (created if missing; must be empty).

    ``uv``: the uv binary (default: the one of the ``uv`` package). ``compiler``: the C
    compiler command (default: ``$CC`` or ``cc``); ``"none"`` uses the prebuilt libraries
    without trying, as does any compiler that is missing or fails. The venv is made from
    the interpreter running cudatx. Raises :class:`DemoError` carrying uv's or the
    compiler's last stderr line.
    """
    workdir = Path(workdir).absolute()
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        if any(workdir.iterdir()):
            raise DemoError(f"demo folder {workdir} is not empty", path=os.fspath(workdir))
        (workdir / "tmp").mkdir()
    except OSError as exc:
        raise DemoError(f"cannot use {workdir} for the demo: {exc}") from exc
    if not sys.executable:
        raise DemoError("the running Python does not know its own executable")
    uv_bin = uv if uv is not None else _find_uv()
    story: list[str] = []

    libs, how = _libraries(workdir, compiler)
    story.append(how)

    wheel_dir = workdir / "wheels"
    contents = _wheel_files(libs)
    for wheel in DEMO_WHEELS:
        write_wheel(
            wheel_dir,
            wheel.name,
            wheel.wheel_version,
            contents[wheel],
            requires=wheel.requires,
            summary=wheel.summary,
        )
    story.append(
        f"wrote {len(DEMO_WHEELS)} wheels to {wheel_dir}: {_spec(DEMO_WHEELS)} "
        "(torch is a demo stand-in)"
    )

    env = _uv_env(workdir)
    venv = workdir / "venv"
    _run_uv(
        [uv_bin, "venv", "--offline", "--python", sys.executable, os.fspath(venv)],
        "uv venv",
        cwd=workdir,
        env=env,
    )
    python = venv / "bin" / "python"
    story.append(f"created {venv} with uv from {sys.executable}")

    local = ["--offline", "--no-index", "--find-links", os.fspath(wheel_dir), "--link-mode", "copy"]
    install = [uv_bin, *local_install_argv(os.fspath(python), local)]
    for step, wheels, who in (
        (1, FIRST_INSTALL, "the CUDA 12.8 training stack"),
        (2, SECOND_INSTALL, "later, a serving stack's CUDA 13 cuDNN and its plug-in"),
    ):
        _run_uv(
            [*install, *(w.name for w in wheels)], f"uv pip install ({step})", cwd=workdir, env=env
        )
        story.append(f"uv pip install {' '.join(w.name for w in wheels)}: {who} ({_spec(wheels)})")

    site = _site_packages(venv)
    cu13 = contents[CUDNN_CU13]
    if any(not (site / p).is_file() or (site / p).read_bytes() != cu13[p] for p in COOWNED_PATHS):
        raise DemoError(
            f"uv did not leave the CUDA 13 bytes in {CUDNN_LIB}: the demo shows no trap",
            path=os.fspath(site / CUDNN_LIB),
        )
    story.append(
        f"the {len(COOWNED_PATHS)} files of {CUDNN_LIB} (libcudnn.so.9 and its sub-libraries) "
        f"are now listed by both {CUDNN_CU12.name} and {CUDNN_CU13.name} and hold the CUDA 13 "
        "bytes: the CUDA 12.8 torch preloads a CUDA 13 cuDNN without a word, and uninstalling "
        f"{CUDNN_CU13.name} would delete the files {CUDNN_CU12.name} still lists"
    )
    story.append(
        "the CUDA 13 cuDNN also wants libcublasLt.so.13, which nothing here provides "
        "(nor libnvrtc.so.13): this environment has cuBLAS 12 only"
    )
    story.append(
        f"{PLUGIN.name}'s libdemo_plugin.so is loaded by {SERVE.name}'s code, by a path put "
        "together only when a request needs it (" + PLUGIN_WORKLOAD.split("; ")[1] + "): nothing "
        "names it, so only a traced run shows the load"
    )
    return DemoEnv(venv=venv, python=python, story=tuple(story), wheels=wheel_dir)
