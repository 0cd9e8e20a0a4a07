"""The smallest real environment with a library in it, for tests that need one to ask about.

One library and one extension module that needs it (DT_NEEDED, found through RPATH
``$ORIGIN/lib``), compiled here, packed into one wheel (``PACKAGE/__init__.py``,
``PACKAGE/lib/LIB``, ``PACKAGE/_ext<EXT>``) and installed by real uv into a fresh venv.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cbuild import compile_extension, compile_lib, ext_suffix
from .venvs import make_venv, site_packages, uv_install
from .wheels import build_wheel


@dataclass(frozen=True)
class ExtWorld:
    venv: Path
    site: Path
    lib: Path  # the installed library
    ext: Path  # the installed extension module that needs it
    work: Path  # a folder to run cudatx in


def build_ext_world(
    root: Path, *, dist: str, package: str, lib: str, **lib_options: Any
) -> ExtWorld:
    """Build it all under `root`: the library `lib` (its soname too; `lib_options` go to
    compile_lib), the extension `package._ext`, the wheel `dist` 1.0, the venv."""
    build = root / "build"
    library = compile_lib(build / lib, soname=lib, **lib_options)
    ext = compile_extension(build, "_ext", needed=[library], rpath="$ORIGIN/lib")
    wheel = build_wheel(
        root / "wheels",
        dist,
        "1.0",
        {
            f"{package}/__init__.py": b"",
            f"{package}/lib/{lib}": library,
            f"{package}/_ext{ext_suffix()}": ext,
        },
        tag="py3-none-linux_x86_64",
    )
    venv = make_venv(root / "venv")
    uv_install(venv, [wheel])
    site = site_packages(venv)
    work = root / "work"
    work.mkdir()
    return ExtWorld(
        venv=venv,
        site=site,
        lib=site / package / "lib" / lib,
        ext=site / package / f"_ext{ext_suffix()}",
        work=work,
    )
