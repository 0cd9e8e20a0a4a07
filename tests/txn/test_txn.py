"""Transactions: `cudatx remove` applied through real uv, `cudatx rollback`, `cudatx history`.

Every test builds its own venv with real uv from real wheels holding real compiled libraries
(tests.support), in the cu12/cu13 shared-path trap of design.md section 1:
``nvidia-cudnn-cu13`` installed first, then ``nvidia-cudnn-cu12`` over it, both shipping
``nvidia/cudnn/lib/libcudnn.so.9`` (other bytes; cu12's are on disk), an extension that needs
that library by RPATH, a console script and a data file outside site-packages and a ``.pth``
file (cu12's RECORD lists ``../../../bin/...`` and ``../../../share/...``), and
``nvidia-nccl-cu12`` so that a removal can be cut off half-way through uv's deletions.
cudatx runs as a user runs it (``python -m cudatx`` in a subprocess, stdin not a terminal),
and drives the real uv binary, offline, with the wheels' folder as ``--find-links`` for the
reinstalls of ``--repair``. "The tree digest" is tests.support.digest.tree_digest of the venv
(every path, mode, sha256 and symlink target; ``__pycache__`` and the store left out).

In this sandbox /proc/1/maps cannot be read, even by root, so cudatx (rightly: a process
it cannot look into is never assumed safe) would block every apply with pid 1 as "unknown".
So every apply here passes ``--ignore-running``, except the in-use test, which checks that
refusal itself.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudatx.discover.catalog import load_catalog
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    site_packages,
    symbol_for,
    uv_bin,
    uv_install,
    venv_python,
)
from tests.support.cli import cudatx, start_cudatx
from tests.support.digest import Entry, diff, tree_digest

CU12, CU13, NCCL = "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-nccl-cu12"
CU12_VERSION, CU13_VERSION, NCCL_VERSION = "9.10.2.21", "9.24.0.43", "2.27.3"
CUDNN_DIR = "nvidia/cudnn/lib"
CUDNN = f"{CUDNN_DIR}/libcudnn.so.9"
NCCL_LIB = "nvidia/nccl/lib/libnccl.so.2"
EXT = f"cudnnuser/_ext{ext_suffix()}"
SCRIPT = "cudnn12-info"  # cu12's console script, in <venv>/bin
DATA = "share/cudnn12/NOTICE"  # cu12's data file, under the prefix
PTH = "cudnn12.pth"
HEADER = "nvidia/cudnn/include/cudnn_version.h"
STEPS = [
    "started",
    "snapshotted",
    "uninstalling",
    "uninstalled",
    "reinstalling",
    "reinstalled",
    "verified",
    "committed",
]

# Exit codes (cudatx/errors.py).
REFUSED, USAGE, BUSY, INTERRUPTED, IN_USE, ROLLED_BACK, CONFLICT, STORE = 1, 2, 7, 8, 9, 10, 11, 12

# Variables that would pick another environment, change uv's behaviour or inject a crash
# behind a test's back.
_HIDDEN = {"VIRTUAL_ENV", "CONDA_PREFIX", "CUDATX_DEBUG", "LD_LIBRARY_PATH", "CUDATX_TEST_CRASH_AT"}


# --------------------------------------------------------------------------------------
# Fixture: wheels (built once), one fresh venv per test
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wheels:
    folder: Path  # every wheel: --find-links for the reinstalls
    cu12: Path
    cu13: Path
    first: tuple[Path, ...]  # installed before cu12: cu13, its user, a bystander, NCCL
    cudnn12: bytes  # libcudnn.so.9 as each wheel ships it
    cudnn13: bytes
    uv_cache: Path  # a uv cache private to this module


def _lib(out: Path, build: str) -> Path:
    source = (
        f'const char build_tag[] = "fixture: {build}";\n'
        f"int {symbol_for(out.name)}(void) {{ return (int)sizeof(build_tag); }}\n"
    )
    return compile_lib(out, soname=out.name, source=source, runpath="$ORIGIN")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    root = tmp_path_factory.mktemp("txn-build")
    out = root / "wheels"
    # libcudnn.so.9 and the sub-libraries it dlopens (cudatx/data/runtime.json), as both
    # cuDNN wheels ship them: the same paths, other bytes.
    subs, _ = load_catalog().known_loads("libcudnn.so.9", None)
    libs: dict[str, dict[str, bytes | Path]] = {}
    for tag in ("cu12", "cu13"):
        libs[tag] = {
            f"{CUDNN_DIR}/{name}": _lib(root / tag / name, f"{name} for CUDA {tag[2:]}")
            for name in ["libcudnn.so.9", *subs]
        }
    cu12_files = dict(libs["cu12"])
    cu12_files["cudnn12info/__init__.py"] = b"def main():\n    print('cuDNN 12')\n"
    cu12_files[f"{PTH}"] = b"# cuDNN 12 was here\n"
    data_dir = f"nvidia_cudnn_cu12-{CU12_VERSION}.data/data"
    cu12_files[f"{data_dir}/{DATA}"] = b"cuDNN 12 notice\n"
    cu12_files[f"nvidia_cudnn_cu12-{CU12_VERSION}.dist-info/entry_points.txt"] = (
        f"[console_scripts]\n{SCRIPT} = cudnn12info:main\n".encode()
    )
    cu12 = build_wheel(out, CU12, CU12_VERSION, cu12_files)
    cu13_files = dict(libs["cu13"])
    cu13_files[HEADER] = b"#define CUDNN_MAJOR 9\n"  # only cu13 ships it
    cu13 = build_wheel(out, CU13, CU13_VERSION, cu13_files)
    nccl = build_wheel(
        out, NCCL, NCCL_VERSION, {NCCL_LIB: _lib(root / "nccl" / "libnccl.so.2", "NCCL 2")}
    )
    cudnn13 = root / "cu13" / "libcudnn.so.9"
    ext = compile_extension(
        root / "cudnnuser", "_ext", needed=[cudnn13], rpath="$ORIGIN/../nvidia/cudnn/lib"
    )
    user = build_wheel(out, "cudnnuser", "1.0", {"cudnnuser/__init__.py": b"", EXT: ext})
    bystander = build_wheel(out, "bystander", "1.0", {"bystander/__init__.py": b""})
    cudnn12 = (root / "cu12" / "libcudnn.so.9").read_bytes()
    assert cudnn12 != cudnn13.read_bytes()
    return Wheels(
        folder=out,
        cu12=cu12,
        cu13=cu13,
        first=(cu13, user, bystander, nccl),
        cudnn12=cudnn12,
        cudnn13=cudnn13.read_bytes(),
        uv_cache=root / "uv-cache",
    )


@dataclass(frozen=True)
class Venv:
    path: Path
    site: Path
    work: Path  # a folder for wrappers, flags and as the working folder of every command
    wheels: Wheels

    def digest(self) -> dict[str, Entry]:
        return tree_digest(self.path)

    @property
    def store(self) -> Path:
        return self.path / ".cudatx"

    def dist_info(self, name: str, version: str) -> Path:
        return self.site / f"{name.replace('-', '_')}-{version}.dist-info"


@pytest.fixture
def venv(wheels: Wheels, tmp_path: Path) -> Venv:
    path = make_venv(tmp_path / "venv")
    uv_install(path, list(wheels.first))
    uv_install(path, [wheels.cu12])  # over cu13: cu12's bytes at the shared paths now
    site = site_packages(path)
    assert (site / CUDNN).read_bytes() == wheels.cudnn12
    record = (site / f"nvidia_cudnn_cu12-{CU12_VERSION}.dist-info" / "RECORD").read_text()
    assert f"../../../bin/{SCRIPT}," in record and f"../../../{DATA}," in record
    assert (path / "bin" / SCRIPT).is_file() and (path / DATA).is_file()
    work = tmp_path / "work"
    work.mkdir()
    return Venv(path, site, work, wheels)


# --------------------------------------------------------------------------------------
# Running cudatx as a user does
# --------------------------------------------------------------------------------------


def _env(v: Venv, extra: dict[str, str] | None = None) -> dict[str, str]:
    # uv as cudatx finds it, but offline-safe and with a cache of its own (every other UV_
    # and PIP_ variable hidden).
    env = {
        "UV_CACHE_DIR": os.fspath(v.wheels.uv_cache),
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
    }
    return env | (extra or {})


_HIDE = (*_HIDDEN, "UV_*", "PIP_*")


def run(
    v: Venv, *args: str | os.PathLike[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m cudatx ARGS --python VENV`, stdin not a terminal."""
    done = cudatx(
        *args,
        "--python",
        v.path,
        cwd=v.work,
        hide=_HIDE,
        env=_env(v, env),
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def start(
    v: Venv, *args: str | os.PathLike[str], env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return start_cudatx(
        *args,
        "--python",
        v.path,
        cwd=v.work,
        hide=_HIDE,
        env=_env(v, env),
        stdin=subprocess.DEVNULL,
    )


def error(done: subprocess.CompletedProcess[str]) -> str:
    """The one `cudatx: error:` line."""
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("cudatx: error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def repair_args(v: Venv, *more: str) -> tuple[str, ...]:
    """`remove nvidia-cudnn-cu12 --repair --yes --ignore-running`, offline from the wheels."""
    return (
        "remove",
        CU12,
        *more,
        "--repair",
        "--yes",
        "--ignore-running",
        "--offline",
        "--find-links",
        os.fspath(v.wheels.folder),
    )


def txn_id(done: subprocess.CompletedProcess[str]) -> str:
    found = re.search(r"Applied as transaction (\S+);", done.stderr)
    assert found, done.stderr
    return found.group(1)


def wrapper(v: Venv, name: str, body: str) -> Path:
    """A shell script standing in for uv; REAL is the real uv binary."""
    path = v.work / name
    path.write_text(f"#!/bin/sh\nREAL={shlex.quote(uv_bin())}\n{body}")
    path.chmod(0o755)
    return path


def assert_same(before: dict[str, Entry], after: dict[str, Entry]) -> None:
    assert after == before, "\n".join(diff(before, after))


def journals(v: Venv) -> list[dict[str, object]]:
    folder = v.store / "transactions"
    if not folder.is_dir():
        return []
    return [json.loads((t / "journal.json").read_text()) for t in sorted(folder.iterdir())]


def record_mismatches(v: Venv, name: str, version: str) -> list[str]:
    """Entries of a distribution's RECORD whose file is missing or holds other bytes."""
    info = v.dist_info(name, version)
    bad = []
    with open(info / "RECORD", newline="") as handle:
        for path, hashed, _ in csv.reader(handle):
            if not hashed:
                continue
            algo, _, want = hashed.partition("=")
            target = v.site / path
            try:
                got = hashlib.new(algo, target.read_bytes()).digest()
            except FileNotFoundError:
                bad.append(f"{path}: missing")
                continue
            if base64.urlsafe_b64encode(got).rstrip(b"=").decode() != want:
                bad.append(f"{path}: other bytes")
    return bad


def imports(v: Venv) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [os.fspath(venv_python(v.path)), "-c", "import cudnnuser._ext"],
        cwd=v.work,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: val for k, val in os.environ.items() if k not in _HIDDEN},
    )


def assert_repaired(v: Venv) -> None:
    """The outcome of `remove nvidia-cudnn-cu12 --repair`: cu13 whole again, cu12 gone."""
    assert (v.site / CUDNN).read_bytes() == v.wheels.cudnn13
    assert not v.dist_info(CU12, CU12_VERSION).exists()
    assert not list(v.site.glob("nvidia_cudnn_cu12-*"))
    assert not (v.path / "bin" / SCRIPT).exists()
    assert not (v.path / DATA).exists()
    assert not (v.site / PTH).exists()
    assert record_mismatches(v, CU13, CU13_VERSION) == []
    done = imports(v)
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------------------
# 1. Crash injection at every step boundary
# --------------------------------------------------------------------------------------

# The uninstall is cut off after real uv removed the first distribution only: cudatx dies
# while uv is deleting, with the second still installed.
PARTIAL_UNINSTALL = """\
if [ "$1 $2" = "pip uninstall" ]; then
    "$REAL" "$1" "$2" "$3" "$4" "$5"
    kill -9 $PPID
    exit 1
fi
exec "$REAL" "$@"
"""
# The reinstall's uv writes every file, then cudatx dies before it hears back.
KILL_AFTER_REINSTALL = """\
if [ "$1 $2" = "pip install" ]; then
    "$REAL" "$@"
    kill -9 $PPID
    exit 1
fi
exec "$REAL" "$@"
"""

CRASHES = [
    pytest.param("snapshotted", None, id="after-snapshot"),
    pytest.param(None, PARTIAL_UNINSTALL, id="while-uv-deletes"),
    pytest.param("uninstalled", None, id="after-uninstall"),
    pytest.param(None, KILL_AFTER_REINSTALL, id="while-reinstalling"),
    pytest.param("verified", None, id="before-commit"),
]


@pytest.mark.reliability
@pytest.mark.parametrize(("crash_at", "uv_script"), CRASHES)
def test_sigkill_at_each_step_then_rollback_restores_the_tree(
    venv: Venv, crash_at: str | None, uv_script: str | None
) -> None:
    before = venv.digest()
    args: tuple[str | os.PathLike[str], ...] = repair_args(venv, NCCL)
    env = {}
    if crash_at is not None:
        env["CUDATX_TEST_CRASH_AT"] = crash_at
    if uv_script is not None:
        args = (*args, "--uv", wrapper(venv, "uv-crash", uv_script))
    done = run(venv, *args, env=env)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr)

    # It died where it was meant to.
    [journal] = journals(venv)
    cu12_info = venv.dist_info(CU12, CU12_VERSION).exists()
    nccl_info = venv.dist_info(NCCL, NCCL_VERSION).exists()
    if crash_at is not None:
        assert journal["state"] == crash_at
    if crash_at == "snapshotted":
        assert venv.digest() == before
    elif uv_script is PARTIAL_UNINSTALL:
        assert journal["state"] == "uninstalling"
        assert cu12_info != nccl_info  # one distribution gone, the other still there
    elif uv_script is KILL_AFTER_REINSTALL:
        assert journal["state"] == "reinstalling"
        assert (venv.site / CUDNN).read_bytes() == venv.wheels.cudnn13
    else:
        assert not cu12_info and not nccl_info
    crashed = venv.digest()

    # A new change is refused until the rollback; a dry run still answers.
    refused = run(venv, "remove", "bystander", "--yes", "--ignore-running")
    assert refused.returncode == INTERRUPTED, refused.stderr
    assert "cudatx rollback" in error(refused)
    assert journal["id"] in error(refused)
    assert run(venv, "remove", "bystander", "--dry-run").returncode == 0
    assert venv.digest() == crashed

    done = run(venv, "rollback", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"Transaction {journal['id']}: rolled back." in done.stdout
    assert_same(before, venv.digest())
    assert imports(venv).returncode == 0

    again = run(venv, "rollback", "--yes")
    assert again.returncode == 0, again.stderr
    assert "already rolled back" in again.stdout
    assert_same(before, venv.digest())

    listed = run(venv, "history")
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    assert journal["id"] in line and "rolled back" in line


def test_the_same_command_rerun_after_a_crash_is_refused_as_interrupted(venv: Venv) -> None:
    """The user who sees cudatx killed runs the same command again: before anything else,
    cudatx must say that a transaction was interrupted (not that the SPEC is gone)."""
    args = repair_args(venv)
    crashed = run(venv, *args, env={"CUDATX_TEST_CRASH_AT": "uninstalled"})
    assert crashed.returncode == -signal.SIGKILL
    again = run(venv, *args)
    assert again.returncode == INTERRUPTED, again.stderr
    assert "cudatx rollback" in again.stderr


# --------------------------------------------------------------------------------------
# 2-3. Failures during the apply roll back by themselves
# --------------------------------------------------------------------------------------


def test_failing_verify_command_rolls_back(venv: Venv) -> None:
    before = venv.digest()
    command = "python -c 'raise SystemExit(3)'"
    done = run(venv, *repair_args(venv, "--verify", command))
    assert done.returncode == ROLLED_BACK, done.stderr
    line = error(done)
    assert command in line and "rolled back" in line, line
    assert_same(before, venv.digest())
    [journal] = journals(venv)
    assert journal["state"] == "rolled back"
    assert command in str(journal["error"])


@pytest.mark.reliability
def test_uv_that_cannot_run_changes_nothing(venv: Venv) -> None:
    before = venv.digest()
    done = run(venv, *repair_args(venv, "--uv", "/nonexistent/uv"))
    assert done.returncode != 0, done.stderr
    assert "/nonexistent/uv" in error(done)
    assert_same(before, venv.digest())
    # Nothing is left for a rollback to complete.
    assert all(j["state"] == "rolled back" for j in journals(venv))


def test_uv_that_cannot_run_is_found_before_the_transaction_begins(venv: Venv) -> None:
    done = run(venv, *repair_args(venv, "--uv", "/nonexistent/uv"))
    assert done.returncode not in (0, ROLLED_BACK), done.stderr
    assert "/nonexistent/uv" in error(done) and "rolled back" not in error(done)
    assert journals(venv) == []


UV_FAILS = """\
if [ "$1 $2" = "pip uninstall" ]; then
    {real}
    echo "warning: a line before the error" >&2
    echo "error: Failed to uninstall: Input/output error (os error 5)" >&2
    exit 1
fi
exec "$REAL" "$@"
"""


@pytest.mark.parametrize(
    "real",
    [
        pytest.param(":", id="before-deleting"),
        pytest.param('"$REAL" "$@" >/dev/null 2>&1', id="after-deleting"),
    ],
)
@pytest.mark.reliability
def test_uv_failing_during_uninstall_rolls_back_with_its_last_line(venv: Venv, real: str) -> None:
    before = venv.digest()
    uv = wrapper(venv, "uv-fails", UV_FAILS.format(real=real))
    done = run(venv, *repair_args(venv, "--uv", os.fspath(uv)))
    assert done.returncode == ROLLED_BACK, done.stderr
    line = error(done)
    assert "error: Failed to uninstall: Input/output error (os error 5)" in line, line
    assert "rolled back" in line
    assert_same(before, venv.digest())


# --------------------------------------------------------------------------------------
# 4, 10. A committed apply, its history, and its rollback
# --------------------------------------------------------------------------------------


def test_repair_commits_then_rollback_restores(venv: Venv) -> None:
    before = venv.digest()
    done = run(venv, *repair_args(venv))
    assert done.returncode == 0, done.stderr
    txn = txn_id(done)
    assert_repaired(venv)
    doctor = run(venv, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr

    # history: one line per transaction, with id, state and command
    listed = run(venv, "history")
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    assert line.startswith(txn)
    assert " committed " in line
    assert line.endswith(shlex.join(repair_args(venv)) + f" --python {venv.path}")
    shown = run(venv, "history", "show", txn)
    assert shown.returncode == 0, shown.stderr
    journal = json.loads(shown.stdout)
    assert journal["id"] == txn and journal["state"] == "committed"
    assert [s["state"] for s in journal["steps"]] == STEPS
    assert journal["remove"] == [{"name": CU12, "version": CU12_VERSION}]
    assert journal["reinstall"] == [{"name": CU13, "version": CU13_VERSION}]
    assert journal["prefix"] == os.fspath(venv.path)
    missing = run(venv, "history", "show", "20000101T000000.000000Z-1")
    assert missing.returncode == USAGE, missing.stderr

    done = run(venv, "rollback", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Transaction {txn}: rolled back.\n"
    assert_same(before, venv.digest())
    assert (venv.site / CUDNN).read_bytes() == venv.wheels.cudnn12
    assert "rolled back" in run(venv, "history").stdout


def test_prune_frees_old_snapshots_never_the_latest(venv: Venv) -> None:
    first = run(venv, *repair_args(venv))
    assert first.returncode == 0, first.stderr
    assert run(venv, "rollback", "--yes").returncode == 0
    second = run(venv, *repair_args(venv))
    assert second.returncode == 0, second.stderr
    old, new = txn_id(first), txn_id(second)
    store = venv.path / ".cudatx" / "transactions"
    pruned = run(venv, "history", "prune", "--keep", "1")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout == "Freed the snapshots of 1 transactions.\n"
    assert not (store / old / "snapshot").exists()
    assert (store / new / "snapshot").is_dir()
    assert len(run(venv, "history").stdout.splitlines()) == 2  # journals stay
    gone = run(venv, "rollback", old, "--yes")
    assert gone.returncode == 0 and "already rolled back" in gone.stdout  # nothing to undo
    assert run(venv, "rollback", "--yes").returncode == 0  # the latest still rolls back


# --------------------------------------------------------------------------------------
# 5-6. Refusals before anything changes
# --------------------------------------------------------------------------------------


def test_unsafe_plan_is_refused_without_force(venv: Venv) -> None:
    before = venv.digest()
    done = run(venv, "remove", CU12, "--yes", "--ignore-running")
    assert done.returncode == REFUSED, done.stderr
    assert "refusing" in error(done)
    assert "Would break:" in done.stdout
    assert_same(before, venv.digest())
    assert journals(venv) == []


def test_forced_unsafe_plan_applies_and_rollback_restores(venv: Venv) -> None:
    before = venv.digest()
    done = run(venv, "remove", CU12, "--yes", "--force", "--ignore-running")
    assert done.returncode == 0, done.stderr
    assert not venv.dist_info(CU12, CU12_VERSION).exists()
    assert not (venv.site / CUDNN).exists()
    broken = imports(venv)
    assert broken.returncode != 0 and "libcudnn.so.9" in broken.stderr, broken.stderr
    done = run(venv, "rollback", "--yes")
    assert done.returncode == 0, done.stderr
    assert_same(before, venv.digest())
    assert imports(venv).returncode == 0


def test_not_a_terminal_without_yes_changes_nothing(venv: Venv) -> None:
    before = venv.digest()
    args = [a for a in repair_args(venv) if a != "--yes"]
    done = run(venv, *args)
    assert done.returncode == USAGE, done.stderr
    assert "not a terminal" in error(done) and "--yes" in error(done)
    assert_same(before, venv.digest())
    assert journals(venv) == []


# --------------------------------------------------------------------------------------
# 7. One transaction per environment at a time
# --------------------------------------------------------------------------------------


@contextmanager
def holding_the_lock(v: Venv) -> Iterator[subprocess.Popen[str]]:
    """An apply (`remove nvidia-cudnn-cu12 --repair`) whose uv waits (up to 30 s) until the
    block ends: it holds the environment's lock all that time. It must commit."""
    gate = v.work / "go"
    slow = wrapper(
        v,
        "uv-slow",
        f"i=0\nwhile [ ! -e {shlex.quote(os.fspath(gate))} ] && [ $i -lt 600 ]; do\n"
        '    sleep 0.05; i=$((i+1))\ndone\nexec "$REAL" "$@"\n',
    )
    first = start(v, *repair_args(v, "--uv", os.fspath(slow)))
    try:
        lock = v.store / "lock"
        deadline = time.monotonic() + 60
        while not (lock.is_file() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first apply never took the lock"
            time.sleep(0.02)
        yield first
        gate.touch()
        _, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
    finally:
        gate.touch()
        if first.poll() is None:
            first.kill()
            first.wait()


@pytest.mark.reliability
def test_two_applies_at_once_exactly_one_proceeds(venv: Venv) -> None:
    before = venv.digest()
    with holding_the_lock(venv) as first:
        second = run(venv, *repair_args(venv))
    assert second.returncode == BUSY, second.stderr
    assert f"pid {first.pid}" in error(second)
    assert_repaired(venv)
    [journal] = journals(venv)
    assert journal["state"] == "committed"
    done = run(venv, "rollback", "--yes")
    assert done.returncode == 0, done.stderr
    assert_same(before, venv.digest())


# --------------------------------------------------------------------------------------
# 8. A process that maps a file to be deleted blocks the apply
# --------------------------------------------------------------------------------------

HOLD = "import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); print('ready', flush=True); "
HOLD += "time.sleep(60)"


@contextmanager
def holding(lib: Path) -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, os.fspath(lib)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "ready\n", (line, proc.stderr.read() if proc.stderr else "")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.reliability
def test_a_process_mapping_the_library_blocks_the_apply(venv: Venv) -> None:
    before = venv.digest()
    with holding(venv.site / CUDNN) as pid:
        done = run(venv, "remove", CU12, "--yes", "--force")
    assert done.returncode == IN_USE, done.stderr
    line = error(done)
    assert f"pid {pid} (" in line, line
    assert "libcudnn.so.9" in line and "--ignore-running" in line
    assert_same(before, venv.digest())
    assert journals(venv) == []


# --------------------------------------------------------------------------------------
# 9, 11. Rollback refuses what it cannot do faithfully
# --------------------------------------------------------------------------------------


def test_rollback_refuses_a_changed_file_unless_forced(venv: Venv) -> None:
    before = venv.digest()
    done = run(venv, *repair_args(venv))
    assert done.returncode == 0, done.stderr
    changed = venv.site / CUDNN
    mode = changed.stat().st_mode
    changed.unlink()  # a new inode: uv may have hard-linked the old one from its cache
    changed.write_bytes(b"\x7fELF rebuilt by the user")
    changed.chmod(mode)
    edited = venv.digest()

    refused = run(venv, "rollback", "--yes")
    assert refused.returncode == CONFLICT, refused.stderr
    assert os.fspath(changed) in error(refused) and "--force" in error(refused)
    assert_same(edited, venv.digest())

    forced = run(venv, "rollback", "--yes", "--force")
    assert forced.returncode == 0, forced.stderr
    assert_same(before, venv.digest())


def _saved(v: Venv, rel: str) -> Path:
    """The snapshot's saved copy of `rel` (relative to site-packages)."""
    [txn] = (v.store / "transactions").iterdir()
    snapshot = txn / "snapshot"
    manifest = json.loads((snapshot / "manifest.json").read_text())
    want = os.fspath(v.site / rel)
    [entry] = [f for f in manifest["files"] if f["path"] == want]
    return snapshot / "files" / entry["stored"]


@pytest.mark.reliability
def test_rollback_refuses_a_tampered_snapshot(venv: Venv) -> None:
    done = run(venv, *repair_args(venv))
    assert done.returncode == 0, done.stderr
    saved = _saved(venv, CUDNN)
    assert saved.stat().st_nlink == 1  # uv replaced the live file: the store's is alone
    with open(saved, "r+b") as handle:
        handle.seek(100)
        handle.write(b"tampered")
    committed = venv.digest()

    refused = run(venv, "rollback", "--yes")
    assert refused.returncode == STORE, refused.stderr
    assert os.fspath(venv.site / CUDNN) in error(refused)
    assert_same(committed, venv.digest())
    assert journals(venv)[0]["state"] != "rolled back"


@pytest.mark.reliability
def test_a_refused_rollback_removes_nothing_either(venv: Venv) -> None:
    # cu13 lost a file of its own before the change (a hollow co-owner, what --repair is
    # for): the reinstall adds it back, so rolling back means deleting it again, but only
    # once the snapshot is known to be sound.
    (venv.site / HEADER).unlink()
    done = run(venv, *repair_args(venv))
    assert done.returncode == 0, done.stderr
    assert (venv.site / HEADER).is_file()
    with open(_saved(venv, CUDNN), "r+b") as handle:
        handle.seek(100)
        handle.write(b"tampered")
    committed = venv.digest()

    refused = run(venv, "rollback", "--yes")
    assert refused.returncode == STORE, refused.stderr
    assert_same(committed, venv.digest())


def test_safe_removal_beside_an_already_hollow_distribution_commits(venv: Venv) -> None:
    before = venv.digest()
    done = run(venv, "remove", "bystander", "--yes", "--ignore-running")
    assert done.returncode == 0, done.stderr
    assert not (venv.site / "bystander").exists()
    done = run(venv, "rollback", "--yes")
    assert done.returncode == 0, done.stderr
    assert_same(before, venv.digest())
