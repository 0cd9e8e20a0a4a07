"""ownership.losing_code in the environment after a change: a distribution the change does
not touch answers from what it lost on disk now, plus the targets of its symlinks; the
others are looked at file by file. Judged against the file-by-file answer and against the
interpreter after the real removal."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cudatx.analysis import ownership
from cudatx.discover.target import start_query
from cudatx.loader.fileview import FileView
from cudatx.planning.selection import select
from cudatx.planning.simulate import simulate
from cudatx.scan import scan
from tests.support import build_wheel, make_venv, site_packages, uv_install, uv_uninstall


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("losing")
    wheels = root / "wheels"
    built = [
        build_wheel(wheels, "foo", "1.0", {"pkgfoo/__init__.py": b"X = 1\n"}),
        # foo's folder, and foo's module with other bytes (a twin's): removing foo deletes it
        build_wheel(
            wheels,
            "foo-extra",
            "1.0",
            {"pkgfoo/__init__.py": b"X = 2\n", "pkgfoo/extra.py": b"Y = 2\n"},
        ),
        # mod.py becomes a link to foo's module (a deduplicating tool, a hand-made link)
        build_wheel(
            wheels, "bar", "1.0", {"pkgbar/__init__.py": b"\n", "pkgbar/mod.py": b"X = 0\n"}
        ),
        build_wheel(wheels, "baz", "1.0", {"pkgbaz/__init__.py": b"Z = 3\n"}),
        # lost its module before the change
        build_wheel(wheels, "qux", "1.0", {"pkgqux/__init__.py": b"Q = 4\n"}),
    ]
    env = make_venv(root / "venv")
    uv_install(env, built[:1], link_mode="copy")
    uv_install(env, built[1:], link_mode="copy")  # foo-extra's bytes over foo's
    site = site_packages(env)
    (site / "pkgbar" / "mod.py").unlink()
    (site / "pkgbar" / "mod.py").symlink_to("../pkgfoo/__init__.py")
    (site / "pkgqux" / "__init__.py").unlink()
    return env


def test_the_answer_after_a_removal_is_the_file_by_file_one(
    venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = scan(start_query(str(venv)), ld_library_path=None, cwd=venv)
    assert ownership.losing_code(env) == ("qux",)
    after = simulate(env, select(env, ("foo",)))
    looked: list[str] = []
    missing = ownership._missing

    def counted(view: FileView, path: str) -> bool:
        looked.append(path)
        return missing(view, path)

    monkeypatch.setattr(ownership, "_missing", counted)
    found = ownership.losing_code(after)
    site = str(site_packages(venv))
    # Only foo-extra, in whose folder the change deletes a file, is looked at file by file.
    assert looked and {os.path.dirname(p) for p in looked} == {os.path.join(site, "pkgfoo")}
    every = tuple(
        d.name
        for d in after.distributions
        if any(missing(after.view, p) for p in ownership._code_paths(d))
    )
    assert found == every == ("bar", "foo-extra", "qux")


def test_the_interpreter_agrees_after_the_real_removal(venv: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(venv, copy, symlinks=True)
    uv_uninstall(copy, ["foo"])
    python = os.fspath(copy / "bin" / "python")

    def imports(line: str) -> bool:
        done = subprocess.run([python, "-c", line], capture_output=True, check=False)
        return done.returncode == 0

    # pkgqux still imports, as a namespace package (PEP 420), without what its module held
    assert not imports("from pkgbar.mod import X") and not imports("from pkgqux import Q")
    assert not imports("from pkgfoo import X")
    assert imports("from pkgbaz import Z") and imports("from pkgfoo.extra import Y")
