"""cudatx.discover.lddebug on what the real glibc writes: processes that exec another
program (one file, several programs), that fork (a child's lines in its parent's file),
that load by path and by name, and that fail to load; checked against tests/support/judge.py,
which reads the same report its own way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudatx.discover.lddebug import DLOPEN, NEEDED, read_report, report_files
from tests.support import compile_lib, parse_ld_debug

PYTHON = os.path.realpath(sys.executable)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("libs")
    dep = compile_lib(folder / "libdep.so.1", soname="libdep.so.1")
    for name in ("libone.so", "libtwo.so", "libforked.so"):
        compile_lib(folder / name, soname=name, needed=[dep], runpath="$ORIGIN")
    return folder


def _run(code: str, tmp_path: Path, *args: str) -> list[tuple[int, Path]]:
    report = tmp_path / "report"
    report.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env |= {"LD_DEBUG": "libs,files", "LD_DEBUG_OUTPUT": str(report / "ld")}
    subprocess.run([PYTHON, "-c", code, *args], env=env, check=True, timeout=60)
    return [(pid, Path(p)) for pid, p in report_files(str(report), "ld")]


def test_a_dlopen_its_needs_and_a_failure(libs: Path, tmp_path: Path) -> None:
    code = (
        "import ctypes, sys\n"
        "ctypes.CDLL(sys.argv[1])\n"
        "try:\n    ctypes.CDLL('libcudatx-none.so.3')\nexcept OSError:\n    pass\n"
    )
    ((pid, path),) = _run(code, tmp_path, str(libs / "libone.so"))
    (image,) = read_report(path.read_text().splitlines(), pid)
    assert image.pid == pid and image.program is not None
    one = next(ld for ld in image.loads if ld.path == str(libs / "libone.so"))
    assert one.kind == DLOPEN and one.name == one.path
    assert one.by is not None and "_ctypes" in one.by
    dep = next(ld for ld in image.loads if ld.name == "libdep.so.1")
    assert dep.kind == NEEDED and dep.by == str(libs / "libone.so")
    assert dep.path == str(libs / "libdep.so.1")  # found by libone's RUNPATH $ORIGIN
    assert not any("none" in ld.name for ld in image.loads)  # it mapped nothing
    # The judge reads the same report: every mapped request, the same requester and file.
    judged = [r for r in parse_ld_debug(path.read_text(), pid=pid) if r.found]
    assert [(r.name, r.needed_by, r.provider) for r in judged] == [
        (ld.name, ld.by, ld.path) for ld in image.loads
    ]


def test_an_exec_starts_another_program_in_the_same_file(libs: Path, tmp_path: Path) -> None:
    second = "import ctypes, sys; ctypes.CDLL(sys.argv[1])"
    code = f"import os, sys; os.execv({PYTHON!r}, ['again', '-c', {second!r}, sys.argv[1]])"
    ((pid, path),) = _run(code, tmp_path, str(libs / "libtwo.so"))
    first, then = read_report(path.read_text().splitlines(), pid)
    assert first.pid == then.pid == pid
    assert then.program == "again"
    assert not any(ld.path.endswith("libtwo.so") for ld in first.loads)
    two = next(ld for ld in then.loads if ld.path.endswith("libtwo.so"))
    assert two.kind == DLOPEN
    # Each program maps its own interpreter's libraries again from the start.
    assert any(ld.by == "again" and ld.kind == NEEDED for ld in then.loads)


def test_a_forked_child_writes_in_its_parent_s_file(libs: Path, tmp_path: Path) -> None:
    code = (
        "import ctypes, os, sys\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    ctypes.CDLL(sys.argv[1])\n    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    files = _run(code, tmp_path, str(libs / "libforked.so"))
    assert len(files) == 1  # the child never exec'd: no file of its own
    ((pid, path),) = files
    (image,) = read_report(path.read_text().splitlines(), pid)
    forked = next(ld for ld in image.loads if ld.path.endswith("libforked.so"))
    assert forked.kind == DLOPEN
    assert next(ld for ld in image.loads if ld.name == "libdep.so.1").by == forked.path


def test_a_pid_of_thousands_of_digits_is_no_line_of_ld_so() -> None:
    """int() refuses over 4,300 digits (found by tests/test_fuzz.py): such a line is passed
    over, as any line ld.so never writes, and the report around it is still read."""
    lines = [
        "     17:\tfile=libz.so.1 [0];  needed by /bin/prog [0]\n",
        "1" * 5000 + ":\tfile=libx.so.1 [0];  needed by /bin/prog [0]\n",
        "     17:\tfile=libz.so.1 [0];  generating link map\n",
    ]
    (process,) = read_report(lines, 17)
    assert [load.name for load in process.loads] == ["libz.so.1"]
