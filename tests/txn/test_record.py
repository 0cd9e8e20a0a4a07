"""What uv deletes, planned exactly: RECORD read as uv reads it, entries uv must not be given
withheld and named, everything that goes saved (``__pycache__`` and the modes of folders).

In the small world of tests/support/pure_world.py (``pure`` and ``other``, a sentinel
outside the venv).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support import venv_python
from tests.support.pure_world import World, rolled_back_to, run, without_pure
from tests.support.txn_world import assert_same


@pytest.mark.reliability
@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        pytest.param("other", "a folder", id="another-dists-folder"),
        pytest.param("", "empty", id="empty"),
        pytest.param(".", "a folder", id="the-site-folder"),
        pytest.param("../../../bin", "a folder", id="bin"),
        pytest.param("../../..", "the environment itself", id="the-prefix"),
        pytest.param("../../../.cudatx", "store", id="the-store"),
        pytest.param("../../../.cudatx/lock", "store", id="the-store-lock"),
        pytest.param("pure/\0x", "NUL byte", id="nul-byte"),
    ],
)
def test_an_entry_uv_must_not_be_given_is_withheld_and_named(
    world: World, entry: str, reason: str
) -> None:
    with world.record.open("a", newline="") as f:
        f.write(f"{entry},,\n")
    before, outside = world.digest(), world.outside()

    dry = run(world, "remove", "pure", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "never lets uv delete" in dry.stdout and reason in dry.stdout, dry.stdout
    assert_same(before, world.digest())

    done = run(world, "remove", "pure", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    after = world.digest()
    assert not (world.site / "pure").exists()
    # Everything but pure is where it was: another's folder, the site, bin/python, the store.
    assert_same(without_pure(before), without_pure(after))
    assert (world.venv / ".cudatx" / "transactions").is_dir()

    rolled_back_to(world, before, outside)


@pytest.mark.reliability
def test_a_record_with_a_byte_order_mark_is_read_as_uv_reads_it(world: World) -> None:
    lines = world.record.read_text().splitlines(keepends=True)
    lines.sort(key=lambda ln: not ln.startswith("pure/__init__.py,"))  # it first, after the mark
    world.record.write_text("\ufeff" + "".join(lines))
    before, outside = world.digest(), world.outside()

    done = run(world, "remove", "pure", "--yes", "--ignore-running")
    assert done.returncode == 0, done.stderr
    assert not (world.site / "pure" / "__init__.py").exists()  # uv read past the mark

    rolled_back_to(world, before, outside)


@pytest.mark.reliability
def test_pycache_and_the_modes_of_folders_come_back(world: World) -> None:
    compiled = subprocess.run(
        [
            os.fspath(venv_python(world.venv)),
            "-m",
            "compileall",
            "-q",
            os.fspath(world.site / "pure"),
        ],
        cwd=world.work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    pycs = sorted(world.site.glob("pure/**/__pycache__/*.pyc"))
    assert len(pycs) == 4, pycs
    (world.site / "pure" / "sub").chmod(0o700)
    (world.site / "pure").chmod(0o750)
    before = world.digest()

    done = run(world, "remove", "pure", "--yes", "--ignore-running")
    assert done.returncode == 0, done.stderr
    assert not (world.site / "pure").exists()  # uv removed __pycache__, then the folders

    back = run(world, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    assert_same(before, world.digest())
