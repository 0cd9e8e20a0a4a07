"""Hardening: a tool that deletes and restores files must never make things worse.

Paths that leave the environment, a damaged store, faults while applying (uv failing, killed
or gone, a full disk, a file the kernel will not let go of) and concurrent commands, each run
as a user runs cudatx, on the real venv of tests/support/txn_world.py (real uv, real wheels, real
libraries). Each test records what it injected and what came of it (`record_property`):
`python -m tests.reliability_report` turns that into README's Reliability table.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from cudatx.discover import confinement
from cudatx.discover.dists import scan_distributions
from cudatx.txn import rollback, touched
from cudatx.txn.journal import Journal, Package, State
from tests.support.digest import tree_digest
from tests.support.txn_world import (
    BUSY,
    CU12,
    CU12_VERSION,
    CU13,
    CU13_VERSION,
    CUDNN,
    NCCL,
    NCCL_VERSION,
    ROLLED_BACK,
    STORE,
    Venv,
    assert_repaired,
    assert_same,
    error,
    holding_the_lock,
    journals,
    repair_args,
    root_only,
    run,
    start,
    tmpfs,
    wrapper,
)

pytestmark = pytest.mark.reliability
Record = Callable[[str, object], None]


def tally(record: Record, outcome: str, cases: int = 1) -> None:
    record("cases", cases)
    record("outcome", outcome)


# --------------------------------------------------------------------------------------
# 2. Paths that leave the environment
# --------------------------------------------------------------------------------------


def _leaky(v: Venv, sentinel: Path, name: str, version: str) -> list[str]:
    """Append to a distribution's RECORD three entries that lead to `sentinel` (outside the
    venv): `../`s, an absolute path, and a path through a symlink in site-packages."""
    rel = os.path.relpath(sentinel / "dotdot", v.site)
    entries = [rel, os.fspath(sentinel / "absolute"), "leak/through-symlink"]
    with open(v.dist_info(name, version) / "RECORD", "a") as handle:
        handle.writelines(f"{e},,\n" for e in entries)
    return entries


@pytest.fixture
def sentinel(venv: Venv, tmp_path: Path) -> Path:
    folder = tmp_path / "sentinel"  # beside the venv, not in it
    folder.mkdir()
    for name in ("dotdot", "absolute", "through-symlink"):
        (folder / name).write_text(f"{name}: not the environment's\n")
    (venv.site / "leak").symlink_to(folder)  # listed by no RECORD
    return folder


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("remove", id="remove"),
        pytest.param("repair", id="repair"),
    ],
)
def test_record_entries_outside_the_environment_are_never_touched(
    venv: Venv, sentinel: Path, how: str, record_property: Record
) -> None:
    if how == "remove":
        leaks = _leaky(venv, sentinel, NCCL, NCCL_VERSION)
        args: tuple[str, ...] = ("remove", NCCL, "--yes", "--ignore-running")
    else:
        leaks = _leaky(venv, sentinel, CU12, CU12_VERSION)
        _leaky(venv, sentinel, CU13, CU13_VERSION)  # reinstalled: uv uninstalls it first
        args = repair_args(venv)
    outside = tree_digest(sentinel)
    before = venv.digest()

    dry = run(venv, *args[:2], "--dry-run", *args[2:])
    assert "paths outside the environment" in dry.stdout, dry.stdout
    assert all(repr(e) in dry.stdout for e in leaks), dry.stdout

    done = run(venv, *args)
    assert done.returncode == 0, done.stderr
    assert "escapes" not in done.stderr  # uv never saw them
    assert tree_digest(sentinel) == outside
    if how == "repair":
        assert_repaired(venv)
    [journal] = journals(venv)
    withheld = journal["withheld"]
    assert isinstance(withheld, list) and len(withheld) == 3 * (1 + (how == "repair"))
    manifest = json.loads(
        (venv.store / "transactions" / str(journal["id"]) / "snapshot" / "manifest.json")
        .read_bytes()
        .decode()
    )
    saved = [f["path"] for f in manifest["files"]] + manifest["folders"]
    assert all(p.startswith(os.fspath(venv.path) + "/") for p in saved)
    assert not any(p.startswith(os.fspath(venv.site / "leak") + "/") for p in saved)

    back = run(venv, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    assert tree_digest(sentinel) == outside
    assert_same(before, venv.digest())  # the RECORDs come back with their outside entries
    tally(record_property, f"{len(withheld)} entries withheld; sentinel unchanged; rolled back")


def test_outside_is_read_as_the_kernel_and_as_an_installer_read_it(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    site = prefix / "lib" / "site-packages"
    (site / "deep" / "er").mkdir(parents=True)
    (tmp_path / "away" / "x").mkdir(parents=True)
    (site / "escape").symlink_to(tmp_path / "away" / "x")
    real = os.path.realpath(prefix)
    inside = ["pkg/a.py", "../../bin/tool", "deep/er/../../pkg/b.py", "escape"]
    outside = [
        "../../../x",
        "/etc/passwd",
        "escape/file",
        "escape/../y",  # lexically site/y; the kernel climbs from the symlink's target
        "deep/../../../../z",
        "nul\0byte",
    ]
    for entry in inside:
        assert confinement.entry_inside(os.fspath(site), entry, real), entry
    for entry in outside:
        assert not confinement.entry_inside(os.fspath(site), entry, real), entry


def test_rollback_never_removes_through_a_symlink_that_leads_out(tmp_path: Path) -> None:
    """What a reinstall added is removed by rollback, but only inside the environment."""
    prefix = tmp_path / "env"
    site = prefix / "lib" / "python3.11" / "site-packages"
    info = site / "pkg-1.0.dist-info"
    info.mkdir(parents=True)
    away = tmp_path / "away"
    away.mkdir()
    (away / "precious").write_text("not the environment's\n")
    (site / "escape").symlink_to(away)
    (site / "pkg.py").write_text("")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    (info / "RECORD").write_text("pkg.py,,\nescape/precious,,\npkg-1.0.dist-info/RECORD,,\n")
    [dist], _ = scan_distributions((os.fspath(site),))
    assert confinement.withheld([dist], os.fspath(prefix)) == (
        confinement.Withheld(
            distribution="pkg", entry="escape/precious", reason="outside the environment"
        ),
    )
    journal = Journal(
        id="t",
        command="cudatx remove pkg",
        prefix=os.fspath(prefix),
        sites=(os.fspath(site),),
        created="now",
        remove=(Package(name="pkg", version="1.0"),),
        state=State.ROLLING_BACK,
    )
    rollback._remove_added(journal, keep=set())
    assert (away / "precious").is_file()
    assert not (site / "pkg.py").exists()


# --------------------------------------------------------------------------------------
# 3. The store
# --------------------------------------------------------------------------------------


def _saved_files(v: Venv) -> tuple[Path, dict[str, str]]:
    """(the snapshot's files/ folder, live path -> stored name) of the one transaction."""
    [folder] = (v.store / "transactions").iterdir()
    manifest = json.loads((folder / "snapshot" / "manifest.json").read_text())
    return folder / "snapshot" / "files", {
        f["path"]: f["stored"] for f in manifest["files"] if f["stored"] is not None
    }


def _damage(how: str, saved: Path) -> None:
    if how == "flipped byte":
        data = bytearray(saved.read_bytes())
        data[len(data) // 2] ^= 0x01
        saved.unlink()  # a new inode: the live file may share the old one
        saved.write_bytes(bytes(data))
    elif how == "truncated":
        data = saved.read_bytes()
        saved.unlink()
        saved.write_bytes(data[: len(data) // 2])
    elif how == "missing":
        saved.unlink()
    elif how == "symlink":  # to an identical copy outside the store: never followed
        copy = saved.parent.parent.parent / "copy"
        shutil.copyfile(saved, copy)
        saved.unlink()
        saved.symlink_to(copy)


@pytest.mark.parametrize("how", ["flipped byte", "truncated", "missing", "symlink"])
def test_rollback_refuses_saved_bytes_that_fail_their_hash(
    venv: Venv, how: str, record_property: Record
) -> None:
    done = run(venv, *repair_args(venv))
    assert done.returncode == 0, done.stderr
    files, stored = _saved_files(venv)
    victim = os.fspath(venv.site / CUDNN)
    _damage(how, files / stored[victim])
    committed = venv.digest()

    refused = run(venv, "rollback", "--yes")
    assert refused.returncode == STORE, refused.stderr
    assert victim in error(refused)
    assert_same(committed, venv.digest())
    assert journals(venv)[0]["state"] == "rolling back"  # left for a rollback once repaired
    tally(record_property, f"exit {STORE}, names the file, tree unchanged")


def test_store_folders_are_0700_and_saved_copies_0600(venv: Venv, record_property: Record) -> None:
    # The store on another filesystem: every file is a copy, made by cudatx.
    store = venv.store
    store.mkdir(mode=0o700)
    with tmpfs(store, "64m"):
        done = run(venv, *repair_args(venv))
        assert done.returncode == 0, done.stderr
        modes = {}
        for folder, dirs, names in os.walk(store):
            for d in dirs:
                modes[os.path.join(folder, d)] = os.lstat(os.path.join(folder, d)).st_mode
            for n in names:
                modes[os.path.join(folder, n)] = os.lstat(os.path.join(folder, n)).st_mode
        folders = [p for p, m in modes.items() if os.path.isdir(p)]
        assert len(folders) >= 4
        assert all(m & 0o777 == 0o700 for p, m in modes.items() if p in folders), modes
        assert all(m & 0o077 == 0 for p, m in modes.items() if p not in folders), modes
    tally(record_property, f"{len(modes)} store entries, none readable by others")


def test_a_symlink_planted_in_the_store_is_never_written_through(
    venv: Venv, tmp_path: Path, record_property: Record
) -> None:
    away = tmp_path / "away"
    away.mkdir()
    venv.store.mkdir(mode=0o700)
    (venv.store / "transactions").symlink_to(away)
    before = venv.digest()
    done = run(venv, *repair_args(venv))
    assert done.returncode == STORE, done.stderr
    assert "transactions" in error(done)
    assert os.listdir(away) == []
    assert_same(before, venv.digest())
    tally(record_property, f"exit {STORE}; nothing written through the symlink; tree unchanged")


# --------------------------------------------------------------------------------------
# 4. Faults
# --------------------------------------------------------------------------------------

UV_KILLED = """\
if [ "$1 $2" = "{step}" ]; then
    "$REAL" "$@" >/dev/null 2>&1
    kill -9 $$
fi
exec "$REAL" "$@"
"""
UV_VANISHES = """\
if [ "$1 $2" = "pip uninstall" ]; then
    rm -f "$0"
fi
exec "$REAL" "$@"
"""
UV_FAILS_TO_INSTALL = """\
if [ "$1 $2" = "pip install" ]; then
    echo "error: Failed to install: No space left on device (os error 28)" >&2
    exit 2
fi
exec "$REAL" "$@"
"""
FAULTS = [
    pytest.param(UV_KILLED.format(step="pip uninstall"), "killed by signal 9", id="uv-killed"),
    pytest.param(
        UV_KILLED.format(step="pip install"), "killed by signal 9", id="uv-killed-reinstalling"
    ),
    pytest.param(UV_VANISHES, "No such file or directory", id="uv-missing-by-reinstall"),
    pytest.param(
        UV_FAILS_TO_INSTALL,
        "error: Failed to install: No space left on device (os error 28)",
        id="uv-fails-reinstalling",
    ),
]


@pytest.mark.parametrize(("script", "said"), FAULTS)
def test_uv_faults_roll_back_with_uvs_own_error(
    venv: Venv, script: str, said: str, record_property: Record
) -> None:
    before = venv.digest()
    uv = wrapper(venv, "uv-fault", script)
    # uv vanishing is another process's doing; this wrapper does it itself, from inside the
    # sandbox, where its own folder is (rightly) read-only: it runs unconfined
    env = {"CUDATX_SANDBOX": "off"} if script == UV_VANISHES else None
    done = run(venv, *repair_args(venv, "--uv", os.fspath(uv)), env=env)
    assert done.returncode == ROLLED_BACK, done.stderr
    line = error(done)
    assert said in line and "rolled back" in line, line
    assert_same(before, venv.digest())
    [journal] = journals(venv)
    assert journal["state"] == "rolled back"
    tally(record_property, f"exit {ROLLED_BACK}, uv's error in the message, tree unchanged")


def _snapshot_size(v: Venv) -> int:
    """Bytes a snapshot of `remove nvidia-cudnn-cu12 --repair` copies (both cuDNNs' files)."""
    dists, _ = scan_distributions((os.fspath(v.site),))
    paths = {p for d in dists if d.name in (CU12, CU13) for p in touched.files_of(d)}
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_disk_full_while_the_snapshot_is_written_deletes_nothing(
    venv: Venv, fraction: float, record_property: Record
) -> None:
    """The store on its own small filesystem: no hard links across filesystems, so the
    snapshot copies every file and fills it. uv must never run."""
    needed = _snapshot_size(venv)
    store = venv.store
    store.mkdir(mode=0o700)
    marker = venv.work / "uv-ran"
    # uv's resolution (`pip compile`, asked where a reinstall's bytes come from) reads and
    # may run while the plan is made; a step that changes the environment never may
    marks = f'case "$1 $2" in "pip install"|"pip uninstall"|"pip sync") touch {marker};; esac\n'
    uv = wrapper(venv, "uv-marks", marks + 'exec "$REAL" "$@"\n')
    before = venv.digest()
    # tmpfs rounds the size up to pages; the journal (some 12 KB with the plan's rebinds,
    # twice while atomic_write replaces it) must still fit.
    size = max(int(needed * fraction), 64 * 1024)
    with tmpfs(store, f"{size}"):
        done = run(venv, *repair_args(venv, "--uv", os.fspath(uv)))
        assert done.returncode == STORE, done.stderr
        assert "No space left on device" in error(done), error(done)
        assert not marker.exists()
        assert_same(before, venv.digest())
        states = [j["state"] for j in journals(venv)]
        assert states == ["rolled back"], states  # nothing left to complete
        assert not list(store.glob("transactions/*/snapshot*"))  # the space is given back
    tally(record_property, f"store of {size} B for {needed} B: exit {STORE}, uv never ran")


def _immutable(path: Path) -> AbstractContextManager[None]:
    flag = ["chattr", "+i", os.fspath(path)]
    return root_only(flag, ["chattr", "-i", os.fspath(path)], "chattr +i")


def test_a_file_that_cannot_be_deleted_rolls_back_whole(
    venv: Venv, record_property: Record
) -> None:
    """Root ignores permission bits, so the file is made immutable (chattr +i): unlink(2)
    fails with EPERM, as it fails with EACCES for a user without write access to the folder.
    uv stops half-way through its deletions; cudatx puts back what uv had deleted."""
    before = venv.digest()
    victim = venv.site / CUDNN
    with _immutable(victim):
        done = run(venv, *repair_args(venv))
        assert done.returncode == ROLLED_BACK, done.stderr
        line = error(done)
        assert "Operation not permitted" in line and "rolled back" in line, line
        assert_same(before, venv.digest())
    [journal] = journals(venv)
    assert journal["state"] == "rolled back"
    tally(record_property, f"exit {ROLLED_BACK}, the kernel's refusal named, tree unchanged")


# --------------------------------------------------------------------------------------
# 5. Concurrency
# --------------------------------------------------------------------------------------


def test_a_rollback_during_an_apply_is_refused(venv: Venv, record_property: Record) -> None:
    before = venv.digest()
    with holding_the_lock(venv) as first:
        refused = run(venv, "rollback", "--yes")
        assert refused.returncode == BUSY, refused.stderr
        assert f"pid {first.pid}" in error(refused)
    assert_repaired(venv)
    assert journals(venv)[0]["state"] == "committed"
    assert run(venv, "rollback", "--yes").returncode == 0
    assert_same(before, venv.digest())
    tally(record_property, f"exit {BUSY} naming the holder; the apply committed")


READERS = 20


def test_twenty_read_only_commands_at_once_agree(venv: Venv, record_property: Record) -> None:
    before = venv.digest()
    commands = [
        ("doctor", "--json") if i % 2 else ("remove", CU12, "--dry-run", "--json")
        for i in range(READERS)
    ]
    procs = [start(venv, *c) for c in commands]
    results = [(p.args, *p.communicate(timeout=300), p.wait()) for p in procs]
    by_command: dict[tuple[str, ...], set[tuple[str, int]]] = {}
    for command, (_, out, err, code) in zip(commands, results, strict=True):
        assert "error" not in err.lower() and "Traceback" not in err, err
        json.loads(out)
        by_command.setdefault(command, set()).add((out, code))
    assert all(len(answers) == 1 for answers in by_command.values()), "answers differ"
    assert_same(before, venv.digest())
    assert not venv.store.exists()  # read-only commands write nothing
    tally(record_property, "identical answers, no errors, nothing written", cases=READERS)
