"""The trial's code runs confined (cudatx.sandbox, issue 32): a `--trial-cmd` may write the
shadow and its own temporary folder, and a write anywhere else fails with EROFS, whichever
shadow. With `CUDATX_SANDBOX=off` the same command's write lands: the documented fallback.

The pure world (real wheels, real uv); the trial's JSON section says which guarantee held.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudatx import sandbox
from tests.support.pure_world import World, build_pure_wheels, install_pure_world, run


@pytest.fixture
def world(tmp_path: Path) -> World:
    return install_pure_world(build_pure_wheels(tmp_path / "wheels"), tmp_path)


def _trial(w: World, method: str, cmd: str, **env: str) -> tuple[dict[str, Any], str]:
    done = run(w, "-v", "remove", "pure", "--dry-run", "--offline", "--json",
               "--trial-shadow", method, "--trial-cmd", cmd, env=env)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    trial: dict[str, Any] = json.loads(done.stdout)["trial"]
    assert trial["error"] is None, trial
    return trial, done.stderr


def _command(trial: dict[str, Any]) -> dict[str, Any]:
    rows = [r for r in trial["roots"] if r["check"].startswith("--trial-cmd")]
    assert len(rows) == 1, trial["roots"]
    return dict(rows[0])


@pytest.mark.parametrize("method", ["overlay", "copy"])
def test_a_trial_cmd_writing_outside_the_shadow_gets_erofs(world: World, method: str) -> None:
    found = sandbox.probe()
    if not found.held:
        pytest.skip(f"no namespace can be made here: {found.reason}")
    escaped = world.sentinel / "escaped.txt"
    inside = 'echo in > "$VIRTUAL_ENV/inside.txt" && echo t > "$TMPDIR/t.txt"'
    trial, stderr = _trial(world, method, f"{inside} && echo x > {escaped}")
    if trial["method"] != method:
        pytest.skip(f"no {method} shadow here ({trial['method']})")
    row = _command(trial)
    # The writes into the shadow and its temporary folder went through; the last did not.
    assert row["error"].endswith(f"{escaped}: Read-only file system"), row
    assert not escaped.exists()
    assert not (world.venv / "inside.txt").exists()
    held = trial["sandbox"]
    assert (held["mode"], held["locked"]) == (found.mode, found.locked), held
    assert len(held["writable"]) == 2, held  # the shadow's prefix, the session's TMPDIR
    assert "cudatx: the trial's sandbox: " + found.describe() in stderr, stderr
    # uv's cache is uv's only: the judged code cannot write it
    assert str(world.work / "uv-cache") not in held["writable"]


def test_the_trial_unconfined_says_so_and_the_write_lands(world: World) -> None:
    escaped = world.sentinel / "escaped.txt"
    trial, stderr = _trial(world, "copy", f"echo x > {escaped}", CUDATX_SANDBOX="off")
    assert _command(trial)["trial"] == "loads"
    assert escaped.read_text() == "x\n"
    assert trial["sandbox"] == {
        "mode": "none",
        "locked": False,
        "reason": "CUDATX_SANDBOX=off",
        "writable": [],
    }
    assert (
        "cudatx: the trial's sandbox: none: CUDATX_SANDBOX=off; only cudatx's own checks held"
        in stderr.splitlines()
    ), stderr
