"""Symbols on a real torch 2.14.1: torchvision built for another torch, caught before uv runs.

torchvision 0.28.0 is built for torch 2.13; over torch 2.14.1 (installed with --no-deps,
the way it is met in the field) `torch.ops.load_library` fails with
`torchvision/_C.so: undefined symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb`
and the user sees `RuntimeError: operator torchvision::nms does not exist`. 0.29.1 is built
for torch 2.14 and loads.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import cudatx
from tests.support.torch_env import download_wheels, torch_env, torch_with

pytestmark = pytest.mark.slow

SYMBOL = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("torchvision")
    for version in ("0.28.0", "0.29.1"):  # one at a time: they pin different torches
        download_wheels([f"torchvision=={version}"], folder)
    return folder


def _plan(store: Path, version: str) -> subprocess.CompletedProcess[str]:
    return cudatx(
        "install",
        f"torchvision=={version}",
        "--no-deps",
        "--dry-run",
        "--json",
        "--offline",
        "--find-links",
        str(store),
        "--ignore-running",
        "--python",
        str(torch_env()),
        hide=(),
        timeout=None,
    )


def test_torchvision_built_for_another_torch_is_unsafe(store: Path) -> None:
    done = _plan(store, "0.28.0")
    assert done.returncode == 1, done.stderr
    plan = json.loads(done.stdout)
    # An arriving extension that fails is a failing import (broken_roots, glibc's message),
    # never a pseudo-library "needed by" the interpreter in `broken`.
    roots = {r["root"].rsplit("/", 2)[-2] + "/" + r["root"].rsplit("/", 1)[-1]: r
             for r in plan["broken_roots"]}  # fmt: skip
    root = roots["torchvision/_C.so"]
    assert root["dist"] == "torchvision" and root["missing"][0] == SYMBOL, roots
    assert (root["detail"] or "").endswith(f"torchvision/_C.so: undefined symbol: {SYMBOL}")
    assert all(b["evidence"] != "import" for b in plan["broken"]), plan["broken"]
    assert plan["at_risk"] == []  # nothing else is blamed on the new extension


def test_torchvision_built_for_this_torch_is_safe(store: Path) -> None:
    done = _plan(store, "0.29.1")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["safe"] and plan["broken"] == [] and plan["at_risk"] == []


@pytest.fixture(scope="module")
def installed(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("tv028")
    env = torch_with(sorted(store.glob("torchvision-0.28.0-*.whl")), root)
    yield env
    shutil.rmtree(root, ignore_errors=True)


def test_doctor_names_the_torchvision_that_does_not_load(installed: Path) -> None:
    python = str(installed / "bin" / "python")
    seen = subprocess.run([python, "-c", "import torchvision"], capture_output=True, text=True)
    assert "operator torchvision::nms does not exist" in seen.stderr  # what the user sees
    # What torch.ops.load_library met, without torchvision's __init__ swallowing it.
    site = "sysconfig.get_paths()['purelib']"
    code = f"import torch, ctypes, sysconfig; ctypes.CDLL({site} + '/torchvision/_C.so')"
    real = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    assert f"_C.so: undefined symbol: {SYMBOL}" in real.stderr
    done = cudatx("doctor", "--json", "--python", str(installed), hide=(), timeout=None)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    symbols = [p for p in report["problems"] if p["code"] == "missing-symbol"]
    lines = [line for p in symbols for line in p["consequences"]]
    assert any(
        line.startswith("importing torchvision/_C.so would fail: ") and SYMBOL in line
        for line in lines
    ), lines
    assert any(
        p["what"].startswith("torchvision/_C.so (torchvision 0.28.0) needs") for p in symbols
    )
