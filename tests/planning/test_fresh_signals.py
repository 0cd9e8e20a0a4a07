"""A signal during `check-requirements --fresh` removes the empty environment it made.

The check makes a `cudatx-fresh-*` folder in $TMPDIR (an empty environment of the target
interpreter) and then waits on uv and the index. SIGTERM and SIGHUP used to kill cudatx
where it stood and leave the folder behind (issue 32, item 3); they end it as ^C does now:
the folder is removed and the exit status is 128 + the signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import start_cudatx
from tests.support.hostile_index import Behaviour, serve_hostile
from tests.support.wheels import build_wheel

WAIT_S = 60.0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_a_fresh_check_leaves_no_folder(tmp_path: Path, signum: int) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "alpha", "1.0", {"alpha/blob.bin": os.urandom(1 << 20)})
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("alpha\n")
    temp = tmp_path / "tmpdir"
    temp.mkdir()
    # The index trickles the wheel to uv too: the check waits there, its folder made.
    with serve_hostile(
        wheels, Behaviour.TRICKLE_BODY, to=("Python-urllib", "uv"), sizes=True, until=WAIT_S
    ) as (index, _):
        child = start_cudatx(
            "check-requirements", "requirements.txt", "--fresh", "--index-url", index,
            "--no-cache",
            cwd=project,
            env={"TMPDIR": os.fspath(temp), "UV_CACHE_DIR": os.fspath(tmp_path / "uv-cache")},
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + WAIT_S
            while not list(temp.glob("cudatx-fresh-*")):
                assert child.poll() is None, child.communicate()
                assert time.monotonic() < deadline, "the fresh check made no folder"
                time.sleep(0.05)
            time.sleep(1.0)  # into uv's wait on the index
            assert child.poll() is None, child.communicate()
            child.send_signal(signum)
            _, err = child.communicate(timeout=WAIT_S)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
    assert child.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    assert list(temp.glob("cudatx-fresh-*")) == [], list(temp.iterdir())
