"""A package that loads its own library by path before the extension that needs it, judged
by the real loader (cudatx.discover.handloads).

`handpkg` ships `lib/libhand.so` and `_ext` (DT_NEEDED libhand.so, no RPATH: no search path
finds it); its `__init__.py` loads the library through a wrapper of its own
(`_util.load("libhand")` -> `ctypes.CDLL(<package>/lib/<name>.so)`) and then imports `_ext`,
whose need the loaded object answers by name. `libhand.so` needs `libdep.so.1`, which the
wheel `dep-lib` installs (found through libhand's RUNPATH).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    site_packages,
    uv_install,
    uv_uninstall,
    venv_python,
)
from tests.support.cli import cudatx

INIT = b"""\
from ._util import load
load("libhand")
from . import _ext
"""
UTIL = b"""\
import ctypes
import os


def load(name):
    ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", name + ".so"))
"""


@dataclass(frozen=True)
class World:
    venv: Path
    site: Path


def _world(root: Path) -> World:
    build = root / "build"
    dep = compile_lib(build / "libdep.so.1", soname="libdep.so.1")
    hand = compile_lib(
        build / "libhand.so", soname="libhand.so", needed=[dep], runpath="$ORIGIN/../../deplib"
    )
    ext = compile_extension(build, "_ext", needed=[hand])
    wheels = [
        build_wheel(
            root / "wheels",
            "dep-lib",
            "1.0",
            {"deplib/libdep.so.1": dep},
            tag="py3-none-linux_x86_64",
        ),
        build_wheel(
            root / "wheels",
            "handpkg",
            "1.0",
            {
                "handpkg/__init__.py": INIT,
                "handpkg/_util.py": UTIL,
                "handpkg/lib/libhand.so": hand,
                f"handpkg/_ext{ext_suffix()}": ext,
            },
            requires=["dep-lib"],
            tag="py3-none-linux_x86_64",
        ),
    ]
    venv = make_venv(root / "venv")
    uv_install(venv, wheels)
    return World(venv, site_packages(venv))


def _imports(world: World) -> bool:
    done = subprocess.run(
        [str(venv_python(world.venv)), "-c", "import handpkg"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0


@pytest.fixture
def world(tmp_path: Path) -> World:
    return _world(tmp_path)


def test_the_hand_loaded_library_answers_the_extensions_need(world: World) -> None:
    assert _imports(world)  # the real interpreter: it imports
    done = cudatx("doctor", "--python", world.venv, "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0, report["problems"]
    assert report["errors"] == 0 and report["warnings"] == 0
    # Without the package's own load, libhand.so is found by no search that asks for it.
    why = cudatx("why", "libhand.so", "--python", world.venv)
    assert "handpkg/__init__.py" in why.stdout and "preload" in why.stdout


def test_removing_what_the_hand_loaded_library_needs_breaks_the_import(world: World) -> None:
    done = cudatx("remove", "dep-lib", "--dry-run", "--python", world.venv, "--json")
    plan = json.loads(done.stdout)
    assert done.returncode == 1 and not plan["safe"]
    broken = {Path(r["root"]).name for r in plan["broken_roots"]}
    assert f"_ext{ext_suffix()}" in broken and "libhand.so" in broken
    uv_uninstall(world.venv, ["dep-lib"])
    assert not _imports(world)  # the real interpreter agrees


def _arrival(root: Path, *, with_dep: bool) -> tuple[Path, Path]:
    """A venv with `dep-lib` (or without it), and the folder of the wheels: `handpkg` 1.0
    is not installed yet, and requires nothing (so that a plan installs it alone)."""
    build = root / "build"
    dep = compile_lib(build / "libdep.so.1", soname="libdep.so.1")
    hand = compile_lib(
        build / "libhand.so", soname="libhand.so", needed=[dep], runpath="$ORIGIN/../../deplib"
    )
    ext = compile_extension(build, "_ext", needed=[hand])
    folder = root / "wheels"
    dep_wheel = build_wheel(
        folder, "dep-lib", "1.0", {"deplib/libdep.so.1": dep}, tag="py3-none-linux_x86_64"
    )
    build_wheel(
        folder,
        "handpkg",
        "1.0",
        {
            "handpkg/__init__.py": INIT,
            "handpkg/_util.py": UTIL,
            "handpkg/lib/libhand.so": hand,
            f"handpkg/_ext{ext_suffix()}": ext,
        },
        tag="py3-none-linux_x86_64",
    )
    venv = make_venv(root / "venv")
    if with_dep:
        uv_install(venv, [dep_wheel])
    return venv, folder


@pytest.mark.parametrize("with_dep", [True, False], ids=["its-need-met", "its-need-unmet"])
def test_a_plan_reads_what_an_arriving_package_loads_by_hand(
    tmp_path: Path, with_dep: bool
) -> None:
    """An install plan reads the arriving package's own code (from the staged wheel) as a
    scan reads an installed one's: with libdep.so.1 there, `import handpkg` works and the
    plan is safe (read as a plain import, `_ext` would miss libhand.so: a false alarm);
    without it, the plan names libhand.so's need, and the real import fails alike."""
    venv, folder = _arrival(tmp_path, with_dep=with_dep)
    links = ("--offline", "--find-links", str(folder))
    done = cudatx("install", "handpkg", "--dry-run", "--python", venv, "--json", *links)
    plan = json.loads(done.stdout)
    broken = {Path(r["root"]).name for r in plan["broken_roots"]}
    if with_dep:
        assert done.returncode == 0 and plan["safe"], plan["broken_roots"]
    else:
        assert done.returncode == 1 and not plan["safe"]
        assert "libhand.so" in broken, plan["broken_roots"]
    uv_install(venv, [next(folder.glob("handpkg-*.whl"))])
    assert _imports(World(venv, site_packages(venv))) is with_dep  # the real interpreter
