"""One target per command (issue 26): the interpreter is asked about itself once, the rescan
after an apply included; the sys.path its `.pth` files make is read from the files at each
scan; and "Using Python" is said before the scan's progress bar."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cudatx import progress
from cudatx.cli import main
from cudatx.discover.target import Query
from cudatx.environment import Environment
from cudatx.txn import apply as applying
from tests.support.cli import HIDDEN, cudatx
from tests.support.pure_world import World
from tests.support.venvs import venv_python
from tests.support.wheels import build_wheel


def _counting(w: World) -> tuple[Path, Path]:
    """A stand-in for the venv's interpreter that writes a line to a file each time it is
    started as cudatx's query starts it (-I -S -c), then runs the real one; and that file."""
    count = w.work / "queries"
    script = w.work / "python"
    real = shlex.quote(os.fspath(venv_python(w.venv)))
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2 $3" = "-I -S -c" ]; then echo query >> {shlex.quote(os.fspath(count))}; fi\n'
        f'exec {real} "$@"\n'
    )
    script.chmod(0o755)
    return script, count


def _asked(count: Path) -> int:
    asked = len(count.read_text().splitlines()) if count.exists() else 0
    count.unlink(missing_ok=True)
    return asked


def _run(
    w: World, python: Path | None, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = cudatx(
        *args,
        *(("--python", python) if python is not None else ()),
        cwd=w.work,
        hide=(*HIDDEN, "UV_*", "PIP_*", "VIRTUAL_ENV", "CONDA_PREFIX", "PRE_COMMIT"),
        env={"UV_CACHE_DIR": os.fspath(w.work / "uv-cache"), "UV_NO_CONFIG": "1", **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def test_the_interpreter_is_asked_once_per_command_the_rescan_included(world: World) -> None:
    python, count = _counting(world)
    doctor = _run(world, python, "doctor")
    assert doctor.returncode == 0, doctor.stderr
    assert _asked(count) == 1
    dry = _run(world, python, "remove", "other", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert _asked(count) == 1
    # The hook's command, with --python and with the environment found as uv finds it (an
    # activated one here, whose bin/python is the counting stand-in).
    pins = world.work / "requirements.txt"
    pins.write_text("pure==1.0\nother==1.0\n")
    checked = _run(world, python, "check-requirements", os.fspath(pins), "--offline")
    assert checked.returncode == 0, checked.stderr
    assert _asked(count) == 1
    active = world.work / "active"
    (active / "bin").mkdir(parents=True)
    (active / "bin" / "python").symlink_to(python)
    found = _run(
        world,
        None,
        "check-requirements",
        os.fspath(pins),
        "--offline",
        env={"VIRTUAL_ENV": os.fspath(active)},
    )
    assert found.returncode == 0, found.stderr
    assert _asked(count) == 1
    # An apply: plan, snapshot, uv, then the rescan that verifies the result, which reuses
    # the first answer.
    applied = _run(world, python, "remove", "other", "--yes")
    assert applied.returncode == 0, applied.stderr
    assert "Applied as transaction" in applied.stderr, applied.stderr
    assert not (world.site / "other").exists()
    assert _asked(count) == 1
    for args in (
        ("history",),
        ("history", "show"),
        ("trace", "--list"),
        ("rollback", "--dry-run"),
        ("rollback", "--yes"),
    ):
        done = _run(world, python, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert _asked(count) == 1, args
    assert (world.site / "other").is_dir()  # rolled back


def test_the_hook_asks_the_interpreter_once_under_pre_commit(world: World) -> None:
    """pre-commit runs a hook with VIRTUAL_ENV set to its own environment, which the hook
    never checks: the project's .venv is asked, and pre-commit's interpreter is not."""
    python, count = _counting(world)
    hooks = world.work / "pre-commit-env"  # pre-commit's own, counted as the target is
    (hooks / "bin").mkdir(parents=True)
    (hooks / "bin" / "python").symlink_to(python)
    project = world.work / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").symlink_to(python)
    pins = project / "requirements.txt"
    pins.write_text("pure==1.0\nother==1.0\n")
    env = {"PRE_COMMIT": "1", "VIRTUAL_ENV": os.fspath(hooks)}
    for python_args in ((), ("--python", ".venv")):
        done = cudatx(
            "check-requirements",
            "requirements.txt",
            "--offline",
            *python_args,
            cwd=project,
            hide=(*HIDDEN, "UV_*", "PIP_*", "CONDA_PREFIX"),
            env={"UV_CACHE_DIR": os.fspath(world.work / "uv-cache"), "UV_NO_CONFIG": "1", **env},
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, (python_args, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert _asked(count) == 1, python_args


def test_a_pth_file_added_after_the_query_is_on_the_next_sys_path(
    world: World, tmp_path: Path
) -> None:
    python, count = _counting(world)
    query = Query(python, "--python")
    before = query.result()
    extra = tmp_path / "extra"
    extra.mkdir()
    assert os.fspath(extra) not in before.sys_path
    (world.site / "zz-extra.pth").write_text(f"{extra}\nimport os\n")
    after = query.result()  # as the post-apply rescan collects it
    assert after.sys_path == (*before.sys_path, os.fspath(extra))
    assert after.pth_imports == (*before.pth_imports, "zz-extra.pth: import os")
    assert _asked(count) == 1  # the interpreter was not run again
    # What the interpreter's own site module makes of the files: the same sys.path.
    said = subprocess.run(
        [venv_python(world.venv), "-I", "-c", "import json, sys; print(json.dumps(sys.path))"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    started = [p for p in json.loads(said.stdout) if p]
    assert tuple(started) == after.sys_path
    (world.site / "zz-extra.pth").unlink()
    assert query.result().sys_path == before.sys_path


def test_the_rescan_after_an_apply_sees_the_pth_file_it_installed(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real install (uv, offline) of a wheel whose .pth names a folder it ships: the
    rescan that verifies the apply has that folder on its sys.path, with the interpreter
    asked once."""
    wheels = tmp_path / "wheels"
    build_wheel(
        wheels,
        "pathy",
        "1.0",
        {"pathy.pth": b"pathy_dir\n", "pathy_dir/pathy_mod.py": b"X = 1\n"},
    )
    python, count = _counting(world)
    rescans: list[Environment] = []
    real_verify = applying.verify

    def seen(plan: object, change: object, env: Environment, after: Environment) -> None:
        rescans.append(after)
        real_verify(plan, change, env, after)  # type: ignore[arg-type]

    monkeypatch.setattr(applying, "verify", seen)
    monkeypatch.chdir(world.work)
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("UV_CACHE_DIR", os.fspath(world.work / "uv-cache"))
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("CUDATX_CACHE_DIR", os.fspath(world.work / "cache"))
    args = ["install", "pathy==1.0", "--offline", "--find-links", os.fspath(wheels)]
    with pytest.raises(SystemExit) as ended:
        main([*args, "--yes", "--ignore-running", "--python", os.fspath(python)])
    assert ended.value.code == 0
    folder = os.fspath(world.site / "pathy_dir")
    assert os.path.isfile(os.path.join(folder, "pathy_mod.py"))
    (after,) = rescans
    assert folder in after.target.sys_path
    assert _asked(count) == 1


def test_using_python_is_said_before_the_progress_bar(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A bar drawn at once, to a stream that is no terminal here: what a terminal would show.
    monkeypatch.setattr(progress, "wanted", lambda stream, environ, *, disabled: not disabled)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setenv("CUDATX_CACHE_DIR", os.fspath(world.work / "cache"))
    with pytest.raises(SystemExit) as ended:
        main(["doctor", "--no-cache", "--python", os.fspath(world.venv)])
    assert ended.value.code == 0
    err = capsys.readouterr().err
    using = err.find("Using Python ")
    bar = err.find("cudatx: reading")
    assert using >= 0 and bar >= 0, err
    assert using < bar, err
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in err[using:].split("\n")[0]
    # --no-progress reaches the scan through the target: the line, and no bar.
    with pytest.raises(SystemExit) as ended:
        main(["doctor", "--no-cache", "--no-progress", "--python", os.fspath(world.venv)])
    assert ended.value.code == 0
    err = capsys.readouterr().err
    assert "Using Python " in err and "cudatx: reading" not in err, err
