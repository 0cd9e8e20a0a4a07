"""The world of the transaction tests (tests/txn/test_txn.py, test_hardening.py), and
cudatx run in it as a user runs it.

The cu12/cu13 shared-path trap of design.md section 1: ``nvidia-cudnn-cu13`` installed
first, then ``nvidia-cudnn-cu12`` over it, both shipping ``nvidia/cudnn/lib/libcudnn.so.9``
(other bytes; cu12's are on disk), an extension that needs that library by RPATH, a console
script and a data file outside site-packages and a ``.pth`` file, and ``nvidia-nccl-cu12``;
real compiled libraries in real wheels, installed by real uv. :func:`run` and :func:`start`
are ``python -m cudatx ARGS --python VENV`` (tests/support/cli.py), stdin not a terminal,
with the real uv offline and a uv cache of the module's own.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cudatx.discover.catalog import load_catalog

from .cbuild import compile_extension, compile_lib, ext_suffix, symbol_for
from .cli import cudatx, start_cudatx
from .digest import Entry, diff, tree_digest
from .venvs import make_venv, site_packages, uv_bin, uv_install, venv_python
from .wheels import build_wheel

CU12, CU13, NCCL = "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-nccl-cu12"
CU12_VERSION, CU13_VERSION, NCCL_VERSION = "9.10.2.21", "9.24.0.43", "2.27.3"
CUDNN_DIR = "nvidia/cudnn/lib"
CUDNN = f"{CUDNN_DIR}/libcudnn.so.9"
NCCL_LIB = "nvidia/nccl/lib/libnccl.so.2"
EXT = f"cudnnuser/_ext{ext_suffix()}"
SCRIPT = "cudnn12-info"  # cu12's console script, in <venv>/bin
DATA = "share/cudnn12/NOTICE"  # cu12's data file, under the prefix
PTH = "cudnn12.pth"
HEADER = "nvidia/cudnn/include/cudnn_version.h"
STEPS = [
    "started",
    "snapshotted",
    "uninstalling",
    "uninstalled",
    "reinstalling",
    "reinstalled",
    "verified",
    "committed",
]

# Exit codes (cudatx/errors.py).
REFUSED, USAGE, BUSY, INTERRUPTED, IN_USE, ROLLED_BACK, CONFLICT, STORE = 1, 2, 7, 8, 9, 10, 11, 12
UNREADABLE = 5

# Variables that would pick another environment, change uv's behaviour or inject a crash
# behind a test's back.
_HIDDEN = {
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CUDATX_DEBUG",
    "LD_LIBRARY_PATH",
    "CUDATX_TEST_CRASH_AT",
    "CUDATX_TEST_PAUSE_AT",
}


# --------------------------------------------------------------------------------------
# The wheels (built once per module) and a fresh venv (one per test): tests/txn/conftest.py
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wheels:
    folder: Path  # every wheel: --find-links for the reinstalls
    cu12: Path
    cu13: Path
    first: tuple[Path, ...]  # installed before cu12: cu13, its user, a bystander, NCCL
    cudnn12: bytes  # libcudnn.so.9 as each wheel ships it
    cudnn13: bytes
    uv_cache: Path  # a uv cache private to this module


def _lib(out: Path, build: str, runpath: str = "$ORIGIN") -> Path:
    source = (
        f'const char build_tag[] = "fixture: {build}";\n'
        f"int {symbol_for(out.name)}(void) {{ return (int)sizeof(build_tag); }}\n"
    )
    return compile_lib(out, soname=out.name, source=source, runpath=runpath)


# Where each cuDNN finds the cuBLASLt and NVRTC it dlopens, as the real wheels say
# (readelf -d of nvidia-cudnn-cu13 9.24's libcudnn_adv.so.9: RUNPATH $ORIGIN,
# ../../cublas/lib, ../../cuda_nvrtc/lib, ../../cu13/lib), and the wheels that ship them.
_CUDNN_RUNPATH = {
    "cu12": "$ORIGIN:$ORIGIN/../../cublas/lib:$ORIGIN/../../cuda_nvrtc/lib",
    "cu13": "$ORIGIN:$ORIGIN/../../cu13/lib",
}
_CUDA_LIBS = (
    ("nvidia-cublas-cu12", "12.8.4.1", "nvidia/cublas/lib/libcublasLt.so.12"),
    ("nvidia-cuda-nvrtc-cu12", "12.8.93", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"),
    ("nvidia-cublas", "13.1.1.3", "nvidia/cu13/lib/libcublasLt.so.13"),
    ("nvidia-cuda-nvrtc", "13.0.88", "nvidia/cu13/lib/libnvrtc.so.13"),
)


def build_wheels(root: Path) -> Wheels:
    out = root / "wheels"
    # libcudnn.so.9 and the sub-libraries it dlopens (cudatx/data/runtime.json), as both
    # cuDNN wheels ship them: the same paths, other bytes.
    subs, _ = load_catalog().known_loads("libcudnn.so.9", None)
    libs: dict[str, dict[str, bytes | Path]] = {}
    for tag in ("cu12", "cu13"):
        libs[tag] = {
            f"{CUDNN_DIR}/{name}": _lib(
                root / tag / name, f"{name} for CUDA {tag[2:]}", _CUDNN_RUNPATH[tag]
            )
            for name in ["libcudnn.so.9", *subs]
        }
    cu12_files = dict(libs["cu12"])
    cu12_files["cudnn12info/__init__.py"] = b"def main():\n    print('cuDNN 12')\n"
    cu12_files[f"{PTH}"] = b"# cuDNN 12 was here\n"
    data_dir = f"nvidia_cudnn_cu12-{CU12_VERSION}.data/data"
    cu12_files[f"{data_dir}/{DATA}"] = b"cuDNN 12 notice\n"
    cu12_files[f"nvidia_cudnn_cu12-{CU12_VERSION}.dist-info/entry_points.txt"] = (
        f"[console_scripts]\n{SCRIPT} = cudnn12info:main\n".encode()
    )
    cu12 = build_wheel(out, CU12, CU12_VERSION, cu12_files)
    cu13_files = dict(libs["cu13"])
    cu13_files[HEADER] = b"#define CUDNN_MAJOR 9\n"  # only cu13 ships it
    cu13 = build_wheel(out, CU13, CU13_VERSION, cu13_files)
    nccl = build_wheel(
        out, NCCL, NCCL_VERSION, {NCCL_LIB: _lib(root / "nccl" / "libnccl.so.2", "NCCL 2")}
    )
    cudnn13 = root / "cu13" / "libcudnn.so.9"
    ext = compile_extension(
        root / "cudnnuser", "_ext", needed=[cudnn13], rpath="$ORIGIN/../nvidia/cudnn/lib"
    )
    user = build_wheel(out, "cudnnuser", "1.0", {"cudnnuser/__init__.py": b"", EXT: ext})
    bystander = build_wheel(out, "bystander", "1.0", {"bystander/__init__.py": b""})
    cuda_libs = tuple(
        build_wheel(out, name, version, {member: _lib(root / name / Path(member).name, name)})
        for name, version, member in _CUDA_LIBS
    )
    cudnn12 = (root / "cu12" / "libcudnn.so.9").read_bytes()
    assert cudnn12 != cudnn13.read_bytes()
    return Wheels(
        folder=out,
        cu12=cu12,
        cu13=cu13,
        first=(cu13, user, bystander, nccl, *cuda_libs),
        cudnn12=cudnn12,
        cudnn13=cudnn13.read_bytes(),
        uv_cache=root / "uv-cache",
    )


@dataclass(frozen=True)
class Venv:
    path: Path
    site: Path
    work: Path  # a folder for wrappers, flags and as the working folder of every command
    wheels: Wheels

    def digest(self) -> dict[str, Entry]:
        return tree_digest(self.path)

    @property
    def store(self) -> Path:
        return self.path / ".cudatx"

    def dist_info(self, name: str, version: str) -> Path:
        return self.site / f"{name.replace('-', '_')}-{version}.dist-info"


def install_venv(wheels: Wheels, tmp_path: Path) -> Venv:
    path = make_venv(tmp_path / "venv")
    uv_install(path, list(wheels.first))
    uv_install(path, [wheels.cu12])  # over cu13: cu12's bytes at the shared paths now
    site = site_packages(path)
    assert (site / CUDNN).read_bytes() == wheels.cudnn12
    record = (site / f"nvidia_cudnn_cu12-{CU12_VERSION}.dist-info" / "RECORD").read_text()
    assert f"../../../bin/{SCRIPT}," in record and f"../../../{DATA}," in record
    assert (path / "bin" / SCRIPT).is_file() and (path / DATA).is_file()
    work = tmp_path / "work"
    work.mkdir()
    return Venv(path, site, work, wheels)


# --------------------------------------------------------------------------------------
# Running cudatx as a user does
# --------------------------------------------------------------------------------------


def _how(v: Venv, extra: dict[str, str] | None) -> dict[str, Any]:
    """How cudatx runs for `v`: in its work folder, stdin not a terminal, and uv as cudatx
    finds it, but offline-safe and with a cache of its own (every other UV_ and PIP_
    variable hidden, with _HIDDEN); `extra` set over that."""
    env = {
        "UV_CACHE_DIR": os.fspath(v.wheels.uv_cache),
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
    }
    return {
        "cwd": v.work,
        "hide": (*_HIDDEN, "UV_*", "PIP_*"),
        "env": env | (extra or {}),
        "stdin": subprocess.DEVNULL,
    }


def run(
    v: Venv, *args: str | os.PathLike[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m cudatx ARGS --python VENV`, stdin not a terminal."""
    done = cudatx(*args, "--python", v.path, **_how(v, env))
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def start(
    v: Venv, *args: str | os.PathLike[str], env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return start_cudatx(*args, "--python", v.path, **_how(v, env))


def error(done: subprocess.CompletedProcess[str]) -> str:
    """The one `cudatx: error:` line."""
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("cudatx: error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def repair_args(v: Venv, *more: str) -> tuple[str, ...]:
    """`remove nvidia-cudnn-cu12 --repair --yes --ignore-running`, offline from the wheels."""
    return (
        "remove",
        CU12,
        *more,
        "--repair",
        "--yes",
        "--ignore-running",
        "--offline",
        "--find-links",
        os.fspath(v.wheels.folder),
    )


def txn_id(done: subprocess.CompletedProcess[str]) -> str:
    found = re.search(r"Applied as transaction (\S+);", done.stderr)
    assert found, done.stderr
    return found.group(1)


# What a plan asks of uv (its dry run, and staging wheels into a scratch `--prefix` to read
# their bytes) changes no environment: a wrapper's faults are for what does.
_PLANNING_PASSES = 'case " $* " in *" --prefix "*|*" --dry-run "*) exec "$REAL" "$@";; esac\n'


def wrapper(v: Venv, name: str, body: str) -> Path:
    """A shell script standing in for uv where it changes the environment; REAL is the real
    uv binary, which also serves the planning's own calls."""
    path = v.work / name
    path.write_text(f"#!/bin/sh\nREAL={shlex.quote(uv_bin())}\n{_PLANNING_PASSES}{body}")
    path.chmod(0o755)
    return path


def assert_same(before: dict[str, Entry], after: dict[str, Entry]) -> None:
    assert after == before, "\n".join(diff(before, after))


def journals(v: Venv) -> list[dict[str, object]]:
    """The journals of the recorded transactions, oldest first. A transaction is a folder
    that holds a journal.json (cudatx.txn.store.Store.ids): a test that polls while an
    apply starts can see its folder made a moment before its first journal is written."""
    folder = v.store / "transactions"
    if not folder.is_dir():
        return []
    found = [t / "journal.json" for t in sorted(folder.iterdir())]
    return [json.loads(j.read_text()) for j in found if j.exists()]


def record_mismatches(v: Venv, name: str, version: str) -> list[str]:
    """Entries of a distribution's RECORD whose file is missing or holds other bytes."""
    info = v.dist_info(name, version)
    bad = []
    with open(info / "RECORD", newline="") as handle:
        for path, hashed, _ in csv.reader(handle):
            if not hashed:
                continue
            algo, _, want = hashed.partition("=")
            target = v.site / path
            try:
                got = hashlib.new(algo, target.read_bytes()).digest()
            except FileNotFoundError:
                bad.append(f"{path}: missing")
                continue
            if base64.urlsafe_b64encode(got).rstrip(b"=").decode() != want:
                bad.append(f"{path}: other bytes")
    return bad


def imports(v: Venv) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [os.fspath(venv_python(v.path)), "-c", "import cudnnuser._ext"],
        cwd=v.work,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: val for k, val in os.environ.items() if k not in _HIDDEN},
    )


def assert_repaired(v: Venv) -> None:
    """The outcome of `remove nvidia-cudnn-cu12 --repair`: cu13 whole again, cu12 gone."""
    assert (v.site / CUDNN).read_bytes() == v.wheels.cudnn13
    assert not v.dist_info(CU12, CU12_VERSION).exists()
    assert not list(v.site.glob("nvidia_cudnn_cu12-*"))
    assert not (v.path / "bin" / SCRIPT).exists()
    assert not (v.path / DATA).exists()
    assert not (v.site / PTH).exists()
    assert record_mismatches(v, CU13, CU13_VERSION) == []
    done = imports(v)
    assert done.returncode == 0, done.stderr


@contextmanager
def holding_the_lock(v: Venv) -> Iterator[subprocess.Popen[str]]:
    """An apply (`remove nvidia-cudnn-cu12 --repair`) whose uv waits (up to 30 s) until the
    block ends: it holds the environment's lock all that time. It must commit."""
    gate = v.work / "go"
    slow = wrapper(
        v,
        "uv-slow",
        f"i=0\nwhile [ ! -e {shlex.quote(os.fspath(gate))} ] && [ $i -lt 600 ]; do\n"
        '    sleep 0.05; i=$((i+1))\ndone\nexec "$REAL" "$@"\n',
    )
    first = start(v, *repair_args(v, "--uv", os.fspath(slow)))
    try:
        lock = v.store / "lock"
        deadline = time.monotonic() + 60
        while not (lock.is_file() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first apply never took the lock"
            time.sleep(0.02)
        yield first
        gate.touch()
        _, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
    finally:
        gate.touch()
        if first.poll() is None:
            first.kill()
            first.wait()


@contextmanager
def root_only(setup: list[str], undo: list[str], what: str) -> Iterator[None]:
    """Run `setup` (as root), yield, then `undo`; skip the test where that cannot be done."""
    if os.geteuid() != 0 or shutil.which(setup[0]) is None:
        pytest.skip(f"{what} needs root")
    done = subprocess.run(setup, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"{what} is not possible here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(undo, check=False)


def tmpfs(where: Path, size: str) -> AbstractContextManager[None]:
    """A tmpfs of `size` bytes mounted at `where` for the block (root only, else a skip)."""
    options = f"size={size},mode=0700"
    mount = ["mount", "-t", "tmpfs", "-o", options, "cudatx-test", os.fspath(where)]
    return root_only(mount, ["umount", "-l", os.fspath(where)], "mounting a tmpfs")
