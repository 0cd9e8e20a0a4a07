"""Interrupts leave a known state: SIGINT or SIGTERM during an apply rolls it back and says
so; a second one during that rollback leaves the journal for `cudatx rollback` and says
that; and every command, doctor first, reports a transaction left unfinished as an error
whose fix is `cudatx rollback`.

The signal is sent while uv is at work (a `--uv` wrapper that runs the real uv, then marks a
flag and waits): the environment is half changed at that moment. In the small world of
tests/support/pure_world.py (real venv, real uv).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import uv_bin
from tests.support.pure_world import World, run, start, without_pure
from tests.support.txn_world import INTERRUPTED, ROLLED_BACK, assert_same, error

pytestmark = pytest.mark.reliability


def _uv_that_waits(w: World) -> tuple[Path, Path]:
    """A uv that uninstalls for real, then says so (a flag) and waits a minute."""
    # In uv's cache: besides the environment, the one folder a confined uv may write
    flag = w.work / "uv-cache" / "uninstalled"
    script = w.work / "uv-waits"
    script.write_text(
        "#!/bin/sh\n"
        f'{shlex.quote(uv_bin())} "$@" || exit $?\n'
        f'if [ "$1 $2" = "pip uninstall" ]; then touch {shlex.quote(os.fspath(flag))}; '
        "exec sleep 60; fi\n"
    )
    script.chmod(0o755)
    return script, flag


def _state(w: World) -> str:
    [folder] = (w.venv / ".cudatx" / "transactions").iterdir()
    return str(json.loads((folder / "journal.json").read_text())["state"])


def _wait_for(what: object, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (what() if callable(what) else Path(str(what)).exists()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "never got there"
        time.sleep(0.02)


def _interrupted_apply(
    w: World, signum: int, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`remove pure --yes` signalled once uv has uninstalled it (the venv half changed)."""
    uv, flag = _uv_that_waits(w)
    apply = start(w, "remove", "pure", "--yes", "--ignore-running", "--uv", os.fspath(uv), env=env)
    _wait_for(flag, apply)
    assert not (w.site / "pure").exists()  # uv really did uninstall
    apply.send_signal(signum)
    return apply


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"]
)
def test_an_interrupted_apply_rolls_back_and_says_so(
    world: World, signum: int, record_property: pytest.RecordProperty
) -> None:
    before = world.digest()
    started = time.monotonic()
    apply = _interrupted_apply(world, signum)
    _, err = apply.communicate(timeout=60)
    assert time.monotonic() - started < 45, "it waited for uv instead of stopping it"
    name = signal.Signals(signum).name
    assert apply.returncode == ROLLED_BACK, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("cudatx: error: ")]
    assert f"interrupted by {name}; the environment was rolled back" in line, err
    assert _state(world) == "rolled back"
    assert_same(before, world.digest())
    record_property("outcome", f"{name} while uv ran: exit 10, said so, tree identical")


def test_a_second_interrupt_leaves_the_rollback_to_cudatx_rollback_and_says_so(
    world: World, record_property: pytest.RecordProperty
) -> None:
    """The rollback the first SIGINT started is held at its first step (a test-only pause),
    and a second SIGINT arrives there: exit 8 saying `cudatx rollback`; every command then
    says so before anything else, doctor first; `cudatx rollback` completes it."""
    before = world.digest()
    apply = _interrupted_apply(
        world, signal.SIGINT, env={"CUDATX_TEST_PAUSE_AT": "rolling back:60"}
    )
    _wait_for(lambda: _state(world) == "rolling back", apply)
    apply.send_signal(signal.SIGINT)
    _, err = apply.communicate(timeout=60)
    assert apply.returncode == INTERRUPTED, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("cudatx: error: ")]
    assert "then by SIGINT while rolling back" in line and "`cudatx rollback`" in line, line
    assert _state(world) == "rolling back"
    half = world.digest()
    assert half == without_pure(before)  # still as uv left it

    (world.work / "req.txt").write_text("other\n")
    commands = [
        ("doctor",),
        ("why", "libc.so.6"),
        ("remove", "other", "--dry-run"),
        ("install", "other", "--dry-run", "--offline"),
        ("check-requirements", os.fspath(world.work / "req.txt"), "--offline"),
    ]
    for args in commands:
        done = run(world, *args)
        assert done.returncode == INTERRUPTED, (args, done.stderr)
        assert "`cudatx rollback --python" in error(done), (args, done.stderr)
    assert_same(half, world.digest())

    back = run(world, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    assert_same(before, world.digest())
    doctor = run(world, "doctor")
    assert doctor.returncode == 0, doctor.stderr
    record_property("cases", 1 + len(commands))
    record_property(
        "outcome",
        "second SIGINT: exit 8 naming `cudatx rollback`; doctor, why, dry runs, "
        "check-requirements: exit 8 until it is run; then identical tree",
    )
