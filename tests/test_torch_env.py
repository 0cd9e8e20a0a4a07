"""`cudatx why` on a real torch 2.14.1 environment (CUDA 13 build with its nvidia wheels)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.torch_env import torch_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env() -> Path:
    return torch_env()


def _why(env: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cudatx", "why", *args, "--python", str(env)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_why_libcudnn_names_cudnn_cu13_and_torch_rpath(env: Path) -> None:
    done = _why(env, "libcudnn.so.9", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    resolved = [r for r in report["routes"] if r["status"] == "resolved"]
    found = [r for r in resolved if r["how"] == "rpath"]
    assert found, report
    route = found[0]
    assert route["file"].endswith("/nvidia/cudnn/lib/libcudnn.so.9")
    assert [o["name"] for o in route["owners"]] == ["nvidia-cudnn-cu13"]
    assert "/torch/lib/" in route["source"]
    assert [d["name"] for d in route["source_distributions"]] == ["torch"]
    text = _why(env, "libcudnn.so.9")
    assert text.returncode == 0
    first = text.stdout.splitlines()
    assert first[0] == "libcudnn.so.9 => nvidia/cudnn/lib/libcudnn.so.9"
    assert first[1].startswith("  found by   rpath of torch/lib/")
    assert "nvidia-cudnn-cu13" in first[2]


def test_every_torch_extension_resolves(env: Path) -> None:
    from cudatx.models import Status
    from cudatx.scan import scan

    scanned = scan(str(env), ld_library_path=None)
    torch_roots = [ld for ld in scanned.loads if "/torch/" in ld.root]
    assert any(ld.root.endswith(".so") and "/torch/_C." in ld.root for ld in torch_roots)
    unmet = [
        (r.name, r.needed_by)
        for ld in torch_roots
        for r in ld.resolutions
        if r.status is not Status.RESOLVED
    ]
    assert unmet == []
