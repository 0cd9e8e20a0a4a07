"""What cudatx does not read, said (cudatx.analysis.coverage): a distribution that requires
an NVIDIA wheel and loads none of its libraries by a route cudatx models.

`nvidia-fake-cu12` installs `nvidia/fake/lib/libfake.so.1`. `linked` requires it and its
extension links it (DT_NEEDED, found through RPATH): modelled. `spawned` requires it too,
but nothing of it names the library (as JAX runs ptxas from nvidia-cuda-nvcc-cu12): a note
in doctor, and in a plan that removes the wheel; none in a plan that does not touch it.
`nvidia-fakecc-cu12` is an NVIDIA wheel itself (a program under nvidia/, no library, as
nvidia-cuda-nvcc requires nvidia-nvvm): never a note. `extraed` requires it only behind
an extra no installer records (as `tensorflow[and-cuda]` does), and `searcher` requires
nothing but its library's DT_RUNPATH names the wheel's folder: both loads are unread, both
get the note.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    uv_install,
)
from tests.support.cli import cudatx

NOTE = (
    "not modelled: spawned (it requires nvidia-fake-cu12, and loads none of its libraries by "
    "a route cudatx reads); plans cannot vouch for its run-time loads"
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("coverage")
    build = root / "build"
    fake = compile_lib(build / "libfake.so.1", soname="libfake.so.1")
    plain = compile_lib(build / "libplain.so.1", soname="libplain.so.1")
    linked = compile_extension(build, "_linked", needed=[fake], rpath="$ORIGIN/../nvidia/fake/lib")
    spawned = compile_extension(build / "s", "_spawned", needed=[plain], rpath="$ORIGIN")
    searcher = compile_lib(build / "libsearcher.so.1", runpath="$ORIGIN/../nvidia/fake/lib")
    tag = "py3-none-linux_x86_64"
    wheels = [
        build_wheel(
            root / "w",
            "extraed",
            "1.0",
            {"extraed/__init__.py": b""},
            requires=['nvidia-fake-cu12; extra == "gpu"'],
            metadata_extra=["Provides-Extra: gpu"],
            tag=tag,
        ),
        build_wheel(
            root / "w",
            "searcher",
            "1.0",
            {"searcher/__init__.py": b"", "searcher/libsearcher.so.1": searcher},
            tag=tag,
        ),
        build_wheel(
            root / "w", "nvidia-fake-cu12", "1.0", {"nvidia/fake/lib/libfake.so.1": fake}, tag=tag
        ),
        build_wheel(
            root / "w",
            "linked",
            "1.0",
            {
                "linked/__init__.py": b"from . import _linked\n",
                f"linked/_linked{ext_suffix()}": linked,
            },
            requires=["nvidia-fake-cu12"],
            tag=tag,
        ),
        build_wheel(
            root / "w",
            "spawned",
            "1.0",
            {
                "spawned/__init__.py": b"from . import _spawned\n",
                f"spawned/_spawned{ext_suffix()}": spawned,
                "spawned/libplain.so.1": plain,
            },
            requires=["nvidia-fake-cu12"],
            tag=tag,
        ),
        build_wheel(
            root / "w",
            "nvidia-fakecc-cu12",
            "1.0",
            {"nvidia/fakecc/bin/fakecc": b"#!/bin/sh\n"},
            requires=["nvidia-fake-cu12"],
            tag=tag,
        ),
    ]
    venv = make_venv(root / "venv")
    uv_install(venv, wheels)
    return venv


def _json(*args: object) -> tuple[int, dict[str, object]]:
    done = cudatx(*map(str, args), "--json")
    return done.returncode, json.loads(done.stdout)


def test_doctor_says_what_it_does_not_read(venv: Path) -> None:
    rc, report = _json("doctor", "--python", venv)
    assert rc == 0 and report["warnings"] == 0, report["problems"]
    notes = report["notes"]
    assert isinstance(notes, list)
    assert NOTE in notes
    assert not any("not modelled: linked" in n for n in notes)
    assert not any("not modelled: nvidia-fakecc" in n for n in notes)


def test_an_extra_or_a_runpath_into_the_wheel_is_a_use_of_it(venv: Path) -> None:
    _, report = _json("doctor", "--python", venv)
    notes = report["notes"]
    assert isinstance(notes, list)
    for name, why in (("extraed", "it requires nvidia-fake-cu12,"), ("searcher", why_runpath)):
        assert any(n.startswith(f"not modelled: {name} ({why}") for n in notes), notes
    _, plan = _json("remove", "nvidia-fake-cu12", "--dry-run", "--python", venv)
    assert any("not modelled: searcher" in n for n in plan["notes"])  # type: ignore[union-attr]


why_runpath = "it uses nvidia-fake-cu12,"  # its DT_RUNPATH names the folder


def test_a_plan_that_removes_the_wheel_says_so(venv: Path) -> None:
    _, plan = _json("remove", "nvidia-fake-cu12", "--dry-run", "--python", venv)
    assert NOTE in plan["notes"]  # type: ignore[operator]
    _, other = _json("remove", "linked", "--dry-run", "--python", venv)
    assert not any("not modelled" in n for n in other["notes"])  # type: ignore[union-attr]
