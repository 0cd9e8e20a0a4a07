"""A small world for the transaction's hardening tests: real wheels (``pure``, with a
subpackage, and ``other``) installed by real uv into a real venv, a sentinel folder beside
the venv that nothing may touch, and cudatx run in it as a user runs it. "The digest" is
tests.support.digest.tree_digest of the venv with ``__pycache__`` included; its fixtures
are in tests/txn/conftest.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cli import HIDDEN, cudatx, start_cudatx
from .digest import Entry, tree_digest
from .txn_world import assert_same
from .venvs import make_venv, site_packages, uv_install
from .wheels import build_wheel

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


def build_pure_wheels(out: Path) -> list[Path]:
    return [
        build_wheel(out, "pure", "1.0", PURE_FILES),
        build_wheel(out, "other", "1.0", OTHER_FILES),
    ]


def install_pure_world(wheels: list[Path], tmp_path: Path, python: str = sys.executable) -> World:
    """A fresh venv of the wheels (made with `python`), a sentinel folder and a work folder
    under `tmp_path`."""
    venv = make_venv(tmp_path / "venv", python)
    uv_install(venv, wheels)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("outside the environment\n")
    work = tmp_path / "work"
    work.mkdir()
    return World(venv, site_packages(venv), work, sentinel)


def _how(w: World, env: dict[str, str] | None) -> dict[str, Any]:
    return {
        "cwd": w.work,
        "hide": (*HIDDEN, "CUDATX_TEST_*", "UV_*", "PIP_*"),
        "env": {"UV_CACHE_DIR": os.fspath(w.work / "uv-cache"), "UV_NO_CONFIG": "1", **(env or {})},
        "stdin": subprocess.DEVNULL,
    }


def run(
    w: World, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m cudatx ARGS --python VENV` in the work folder, stdin not a terminal, uv
    with a cache of its own; `env` set over that. No traceback, no internal error."""
    done = cudatx(*args, "--python", w.venv, **_how(w, env), timeout=timeout)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def start(w: World, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`run`, left running in the background."""
    return start_cudatx(*args, "--python", w.venv, **_how(w, env))


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
