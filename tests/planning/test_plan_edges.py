"""Plans for what a shared library path alone does not show: a library reached through a
symlink, and a shared path that holds no library at all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    make_venv,
    site_packages,
    uv_install,
    uv_uninstall,
)
from tests.support.cli import cudatx


def _plan(venv: Path, *args: str) -> tuple[int, dict[str, object]]:
    done = cudatx("remove", *args, "--dry-run", "--json", "--python", venv, cwd=venv)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("edges")
    build = root / "build"
    foo = compile_lib(build / "pkgfoo" / "libfoo.so.1", soname="libfoo.so.1")
    (build / "myext").mkdir(parents=True)
    ext = compile_extension(build / "myext", "_ext", needed=[foo], runpath="$ORIGIN/mylibs")
    wheels = root / "wheels"
    data = {"shared/data.txt": b"one\n"}
    built = [
        build_wheel(wheels, "foo", "1.0", {"pkgfoo/libfoo.so.1": foo}),
        build_wheel(wheels, "myext", "1.0", {f"myext/{ext.name}": ext}),
        build_wheel(wheels, "extra-a", "1.0", data),
        build_wheel(wheels, "extra-b", "1.0", {"shared/data.txt": b"two\n"}),
    ]
    env = make_venv(root / "venv")
    uv_install(env, built)
    # The extension finds libfoo through a symlink into foo's folder (wheels carry none).
    mylibs = site_packages(env) / "myext" / "mylibs"
    mylibs.mkdir()
    (mylibs / "libfoo.so.1").symlink_to("../../pkgfoo/libfoo.so.1")
    return env


def test_a_library_reached_through_a_symlink_breaks_with_its_target(
    venv: Path, tmp_path: Path
) -> None:
    code, plan = _plan(venv, "foo")
    assert code == 1 and plan["safe"] is False
    roots = plan["broken_roots"]
    assert isinstance(roots, list) and [r["first_missing"] for r in roots] == ["libfoo.so.1"]
    copy = tmp_path / "copy"
    shutil.copytree(venv, copy, symlinks=True)
    uv_uninstall(copy, ["foo"])
    imported = subprocess.run(
        [os.fspath(copy / "bin" / "python"), "-c", "import myext._ext"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.returncode != 0 and "libfoo.so.1" in imported.stderr


def test_a_shared_data_path_leaves_its_other_owner_hollow(venv: Path) -> None:
    """Nothing loads the file, and still: a package that stays loses a file its RECORD lists
    (other bytes there: the two wheels name different hashes). A data file is no code: the
    loss is said, and counted only with --strict (docs/loader-model.md, "What a file is")."""
    code, plan = _plan(venv, "extra-a")
    assert code == 0 and plan["safe"] is True
    assert plan["left_hollow"] == [{"name": "extra-b", "version": "1.0"}]
    (loss,) = plan["losses"]
    assert loss["missing"] == ["shared/data.txt"] and loss["imports"] == []
    assert loss["code"] is False
    strict, strict_plan = _plan(venv, "extra-a", "--strict")
    assert strict == 1 and strict_plan["safe"] is False
    repair = plan["repair"]
    assert isinstance(repair, dict) and repair["reinstall"] == [
        {"name": "extra-b", "version": "1.0"}
    ]
    text = cudatx("remove", "extra-a", "--dry-run", "--python", venv, cwd=venv).stdout
    assert " ! extra-b==1.0 would lose shared/data.txt" in text and "--repair" in text


def test_a_change_the_replay_never_read_is_not_replayed(
    venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removing what no replay read (data files) reuses the first replay; the plan is the
    one a second replay gives. Removing a library it loaded replays again."""
    from cudatx.discover.target import start_query
    from cudatx.planning import plan as planner
    from cudatx.planning import simulate as simulation
    from cudatx.planning.selection import select
    from cudatx.scan import scan

    env = scan(start_query(str(venv)), ld_library_path=None, cwd=venv)
    data = select(env, ("extra-a",))
    shortcut = planner.plan_change(env, data, (), planner.PlanOptions())
    after = simulation.simulate(env, data)
    assert after.loads is env.loads  # not replayed
    library = select(env, ("foo",))
    assert simulation.simulate(env, library).loads is not env.loads
    monkeypatch.setattr(simulation, "_replay_unchanged", lambda *args: False)
    assert simulation.simulate(env, data).loads == env.loads
    assert planner.plan_change(env, data, (), planner.PlanOptions()) == shortcut
