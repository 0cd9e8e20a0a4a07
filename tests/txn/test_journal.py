"""The journal and what is read from it: history's counts, the command line it records,
rollback's site folders, a bug during an apply, and how often rollback hashes."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from cudatx import documents
from cudatx.cli import main
from cudatx.render import history as render_history
from cudatx.txn import rollback, snapshot
from cudatx.txn.journal import Journal, Package, State
from tests.support.txn_world import (
    CU12,
    CU12_VERSION,
    ROLLED_BACK,
    Venv,
    assert_same,
    journals,
    repair_args,
    run,
)


def _journal(**fields: object) -> Journal:
    data: dict[str, object] = {
        "id": "20261201T000000.000000Z-1",
        "command": "cudatx install pkg",
        "prefix": "/env",
        "sites": ("/env/lib/python3.11/site-packages",),
        "created": "2026-12-01T00:00:00+00:00",
        "state": State.COMMITTED,
    }
    return documents.load(Journal, data | fields)


def test_history_counts_installs_with_removals_and_reinstalls() -> None:
    one = Package(name="pkg", version="1.0")
    lines = render_history.to_text(
        [
            _journal(install=(one,)),
            _journal(remove=(one,), install=(Package(name="pkg", version="2.0"),)),
            _journal(remove=(one,), reinstall=(Package(name="other", version="3"),)),
        ]
    ).splitlines()
    assert [re.findall(r"  (\d+ changes?)  ", line) for line in lines] == [
        ["1 change"],
        ["2 changes"],
        ["2 changes"],
    ]


def test_the_journal_keeps_the_command_line_shell_quoted(venv: Venv) -> None:
    check = "python -c 'import cudnnuser._ext'"
    args = (*repair_args(venv), "--verify", check)
    done = run(venv, *args)
    assert done.returncode == 0, done.stderr
    (journal,) = journals(venv)
    expected = ["cudatx", *args, "--python", os.fspath(venv.path)]
    assert journal["command"] == shlex.join(expected)
    assert shlex.split(str(journal["command"])) == expected


def _in_process(venv: Venv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run cudatx in this process as the txn world runs it in a subprocess (offline uv with
    its own cache, no VIRTUAL_ENV), with sys.argv pytest's own."""
    monkeypatch.chdir(venv.work)
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "CUDATX_DEBUG", "LD_LIBRARY_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("UV_CACHE_DIR", os.fspath(venv.wheels.uv_cache))
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")


def test_main_from_python_records_the_argv_it_was_given(
    venv: Venv, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_process(venv, monkeypatch)
    args = [*repair_args(venv), "--python", os.fspath(venv.path)]
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 0
    (journal,) = journals(venv)
    assert journal["command"] == shlex.join(["cudatx", *args])


def test_a_bug_during_an_apply_is_an_internal_error_and_the_env_goes_back(
    venv: Venv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not "rolled back" (exit 10, as for a failed uv or --verify) with a message like
    `'key'`: the environment goes back, and the bug says it is one (exit 70)."""
    _in_process(venv, monkeypatch)
    before = venv.digest()

    def bug(*args: object) -> None:
        raise KeyError("key")

    monkeypatch.setattr("cudatx.txn.apply.verify", bug)
    with pytest.raises(SystemExit) as done:
        main([*repair_args(venv), "--python", os.fspath(venv.path)])
    assert done.value.code == 70
    (line,) = capsys.readouterr().err.splitlines()[-1:]
    assert line.startswith("cudatx: internal error: KeyError: 'key'"), line
    assert_same(before, venv.digest())
    (journal,) = journals(venv)
    assert journal["state"] == "rolled back"
    assert journal["error"] == "internal error: KeyError: 'key'"


def test_a_failure_of_the_change_itself_is_rolled_back_exit_10(venv: Venv) -> None:
    before = venv.digest()
    done = run(venv, *repair_args(venv), "--verify", "exit 3")
    assert done.returncode == ROLLED_BACK, done.stderr
    assert_same(before, venv.digest())


def test_rollback_checks_each_saved_file_once(venv: Venv, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(venv, *repair_args(venv)).returncode == 0
    checked: list[int] = []
    verify_saved = snapshot.verify_saved

    def counting(txn_dir: Path, saved: snapshot.Snapshot) -> None:
        checked.append(len(saved.files))
        verify_saved(txn_dir, saved)

    monkeypatch.setattr(snapshot, "verify_saved", counting)
    assert rollback.rollback(os.fspath(venv.path), None, force=False)[1] == "rolled back"
    assert len(checked) == 1 and checked[0] > 0


def test_rollback_looks_for_added_files_in_the_journals_site_folders(tmp_path: Path) -> None:
    """Where a reinstall added files, rollback finds them in the site folders the journal
    names, whatever their layout (not only lib/pythonX.Y/site-packages)."""
    prefix = tmp_path / "env"
    site = prefix / "pkgs"
    info = site / f"{CU12.replace('-', '_')}-{CU12_VERSION}.dist-info"
    info.mkdir(parents=True)
    (site / "added.py").write_text("")
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {CU12}\nVersion: {CU12_VERSION}\n"
    )
    (info / "RECORD").write_text(f"added.py,,\n{info.name}/RECORD,,\n")
    journal = _journal(
        prefix=os.fspath(prefix),
        sites=(os.fspath(site),),
        reinstall=(Package(name=CU12, version=CU12_VERSION),),
        state=State.ROLLING_BACK,
    )
    rollback._remove_added(journal, keep=set())
    assert not (site / "added.py").exists()
    assert not info.exists()


def test_a_journal_that_is_not_one_is_a_corrupt_store(venv: Venv) -> None:
    assert run(venv, *repair_args(venv)).returncode == 0
    (folder,) = (venv.store / "transactions").iterdir()
    (folder / "journal.json").write_text('{"id": 3}')
    done = run(venv, "rollback", "--yes")
    assert done.returncode == 12, done.stderr
    assert "journal of transaction" in done.stderr and "is corrupt" in done.stderr
