"""Transactions: `cudatx remove` applied through real uv, `cudatx rollback`, `cudatx history`.

Every test builds its own venv with real uv from real wheels holding real compiled libraries
(tests/support/txn_world.py), in the cu12/cu13 shared-path trap of design.md section 1:
``nvidia-cudnn-cu13`` installed first, then ``nvidia-cudnn-cu12`` over it, both shipping
``nvidia/cudnn/lib/libcudnn.so.9`` (other bytes; cu12's are on disk), an extension that needs
that library by RPATH, a console script and a data file outside site-packages and a ``.pth``
file (cu12's RECORD lists ``../../../bin/...`` and ``../../../share/...``), and
``nvidia-nccl-cu12`` so that a removal can be cut off half-way through uv's deletions.
cudatx runs as a user runs it (``python -m cudatx`` in a subprocess, stdin not a terminal),
and drives the real uv binary, offline, with the wheels' folder as ``--find-links`` for the
reinstalls of ``--repair``. "The tree digest" is tests.support.digest.tree_digest of the venv
(every path, mode, sha256 and symlink target; ``__pycache__`` and the store left out).

In this sandbox /proc/1/maps cannot be read, even by root: cudatx names such a process in a
warning and goes on (``--strict-running`` makes it block). Most applies here pass
``--ignore-running`` all the same, to scan no /proc; the in-use tests check both ways.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.txn_world import (
    BUSY,
    CONFLICT,
    CU12,
    CU12_VERSION,
    CU13,
    CU13_VERSION,
    CUDNN,
    HEADER,
    IN_USE,
    INTERRUPTED,
    NCCL,
    NCCL_LIB,
    NCCL_VERSION,
    REFUSED,
    ROLLED_BACK,
    STEPS,
    STORE,
    USAGE,
    Venv,
    assert_repaired,
    assert_same,
    error,
    holding_the_lock,
    imports,
    journals,
    repair_args,
    run,
    txn_id,
    wrapper,
)

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
        # The wrapper kills its parent, which is cudatx only where uv runs unconfined
        # (confined, it is the sandbox's init, which a signal from inside cannot end)
        env["CUDATX_SANDBOX"] = "off"
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

    # A new change is refused until the rollback, and so is a dry run: what it would say of
    # a half-changed environment is wrong (issue 23).
    for more in ("--yes", "--dry-run"):
        refused = run(venv, "remove", "bystander", more, "--ignore-running")
        assert refused.returncode == INTERRUPTED, refused.stderr
        assert "cudatx rollback" in error(refused)
        assert journal["id"] in error(refused)
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
    listed_json = json.loads(run(venv, "history", "--json").stdout)
    [entry] = listed_json["transactions"]
    assert (entry["id"], entry["state"], entry["changes"]) == (txn, "committed", 2)
    shown = run(venv, "history", "show", txn)
    assert shown.returncode == 0, shown.stderr
    # For a person: one field a line, what it changed as uv says it, how to undo it.
    text = shown.stdout.splitlines()
    assert text[0] == f"Transaction {txn}: committed"
    assert f" - {CU12}=={CU12_VERSION}" in text and f" ~ {CU13}=={CU13_VERSION}" in text
    assert f"Undo with: cudatx rollback {txn} --python {venv.path}" in text
    shown = run(venv, "history", "show", txn, "--json")
    assert shown.returncode == 0, shown.stderr
    journal = json.loads(shown.stdout)
    assert journal["id"] == txn and journal["state"] == "committed"
    assert [s["state"] for s in journal["steps"]] == STEPS
    assert journal["remove"] == [{"name": CU12, "version": CU12_VERSION}]
    assert journal["reinstall"] == [{"name": CU13, "version": CU13_VERSION}]
    assert journal["prefix"] == os.fspath(venv.path)
    missing = run(venv, "history", "show", "20000101T000000.000000Z-1")
    assert missing.returncode == USAGE, missing.stderr
    # No ID: the latest, the one `rollback` takes, in text and JSON alike.
    assert run(venv, "history", "show").stdout == run(venv, "history", "show", txn).stdout
    assert json.loads(run(venv, "history", "show", "--json").stdout)["id"] == txn

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
    assert pruned.stdout == "Freed the snapshot of 1 transaction.\n"
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
    assert "libcudnn.so.9" in line and "stop them, or pass --ignore-running" in line
    assert_same(before, venv.digest())
    assert journals(venv) == []


def _unreadable_pids() -> list[int]:
    """Processes whose maps this user cannot read (pid 1 here, even for root)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/maps", "rb") as f:
                    f.read(1)
            except PermissionError:
                pids.append(int(name))
            except OSError:
                pass
    return sorted(pids)


@pytest.mark.reliability
def test_a_process_that_cannot_be_checked_is_named_and_blocks_only_when_strict(
    venv: Venv,
) -> None:
    unreadable = _unreadable_pids()
    if not unreadable:
        pytest.skip("every process's maps can be read here")
    before = venv.digest()
    strict = run(venv, "remove", NCCL, "--yes", "--strict-running")
    assert strict.returncode == IN_USE, strict.stderr
    line = error(strict)
    assert "could not check" in line and f"pid {unreadable[0]} (" in line, line
    assert "--strict-running" in line
    assert_same(before, venv.digest())
    assert journals(venv) == []

    # Neither flag: a warning that counts and names them, and the change is made.
    done = run(venv, "remove", NCCL, "--yes")
    assert done.returncode == 0, done.stderr
    [warning] = [ln for ln in done.stderr.splitlines() if ln.startswith("cudatx: warning: ")]
    assert re.search(r"could not check \d+ process(es)?: pid \d+ \(", warning), warning
    assert f"pid {unreadable[0]} (" in warning
    assert not (venv.site / NCCL_LIB).exists()


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
