"""What uv deletes, planned exactly: RECORD read as uv reads it, entries uv must not be given
withheld and named, everything that goes saved (``__pycache__`` and the modes of folders).

A small world of its own: real wheels (``pure``, with a subpackage, and ``other``) installed
by real uv into a real venv, a sentinel folder beside the venv, and cudatx run as a user runs
it. "The digest" is tests.support.digest.tree_digest with ``__pycache__`` included.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import build_wheel, make_venv, site_packages, uv_install, venv_python
from tests.support.cli import cudatx
from tests.support.digest import Entry, diff, tree_digest

PURE_FILES = {
    "pure/__init__.py": b"from pure import mod\n",
    "pure/mod.py": b"VALUE = 1\n",
    "pure/sub/__init__.py": b"",
    "pure/sub/deep.py": b"DEEP = 2\n",
}
OTHER_FILES = {"other/__init__.py": b"", "other/data.txt": b"precious\n"}


@dataclass(frozen=True)
class World:
    venv: Path
    site: Path
    work: Path
    sentinel: Path

    @property
    def record(self) -> Path:
        return self.site / "pure-1.0.dist-info" / "RECORD"

    def digest(self) -> dict[str, Entry]:
        return tree_digest(self.venv, exclude=(".cudatx",))

    def outside(self) -> dict[str, Entry]:
        return tree_digest(self.sentinel, exclude=())


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("record-wheels")
    return [
        build_wheel(out, "pure", "1.0", PURE_FILES),
        build_wheel(out, "other", "1.0", OTHER_FILES),
    ]


@pytest.fixture
def world(wheels: list[Path], tmp_path: Path) -> World:
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, wheels)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("outside the environment\n")
    work = tmp_path / "work"
    work.mkdir()
    return World(venv, site_packages(venv), work, sentinel)


def run(w: World, *args: str) -> subprocess.CompletedProcess[str]:
    done = cudatx(
        *args,
        "--python",
        w.venv,
        cwd=w.work,
        hide=("VIRTUAL_ENV", "CONDA_PREFIX", "CUDATX_DEBUG", "LD_LIBRARY_PATH", "UV_*", "PIP_*"),
        env={"UV_CACHE_DIR": os.fspath(w.work / "uv-cache"), "UV_NO_CONFIG": "1"},
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def assert_same(before: dict[str, Entry], after: dict[str, Entry]) -> None:
    assert after == before, "\n".join(diff(before, after))


def rolled_back_to(w: World, before: dict[str, Entry], outside: dict[str, Entry]) -> None:
    """`cudatx rollback` succeeds and gives back the tree; the sentinel never changed."""
    back = run(w, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    assert_same(before, w.digest())
    assert_same(outside, w.outside())


def without_pure(digest: dict[str, Entry]) -> dict[str, Entry]:
    """The digest less what uninstalling pure takes: its package and its metadata folder
    (keys are `lib/pythonX.Y/site-packages/TOP/...`)."""
    return {
        k: v
        for k, v in digest.items()
        if k.split("/")[3:4] not in (["pure"], ["pure-1.0.dist-info"])
    }


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
