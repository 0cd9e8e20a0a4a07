"""A dry run, `check-requirements` and the pre-commit hook build nothing, so they run nothing.

Each requirement here can only be had by building it: an sdist in --find-links, an editable
folder, a local folder by `name @ file://`, a pyproject dependency on one, a VCS URL. Its
build backend (tests/support/builds.py) writes a line to a marker file whenever any of its
hooks runs, so "nothing ran" is read from the marker, not assumed. Each is refused in one
line naming it (exit 16) unless --allow-build, which then builds it as asked.

In the small world of tests/support/pure_world.py (a real venv, real uv, offline).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.builds import runs, sdist_of, tattling_project
from tests.support.cli import cudatx
from tests.support.pure_world import World, run
from tests.support.txn_world import assert_same, error

NEEDS_BUILD = 16  # cudatx/errors.py
pytestmark = pytest.mark.reliability


def _built(marker: Path) -> str:
    return f"ran {runs(marker)}"


@pytest.fixture
def marker(world: World) -> Path:
    return world.work / "ran.log"


@pytest.fixture
def sdists(world: World, marker: Path) -> Path:
    project = tattling_project(world.work / "src" / "tattle", "tattle", "1.0", marker)
    return sdist_of(project, world.work / "links", "tattle", "1.0").parent


ASKED = "can only be checked by building it: pass --allow-build"
# Without an environment --allow-build alone is refused: the line says what builds it.
NO_ENV = (
    "can only be checked by building it: the check without an environment never builds; "
    "pass --fresh (or --python) with --allow-build"
)


def _refused(
    done: subprocess.CompletedProcess[str], marker: Path, named: str, asked: str = ASKED
) -> None:
    assert done.returncode == NEEDS_BUILD, done.stderr
    line = error(done)
    assert named in line and asked in line, line
    assert runs(marker) == [], _built(marker)


def test_a_dry_run_of_an_sdist_builds_nothing(
    world: World, sdists: Path, marker: Path, record_property: pytest.RecordProperty
) -> None:
    """`install NAME --dry-run --find-links DIR`, DIR holding only an sdist: refused in one line
    naming it, its build never run; --allow-build builds it as asked."""
    before = world.digest()
    where = ("--offline", "--find-links", os.fspath(sdists))
    _refused(run(world, "install", "tattle", "--dry-run", *where), marker, "tattle")
    _refused(run(world, "install", "tattle", "--yes", *where), marker, "tattle")
    assert_same(before, world.digest())

    allowed = run(world, "install", "tattle", "--dry-run", "--allow-build", *where)
    assert allowed.returncode == 0, allowed.stderr
    assert "tattle" in allowed.stdout
    assert runs(marker), "--allow-build should have built it"
    assert_same(before, world.digest())
    record_property("cases", 3)
    record_property("outcome", "dry run and apply: exit 16, build never ran; --allow-build builds")


def _requirements(world: World, sdists: Path, marker: Path, how: str) -> tuple[Path, str]:
    """A file to check, and the name its refusal must say. `./localdir` is relative to the
    working folder (world.work), where uv reads a requirement's relative path from."""
    local = tattling_project(world.work / "localdir", "tattle", "1.0", marker)
    (world.work / "repo").mkdir(exist_ok=True)
    if how == "sdist in --find-links":
        path = world.work / "requirements.txt"
        path.write_text(f"--find-links {sdists}\ntattle\n")
        return path, "tattle"
    if how == "-e ./localdir":
        path = world.work / "repo" / "requirements.txt"
        path.write_text("-e ./localdir\n")
        return path, "-e ./localdir"
    if how == "name @ file:///localdir":
        path = world.work / "repo" / "requirements.txt"
        path.write_text(f"tattle @ {local.as_uri()}\n")
        return path, "tattle"
    if how == "pyproject N @ file:///dir":
        path = world.work / "repo" / "pyproject.toml"
        dependency = f"tattle @ {local.as_uri()}"
        project = '[project]\nname = "app"\nversion = "1"\n'
        path.write_text(f'{project}dependencies = ["{dependency}"]\n')
        return path, "tattle"
    if how == "git URL":
        if shutil.which("git") is None:
            pytest.skip("no git on this machine")
        git = ["git", "-C", os.fspath(local), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git[:3], "init", "-q"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", "the project"], check=True)
        path = world.work / "requirements.txt"
        path.write_text(f"tattle @ git+{local.as_uri()}\n")
        return path, "tattle"
    raise AssertionError(how)


CASES = [
    "sdist in --find-links",
    "-e ./localdir",
    "name @ file:///localdir",
    "pyproject N @ file:///dir",
    "git URL",
]


@pytest.mark.parametrize("how", CASES)
def test_check_requirements_never_runs_the_checked_repositorys_code(
    world: World, sdists: Path, marker: Path, how: str, record_property: pytest.RecordProperty
) -> None:
    """The pre-commit hook's command on a file naming what only a build gives: one line
    naming it (exit 16), the build never run; --allow-build checks it by building."""
    path, named = _requirements(world, sdists, marker, how)
    before = world.digest()
    done = run(world, "check-requirements", "--offline", os.fspath(path))
    _refused(done, marker, named)
    assert_same(before, world.digest())
    record_property("outcome", f"{how}: exit 16 naming it, its build never ran")


@pytest.mark.parametrize("spec", ["./src/tattle", "tattle @ file:{src}", "{src}"])
def test_a_local_folder_on_the_command_line_is_never_built_by_a_dry_run(
    world: World, sdists: Path, marker: Path, spec: str
) -> None:
    src = world.work / "src" / "tattle"
    spec = spec.format(src=src)
    done = run(world, "install", spec, "--dry-run", "--offline")
    _refused(done, marker, spec)


def test_a_requirements_file_given_to_install_is_read_for_what_it_builds(
    world: World, sdists: Path, marker: Path
) -> None:
    """`install -r FILE` and `sync FILE`: uv would read the file itself; cudatx reads it first,
    its -r includes too."""
    tattling_project(world.work / "localdir", "tattle", "1.0", marker)  # from the working folder
    (world.work / "repo").mkdir(exist_ok=True)
    (world.work / "repo" / "more.txt").write_text("-e ./localdir\n")
    (world.work / "repo" / "req.txt").write_text("-r more.txt\n")
    req = os.fspath(world.work / "repo" / "req.txt")
    _refused(run(world, "install", "-r", req, "--dry-run", "--offline"), marker, "-e ./localdir")
    _refused(run(world, "sync", req, "--dry-run", "--offline"), marker, "-e ./localdir")


@pytest.mark.parametrize("how", ["-e ./localdir", "name @ file:///localdir"])
def test_check_requirements_without_an_environment_never_runs_the_checked_code(
    world: World, sdists: Path, marker: Path, how: str, record_property: pytest.RecordProperty
) -> None:
    """The hook in a fresh clone or CI (no --python, no .venv: the check of the file alone,
    which runs `uv pip compile --no-build`, and uv builds an editable even so): named in one
    line (exit 16) before uv is asked, the build never run."""
    from tests.support.pure_world import _how

    path, named = _requirements(world, sdists, marker, how)
    done = cudatx("check-requirements", "--offline", os.fspath(path), **_how(world, None))
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    _refused(done, marker, named, NO_ENV)
    record_property("outcome", f"no environment, {how}: exit 16 naming it, never built")
