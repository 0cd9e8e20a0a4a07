"""A tiny TensorFlow-like package whose GPU check is compiled into a library, as TSL's DSO
loader is (cudatx.discover.frameworks.tsl): `tfake/libtfake_framework.so.2` exports
`tsl::internal::DsoLoader::TryDlopenCUDALibraries()` (the mangled name), which dlopens each
library by bare name from its own code (so through its own DT_RUNPATH) and returns the
number that failed, writing each failure's dlerror to stderr; its build's versions are in
`tfake/include/third_party/gpus/cuda/cuda_config.h`, as TF's wheel ships them. Each library
comes from its own `nvidia-*` wheel, required under the `and-cuda` extra."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from .cbuild import compile_lib
from .wheels import build_wheel

SYMBOL = "_ZN3tsl8internal9DsoLoader22TryDlopenCUDALibrariesEv"
# The same check as TF 2.11 and older export it (stream_executor::internal::DsoLoader)
OLDER_SYMBOL = "_ZN15stream_executor8internal9DsoLoader22TryDlopenCUDALibrariesEv"
# (wheel, folder under nvidia/, soname): the libraries the check opens
LIBRARIES = (
    ("nvidia-cuda-runtime-fake", "cuda_runtime", "libcudart.so.12"),
    ("nvidia-cublas-fake", "cublas", "libcublas.so.12"),
    ("nvidia-cublas-fake", "cublas", "libcublasLt.so.12"),
    ("nvidia-cufft-fake", "cufft", "libcufft.so.11"),
    ("nvidia-cusolver-fake", "cusolver", "libcusolver.so.11"),
    ("nvidia-cusparse-fake", "cusparse", "libcusparse.so.12"),
    ("nvidia-cudnn-fake", "cudnn", "libcudnn.so.9"),
)
_CUDNN_PARTS = (
    "graph",
    "ops",
    "cnn",
    "adv",
    "engines_precompiled",
    "engines_runtime_compiled",
    "heuristic",
)
CONFIG = b"""#ifndef CUDA_CUDA_CONFIG_H_
#define CUDA_CUDA_CONFIG_H_
#define TF_CUDA_VERSION "12.5.1"
#define TF_CUDART_VERSION "12"
#define TF_CUPTI_VERSION "12"
#define TF_CUBLAS_VERSION "12"
#define TF_CUSOLVER_VERSION "11"
#define TF_CURAND_VERSION "10"
#define TF_CUFFT_VERSION "11"
#define TF_CUSPARSE_VERSION "12"
#define TF_CUDNN_VERSION "9"
#endif
"""
BUILD_INFO = b"""import collections
build_info = collections.OrderedDict([('cuda_version', '12.5.1'), ('cudnn_version', '9'), \
('is_cuda_build', True)])
"""
TAG = "py3-none-linux_x86_64"


def _loader_source(symbol: str) -> str:
    """The check returns its status as TSL's does, an absl::Status (one word: 1 for OK, else
    a pointer to its failure) through the hidden result pointer of the x86-64 ABI."""
    names = ", ".join(f'"{soname}"' for _, _, soname in LIBRARIES)
    return f"""#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
static const char failure[] = "Cannot dlopen all CUDA libraries.";
uintptr_t *check(uintptr_t *status) __asm__("{symbol}");
uintptr_t *check(uintptr_t *status) {{
    static const char *names[] = {{{names}}};
    int failed = 0;
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++) {{
        if (!dlopen(names[i], RTLD_NOW | RTLD_LOCAL)) {{
            fprintf(stderr, "Could not load dynamic library '%s'; dlerror: %s\\n",
                    names[i], dlerror());
            failed++;
        }}
    }}
    *status = failed ? (uintptr_t)failure : 1;
    return status;
}}
"""


def build(out: Path, folders: Sequence[str], *, older: bool = False) -> list[Path]:
    """The wheels: `tfake` (its loader's DT_RUNPATH `$ORIGIN/../nvidia/<folder>/lib` for
    each of `folders`, and an `and-cuda` extra) and one wheel per library, plus
    `nvidia-curand-fake`, a required wheel the check does not open. `older`: built as TF
    2.11 and older are, the check under stream_executor's name and no cuda_config.h."""
    build_dir = out / "build"
    runpath = ":".join(f"$ORIGIN/../nvidia/{f}/lib" for f in folders)
    loader = compile_lib(
        build_dir / "libtfake_framework.so.2",
        soname="libtfake_framework.so.2",
        runpath=runpath,
        source=_loader_source(OLDER_SYMBOL if older else SYMBOL),
    )
    wheels: dict[str, dict[str, bytes | Path]] = {}
    # cuDNN 9's libcudnn.so.9 loads its sub-libraries on demand (cudatx/data/runtime.json):
    # its wheel ships them beside it, as nvidia-cudnn-cu12 does.
    cudnn = [("nvidia-cudnn-fake", "cudnn", f"libcudnn_{part}.so.9") for part in _CUDNN_PARTS]
    extra = ("nvidia-curand-fake", "curand", "libcurand.so.10")
    for wheel, folder, soname in (*LIBRARIES, *cudnn, extra):
        lib = compile_lib(build_dir / folder / soname, soname=soname, runpath="$ORIGIN")
        wheels.setdefault(wheel, {})[f"nvidia/{folder}/lib/{soname}"] = lib
    out_wheels = [
        build_wheel(out / "w", name, "1.0", files, tag=TAG) for name, files in wheels.items()
    ]
    out_wheels.append(
        build_wheel(
            out / "w",
            "tfake",
            "2.0",
            {
                "tfake/__init__.py": b"",
                "tfake/libtfake_framework.so.2": loader,
                "tfake/python/platform/build_info.py": BUILD_INFO,
                **({} if older else {"tfake/include/third_party/gpus/cuda/cuda_config.h": CONFIG}),
            },
            requires=[f'{name}==1.0; extra == "and-cuda"' for name in wheels],
            metadata_extra=["Provides-Extra: and-cuda"],
            tag=TAG,
        )
    )
    return out_wheels


JUDGE = r"""
import ctypes, glob, os, sys
site = glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages"))[0]
lib = ctypes.CDLL(os.path.join(site, "tfake", "libtfake_framework.so.2"))
status = ctypes.create_string_buffer(8)
getattr(lib, sys.argv[1])(status)
sys.exit(int.from_bytes(status.raw, sys.byteorder) != 1)
"""


def gpu_check(venv: Path) -> subprocess.CompletedProcess[str]:
    """The loader's own check, called in a fresh process of the venv's interpreter: exit 0
    where its status is OK, 1 where it is not (each failure on stderr)."""
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", JUDGE, SYMBOL],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
