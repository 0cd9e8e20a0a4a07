"""Plans count what glibc's version and symbol checks refuse: a rebinding to a build that
lacks a version or a symbol that was met before is a break, named with glibc's message.

Real libraries with GNU version scripts in real wheels (four releases of one provider),
real uv; each verdict is checked against the real loader after the same change made by uv.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.loader.test_symbols_judge import ext_source, functions
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    observe_import,
    uv_install,
    venv_python,
)
from tests.support.cli import cudatx

EXT = ext_suffix()
LIB = "prov/lib/libpv.so"
RELEASES = {
    # version: (functions, version script)
    "0.9": (("f1",), "V1 { global: f1; local: *; };\n"),  # no V2 at all
    "1.0": (("f1", "f2"), "V1 { global: f1; local: *; };\nV2 { global: f2; } V1;\n"),
    "1.1": (("f1", "f9"), "V1 { global: f1; local: *; };\nV2 { global: f9; } V1;\n"),  # f2 gone
    "2.0": (
        ("f1", "f2", "f3"),
        "V1 { global: f1; local: *; };\nV2 { global: f2; } V1;\nV3 { global: f3; } V2;\n",
    ),
}


@dataclass(frozen=True)
class World:
    wheels: Path
    pristine: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("plan-symbols")
    build, wheels = root / "build", root / "wheels"
    for version, (names, script) in RELEASES.items():
        lib = compile_lib(
            build / version / LIB,
            soname="libpv.so",
            source=functions(*names),
            version_script=script,
        )
        build_wheel(wheels, "fx-prov", version, {LIB: lib})
    linked = build / "1.0" / LIB
    ext = compile_extension(
        build / "user",
        "_ext",
        source=ext_source("_ext", calls=["f2"]),
        needed=[linked],
        runpath="$ORIGIN/../prov/lib",
    )
    user = build_wheel(wheels, "fx-user", "1.0", {"user/__init__.py": b"", f"user/_ext{EXT}": ext})
    pristine = make_venv(root / "pristine")
    uv_install(pristine, [wheels / "fx_prov-1.0-py3-none-any.whl", user])
    return World(wheels, pristine)


def _plan(world: World, spec: str) -> tuple[int, dict[str, Any]]:
    links = ("--offline", "--find-links", str(world.wheels), "--ignore-running")
    done = cudatx("install", spec, "--dry-run", "--json", *links, "--python", world.pristine)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _really(world: World, spec: str, tmp_path: Path) -> str | None:
    """The import after uv makes the same change in a copy: None, or glibc's message."""
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [world.wheels / "fx_user-1.0-py3-none-any.whl"])
    version = spec.split("==")[1]
    uv_install(venv, [world.wheels / f"fx_prov-{version}-py3-none-any.whl"])
    seen = observe_import(venv_python(venv), "user._ext")
    shutil.rmtree(venv)
    return None if seen.ok else (seen.error or "").removeprefix("ImportError: ")


@pytest.mark.parametrize(
    ("spec", "missing"),
    [("fx-prov==0.9", "`V2'"), ("fx-prov==1.1", "f2@V2"), ("fx-prov==2.0", None)],
)
def test_rebinding_to_a_build_without_a_version_or_symbol_is_a_break(
    world: World, spec: str, missing: str | None, tmp_path: Path
) -> None:
    code, plan = _plan(world, spec)
    real = _really(world, spec, tmp_path)
    assert (code == 0) == (real is None) == (missing is None), (plan, real)
    if missing is None:
        assert plan["safe"] and plan["broken"] == []
        return
    (broken,) = plan["broken"]
    assert broken["soname"] == "libpv.so" and broken["missing"] == [missing]
    assert broken["needed_by"].endswith(f"user/_ext{EXT}")
    (root,) = plan["broken_roots"]
    # The same message glibc gives, paths as the real process opened them.
    assert root["detail"] == real.replace(str(tmp_path / "venv"), str(world.pristine))
    assert broken["reason"] == root["detail"]


def test_text_plan_names_the_symbol(world: World) -> None:
    links = ("--offline", "--find-links", str(world.wheels), "--ignore-running")
    done = cudatx("install", "fx-prov==1.1", "--dry-run", *links, "--python", world.pristine)
    assert done.returncode == 1, done.stderr
    assert "undefined symbol: f2, version V2" in done.stdout


def test_no_deps_is_passed_to_uv(world: World, tmp_path: Path) -> None:
    """install, sync and check-requirements take uv's --no-deps: a prebuilt extension whose
    dependency is nowhere to be found plans only with it."""
    needy = build_wheel(
        tmp_path / "more", "fx-needy", "1.0", {"needy/__init__.py": b""}, requires=["fx-absent"]
    )
    shutil.copy(needy, world.wheels / needy.name)
    links = ("--offline", "--find-links", str(world.wheels), "--ignore-running")
    where = ("--python", world.pristine)
    without = cudatx("install", "fx-needy", "--dry-run", "--json", *links, *where)
    assert without.returncode not in (0, 1) and "fx-absent" in without.stderr
    done = cudatx("install", "fx-needy", "--no-deps", "--dry-run", "--json", *links, *where)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert [(p["name"], p["version"]) for p in plan["install"]] == [("fx-needy", "1.0")]
    # What uv was told not to install is the user's to meet: said, not counted.
    assert plan["requirements_broken"] == []
    assert "--no-deps: fx-needy requires fx-absent, not counted" in plan["notes"]

    requirements = tmp_path / "requirements.txt"
    requirements.write_text("fx-needy\n")
    check = ("check-requirements", requirements, *links[:3], *where)
    assert cudatx(*check).returncode not in (0, 1)
    assert cudatx(*check, "--no-deps").returncode == 0
    # uv pip sync has no --no-deps (it installs exactly what the file lists): cudatx takes
    # it, leaves it out of uv's command line and leaves fx-needy's requirement to the user.
    pins = tmp_path / "pins.txt"
    pins.write_text("fx-prov==1.0\nfx-user==1.0\nfx-needy==1.0\n")
    synced = [
        cudatx("sync", pins, *flags, "--dry-run", "--json", *links, *where)
        for flags in ((), ("--no-deps",))
    ]
    assert [s.returncode for s in synced] == [1, 0], [s.stderr for s in synced]
    plain, no_deps = (json.loads(s.stdout) for s in synced)
    assert plain["requirements_broken"] == [{"dist": "fx-needy", "requirement": "fx-absent"}]
    assert no_deps["requirements_broken"] == [] and no_deps["install"] == plain["install"]


def test_an_arriving_extension_that_would_fail_is_a_broken_root(
    world: World, tmp_path: Path
) -> None:
    """One shape for a failing import, installed or arriving: an extension built against a
    release of the provider that defines f3 (2.0), arriving where 1.0 is installed, is in
    `broken_roots` with glibc's message; `broken` holds only libraries something needs."""
    build = tmp_path / "build"
    lib = compile_lib(
        build / LIB, soname="libpv.so", source=functions(*RELEASES["2.0"][0]),
        version_script=RELEASES["2.0"][1],
    )  # fmt: skip
    ext = compile_extension(
        build / "late",
        "_ext",
        source=ext_source("_ext", calls=["f3"]),
        needed=[lib],
        runpath="$ORIGIN/../prov/lib",
    )
    late = build_wheel(
        tmp_path / "w", "fx-late", "1.0", {"late/__init__.py": b"", f"late/_ext{EXT}": ext}
    )
    links = ("--offline", "--find-links", str(late.parent), "--ignore-running", "--no-deps")
    done = cudatx("install", "fx-late", "--dry-run", "--json", *links, "--python", world.pristine)
    assert done.returncode == 1, done.stderr
    plan = json.loads(done.stdout)
    # The library it needs, lacking the symbol, may be named; the module itself is no
    # library needed by the interpreter.
    assert all(b["evidence"] != "import" for b in plan["broken"]), plan["broken"]
    assert [b["soname"] for b in plan["broken"]] in ([], ["libpv.so"]), plan["broken"]
    (root,) = plan["broken_roots"]
    assert root["root"].endswith(f"late/_ext{EXT}") and root["dist"] == "fx-late"
    assert root["missing"] == ["`V3'"]  # glibc checks versions first
    # The real loader, after the same install by uv in a copy.
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [world.wheels / "fx_prov-1.0-py3-none-any.whl", late])
    seen = observe_import(venv_python(venv), "late._ext")
    assert not seen.ok
    real = (seen.error or "").removeprefix("ImportError: ")
    assert root["detail"] == real.replace(str(venv), str(world.pristine))
    text = cudatx("install", "fx-late", "--dry-run", *links, "--python", world.pristine).stdout
    assert text.startswith("Unsafe: 1 import would fail"), text
    assert f"import of late/_ext{EXT} [fx-late] would fail: " in text
