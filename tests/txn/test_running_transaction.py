"""While a transaction holds an environment (issue 34 item 5): a second change is Busy at
once, before it scans and plans, and doctor says a transaction is running. The holder is a
real cudatx apply held inside its uv step, or a real process holding the store's flock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.txn_world import (
    BUSY,
    NCCL,
    Venv,
    error,
    journals,
    run,
    start,
    wrapper,
)

# uv held in its uninstall until the test says go: the apply holds the lock meanwhile.
HELD = 'touch "$AT"\nwhile [ ! -e "$GO" ]; do sleep 0.05; done\nexec "$REAL" "$@"\n'
# uv that leaves a line in a log for every call, the planning's own dry runs included.
LOGGED = 'echo "$*" >> "$LOG"\nexec "$REAL" "$@"\n'


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"never reached {path}"
        time.sleep(0.02)


@contextmanager
def _held_apply(venv: Venv) -> Iterator[subprocess.Popen[str]]:
    at, go = venv.work / "uv-started", venv.work / "go"
    uv = wrapper(venv, "uv-held", HELD)
    env = {"AT": os.fspath(at), "GO": os.fspath(go)}
    apply = start(venv, "remove", NCCL, "--yes", "--ignore-running", "--uv", uv, env=env)
    try:
        _wait_for(at, apply)
        yield apply
    finally:
        go.touch()
        apply.wait(timeout=120)
    _, err = apply.communicate()
    assert apply.returncode == 0, err


def test_a_second_change_is_busy_before_it_scans(venv: Venv) -> None:
    log = venv.work / "uv.log"
    logged = wrapper(venv, "uv-logged", LOGGED)
    cu13 = os.fspath(venv.wheels.cu13)
    # A scan writes the scan cache: a fresh one per command shows whether it scanned.
    caches = [venv.work / f"scan-cache-{n}" for n in range(3)]
    with _held_apply(venv) as apply:
        for args, cache in (
            (("install", cu13, "--offline", "--find-links", os.fspath(venv.wheels.folder)), 0),
            (("remove", "bystander"), 1),
        ):
            env = {"LOG": os.fspath(log), "CUDATX_CACHE_DIR": os.fspath(caches[cache])}
            done = run(venv, *args, "--yes", "--uv", logged, env=env)
            assert done.returncode == BUSY, done.stderr
            assert f"(pid {apply.pid})" in error(done)
            # Nothing scanned, no plan printed, and uv never asked (an install's plan
            # resolves with uv's dry run first): the refusal came before all of them.
            assert not caches[cache].exists()
            assert done.stdout == ""
            assert not log.exists(), log.read_text()
        # A dry run only reads: it scans and plans, and says the files may be mid-change.
        env = {"CUDATX_CACHE_DIR": os.fspath(caches[2])}
        dry = run(venv, "remove", "bystander", "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        assert "is running" in dry.stderr and dry.stdout.startswith("Safe:")
        assert caches[2].is_dir()
    assert [j["state"] for j in journals(venv)] == ["committed"]


def test_doctor_says_a_transaction_is_running(venv: Venv) -> None:
    quiet = run(venv, "doctor")
    with _held_apply(venv) as apply:
        during = run(venv, "doctor")
    [txn] = journals(venv)
    [warned] = [ln for ln in during.stderr.splitlines() if "warning:" in ln]
    # Its state is the step it was held at (uv is first asked for its cache folder).
    said, state = warned.rsplit("; ", 1)
    assert said == (
        f"cudatx: warning: transaction {txn['id']} is running (pid {apply.pid}: {txn['command']}"
    ), during.stderr
    assert state.endswith(
        "): the environment's files may be mid-change, so what is read may change"
    ), warned
    assert during.returncode == quiet.returncode, during.stderr
    assert not [ln for ln in quiet.stderr.splitlines() if "warning:" in ln], quiet.stderr


HOLD_LOCK = """
import sys, time
from cudatx.txn.store import Store
with Store(sys.argv[1]).lock():
    print("held", flush=True)
    time.sleep(60)
"""


def test_doctor_names_a_holder_that_recorded_nothing_yet(venv: Venv) -> None:
    # The lock is taken before the journal is written: a transaction just started.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, os.fspath(venv.path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        during = run(venv, "doctor")
        busy = run(venv, "remove", "bystander", "--yes")
    finally:
        holder.kill()
        holder.wait()
    said = f"a transaction is running (pid {holder.pid}; nothing recorded yet)"
    assert said in during.stderr, during.stderr
    assert busy.returncode == BUSY and busy.stdout == "", busy.stderr
    assert f"(pid {holder.pid})" in error(busy)
