"""The process a module is really imported in, judged by the real interpreter
(cudatx.discover.imports.Companion, cudatx.scan's companions, cudatx.analysis.optional).

The wheel `apkg` ships two top-level packages, as torch 2.0's wheel ships torch and nvfuser:
`apkg`, whose `__init__.py` loads its own `apkg/lib/libx.so.1` with ctypes and then imports
`bpkg`; and `bpkg`, whose `_ext` needs libx.so.1 with no RUNPATH to it (and libdep.so.1 from
the wheel `dep-lib`, through its RUNPATH). `import apkg` works; a bare `import bpkg` in a new
process does not, and stands for no user's import. `bpkg._cudnn` needs a library nothing
installs and only `apkg/cudnn.py` imports it, under `try: ... except ImportError` (CuPy's
cuDNN module). The controls: the same wheel with `import bpkg` above the ctypes load (then
`import apkg` really fails), and `bpkg` in a wheel of its own (then `import bpkg` is a
user's import, and it fails).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    uv_install,
)
from tests.support.cli import cudatx

PRELOAD = b"""\
import ctypes
import os

ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libx.so.1"))
"""
CUDNN = b"""\
available = True
try:
    from bpkg._cudnn import *  # noqa
except ImportError:
    available = False
"""
TAG = "py3-none-linux_x86_64"


def _world(root: Path, *, import_first: bool = False, own_wheel: bool = False) -> Path:
    build = root / "build"
    libx = compile_lib(build / "libx.so.1", soname="libx.so.1")
    dep = compile_lib(build / "libdep.so.1", soname="libdep.so.1")
    gone = compile_lib(build / "gone" / "libgone.so.8", soname="libgone.so.8")
    ext = compile_extension(build, "_ext", needed=[libx, dep], runpath="$ORIGIN/../deplib")
    cudnn = compile_extension(build, "_cudnn", needed=[gone])
    init = b"import bpkg\n" + PRELOAD if import_first else PRELOAD + b"import bpkg\n"
    apkg: dict[str, bytes | Path] = {
        "apkg/__init__.py": init,
        "apkg/cudnn.py": CUDNN,
        "apkg/lib/libx.so.1": libx,
    }
    bpkg: dict[str, bytes | Path] = {
        "bpkg/__init__.py": b"from . import _ext\n",
        f"bpkg/_ext{ext_suffix()}": ext,
        f"bpkg/_cudnn{ext_suffix()}": cudnn,
    }
    out = root / "wheels"
    wheels = [build_wheel(out, "dep-lib", "1.0", {"deplib/libdep.so.1": dep}, tag=TAG)]
    if own_wheel:
        wheels.append(build_wheel(out, "bpkg", "1.0", bpkg, requires=["dep-lib"], tag=TAG))
        wheels.append(build_wheel(out, "apkg", "1.0", apkg, requires=["bpkg"], tag=TAG))
    else:
        both = {**apkg, **bpkg}
        wheels.append(build_wheel(out, "apkg", "1.0", both, requires=["dep-lib"], tag=TAG))
    venv = make_venv(root / "venv")
    uv_install(venv, wheels)
    return venv


def _runs(venv: Path, code: str) -> bool:
    python = venv / "bin" / "python"
    done = subprocess.run([str(python), "-c", code], capture_output=True, check=False)
    return done.returncode == 0


def _doctor(venv: Path) -> tuple[int, dict[str, object]]:
    done = cudatx("doctor", "--python", venv, "--json")
    return done.returncode, json.loads(done.stdout)


def _errors(venv: Path) -> list[str]:
    """What doctor says fails, where it exits 1."""
    rc, report = _doctor(venv)
    problems = report["problems"]
    assert rc == 1 and isinstance(problems, list), problems
    return [c for p in problems for c in p["consequences"]]


def test_a_companion_is_judged_after_its_importer_and_its_optional_module_is_a_note(
    tmp_path: Path,
) -> None:
    venv = _world(tmp_path)
    assert _runs(venv, "import apkg")
    assert not _runs(venv, "import bpkg")  # alone, in a new process: libx.so.1 not found
    assert not _runs(venv, "import apkg.cudnn, sys; sys.exit(not apkg.cudnn.available)")
    rc, report = _doctor(venv)
    assert rc == 0, report["problems"]
    assert report["errors"] == 0 and report["warnings"] == 0, report["problems"]
    notes = report["notes"]
    assert isinstance(notes, list)
    assert (
        "bpkg._cudnn (apkg) is not loaded by `import apkg`, and needs libgone.so.8, which "
        "nothing installs"
    ) in notes
    # A removal that breaks the module apkg really imports is unsafe, naming apkg's import.
    done = cudatx("remove", "dep-lib", "--dry-run", "--python", venv, "--json")
    plan = json.loads(done.stdout)
    assert done.returncode == 1 and not plan["safe"]
    assert [(Path(r["root"]).name, r["importer"]) for r in plan["broken_roots"]] == [
        (f"_ext{ext_suffix()}", "apkg")
    ]
    text = cudatx("remove", "dep-lib", "--dry-run", "--python", venv).stdout
    assert f"import of apkg (bpkg/_ext{ext_suffix()}, which it imports)" in text


def test_control_the_importer_imports_the_companion_before_its_preload(tmp_path: Path) -> None:
    venv = _world(tmp_path, import_first=True)
    assert not _runs(venv, "import apkg")
    said = _errors(venv)
    assert any(c.startswith("importing apkg would fail (bpkg/_ext") for c in said), said


def test_control_a_package_of_its_own_wheel_is_a_users_import(tmp_path: Path) -> None:
    venv = _world(tmp_path, own_wheel=True)
    assert _runs(venv, "import apkg")
    assert not _runs(venv, "import bpkg")
    said = _errors(venv)
    assert f"importing bpkg/_ext{ext_suffix()} would fail: libx.so.1 not found" in said, said
