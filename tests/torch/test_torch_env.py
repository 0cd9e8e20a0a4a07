"""`cudatx why` on a real torch 2.14.1 environment (CUDA 13 build with its nvidia wheels)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import cudatx
from tests.support.torch_env import torch_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env() -> Path:
    return torch_env()


def _why(env: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cudatx("why", *args, "--python", env, hide=(), timeout=None)


def test_why_libcudnn_names_cudnn_cu13_and_torch_rpath(env: Path) -> None:
    done = _why(env, "libcudnn.so.9", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # torch/__init__.py preloads cuDNN by path; torch's libraries then reuse it by name, and
    # the search they would do alone (shown as the attempts) finds it through torch's RPATH.
    preload = [r for r in report["routes"] if r["how"] == "path"]
    assert preload and preload[0]["needed_by"][0]["evidence"] == "preload"
    reused = [r for r in report["routes"] if r["how"] == "already loaded"]
    assert reused, report
    route = reused[0]
    assert route["file"].endswith("/nvidia/cudnn/lib/libcudnn.so.9")
    assert [o["name"] for o in route["owners"]] == ["nvidia-cudnn-cu13"]
    assert route["detail"] == "the search alone finds the same file"
    needer = route["needed_by"][0]
    assert "/torch/lib/" in needer["object"] and needer["evidence"] == "DT_NEEDED"
    found = needer["attempts"][-1]
    assert found["outcome"] == "found" and found["how"] == "rpath"
    assert found["source"] == needer["object"]
    text = _why(env, "libcudnn.so.9")
    assert text.returncode == 0
    assert "listed by  nvidia-cudnn-cu13" in text.stdout
    assert "-> rpath of torch/lib/" in text.stdout


def test_every_torch_extension_resolves(env: Path) -> None:
    from cudatx.discover.target import start_query
    from cudatx.models import Evidence, Status
    from cudatx.scan import scan

    scanned = scan(start_query(str(env)), ld_library_path=None)
    torch_roots = [ld for ld in scanned.loads if "/torch/" in ld.root]
    assert any(ld.root.endswith(".so") and "/torch/_C." in ld.root for ld in torch_roots)
    unmet = [
        (r.name, r.needed_by)
        for ld in torch_roots
        for r in ld.resolutions
        if r.status in (Status.NOT_FOUND, Status.ERROR) and r.evidence is not Evidence.DLOPEN_STRING
    ]
    assert unmet == []
    assert all(ld.ok for ld in torch_roots)
