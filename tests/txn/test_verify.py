"""Verify checks that the change happened: a uv that exits 0 and does nothing is a failure,
and the transaction rolls back (exit 10), naming what did not happen."""

from __future__ import annotations

import os

import pytest

from tests.support import uv_uninstall
from tests.support.pure_world import World
from tests.support.pure_world import run as run_in
from tests.support.txn_world import ROLLED_BACK, Venv, assert_same, error, run, wrapper


@pytest.mark.reliability
def test_a_removal_uv_did_not_carry_out_rolls_back(world: World) -> None:
    before = world.digest()
    done = run_in(world, "remove", "pure", "--yes", "--uv", "/bin/true")
    assert done.returncode == ROLLED_BACK, done.stderr
    assert "pure 1.0 is still installed" in error(done)
    assert "Applied" not in done.stderr
    assert_same(before, world.digest())


@pytest.mark.reliability
def test_an_install_uv_did_not_carry_out_rolls_back(venv: Venv) -> None:
    uv_uninstall(venv.path, ["bystander"])
    before = venv.digest()
    noop = wrapper(venv, "uv-noop", "exit 0\n")  # the plan's own uv calls still go through
    done = run(
        venv,
        "install",
        "bystander==1.0",
        "--yes",
        "--offline",
        "--find-links",
        os.fspath(venv.wheels.folder),
        "--uv",
        os.fspath(noop),
    )
    assert done.returncode == ROLLED_BACK, done.stderr
    assert "bystander 1.0 is not installed" in error(done)
    assert_same(before, venv.digest())
