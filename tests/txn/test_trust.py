"""A store only cudatx made, rolled back only where it was made: forged stores, hard links
planted in the store and the cache, copied and moved environments, missing snapshots and
tampered journals are refused (exit 12) and change nothing.

In the small world of tests/support/pure_world.py (``pure`` and ``other``, a sentinel
outside the venv).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.support import build_wheel, uv_install
from tests.support.pure_world import World, run
from tests.support.txn_world import STORE, assert_same, error

FORGED_ID = "20990101T000000.000000Z-1"


def forged_store_wheel(out: Path, victim: Path) -> Path:
    """A wheel whose `.data/data/` files (installed under the prefix, running no code) are
    a transaction store: a journal stuck in "uninstalling" and a snapshot whose manifest says
    `prefix: "/"` and holds bytes for `victim`, outside the environment."""
    evil = b"written by a forged rollback\n"
    data = "forger-1.0.data/data/.cudatx/transactions/" + FORGED_ID
    journal = {
        "id": FORGED_ID,
        "command": "cudatx remove six",
        "prefix": "/",
        "sites": [],
        "created": "2099-01-01T00:00:00+00:00",
        "state": "uninstalling",
        "steps": [
            {"state": "started", "time": "2099-01-01T00:00:00+00:00"},
            {"state": "snapshotted", "time": "2099-01-01T00:00:00+00:00"},
            {"state": "uninstalling", "time": "2099-01-01T00:00:00+00:00"},
        ],
    }
    manifest = {
        "files": [
            {
                "path": os.fspath(victim),
                "stored": "0",
                "sha256": hashlib.sha256(evil).hexdigest(),
                "mode": 0o644,
                "size": len(evil),
                "link": None,
            }
        ],
        "folders": [],
        "installed": [],
        "created": "2099-01-01T00:00:00+00:00",
        "prefix": "/",
    }
    return build_wheel(
        out,
        "forger",
        "1.0",
        {
            "forger/__init__.py": b"",
            f"{data}/journal.json": json.dumps(journal).encode(),
            f"{data}/snapshot/manifest.json": json.dumps(manifest).encode(),
            f"{data}/snapshot/files/0": evil,
        },
    )


@pytest.mark.reliability
def test_a_store_planted_by_a_wheel_is_never_trusted(world: World, tmp_path: Path) -> None:
    victim = world.sentinel / "keep.txt"
    uv_install(world.venv, [forged_store_wheel(tmp_path / "forged", victim)])
    assert (world.venv / ".cudatx" / "transactions" / FORGED_ID / "journal.json").is_file()
    before, outside = world.digest(), world.outside()

    change = run(world, "remove", "pure", "--yes")
    assert change.returncode == STORE, change.stderr
    assert "not part of a store cudatx made" in error(change), change.stderr
    back = run(world, "rollback", "--yes")
    assert back.returncode == STORE, back.stderr
    assert "not part of a store cudatx made" in error(back)
    assert_same(before, world.digest())
    assert_same(outside, world.outside())


@pytest.mark.reliability
def test_a_hard_link_planted_as_the_lock_is_never_written_through(world: World) -> None:
    store = world.venv / ".cudatx"
    store.mkdir(mode=0o700)
    os.link(world.sentinel / "keep.txt", store / "lock")
    before, outside = world.digest(), world.outside()

    done = run(world, "remove", "pure", "--yes")
    assert done.returncode == STORE, done.stderr
    assert "2 hard links" in error(done)
    assert_same(before, world.digest())
    assert_same(outside, world.outside())


@pytest.mark.reliability
def test_a_hard_link_planted_as_the_scan_cache_is_never_written_through(
    world: World, tmp_path: Path
) -> None:
    other = world.sentinel / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        db.execute("INSERT INTO meta VALUES ('schema', 'not cudatx')")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    os.link(other, cache / "scan.sqlite")
    outside = world.outside()

    done = run(world, "doctor", env={"CUDATX_CACHE_DIR": os.fspath(cache)})
    assert done.returncode in (0, 1), done.stderr
    assert_same(outside, world.outside())


def _applied(world: World) -> dict[str, object]:
    done = run(world, "remove", "pure", "--yes")
    assert done.returncode == 0, done.stderr
    return world.digest()


@pytest.mark.reliability
@pytest.mark.parametrize("how", ["copied", "moved"])
def test_a_copied_or_moved_environment_is_not_rolled_back(
    world: World, tmp_path: Path, how: str
) -> None:
    applied = _applied(world)
    elsewhere = tmp_path / "venv2"
    if how == "copied":
        shutil.copytree(world.venv, elsewhere, symlinks=True)
    else:
        world.venv.rename(elsewhere)
    there = World(elsewhere, world.site, world.work, world.sentinel)
    copy_before, outside = there.digest(), world.outside()

    done = run(there, "rollback", "--yes")
    assert done.returncode == STORE, done.stderr
    assert "moved or copied" in error(done)
    assert_same(copy_before, there.digest())
    assert_same(outside, world.outside())
    if how == "copied":
        assert_same(applied, world.digest())  # the original was not written into either
    else:
        assert not world.venv.exists()  # nor recreated


@pytest.mark.reliability
def test_a_missing_snapshot_is_an_error_not_a_rollback(world: World) -> None:
    applied = _applied(world)
    [txn] = (world.venv / ".cudatx" / "transactions").iterdir()
    shutil.rmtree(txn / "snapshot")

    done = run(world, "rollback", "--yes")
    assert done.returncode == STORE, done.stderr
    assert "missing" in error(done)
    assert_same(applied, world.digest())
    history = run(world, "history")
    assert "rolled back" not in history.stdout, history.stdout


@pytest.mark.reliability
def test_a_journal_naming_a_folder_outside_is_refused(world: World) -> None:
    _applied(world)
    empty = world.sentinel / "empty"
    empty.mkdir()
    [txn] = (world.venv / ".cudatx" / "transactions").iterdir()
    path = txn / "journal.json"
    journal = json.loads(path.read_text())
    journal["created_folders"] = [os.fspath(empty)]
    path.write_text(json.dumps(journal))
    applied, outside = world.digest(), world.outside()

    done = run(world, "rollback", "--yes", "--force")
    assert done.returncode == STORE, done.stderr
    assert "outside" in error(done) and os.fspath(empty) in error(done)
    assert_same(applied, world.digest())
    assert_same(outside, world.outside())


@pytest.mark.reliability
def test_history_prune_never_follows_a_symlinked_snapshot(world: World) -> None:
    _applied(world)
    assert run(world, "rollback", "--yes").returncode == 0
    assert run(world, "remove", "other", "--yes").returncode == 0
    first = sorted((world.venv / ".cudatx" / "transactions").iterdir())[0]
    shutil.rmtree(first / "snapshot")
    (first / "snapshot").symlink_to(world.sentinel)
    outside = world.outside()

    done = run(world, "history", "prune", "--keep", "1")
    assert done.returncode == STORE, done.stderr
    assert "not a folder" in error(done)
    assert_same(outside, world.outside())
