"""The apply runs uv's steps as the trial does: the very list cudatx.planning.change.uv_steps
builds for the change, one uv per step, in order, word for word (docs/architecture.md: the
trial runs "the same uv steps" as the apply)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support import uv_bin, uv_install, uv_uninstall
from tests.support.pure_world import World
from tests.support.wheels import build_wheel


def test_the_apply_runs_exactly_the_uv_steps_of_its_change(
    world: World, pure_wheels: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One change of each phase: pure uninstalled (replaced), other installed, spare
    reinstalled; a uv that logs each call, and uv_steps watched as the apply calls it."""
    from cudatx.discover.target import start_query
    from cudatx.environment import Environment
    from cudatx.planning import change as planning_change
    from cudatx.planning.change import Planning, Proposal, propose
    from cudatx.scan import scan
    from cudatx.txn import apply
    from cudatx.txn.apply import ApplyOptions, apply_change
    from cudatx.uv import UvOptions

    folder = os.fspath(pure_wheels[0].parent)
    uv_install(world.venv, [build_wheel(world.work, "spare", "1.0", {"spare/__init__.py": b""})])
    uv_uninstall(world.venv, ["other"])
    # The log lies in uv's cache: besides the environment, the one folder a confined uv
    # may write (cudatx.sandbox).
    cache = world.work / "uv-cache"
    cache.mkdir()
    log = cache / "calls.log"
    uv = world.work / "uv"
    uv.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {uv_bin()} "$@"\n')
    uv.chmod(0o755)
    monkeypatch.setenv("UV_CACHE_DIR", os.fspath(cache))
    monkeypatch.setenv("UV_NO_CONFIG", "1")

    def rescan() -> Environment:
        query = start_query(os.fspath(world.venv), environ={}, cwd=world.work)
        return scan(query, cwd=world.work, ld_library_path=None)

    env = rescan()
    where = ("--offline", "--find-links", folder)
    proposal = propose(env, "install", ["other"], Planning(uv_options=where), ("pure",))
    spare = tuple(d for d in env.distributions if d.name == "spare")
    proposal = Proposal(proposal.plan, replace(proposal.change, reinstalling=spare))

    built: list[list[Any]] = []

    def watched(*args: Any, **kwargs: Any) -> list[Any]:
        steps = planning_change.uv_steps(*args, **kwargs)
        built.append(steps)
        return steps

    # Not raising: an apply that never asks uv_steps leaves `built` empty.
    monkeypatch.setattr(apply, "uv_steps", watched, raising=False)
    options = ApplyOptions(
        uv=os.fspath(uv),
        uv_options=UvOptions(offline=True, find_links=(folder,)),
        ignore_running=True,
    )
    apply_change(env, proposal, options, rescan)

    assert len(built) == 1
    steps = built[0]
    assert [s.phase for s in steps] == ["uninstall", "install", "reinstall"]
    assert all(s.argv[0] == os.fspath(uv) for s in steps)
    ran = [c for c in log.read_text().splitlines() if c.startswith("pip ")]
    assert ran == [" ".join(s.argv[1:]) for s in steps]
    assert (world.site / "other").is_dir() and not (world.site / "pure").exists()
