"""Issue 6 on a real torch 2.14.1 (CUDA 13) environment: an install that would rebind
libcudnn.so.9, and the pre-commit hook on the `uv pip freeze` of torch with both cuDNNs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import cudatx
from tests.support.digest import diff, tree_digest
from tests.support.precommit_story import run_story
from tests.support.torch_env import download_wheels, torch_env, torch_with

pytestmark = pytest.mark.slow

CU12 = "nvidia-cudnn-cu12"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cu12 cuDNN and what it requires (uv's dry run resolves them, offline)."""
    folder = tmp_path_factory.mktemp("cu12")
    download_wheels([CU12], folder, deps=True)
    return folder


def test_installing_the_cu12_cudnn_would_rebind_libcudnn_under_cuda13_torch(
    wheels: Path, tmp_path: Path
) -> None:
    env = torch_env()
    before = tree_digest(env)
    links = ("--offline", "--find-links", str(wheels))
    done = cudatx("install", CU12, "--dry-run", "--json", *links, "--python", env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    plan = json.loads(done.stdout)
    assert CU12 in [p["name"] for p in plan["install"]]
    rebound = [r for r in plan["rebound"] if r["soname"] == "libcudnn.so.9"]
    assert rebound and all(r["cuda_major_after"] == 12 for r in rebound), plan["rebound"]
    assert all(r["provider_after_owners"] == [CU12] for r in rebound)
    mixed = [m for m in plan["mixed"] if m["soname"] == "libcudnn.so.9"]
    assert mixed and mixed[0]["major"] == 12 and mixed[0]["torch_cuda"].startswith("13")
    text = cudatx("install", CU12, "--dry-run", *links, "--python", env, cwd=tmp_path)
    assert "libcudnn.so.9" in text.stdout and "is a CUDA 12 build" in text.stdout
    assert diff(before, tree_digest(env)) == []


@pytest.fixture(scope="module")
def both(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """torch 2.14.1 with the cu13 cuDNN, then the cu12 cuDNN over it (its bytes on disk)."""
    cudnn = sorted(wheels.glob("nvidia_cudnn_cu12-*.whl"))[-1]
    env = torch_with([cudnn], tmp_path_factory.mktemp("torch"))
    yield env
    shutil.rmtree(env, ignore_errors=True)


def test_precommit_rejects_dropping_the_cudnn_on_disk(both: Path, tmp_path: Path) -> None:
    args = ["--python", str(both), "--offline"]
    rejected, accepted = run_story(both, tmp_path, CU12, args, "local")
    assert rejected.returncode != 0, rejected.output
    assert "libcudnn.so.9" in rejected.output, rejected.output
    assert f"uninstall {CU12} <- line" in rejected.output
    assert accepted.returncode == 0, accepted.output
