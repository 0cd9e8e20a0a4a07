"""uv changes an environment inside the sandbox (cudatx.sandbox, issue 32): a package folder
swapped for a symlink to an outside folder after cudatx's last check and before uv's
uninstall leads uv's unlinks to a read-only mount (EROFS), not to the outside files.

The race is made as tests/txn/test_symlink_swaps.py makes it: a `--uv` wrapper that swaps
`site-packages/pure` for a symlink to a decoy folder, then execs the real uv. Confined, the
wrapper runs in the sandbox too: its swap lands (the prefix is writable), uv's deletions
through it do not. With `CUDATX_SANDBOX=off` the same race deletes outside files: the
documented fallback, said as such.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from cudatx import sandbox
from tests.support import uv_bin
from tests.support.digest import tree_digest
from tests.support.pure_world import PURE_FILES, World, run
from tests.support.txn_world import ROLLED_BACK, assert_same, error

pytestmark = pytest.mark.reliability


def _decoy(w: World) -> Path:
    """A folder outside the venv holding the 4 files of pure's package, by the same names."""
    decoy = w.sentinel / "decoy"
    for name in PURE_FILES:
        path = decoy / name.split("/", 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"outside the environment: {name}\n")
    return decoy


def _uv_that_swaps(w: World, folder: Path, to: Path) -> Path:
    """A uv that, asked to uninstall, first moves `folder` away and leaves a symlink to `to`
    in its place: the swap lands between cudatx's check and uv's unlinks."""
    script = w.work / "uv-swaps"
    moved = shlex.quote(os.fspath(folder) + ".moved")
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2" = "pip uninstall" ]; then\n'
        f"    mv {shlex.quote(os.fspath(folder))} {moved}\n"
        f"    ln -s {shlex.quote(os.fspath(to))} {shlex.quote(os.fspath(folder))}\n"
        "fi\n"
        f'exec {shlex.quote(uv_bin())} "$@"\n'
    )
    script.chmod(0o755)
    return script


def _decoy_files(decoy: Path) -> list[str]:
    return sorted(str(p.relative_to(decoy)) for p in decoy.rglob("*") if p.is_file())


def test_a_swap_during_uvs_uninstall_deletes_nothing_outside_when_confined(
    world: World, record_property: pytest.RecordProperty
) -> None:
    found = sandbox.probe()
    if not found.held:
        pytest.skip(f"no namespace can be made here: {found.reason}")
    decoy = _decoy(world)
    outside = tree_digest(world.sentinel)
    uv = _uv_that_swaps(world, world.site / "pure", decoy)

    done = run(world, "-v", "remove", "pure", "--yes", "--ignore-running", "--uv", os.fspath(uv))
    assert done.returncode == ROLLED_BACK, done.stderr
    assert_same(outside, tree_digest(world.sentinel))
    assert len(_decoy_files(decoy)) == 4
    line = error(done)
    assert f"{world.site / 'pure'} is now a symlink to {decoy}" in line, line
    assert f"uv ran confined ({found.describe()})" in line, line
    assert "the environment was rolled back" in line, line
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("cudatx: sandbox: ")]
    assert said == [
        f"cudatx: sandbox: {found.describe()} (writable: {world.venv}, {world.work / 'uv-cache'})"
    ], done.stderr
    assert not (world.site / "pure").is_symlink()
    record_property("outcome", f"exit 10; the 4 outside files kept ({found.describe()})")


def test_the_same_swap_unconfined_says_the_fallback(
    world: World, record_property: pytest.RecordProperty
) -> None:
    decoy = _decoy(world)
    uv = _uv_that_swaps(world, world.site / "pure", decoy)

    done = run(
        world,
        "-v",
        "remove",
        "pure",
        "--yes",
        "--ignore-running",
        "--uv",
        os.fspath(uv),
        env={"CUDATX_SANDBOX": "off"},
    )
    assert done.returncode == ROLLED_BACK, done.stderr
    line = error(done)
    assert "uv may have deleted or written through it outside the environment" in line, line
    assert "uv ran unconfined, none: CUDATX_SANDBOX=off: only cudatx's own checks held" in line
    assert (
        "cudatx: sandbox: none: CUDATX_SANDBOX=off; only cudatx's own checks held"
        in done.stderr.splitlines()
    ), done.stderr
    # What the sandbox prevents: uv deleted through the symlink (3 of 4 files, measured)
    lost = 4 - len(_decoy_files(decoy))
    assert lost > 0
    record_property("outcome", f"exit 10; {lost} of 4 outside files deleted, fallback said")


def test_a_committed_apply_says_how_uv_ran(world: World) -> None:
    found = sandbox.probe()
    done = run(world, "remove", "pure", "--yes", "--ignore-running")
    assert done.returncode == 0, done.stderr
    if found.held:
        assert f"\nuv ran confined ({found.describe()})\n" in done.stderr, done.stderr
    else:
        assert f"\nuv ran unconfined (none: {found.reason}): " in done.stderr, done.stderr
    back = run(world, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    off = run(world, "remove", "pure", "--yes", "--ignore-running", env={"CUDATX_SANDBOX": "off"})
    assert off.returncode == 0, off.stderr
    assert (
        "\nuv ran unconfined (none: CUDATX_SANDBOX=off): only cudatx's own checks held\n"
        in off.stderr
    ), off.stderr
