"""Whose code, all of it (issue 32): as root, a trial, `trace` and `--verify` run nothing of an
environment where another user can change any file the interpreter could import, however
deep (`site-packages/pure/mod.py`, imported by `import pure`), nor a folder a `.pth` adds:
exit 17 naming the file, and the code never runs (the module writes a marker when it does).

Root's own venv of the pure world (real uv), one file of it then given away: to another uid
(nobody's, 65534: no user need be made), or made writable by group (a group that holds
another user) or by every user. Root only; skipped otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import pure_world
from tests.support.cli import cudatx
from tests.support.pure_world import World, build_pure_wheels, install_pure_world
from tests.support.txn_world import error

pytestmark = [
    pytest.mark.reliability,
    pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is root's"),
]
UNSAFE_PATHS = 17  # cudatx/errors.py
NOBODY = 65534


@pytest.fixture
def world(tmp_path: Path) -> World:
    return install_pure_world(build_pure_wheels(tmp_path / "wheels"), tmp_path)


def _tattler(w: World, marker: Path) -> Path:
    """pure/mod.py, which `import pure` runs, made to write `marker` when it runs."""
    mod = w.site / "pure" / "mod.py"
    mod.write_text(f"open({os.fspath(marker)!r}, 'a').write('ran\\n')\nVALUE = 1\n")
    shutil.rmtree(w.site / "pure" / "__pycache__", ignore_errors=True)
    return mod


def _give_away(path: Path, how: str) -> str:
    """Make `path` another user's to change; what cudatx should say of it."""
    if how == "owned by another uid":
        os.chown(path, NOBODY, NOBODY)
        return f"{path} (owned by uid {NOBODY}"
    if how == "writable by group":
        os.chown(path, 0, NOBODY)  # nogroup: user nobody's own group, so not root's alone
        os.chmod(path, 0o664)
        return f"{path} (writable by group {NOBODY}"
    os.chmod(path, 0o646)
    return f"{path} (writable by every user)"


_IMPORT = "python -c 'import pure'"


def run(w: World, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    """As pure_world.run, with --python before the rest (trace's command follows `--`)."""
    how = pure_world._how(w, None)
    done = cudatx(command, "--python", w.venv, *args, **how, timeout=300)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def _commands(marker: Path) -> list[tuple[str, ...]]:
    return [
        ("remove", "other", "--dry-run", "--trial", "--offline"),
        ("doctor", "--trial"),
        ("trace", "--", "python", "-c", "import pure"),
        ("remove", "other", "--yes", "--ignore-running", "--offline", "--verify", _IMPORT),
    ]


@pytest.mark.parametrize(
    "how", ["owned by another uid", "writable by group", "writable by every user"]
)
def test_root_runs_nothing_of_an_environment_with_one_deep_module_another_user_can_change(
    world: World, tmp_path: Path, how: str
) -> None:
    marker = tmp_path / "ran"
    mod = _tattler(world, marker)
    # The control: while every file is root's, the import runs (and writes the marker).
    control = run(world, "trace", "--", "python", "-B", "-c", "import pure")
    assert control.returncode == 0, control.stderr
    assert marker.exists(), "the tattling module did not run: the test proves nothing"
    marker.unlink()

    said = _give_away(mod, how)
    for args in _commands(marker):
        done = run(world, *args)
        assert done.returncode == UNSAFE_PATHS, (args, done.stdout, done.stderr)
        line = error(done)
        assert said in line and "cudatx runs as root" in line, (args, line)
        assert not marker.exists(), (args, "the module ran as root")
    assert (world.site / "other").is_dir()  # the --verify apply changed nothing


def test_a_folder_a_pth_file_adds_is_walked_too(world: World, tmp_path: Path) -> None:
    """A `.pth` line adds a folder outside the environment (an editable install): its
    modules are imported as the environment's own, so they must be root's as well."""
    marker = tmp_path / "ran"
    extra = tmp_path / "editable"
    (extra / "edited").mkdir(parents=True)
    module = extra / "edited" / "__init__.py"
    module.write_text(f"open({os.fspath(marker)!r}, 'a').write('ran\\n')\n")
    (world.site / "edited.pth").write_text(f"{extra}\n")
    subprocess.run(["chown", f"{NOBODY}:{NOBODY}", os.fspath(module)], check=True)
    done = run(world, "trace", "--", "python", "-B", "-c", "import edited")
    assert done.returncode == UNSAFE_PATHS, done.stderr
    assert f"{module} (owned by uid {NOBODY}" in error(done)
    assert not marker.exists()


def test_a_sticky_folder_inside_is_no_excuse_but_above_it_is(world: World) -> None:
    """/tmp's sticky bit lets others create names in it, not rename root's: above the
    environment (tmp_path lies in /tmp) that is harmless; inside the site folder a new
    module or `.pth` is code root would run."""
    from cudatx.discover.target import start_query
    from cudatx.trust import code_writers

    target = start_query(os.fspath(world.venv)).result()
    assert code_writers(target) == []
    pkg = world.site / "pure" / "sub"
    os.chmod(pkg, 0o1777)
    found = code_writers(target)
    assert found and found[0].startswith(f"{pkg} (writable by every user)"), found
