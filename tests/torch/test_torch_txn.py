"""Transactions on a real torch 2.14.1 environment with the four cu12 twins (slow).

In this sandbox pid 1's maps are unreadable even to root, so every apply passes
--ignore-running (an unreadable process is never taken as safe).
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudatx.discover.dists import scan_distributions
from tests.support.cli import cudatx
from tests.support.digest import diff, tree_digest
from tests.support.torch_env import download_wheels, torch_with

pytestmark = pytest.mark.slow

CU12 = ["nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cusparselt-cu12", "nvidia-nvshmem-cu12"]


def _cudatx(env: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cudatx(*args, "-p", env, hide=(), timeout=None)


def _import_torch(env: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env / "bin" / "python"), "-c", "import torch"],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    wheels = download_wheels(CU12, tmp_path_factory.mktemp("cu12"))
    env = torch_with(wheels, tmp_path_factory.mktemp("torch"))
    yield env
    shutil.rmtree(env, ignore_errors=True)


def test_forced_removal_then_rollback_then_repair(twins: Path) -> None:
    before = tree_digest(twins)
    forced = _cudatx(twins, "remove", "nvidia-*-cu12", "--yes", "--force", "--ignore-running")
    assert forced.returncode == 0, forced.stderr
    assert "libcudnn.so.9" in _import_torch(twins).stderr

    back = _cudatx(twins, "rollback", "--yes")
    assert back.returncode == 0, back.stderr
    assert diff(before, tree_digest(twins)) == []
    assert _import_torch(twins).returncode == 0

    repaired = _cudatx(
        twins,
        "remove",
        "nvidia-*-cu12",
        "--repair",
        "--yes",
        "--ignore-running",
        "--verify",
        "python -c 'import torch'",
    )
    assert repaired.returncode == 0, repaired.stderr
    assert _import_torch(twins).returncode == 0
    site = next((twins / "lib").glob("python*/site-packages"))
    dists, _ = scan_distributions((str(site),))
    names = {d.name for d in dists}
    assert not names & set(CU12)
    doctor = _cudatx(twins, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout
    assert '"hollow"' not in doctor.stdout
    # every file of the cu13 twins matches its RECORD, byte for byte
    twins13 = [d for d in dists if d.name in {n.replace("cu12", "cu13") for n in CU12}]
    assert len(twins13) == 4
    for dist in twins13:
        for entry in dist.records:
            if entry.hash_algorithm != "sha256":
                continue
            data = (Path(dist.site) / entry.path).read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest.decode() == entry.hash_digest, entry.path
