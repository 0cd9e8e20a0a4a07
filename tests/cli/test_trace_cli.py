"""`cudatx trace` at the command line: the command runs in the environment with its own
output and exit code, and bad input is one line with a documented exit code that leaves the
environment as it was (no store made, no record written, the command not run)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.support import make_venv
from tests.support.cli import cudatx
from tests.support.digest import tree_digest


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("trace") / "venv")


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    return make_venv(tmp_path / "venv")


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("cudatx: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_the_command_runs_in_the_environment_and_its_exit_code_is_cudatx_s(
    fresh: Path, tmp_path: Path
) -> None:
    code = "import os, sys; print(sys.prefix, os.environ['VIRTUAL_ENV']); sys.exit(7)"
    done = cudatx("trace", "--python", fresh, "--", "python", "-c", code, cwd=tmp_path)
    # `python` is the environment's (its bin/ first on PATH), VIRTUAL_ENV names it.
    assert done.stdout.split() == [str(fresh), str(fresh)]
    assert done.returncode == 7, done.stderr
    listed = json.loads(cudatx("trace", "--list", "--json", "--python", fresh).stdout)
    assert [t["exit_code"] for t in listed["traces"]] == [7]
    # Killed by a signal: 128+N, as a shell says it.
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    done = cudatx("trace", "--python", fresh, "--", "python", "-c", killed, cwd=tmp_path)
    assert done.returncode == 128 + 15, done.stderr
    # Without `--`, what follows the command is the command's (its -c is not cudatx's).
    done = cudatx("trace", "--python", fresh, "python", "-c", "print('own')", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "own\n", done.stderr


def test_the_store_is_made_private(fresh: Path, tmp_path: Path) -> None:
    assert cudatx("trace", "-p", fresh, "--", "python", "-c", "0", cwd=tmp_path).returncode == 0
    for folder in (fresh / ".cudatx", fresh / ".cudatx" / "traces"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    (record,) = (fresh / ".cudatx" / "traces").iterdir()
    assert stat.S_IMODE(record.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        ((), 2, "trace needs a command"),
        (("--",), 2, "trace needs a command"),
        (("--", "cudatx-no-such-command"), 127, "cudatx-no-such-command: command not found"),
        (("--", "./no-such-file"), 127, "./no-such-file: no such file"),
        (("--", "./not-executable"), 126, "./not-executable: not executable"),
        (("--list", "--clear"), 2, "do not go together"),
        (("--json",), 2, "--json goes with --list"),
        (("--list", "python"), 2, "--list takes no command"),
        (("--clear", "20260101T000000.000000Z-1"), 2, "no trace record 20260101T000000"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    venv: Path, tmp_path: Path, args: tuple[str, ...], code: int, said: str
) -> None:
    (tmp_path / "not-executable").write_text("#!/bin/sh\necho ran\n")
    before = tree_digest(venv)
    done = cudatx("trace", "--python", venv, *args, cwd=tmp_path)
    assert done.returncode == code, done.stderr
    assert said in _one_line(done.stderr)
    assert done.stdout == ""
    assert tree_digest(venv) == before
    assert not (venv / ".cudatx").exists()


def test_no_environment_is_exit_3(tmp_path: Path) -> None:
    done = cudatx("trace", "--", "python", "-c", "print('ran')", cwd=tmp_path)
    assert done.returncode == 3
    assert "No virtual environment found" in _one_line(done.stderr)
    assert done.stdout == ""


@pytest.mark.parametrize("planted", ["store", "traces"])
def test_a_store_cudatx_did_not_make_is_refused_before_the_command_runs(
    fresh: Path, tmp_path: Path, planted: str
) -> None:
    store = fresh / ".cudatx"
    if planted == "store":
        store.mkdir(mode=0o755)  # as a wheel's data files would make it
        os.chmod(store, 0o755)
    else:
        store.mkdir(mode=0o700)
        (store / "traces").mkdir()
        os.chmod(store / "traces", 0o777)
    before = tree_digest(fresh, exclude=("__pycache__",))
    done = cudatx("trace", "-p", fresh, "--", "python", "-c", "print('ran')", cwd=tmp_path)
    assert done.returncode == 12
    assert "not part of a store cudatx made" in _one_line(done.stderr)
    assert done.stdout == ""  # the command never ran
    assert tree_digest(fresh, exclude=("__pycache__",)) == before
    listed = cudatx("trace", "--list", "-p", fresh, cwd=tmp_path)
    assert listed.returncode == 12 and "not part of a store" in _one_line(listed.stderr)


def test_a_planted_record_is_not_read(fresh: Path, tmp_path: Path) -> None:
    """A record cudatx did not write (here: readable by others) is refused by --list (exit
    12), and a scan goes on without it, saying so in doctor."""
    assert cudatx("trace", "-p", fresh, "--", "python", "-c", "0", cwd=tmp_path).returncode == 0
    (record,) = (fresh / ".cudatx" / "traces").iterdir()
    os.chmod(record, 0o644)
    listed = cudatx("trace", "--list", "-p", fresh, cwd=tmp_path)
    assert listed.returncode == 12 and "not private to its owner" in _one_line(listed.stderr)
    doctor = json.loads(cudatx("doctor", "--json", "-p", fresh, cwd=tmp_path).stdout)
    (problem,) = doctor["problems"]
    assert problem["code"] == "untrusted-trace-record" and problem["severity"] == "warning"
    assert not any("traced run" in n for n in doctor["notes"])


def test_list_and_clear(fresh: Path, tmp_path: Path) -> None:
    assert "No traced runs recorded" in cudatx("trace", "--list", "-p", fresh).stdout
    for n in (1, 2):
        done = cudatx("trace", "-p", fresh, "--", "python", "-c", str(n), cwd=tmp_path)
        assert done.returncode == 0
    listed = json.loads(cudatx("trace", "--list", "--json", "-p", fresh).stdout)
    first, second = (t["id"] for t in listed["traces"])
    done = cudatx("trace", "--clear", "-p", fresh, first)
    assert done.returncode == 0 and done.stdout == "Removed 1 trace record.\n"
    listed = json.loads(cudatx("trace", "--list", "--json", "-p", fresh).stdout)
    assert [t["id"] for t in listed["traces"]] == [second]
    assert cudatx("trace", "--clear", "-p", fresh).stdout == "Removed 1 trace record.\n"
