"""Signals end what a trial started (issue 32): SIGINT, SIGTERM or SIGHUP while a trial's
`--trial-cmd` runs leaves no process of its session (the command, its shell, the imports)
and no folder of cudatx's in $TMPDIR (the shadow, a full copy in copy mode, the session's
working folder), within bounded waits.

The pure world (real wheels, real uv); the trial's command writes a file when it starts, so
the signal comes while it runs, and names a token found again in /proc if it survives.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import start_cudatx
from tests.support.pure_world import World, build_pure_wheels, install_pure_world

WAIT_S = 60.0  # for the trial to reach the command, and for cudatx to end after the signal


@pytest.fixture
def world(tmp_path: Path) -> World:
    return install_pure_world(build_pure_wheels(tmp_path / "wheels"), tmp_path)


def _running(token: str) -> list[int]:
    """The pids whose command line holds `token`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry))
    return found


def _until(ok: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ok():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {WAIT_S:g} s: {what}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("signum", "shadow"),
    [
        (signal.SIGTERM, "copy"),
        (signal.SIGHUP, "copy"),
        (signal.SIGINT, "copy"),
        (signal.SIGTERM, "auto"),
    ],
    ids=["SIGTERM-copy", "SIGHUP-copy", "SIGINT-copy", "SIGTERM-auto"],
)
def test_a_signal_during_a_trial_leaves_no_process_and_no_folder(
    world: World, tmp_path: Path, signum: int, shadow: str
) -> None:
    temp = tmp_path / "tmpdir"  # cudatx's $TMPDIR: whatever it leaves there is seen
    temp.mkdir()
    # The command's marker goes in its own $TMPDIR (inside the trial's folder, in `temp`):
    # anywhere else outside the shadow its write fails (EROFS, cudatx.sandbox).
    token = f"cudatx-signal-test-{secrets.token_hex(6)}"
    # The shell of the command, and a child it waits on, and one left in the background.
    sleep = "python -c 'import time; time.sleep(300)'"
    command = f'touch "$TMPDIR/started"; {sleep} {token} & {sleep} {token}b'
    child = start_cudatx(
        "remove", "other", "--dry-run", "--offline", "--python", world.venv,
        "--trial-shadow", shadow, "--trial-cmd", command,
        env={"TMPDIR": os.fspath(temp), "UV_CACHE_DIR": os.fspath(world.work / "uv-cache")},
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _until(
            lambda: any(temp.glob("cudatx-trial-*/tmp/started")) or child.poll() is not None,
            "the trial's command ran",
        )
        assert child.poll() is None, child.communicate()
        _until(lambda: len(_running(token)) >= 3, "the shell and its two children started")
        assert any(temp.iterdir()), "the trial made nothing in $TMPDIR: the test proves nothing"
        child.send_signal(signum)
        _, err = child.communicate(timeout=WAIT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    # The shell's convention, as docs/commands.md says: 128 + the signal (130, 143, 129).
    assert child.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    _until(lambda: not _running(token), f"the trial's command ended: {_running(token)}")
    assert list(temp.iterdir()) == [], list(temp.iterdir())
