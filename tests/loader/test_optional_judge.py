"""Extension modules an import does not load, judged by the real interpreter
(cudatx.analysis.optional, cudatx.discover.imports.import_closure).

`optpkg`'s `__init__.py` imports `_need` (DT_NEEDED libneed.so.1, from the wheel
`need-lib`); `_tbb` (DT_NEEDED libtbb.so.12, which nothing installs) and `_extra`
(DT_NEEDED libextra.so.1, from the wheel `extra-lib`) are imported only inside functions,
when the user asks for them: numba's TBB layer is built so.
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
from . import _need


def use_tbb():
    from . import _tbb


def use_extra():
    from . import _extra
"""


@dataclass(frozen=True)
class World:
    venv: Path
    site: Path


def _lib_wheel(root: Path, dist: str, lib: str) -> tuple[Path, Path]:
    built = compile_lib(root / "build" / lib, soname=lib)
    folder = dist.replace("-", "_")
    wheel = build_wheel(
        root / "wheels", dist, "1.0", {f"{folder}/{lib}": built}, tag="py3-none-linux_x86_64"
    )
    return built, wheel


@pytest.fixture
def world(tmp_path: Path) -> World:
    build = tmp_path / "build"
    need, need_wheel = _lib_wheel(tmp_path, "need-lib", "libneed.so.1")
    extra, extra_wheel = _lib_wheel(tmp_path, "extra-lib", "libextra.so.1")
    tbb = compile_lib(build / "gone" / "libtbb.so.12", soname="libtbb.so.12")
    members = {"optpkg/__init__.py": INIT}
    for module, lib, folder in (
        ("_need", need, "need_lib"),
        ("_extra", extra, "extra_lib"),
        ("_tbb", tbb, "nowhere"),
    ):
        ext = compile_extension(build, module, needed=[lib], rpath=f"$ORIGIN/../{folder}")
        members[f"optpkg/{module}{ext_suffix()}"] = ext
    wheel = build_wheel(tmp_path / "wheels", "optpkg", "1.0", members, tag="py3-none-linux_x86_64")
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [wheel, need_wheel, extra_wheel])
    return World(venv, site_packages(venv))


def _runs(world: World, code: str) -> bool:
    done = subprocess.run(
        [str(venv_python(world.venv)), "-c", code], capture_output=True, text=True, check=False
    )
    return done.returncode == 0


def _doctor(world: World) -> tuple[int, dict[str, object]]:
    done = cudatx("doctor", "--python", world.venv, "--json")
    return done.returncode, json.loads(done.stdout)


def test_a_module_the_import_does_not_load_is_a_note_not_an_error(world: World) -> None:
    assert _runs(world, "import optpkg")
    assert not _runs(world, "import optpkg; optpkg.use_tbb()")  # the feature is not had
    rc, report = _doctor(world)
    assert rc == 0, report["problems"]
    assert report["errors"] == 0 and report["warnings"] == 0
    assert (
        "optpkg._tbb (optpkg) is not loaded by `import optpkg`, and needs libtbb.so.12, which "
        "nothing installs"
    ) in report["notes"]


def test_a_plan_that_breaks_only_a_module_no_import_loads_is_safe_with_a_note(
    world: World,
) -> None:
    # One rule for doctor and plans (issue 33): the feature `use_extra()` loses is said in a
    # note; `import optpkg` still works, so nothing that counts breaks.
    assert _runs(world, "import optpkg; optpkg.use_extra()")
    done = cudatx("remove", "extra-lib", "--dry-run", "--python", world.venv, "--json")
    plan = json.loads(done.stdout)
    assert done.returncode == 0 and plan["safe"], plan
    assert plan["broken_roots"] == [] and plan["broken"] == []
    assert (
        "optpkg._extra (optpkg) would no longer load: it needs libextra.so.1, which nothing "
        "installs; `import optpkg` does not load it (a feature lost, not counted)"
    ) in plan["notes"]
    uv_uninstall(world.venv, ["extra-lib"])
    assert _runs(world, "import optpkg")
    assert not _runs(world, "import optpkg; optpkg.use_extra()")
    rc, report = _doctor(world)  # now a feature not had: a note
    assert rc == 0 and any("optpkg._extra" in n for n in report["notes"])


def test_a_module_the_import_loads_is_an_error_when_it_fails(world: World) -> None:
    uv_uninstall(world.venv, ["need-lib"])
    assert not _runs(world, "import optpkg")
    rc, report = _doctor(world)
    assert rc == 1 and report["errors"] == 1, report["problems"]
