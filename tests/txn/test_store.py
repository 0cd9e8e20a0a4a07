"""The transaction store and snapshots, on real files, with real processes and real kills."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cudatx import documents
from cudatx.errors import Busy, ExitCode, StoreError
from cudatx.txn.journal import Journal, State
from cudatx.txn.snapshot import SNAPSHOT, SNAPSHOT_TMP, load, restore, take, verify_saved
from cudatx.txn.store import Store, atomic_write
from tests.support.digest import diff, tree_digest
from tests.support.paths import REPO

SITE = "lib/python3.11/site-packages"
INSTALLED = ({"name": "demo", "version": "1.0", "direct_url": None},)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_child_env(),
        cwd=REPO,
    )


@pytest.fixture
def env(tmp_path: Path) -> Path:
    """A small environment-shaped tree: files of several modes, a symlink, an empty folder."""
    prefix = tmp_path / "env"
    site = prefix / SITE
    pkg = site / "demo"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from demo import core\n")
    (pkg / "core.py").write_text("VALUE = 1\n")
    so = pkg / "lib" / "libdemo.so.1"
    so.write_bytes(os.urandom(64 * 1024))
    so.chmod(0o755)
    (pkg / "lib" / "libdemo.so").symlink_to("libdemo.so.1")
    ro = pkg / "data.bin"
    ro.write_bytes(b"\0" * 1000)
    ro.chmod(0o444)
    info = site / "demo-1.0.dist-info"
    (info / "licenses").mkdir(parents=True)  # empty: must come back too
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    (info / "RECORD").write_text("demo/__init__.py,,\n")
    (prefix / "bin").mkdir()
    tool = prefix / "bin" / "demo"
    tool.write_text("#!/bin/sh\necho demo\n")
    tool.chmod(0o755)
    return prefix


def _listing(prefix: Path) -> tuple[list[str], list[str]]:
    """(regular files and symlinks, folders) under the tree's site-packages and bin/."""
    paths: list[str] = []
    folders: list[str] = []
    for top in (prefix / SITE / "demo", prefix / SITE / "demo-1.0.dist-info", prefix / "bin"):
        folders.append(str(top))
        for folder, dirs, names in os.walk(top):
            folders += [os.path.join(folder, d) for d in dirs]
            paths += [os.path.join(folder, n) for n in names]
    return sorted(paths), sorted(folders)


def _journal(txn: str, state: State = State.STARTED, **fields: Any) -> Journal:
    return Journal(
        id=txn,
        command="cudatx remove demo",
        prefix="/nowhere",
        sites=(),
        created="2026-12-01T00:00:00+00:00",
        state=state,
        **fields,
    )


def _wipe(prefix: Path) -> None:
    for top in (prefix / SITE / "demo", prefix / SITE / "demo-1.0.dist-info", prefix / "bin"):
        shutil.rmtree(top)


def _snap(prefix: Path, txn: str = "t1") -> tuple[Path, list[str]]:
    store = Store(str(prefix))
    store.write_journal(_journal(txn))
    paths, folders = _listing(prefix)
    _, outside = take(store.txn_dir(txn), paths, folders, INSTALLED, prefix=str(prefix))
    return store.txn_dir(txn), outside


# -- atomic_write ---------------------------------------------------------------------------


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "journal.json"
    atomic_write(target, b"old")
    atomic_write(target, b"new content")
    assert target.read_bytes() == b"new content"
    assert os.listdir(tmp_path) == ["journal.json"]


def test_atomic_write_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    link = tmp_path / "journal.json"
    link.symlink_to(victim)
    atomic_write(link, b"journal")
    assert not link.is_symlink()
    assert link.read_bytes() == b"journal"
    assert victim.read_bytes() == b"keep me"


# -- ids and journals -----------------------------------------------------------------------


def test_new_ids_are_unique_sortable_and_stamped() -> None:
    made = [Store.new_id() for _ in range(2000)]
    assert len(set(made)) == len(made)
    assert sorted(made) == made
    assert re.fullmatch(rf"\d{{8}}T\d{{6}}\.\d{{6}}Z-{os.getpid()}", made[0])


def test_journals_round_trip_and_ids_list_only_journalled_folders(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    assert store.ids() == []
    first, second = store.new_id(), store.new_id()
    started = _journal(second, error="b")
    store.write_journal(started)
    store.write_journal(_journal(first, State.COMMITTED))
    store.txn_dir("stray").mkdir()  # no journal: not a transaction
    assert store.ids() == [first, second]
    assert store.read_journal(second) == started
    text = (store.txn_dir(first) / "journal.json").read_text()
    data = documents.dump(_journal(first, State.COMMITTED), mode="json")
    assert text == json.dumps(data, sort_keys=True, indent=2) + "\n"
    store.write_journal(_journal(first, State.ROLLED_BACK))
    assert store.read_journal(first).state is State.ROLLED_BACK
    assert sorted(os.listdir(store.txn_dir(first))) == ["journal.json"]


def test_unreadable_journals_and_bad_ids_are_store_errors(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    with pytest.raises(StoreError, match="has no journal"):
        store.read_journal("nope")
    store.write_journal(_journal("t"))
    (store.txn_dir("t") / "journal.json").write_text("{trunc")
    with pytest.raises(StoreError, match="corrupt") as caught:
        store.read_journal("t")
    assert caught.value.exit_code == ExitCode.STORE
    for bad in ("", "..", "../x", "a/b"):
        with pytest.raises(StoreError):
            store.txn_dir(bad)


def test_store_folders_are_private(env: Path) -> None:
    txn_dir, _ = _snap(env)
    store = Store(str(env))
    for folder in (
        store.root,
        store.root / "transactions",
        txn_dir,
        txn_dir / SNAPSHOT,
        txn_dir / SNAPSHOT / "files",
    ):
        assert stat.S_IMODE(folder.lstat().st_mode) == 0o700, folder


def test_a_symlink_planted_as_the_store_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / ".cudatx").symlink_to(elsewhere)
    with pytest.raises(StoreError, match="should be a folder"):
        Store(str(prefix)).write_journal(_journal("t"))
    assert os.listdir(elsewhere) == []


# -- the lock -------------------------------------------------------------------------------

_HOLD = """
import sys
from cudatx.txn.store import Store
with Store(sys.argv[1]).lock():
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    prefix = str(tmp_path)
    child = _python(_HOLD, prefix)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    try:
        yield child, prefix
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_a_second_locker_is_told_who_holds_the_lock(
    holder: tuple[subprocess.Popen[str], str],
) -> None:
    child, prefix = holder
    with pytest.raises(Busy) as caught, Store(prefix).lock():
        pass
    assert str(caught.value) == (
        f"another cudatx transaction (pid {child.pid}) holds {prefix}; "
        "wait for it or check that it is still running"
    )
    assert caught.value.exit_code == ExitCode.BUSY


def test_the_lock_is_free_once_the_holder_exits(holder: tuple[subprocess.Popen[str], str]) -> None:
    child, prefix = holder
    child.communicate("\n", timeout=30)  # let it leave the with-block and exit
    assert child.returncode == 0
    with Store(prefix).lock():
        assert (Path(prefix) / ".cudatx" / "lock").read_text().strip() == str(os.getpid())
    assert (Path(prefix) / ".cudatx" / "lock").exists()  # never deleted


def test_a_holder_killed_with_sigkill_releases_the_lock(
    holder: tuple[subprocess.Popen[str], str],
) -> None:
    child, prefix = holder
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    # The dead holder's pid is still in the file; the lock is not: flock dies with the process.
    assert (Path(prefix) / ".cudatx" / "lock").read_text().strip() == str(child.pid)
    with Store(prefix).lock():
        pass


def test_the_lock_excludes_a_second_open_in_the_same_process(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    with (
        store.lock(),
        pytest.raises(Busy, match=f"pid {os.getpid()}"),
        Store(str(tmp_path)).lock(),
    ):
        pass
    with store.lock():
        pass


def test_a_holder_that_wrote_no_pid_is_an_unknown_pid(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    with store.lock():
        pass  # creates the lock file; release empties it
    code = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    child = _python(code, str(store.root / "lock"))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(Busy, match=r"\(unknown pid\)"), store.lock():
            pass
    finally:
        child.kill()
        child.wait()


# -- snapshots ------------------------------------------------------------------------------


def test_take_and_restore_round_trip(env: Path) -> None:
    before = tree_digest(env)
    assert before[f"{SITE}/demo/lib/libdemo.so"] == ("symlink", 0o777, "libdemo.so.1")
    txn_dir, outside = _snap(env)
    assert outside == []
    saved = load(txn_dir)
    assert saved is not None
    assert saved.installed == INSTALLED
    assert f"{env}/{SITE}/demo-1.0.dist-info/licenses" in saved.folders
    regular = [f for f in saved.files if f.stored is not None]
    assert len(regular) == 7
    for f in regular:
        # Same filesystem: hard links, so the live file now has two names.
        assert os.stat(f.path).st_nlink == 2, f.path
    _wipe(env)
    assert diff(before, tree_digest(env))  # it really is gone
    restore(txn_dir, saved)
    assert diff(before, tree_digest(env)) == []
    verify_saved(txn_dir, saved)  # the store kept its bytes


def test_restore_twice_is_harmless(env: Path) -> None:
    before = tree_digest(env)
    txn_dir, _ = _snap(env)
    saved = load(txn_dir)
    assert saved is not None
    restore(txn_dir, saved)  # over the intact tree
    assert diff(before, tree_digest(env)) == []
    _wipe(env)
    restore(txn_dir, saved)
    restore(txn_dir, saved)
    assert diff(before, tree_digest(env)) == []
    # Restored files are copies: the store's inodes are its own again.
    for f in saved.files:
        if f.stored is not None:
            assert os.stat(f.path).st_nlink == 1
    leftovers = [n for _, _, names in os.walk(env) for n in names if n.startswith(".cudatx-")]
    assert leftovers == []


def test_restore_puts_back_what_an_installer_replaced(env: Path) -> None:
    before = tree_digest(env)
    txn_dir, _ = _snap(env)
    core = env / SITE / "demo" / "core.py"
    # What uv and pip do: a new inode under the old name (the saved link keeps the old bytes).
    core.unlink()
    core.write_text("VALUE = 2\n")
    link = env / SITE / "demo" / "lib" / "libdemo.so"
    link.unlink()
    link.symlink_to("elsewhere.so")
    (env / "bin" / "demo").chmod(0o600)
    (env / SITE / "demo" / "added.py").write_text("")  # not restore's business: stays
    saved = load(txn_dir)
    assert saved is not None
    restore(txn_dir, saved)
    assert diff(before, tree_digest(env)) == [f"{SITE}/demo/added.py: file only in the second tree"]


def test_copies_when_the_store_is_on_another_filesystem(env: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm to put the store on another filesystem")
    if shm.stat().st_dev == env.stat().st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the test's temporary folder")
    before = tree_digest(env)
    paths, folders = _listing(env)
    store_dir = Path(tempfile.mkdtemp(dir=shm))
    try:
        txn_dir = store_dir / "txn"
        saved, _ = take(txn_dir, paths, folders, INSTALLED, prefix=str(env))
        regular = [f for f in saved.files if f.stored is not None]
        assert regular
        for f in regular:
            assert os.stat(f.path).st_nlink == 1, f"{f.path} was linked, not copied"
            copy = txn_dir / SNAPSHOT / "files" / str(f.stored)
            assert copy.stat().st_dev != Path(f.path).stat().st_dev
        _wipe(env)
        restore(txn_dir, saved)
        assert diff(before, tree_digest(env)) == []
    finally:
        shutil.rmtree(store_dir)


@pytest.mark.reliability
@pytest.mark.parametrize("where", ["store", "live"])
def test_bytes_written_in_place_are_caught_and_nothing_is_restored(env: Path, where: str) -> None:
    txn_dir, _ = _snap(env)
    saved = load(txn_dir)
    assert saved is not None
    victim = next(f for f in saved.files if f.path.endswith("core.py"))
    target = (
        txn_dir / SNAPSHOT / "files" / str(victim.stored) if where == "store" else Path(victim.path)
    )
    # An in-place write (no unlink first): with a hard link, store and live file are one inode.
    with open(target, "r+b") as handle:
        handle.write(b"X")
    for f in saved.files:
        if f.path != victim.path:
            os.unlink(f.path)
    shutil.rmtree(env / SITE / "demo-1.0.dist-info" / "licenses")
    damaged = tree_digest(env)
    with pytest.raises(StoreError) as caught:
        restore(txn_dir, saved)
    assert str(caught.value).startswith(
        f"saved bytes of {victim.path} no longer match their recorded hash"
    )
    assert caught.value.path == victim.path
    assert diff(damaged, tree_digest(env)) == []  # all or nothing: nothing came back


@pytest.mark.reliability
def test_paths_outside_the_prefix_are_not_saved(tmp_path: Path, env: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret").write_text("not the environment's")
    (env / "escape").symlink_to(elsewhere)  # a folder inside that resolves outside
    (env / "pointer").symlink_to(elsewhere / "secret")  # a symlink inside: saved as a link
    inside = env / SITE / "demo" / "core.py"
    asked = [
        str(elsewhere / "secret"),
        str(env / "escape" / "secret"),
        f"{env}/{SITE}/../../../../elsewhere/secret",
        "relative/path",
        str(env / "pointer"),
        str(inside),
        str(env / "missing.py"),
    ]
    store = Store(str(env))
    store.write_journal(_journal("t"))
    saved, outside = take(store.txn_dir("t"), asked, [], INSTALLED, prefix=str(env))
    assert outside == asked[:4]
    assert [f.path for f in saved.files] == [str(env / "pointer"), str(inside)]
    assert saved.files[0].link == str(elsewhere / "secret")
    assert os.listdir(store.txn_dir("t") / SNAPSHOT / "files") == ["0"]
    assert os.stat(elsewhere / "secret").st_nlink == 1


@pytest.mark.reliability
def test_restore_never_writes_through_a_folder_that_now_leads_outside(
    tmp_path: Path, env: Path
) -> None:
    """A symlink to a folder outside, put where the snapshot saw a folder: the symlink is
    removed (never followed) and the folder made again; nothing lands outside."""
    before = tree_digest(env)
    txn_dir, _ = _snap(env)
    saved = load(txn_dir)
    assert saved is not None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(env / "bin")
    (env / "bin").symlink_to(elsewhere)
    assert restore(txn_dir, saved) == [str(env / "bin")]
    assert os.listdir(elsewhere) == []
    assert diff(before, tree_digest(env)) == []


@pytest.mark.reliability
def test_restore_refuses_a_file_standing_where_a_folder_was(env: Path) -> None:
    txn_dir, _ = _snap(env)
    saved = load(txn_dir)
    assert saved is not None
    shutil.rmtree(env / "bin")
    (env / "bin").write_text("a file now\n")
    damaged = tree_digest(env)
    with pytest.raises(StoreError, match="not a folder"):
        restore(txn_dir, saved)
    assert diff(damaged, tree_digest(env)) == []


def test_load_without_a_snapshot_and_a_second_take_is_refused(env: Path) -> None:
    store = Store(str(env))
    store.write_journal(_journal("t"))
    assert load(store.txn_dir("t")) is None
    _snap(env, "u")
    with pytest.raises(StoreError, match="already has a snapshot"):
        take(store.txn_dir("u"), [], [], (), prefix=str(env))


# -- crashes --------------------------------------------------------------------------------

_TAKE = """
import sys
from pathlib import Path
from cudatx.txn.snapshot import take
paths = Path(sys.argv[3]).read_text().splitlines()
print("start", flush=True)
take(Path(sys.argv[1]), paths, [], [], prefix=sys.argv[2])
print("done", flush=True)
"""


@pytest.mark.reliability
def test_a_take_killed_at_any_point_leaves_no_snapshot_or_a_complete_one(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    many = prefix / "many"
    many.mkdir(parents=True)
    paths = []
    for i in range(800):
        path = many / f"f{i:04}"
        path.write_bytes(i.to_bytes(2, "big") * (1 + i % 50))
        paths.append(str(path))
    listing = tmp_path / "paths.txt"
    listing.write_text("\n".join(paths))
    store = Store(str(prefix))
    for txn in ("timing", *(f"crash{n}" for n in range(6))):
        store.write_journal(_journal(txn))
    started = time.monotonic()
    take(store.txn_dir("timing"), paths, [], [], prefix=str(prefix))
    duration = time.monotonic() - started

    rng = random.Random(20261130)
    fractions = [0.05, 0.3, 0.6, 0.9, 1.2, rng.uniform(0, 1.2)]
    outcomes = []
    for n, fraction in enumerate(fractions):
        txn_dir = store.txn_dir(f"crash{n}")
        child = _python(_TAKE, str(txn_dir), str(prefix), str(listing))
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "start"
        time.sleep(duration * fraction)
        child.send_signal(signal.SIGKILL)
        child.wait()
        saved = load(txn_dir)
        if saved is None:
            assert not (txn_dir / SNAPSHOT).exists()
            outcomes.append("partial" if (txn_dir / SNAPSHOT_TMP).exists() else "none")
            # The next take clears the stale snapshot.tmp and completes.
            saved, _ = take(txn_dir, paths, [], [], prefix=str(prefix))
            assert not (txn_dir / SNAPSHOT_TMP).exists()
            assert load(txn_dir) == saved
        else:
            assert not (txn_dir / SNAPSHOT_TMP).exists()
            outcomes.append("complete")
        assert len(saved.files) == len(paths)
        verify_saved(txn_dir, saved)
    assert "partial" in outcomes, outcomes  # at least one kill landed in the middle of a take


def test_a_rollback_before_the_first_journal_is_busy_not_nothing(tmp_path: Path) -> None:
    """A transaction holds the lock before it writes its journal: a rollback in that moment,
    in an environment with nothing recorded yet, is Busy (7) naming the holder, not "nothing
    to roll back" (14), which would be false a moment later. (The real apply of
    test_hardening's test_a_rollback_during_an_apply_is_refused hit that moment on a loaded
    machine.) Once the lock is let go, it is 14 again."""
    from tests.support import make_venv
    from tests.support.cli import cudatx

    venv = make_venv(tmp_path / "venv")
    store = Store(os.fspath(venv))
    with store.lock():
        held = cudatx("rollback", "--yes", "--python", venv)
        dry = cudatx("rollback", "--dry-run", "--python", venv)
    assert held.returncode == ExitCode.BUSY, held.stderr
    assert f"pid {os.getpid()}" in held.stderr
    assert dry.returncode == ExitCode.BUSY, dry.stderr
    after = cudatx("rollback", "--yes", "--python", venv)
    assert after.returncode == ExitCode.NOTHING_TO_ROLL_BACK, after.stderr
