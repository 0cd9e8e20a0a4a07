"""uv dies with cudatx, and the lock covers the whole change.

kill -9 of cudatx at random instants while a slow uv uninstalls and reinstalls, and of the
rollback after it: the tree comes back identical and no uv of the transaction is left
running. Two applies launched together: exactly one proceeds; a plan made before another
change finished is refused under the lock.

``CUDATX_KILL_TRIALS`` sets how many random trials run (a fixed handful by default; the
issue's long run is 50). Every venv is real, every uv is the real one behind a shell wrapper
that makes it slow.
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import uv_bin
from tests.support.cli import start_cudatx
from tests.support.pure_world import World
from tests.support.pure_world import run as run_in
from tests.support.txn_world import (
    BUSY,
    NCCL,
    Venv,
    Wheels,
    assert_same,
    install_venv,
    journals,
    repair_args,
    run,
    start,
    wrapper,
)

# Every uv that changes the environment starts late and works slowly: there is time to
# kill cudatx while it runs, and an orphaned uv would go on deleting after the rollback.
SLOW = 'sleep 1\n"$REAL" "$@"\ncode=$?\nsleep 0.5\nexit $code\n'


def _running(marker: str) -> list[int]:
    """Processes whose command line names `marker` (a wrapper's path)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def _wait_for_state(v: Venv, proc: subprocess.Popen[str], state: str) -> None:
    deadline = time.monotonic() + 60
    while not any(j.get("state") == state for j in journals(v)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"never reached {state}"
        time.sleep(0.02)


@pytest.mark.reliability
def test_uv_dies_with_cudatx_and_never_deletes_after_the_rollback(venv: Venv) -> None:
    before = venv.digest()
    slow = wrapper(venv, "uv-slow", SLOW)
    apply = start(venv, "remove", NCCL, "--yes", "--uv", slow)
    _wait_for_state(venv, apply, "uninstalling")
    apply.kill()
    apply.communicate()

    back = run(venv, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    time.sleep(2.5)  # past the moment the orphaned uv would have started deleting
    assert _running(os.fspath(slow)) == []
    assert_same(before, venv.digest())


def _kill_at_random(proc: subprocess.Popen[str], rng: random.Random, within: float) -> bool:
    """SIGKILL `proc` at a random instant within `within` s; whether it was still running."""
    deadline = time.monotonic() + rng.uniform(0.05, within)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    alive = proc.poll() is None
    proc.kill()
    proc.communicate()
    return alive


TRIALS = int(os.environ.get("CUDATX_KILL_TRIALS", "3"))


@pytest.mark.reliability
@pytest.mark.parametrize("trial", range(TRIALS))
def test_sigkill_at_random_instants_of_apply_and_rollback(
    wheels: Wheels, tmp_path: Path, trial: int, record_property: pytest.RecordProperty
) -> None:
    rng = random.Random(1000 + trial)
    v = install_venv(wheels, tmp_path)
    before = v.digest()
    slow = wrapper(v, "uv-slow", SLOW)
    # remove --repair: uv uninstalls, then installs the reinstalled wheel, both slowly.
    killed = _kill_at_random(start(v, *repair_args(v, NCCL, "--uv", os.fspath(slow))), rng, 6)
    at = journals(v)[-1]["state"] if journals(v) else "before the journal"
    if journals(v):
        # The rollback itself killed at a random instant, then run to the end.
        _kill_at_random(start(v, "rollback", "--yes"), rng, 1.5)
        back = run(v, "rollback", "--yes")
        assert back.returncode == 0, back.stderr
    time.sleep(2)  # an orphaned uv would start its work by now
    assert _running(os.fspath(slow)) == []
    assert_same(before, v.digest())
    what = f"apply killed at {at}" if killed else "apply done first"
    record_property("outcome", f"{what}; rollback killed, then run: identical tree, no uv left")


@pytest.mark.reliability
@pytest.mark.parametrize("trial", range(10))
def test_two_applies_launched_together_exactly_one_proceeds(world: World, trial: int) -> None:
    # uv starts a second late: whichever takes the lock first changes nothing before the
    # other has scanned, so the other's plan is stale by then (refused under the lock, or
    # refused at it); neither plan may commit over the other.
    before = world.digest()
    slow = world.work / "uv-late"
    slow.write_text(f'#!/bin/sh\nsleep 1\nexec {shlex.quote(uv_bin())} "$@"\n')
    slow.chmod(0o755)
    args = ("--yes", "--uv", os.fspath(slow), "--python", os.fspath(world.venv))
    procs = [
        start_cudatx("remove", name, *args, cwd=world.work, stdin=subprocess.DEVNULL)
        for name in ("pure", "other")
    ]
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, BUSY], results
    back = run_in(world, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    assert_same(before, world.digest())


def test_a_plan_made_before_another_change_finished_is_refused_under_the_lock(
    world: World,
) -> None:
    from cudatx.discover.target import start_query
    from cudatx.errors import Busy
    from cudatx.planning.change import Planning, propose_removal
    from cudatx.scan import scan
    from cudatx.txn.apply import ApplyOptions, apply_change
    from tests.support import uv_uninstall

    env = scan(
        start_query(os.fspath(world.venv), {}, world.work), cwd=world.work, ld_library_path=None
    )
    proposal = propose_removal(env, ("pure",), (), Planning())
    uv_uninstall(world.venv, ["other"])  # another change, finished after the plan was made
    after_other = world.digest()
    with pytest.raises(Busy, match="changed since this plan was made"):
        apply_change(env, proposal, ApplyOptions(ignore_running=True), lambda: env)
    assert_same(after_other, world.digest())
    assert (world.site / "pure").is_dir()
