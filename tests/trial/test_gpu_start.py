"""The frameworks' GPU starts in a trial (issue 33 item 6): run only where the driver reports
a device, and said either way.

No machine of CI has a GPU. The driver is what decides, so the tests give the environment's
interpreter a driver of their own: a `libcuda.so.1` compiled here whose cuInit and
cuDeviceGetCount answer as a machine with (or without) devices does, found first through
LD_LIBRARY_PATH as glibc searches it (elf/dl-load.c). The GPU start then runs for real:
a `cupy` package whose first product on the device loads a library of another wheel, as a
framework's first GPU call loads what its import did not.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from cudatx.trial.judge import gpu_present
from tests.support import build_wheel, compile_lib
from tests.support.blind_world import BlindWheels, build_blind_world
from tests.support.cli import cudatx
from tests.support.venvs import make_venv, uv_install

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

# What libcuda.so.1 says: cuInit's result, and how many devices cuDeviceGetCount counts.
_DRIVER = """\
int cuInit(unsigned int flags) {{ (void)flags; return {init}; }}
int cuDeviceGetCount(int *count) {{ *count = {count}; return 0; }}
"""

# A cupy whose import loads nothing and whose first product loads hiddenlib's library.
_CUPY = b"""\
import ctypes, os

class _Array:
    def __matmul__(self, other):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        ctypes.CDLL(os.path.join(here, "hiddenlib", "libhidden.so"))
        return self

    def sum(self):
        return self

    def item(self):
        return 0.0

def ones(shape):
    return _Array()
"""


def _driver(folder: Path, *, init: int, count: int) -> Path:
    folder.mkdir(parents=True)
    source = _DRIVER.format(init=init, count=count)
    compile_lib(folder / "libcuda.so.1", soname="libcuda.so.1", source=source)
    return folder


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[BlindWheels, Path]:
    root = tmp_path_factory.mktemp("gpu")
    blind = build_blind_world(root / "blind")
    cupy = build_wheel(root / "wheels", "gpustub", "1.0", {"cupy/__init__.py": _CUPY})
    return blind, cupy


@pytest.mark.parametrize(
    ("init", "count", "found", "said"),
    [
        (0, 2, True, "2 GPUs"),
        (0, 1, True, "1 GPU"),
        (100, 0, False, "no GPU (cuInit(0) returned CUDA error 100)"),
        (0, 0, False, "no GPU (cuDeviceGetCount found 0 devices (CUDA error 0))"),
    ],
)
def test_the_driver_decides_whether_a_gpu_is_there(
    tmp_path: Path, init: int, count: int, found: bool, said: str
) -> None:
    folder = _driver(tmp_path / "driver", init=init, count=count)
    environ = {**os.environ, "LD_LIBRARY_PATH": os.fspath(folder)}
    assert gpu_present(sys.executable, environ, 30) == (found, said)


def test_no_driver_is_no_gpu_with_the_loaders_words(tmp_path: Path) -> None:
    # An empty root for the loader: no libcuda.so.1 anywhere it searches but this folder.
    python = make_venv(tmp_path / "venv") / "bin" / "python"
    found, said = gpu_present(os.fspath(python), {"LD_LIBRARY_PATH": os.fspath(tmp_path)}, 30)
    if found:
        pytest.skip("this machine has a GPU driver: its libcuda.so.1 is found")
    assert said.startswith("no GPU (libcuda.so.1: cannot open shared object file")


def _plan(venv: Path, driver: Path | None) -> dict[str, Any]:
    how = ["--python", os.fspath(venv), "--dry-run", "--trial", "--json"]
    if driver is not None:
        how += ["--ld-library-path", os.fspath(driver)]
    done = cudatx("remove", "hiddenlib", *how)
    assert done.stdout, done.stderr
    plan: dict[str, Any] = json.loads(done.stdout)
    return plan


def test_a_gpu_start_catches_what_no_import_loads(
    world: tuple[BlindWheels, Path], tmp_path: Path
) -> None:
    blind, cupy = world
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [cupy, blind.hidden])
    label = "cupy's GPU start (a product on device 0)"

    with_gpu = _plan(venv, _driver(tmp_path / "gpu", init=0, count=1))
    trial = with_gpu["trial"]
    assert trial["gpu"] == "1 GPU"
    rows = {r["check"]: r for r in trial["roots"]}
    assert rows["import cupy"]["trial"] == "loads"  # its import loads nothing
    assert (rows[label]["model"], rows[label]["trial"]) == ("loads", "breaks")
    assert "libhidden.so" in rows[label]["error"]
    assert with_gpu["safe"] is False

    # The same change where the driver reports no device: the step is not run, and the
    # plan says so rather than calling the GPU start judged.
    without = _plan(venv, _driver(tmp_path / "none", init=100, count=0))
    assert without["trial"]["gpu"] == "no GPU (cuInit(0) returned CUDA error 100)"
    assert label not in {r["check"] for r in without["trial"]["roots"]}
    assert without["safe"] is True
    text = cudatx(
        "remove", "hiddenlib", "--python", venv, "--dry-run", "--trial",
        "--ld-library-path", tmp_path / "none",
    )  # fmt: skip
    assert "  GPU starts not run: no GPU (cuInit(0) returned CUDA error 100)" in text.stdout
