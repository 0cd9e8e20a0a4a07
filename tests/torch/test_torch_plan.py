"""`cudatx remove --dry-run` on a real torch 2.14.1 environment with the cu12 twins.

torch 2.14.1 (CUDA 13) plus nvidia-cudnn-cu12, nvidia-nccl-cu12, nvidia-cusparselt-cu12 and
nvidia-nvshmem-cu12 installed with --no-deps: each cu12 wheel installs the same paths as
torch's cu13 one. Removing the four, as the team of design.md section 1 did, hollows out
their cu13 twins; the plan must say so before, and reality must agree after.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import uv_bin
from tests.support.cli import cudatx
from tests.support.torch_env import download_wheels, torch_env, torch_with

pytestmark = pytest.mark.slow

CU12 = ["nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cusparselt-cu12", "nvidia-nvshmem-cu12"]
SHARED = {"libcudnn.so.9", "libnccl.so.2", "libcusparseLt.so.0", "libnvshmem_host.so.3"}


def _uv(*args: str) -> None:
    done = subprocess.run([uv_bin(), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _remove(env: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = cudatx("remove", *args, "--dry-run", "--json", "-p", env, hide=(), timeout=None)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    wheels = download_wheels(CU12, tmp_path_factory.mktemp("cu12"))
    env = torch_with(wheels, tmp_path_factory.mktemp("torch"))
    yield env
    shutil.rmtree(env, ignore_errors=True)


def test_removing_the_cu12_twins(twins: Path) -> None:
    code, plan = _remove(twins, "nvidia-*-cu12")
    assert code == 1 and plan["safe"] is False
    assert sorted(p["name"] for p in plan["remove"]) == sorted(CU12)
    named = {b["soname"] for b in plan["broken"]}
    assert named >= SHARED, named
    for broken in plan["broken"]:
        if broken["soname"] in SHARED:
            assert "(shared path)" in broken["reason"], broken
    assert any(
        r["root"].endswith(".so") and "/torch/_C." in r["root"] for r in plan["broken_roots"]
    )

    same, by_major = _remove(twins, "cuda:12")
    assert same == 1
    assert sorted(p["name"] for p in by_major["remove"]) == sorted(CU12)

    code, repaired = _remove(twins, "nvidia-*-cu12", "--repair")
    assert code == 0 and repaired["safe"] is True, repaired["broken"]
    assert {p["name"] for p in repaired["reinstall"]} == {n.replace("cu12", "cu13") for n in CU12}


def test_reality_agrees_after_the_uninstall(twins: Path) -> None:
    code, plan = _remove(twins, "nvidia-*-cu12")
    assert code == 1
    named = {b["soname"] for b in plan["broken"]} | {
        r["first_missing"] for r in plan["broken_roots"]
    }
    _uv("pip", "uninstall", "--python", str(twins), *CU12)
    done = subprocess.run(
        [str(twins / "bin" / "python"), "-c", "import torch"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    missing = done.stderr.strip().splitlines()[-1]
    assert any(name in missing for name in named), (missing, named)


def test_no_false_alarms_on_torch() -> None:
    env = torch_env()
    code, plan = _remove(env, "pip")  # pure Python, nothing requires it
    assert code == 0 and plan["safe"] is True
    assert plan["broken"] == [] and plan["broken_roots"] == []
    assert plan["requirements_broken"] == [] and plan["rebound"] == []
    code, plan = _remove(env, "filelock")  # torch requires it
    assert code == 1 and plan["safe"] is False
    assert plan["broken"] == [] and plan["broken_roots"] == [] and plan["rebound"] == []
    assert [(r["dist"], r["requirement"]) for r in plan["requirements_broken"]] == [
        ("torch", "filelock")
    ]
