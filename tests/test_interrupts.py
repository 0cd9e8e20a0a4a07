"""cudatx.interrupts: SIGTERM and SIGHUP end cudatx as SIGINT does, every cleanup run, the
process group of what it started killed, and the shell's exit code (128 + the signal).

Each case is a real child Python that installs the handlers as cudatx's entry point does,
makes a temporary folder, starts a grandchild in a group of its own, and is sent the signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

_CHILD = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from cudatx import interrupts

interrupts.install()
try:
    with interrupts.temporary_folder("cudatx-fresh-") as folder:
        sleeper = [sys.executable, "-c", "import time; time.sleep(300)", sys.argv[2]]
        print(folder, flush=True)
        interrupts.run_in_group(sleeper)
except KeyboardInterrupt as exc:
    sys.exit(interrupts.exit_code(exc))
except interrupts.Terminated as exc:
    sys.exit(interrupts.exit_code(exc))
"""
ROOT = Path(__file__).resolve().parent.parent


def _pids(token: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if token.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    out.append(int(entry))
            except OSError:
                pass
    return out


def _wait(ok: object, what: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not ok():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_runs_every_cleanup_kills_the_group_and_exits_128_plus_it(
    tmp_path: Path, signum: int
) -> None:
    token = f"cudatx-interrupts-{os.getpid()}-{signum}"
    env = {**os.environ, "TMPDIR": os.fspath(tmp_path)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, os.fspath(ROOT), token],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        folder = Path(child.stdout.readline().strip())
        assert folder.is_dir() and folder.parent == tmp_path
        _wait(lambda: len(_pids(token)) == 2, "the grandchild started")  # the child's argv too
        child.send_signal(signum)
        child.wait(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 128 + signum
    assert not folder.exists()
    _wait(lambda: not _pids(token), "the grandchild's group was killed")


def test_an_ignored_sighup_stays_ignored() -> None:
    """nohup(1) starts a command with SIGHUP ignored: cudatx then survives its terminal."""
    code = (
        f"import sys, signal; sys.path.insert(0, {os.fspath(ROOT)!r}); "
        "from cudatx import interrupts; interrupts.install(); "
        "assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN; "
        "assert signal.getsignal(signal.SIGTERM) is interrupts._raise"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_transactions_block_names_every_signal_and_leaves_an_ignored_one_ignored() -> None:
    """every_one_raised (an apply's): SIGINT raises Terminated naming it, not
    KeyboardInterrupt; an ignored SIGHUP (nohup) does nothing, so a transaction survives
    the terminal closing; the handlers are back as they were after the block."""
    code = (
        f"import os, sys, signal; sys.path.insert(0, {os.fspath(ROOT)!r}); "
        "from cudatx import interrupts\n"
        "with interrupts.every_one_raised():\n"
        "    os.kill(os.getpid(), signal.SIGHUP)\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    except interrupts.Terminated as exc:\n"
        "        print(exc.name)\n"
        "assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SIGINT"]
