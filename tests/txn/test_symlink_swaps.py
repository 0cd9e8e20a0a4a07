"""A folder swapped for a symlink never redirects what cudatx deletes or writes.

Each race has a controlled pause: a slow `--uv` wrapper that makes the swap itself while cudatx
waits for it, or a watcher thread that swaps a folder as soon as the rollback makes its first
entry there. Outside the venv, a sentinel folder holds files of the same names, so a write or
a deletion that went through the symlink would show there. In the small world of
tests/support/pure_world.py (real venv, real uv, real wheels), as the same user; the
multi-user forms are in tests/txn/test_other_users.py.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import threading
import time
from pathlib import Path

import pytest

from tests.support import uv_bin
from tests.support.digest import tree_digest
from tests.support.pure_world import PURE_FILES, World, run, without_pure
from tests.support.txn_world import ROLLED_BACK, STORE, assert_same, error
from tests.support.wheels import build_wheel

pytestmark = pytest.mark.reliability
UNSAFE_PATHS = 17  # cudatx/errors.py


def _journal_states(w: World) -> list[str]:
    folder = w.venv / ".cudatx" / "transactions"
    return [
        json.loads((t / "journal.json").read_text())["state"]
        for t in sorted(folder.iterdir())
        if (t / "journal.json").exists()
    ]


def _decoy(w: World, files: dict[str, bytes]) -> Path:
    """A folder outside the venv holding files of the same names as a package's."""
    decoy = w.sentinel / "decoy"
    for name in files:
        path = decoy / name.split("/", 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"outside the environment: {name}\n")
    return decoy


def _uv_that_swaps(w: World, folder: Path, to: Path) -> Path:
    """A uv that, when asked to uninstall, first moves `folder` away and puts a symlink to
    `to` in its place (what a second process can do while cudatx waits for uv)."""
    script = w.work / "uv-swaps"
    moved = shlex.quote(os.fspath(folder) + ".moved")
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2" = "pip uninstall" ]; then\n'
        f"    mv {shlex.quote(os.fspath(folder))} {moved}\n"
        f"    ln -s {shlex.quote(os.fspath(to))} {shlex.quote(os.fspath(folder))}\n"
        "fi\n"
        f'exec {shlex.quote(uv_bin())} "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_a_folder_swapped_while_uv_runs_rolls_back_and_is_never_verified(
    world: World, record_property: pytest.RecordProperty
) -> None:
    """`remove pure --yes` with a slow `--uv` wrapper that swaps `site-packages/pure` for a
    symlink to an outside folder before uv deletes: the apply rolls back and says why,
    never "Verified"; the symlink goes, the folder comes back as it was."""
    before = world.digest()
    decoy = _decoy(world, PURE_FILES)
    uv = _uv_that_swaps(world, world.site / "pure", decoy)

    done = run(world, "remove", "pure", "--yes", "--ignore-running", "--uv", os.fspath(uv))
    assert done.returncode == ROLLED_BACK, done.stderr
    line = error(done)
    assert f"{world.site / 'pure'} is now a symlink to {decoy}" in line, line
    assert "the environment was rolled back" in line, line
    assert "replaced by its folder" in line, line
    assert "Verified" not in done.stderr and "Applied" not in done.stderr
    assert _journal_states(world) == ["rolled back"]
    after = world.digest()
    moved = {k for k in after if k.split("/")[3:4] == ["pure.moved"]}
    assert_same(before, {k: v for k, v in after.items() if k not in moved})
    assert not (world.site / "pure").is_symlink()
    record_property(
        "outcome", "exit 10 naming the symlink, never Verified; tree back, symlink replaced"
    )


def _wide_wheel(w: World, count: int) -> tuple[Path, dict[str, bytes]]:
    """A wheel of `count` modules: a rollback that restores it takes long enough for a
    watcher to act between its first entry and its last."""
    files = {f"wide/m{i:04}.py": f"VALUE = {i}\n".encode() for i in range(count)}
    files["wide/__init__.py"] = b""
    return build_wheel(w.work / "wheels", "wide", "1.0", files), files


def test_a_folder_swapped_while_the_rollback_writes_into_it_is_never_written_through(
    world: World, record_property: pytest.RecordProperty
) -> None:
    """After a committed `remove wide`, an empty `wide/` is made (the rollback's conflict
    check passes), and a watcher swaps it for a symlink to an outside folder as soon as the
    rollback makes its first entry there: nothing outside is written, the rollback does not
    say "rolled back" over a tree it did not restore, and a second rollback completes."""
    wheel, files = _wide_wheel(world, 400)
    installed = run(world, "install", os.fspath(wheel), "--yes", "--ignore-running", "--offline")
    assert installed.returncode == 0, installed.stderr
    before = world.digest()
    removed = run(world, "remove", "wide", "--yes", "--ignore-running")
    assert removed.returncode == 0, removed.stderr

    decoy = _decoy(world, files)
    outside = tree_digest(world.sentinel)
    wide = world.site / "wide"
    wide.mkdir()
    taken = world.work / "wide.taken"
    swapped = threading.Event()
    at_swap: list[int] = []  # entries the rollback had made when the folder was swapped

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if entries := os.listdir(wide):
                    at_swap.append(len(entries))
                    os.rename(wide, taken)
                    os.symlink(decoy, wide)
                    swapped.set()
                    return
            except FileNotFoundError:
                return
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    back = run(world, "rollback", "--yes")
    watcher.join()
    assert swapped.is_set(), "the watcher never saw the rollback's first entry"
    assert at_swap[0] < len(files), "the rollback was done before the swap: no race"
    # What it wrote after the swap followed the folder it had opened, not the name.
    assert sorted(os.listdir(taken)) == sorted(n.split("/", 1)[1] for n in files)
    assert_same(outside, tree_digest(world.sentinel))
    assert back.returncode == STORE, back.stderr
    assert "rolled back" not in back.stdout
    assert str(wide) in error(back)

    again = run(world, "rollback", "--yes")
    assert again.returncode == 0, again.stderr
    assert_same(outside, tree_digest(world.sentinel))
    assert_same(before, world.digest())
    record_property(
        "outcome",
        f"swapped after {at_swap[0]}/{len(files)} entries: outside unchanged, exit 12; "
        "second rollback: identical tree",
    )


def test_a_symlinked_dist_info_is_refused_before_anything_is_touched(
    world: World, record_property: pytest.RecordProperty
) -> None:
    """`other-1.0.dist-info` replaced by a symlink to a folder outside (which holds files no
    RECORD lists too): remove, its dry run, and a rollback never act in that folder."""
    info = world.site / "other-1.0.dist-info"
    away = world.sentinel / "other-1.0.dist-info"
    shutil.move(info, away)
    (away / "unlisted.txt").write_text("listed by no RECORD\n")
    info.symlink_to(away)
    before, outside = world.digest(), tree_digest(world.sentinel)

    for extra in ("--dry-run", "--yes"):
        done = run(world, "remove", "other", extra, "--ignore-running")
        assert done.returncode == UNSAFE_PATHS, done.stderr
        line = error(done)
        assert f"{info} -> {away}" in line and "symlink leading outside" in line, line
    assert not (world.venv / ".cudatx").exists()
    assert_same(before, world.digest())
    assert_same(outside, tree_digest(world.sentinel))
    # Another change goes on; its rollback never walks the symlinked folder either.
    done = run(world, "remove", "pure", "--yes", "--ignore-running")
    assert done.returncode == 0, done.stderr
    assert_same(without_pure(before), world.digest())
    back = run(world, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    assert_same(before, world.digest())
    assert_same(outside, tree_digest(world.sentinel))
    record_property("outcome", "exit 17 naming it, dry run and apply; outside tree unchanged")
