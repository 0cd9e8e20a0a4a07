"""The CUDA 12 frameworks, as most environments in the wild have them: torch 2.9.1 (CUDA
12.8) with torchvision and torchaudio, `jax[cuda12]` 0.10.2, onnxruntime-gpu 1.26 (its
CUDA 12.8 build, without `_get_cuda_plugin_ep_library_path`) and `cupy-cuda12x[ctk]` 14.2
(tests/support/torch_env.frameworks_cu12_env, built once).

Healthy, doctor says so; and for the removal of each NVIDIA wheel the frameworks load, the
plan names exactly the framework roots and contexts that stop loading, as the real
interpreter shows them after a real `uv pip uninstall` in a copy, each framework run through
its own load steps (tests/support/frameworks_judge.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import uv_bin
from tests.support.cli import cudatx
from tests.support.frameworks_judge import (
    actual,
    judge,
    libcuda_stub,
    predicted,
    torch_breaks,
    torch_broken_in,
)
from tests.support.torch_env import copy_env, frameworks_cu12_env

pytestmark = pytest.mark.slow

# The NVIDIA wheels JAX, onnxruntime or CuPy load here.
WHEELS = (
    "nvidia-cudnn-cu12",
    "nvidia-cufft-cu12",
    "nvidia-cusparse-cu12",
    "nvidia-nvjitlink-cu12",
    "nvidia-cuda-nvrtc-cu12",
    "nvidia-curand-cu12",
    "nvidia-cublas-cu12",
    "nvidia-cuda-runtime-cu12",
    "nvidia-nccl-cu12",
    "nvidia-cusolver-cu12",
    "nvidia-cuda-cupti-cu12",
)
# What the judge loads; a plan may name more of CuPy's modules (cupyx._cusolver, jitify),
# which the judge does not import.
JUDGED = (
    "jax_plugins/",
    "onnxruntime's",
    "cupy's module cupy_backends",
    "cupy's module cupy.cuda.cufft",
)


def _json(*args: str) -> tuple[int, dict[str, Any]]:
    done = cudatx(*args, "--json", hide=(), timeout=None)
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def env() -> Path:
    return frameworks_cu12_env()


@pytest.fixture(scope="module")
def stub(env: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return libcuda_stub(env, tmp_path_factory.mktemp("driver"))


@pytest.fixture(scope="module")
def before(env: Path, stub: Path) -> dict[str, dict[str, str]]:
    return {context: judge(env, stub, context) for context in ("alone", "torch")}


def test_healthy_doctor_exit_0_no_warning(env: Path, before: dict[str, dict[str, str]]) -> None:
    rc, report = _json("doctor", "--python", str(env))
    assert rc == 0, report["problems"]
    assert report["errors"] == 0 and report["warnings"] == 0, report["problems"]
    notes = "\n".join(report["notes"])
    for name in ("jax_plugins/xla_cuda12", "onnxruntime", "cupy"):
        assert f"{name} load list: read from" in notes
    assert (
        "jax_plugins/xla_cuda12's XLA plugin: loads jax alone; loads after `import torch`" in notes
    )
    # The one CuPy module whose library nothing installs: a feature not had, as the judge sees.
    assert (
        "cupy's module cupy_backends.cuda.libs.cutensor (imported when first used): needs "
        "libcutensor.so.2, which nothing installs"
    ) in notes
    failing = {label for verdicts in before.values() for label, v in verdicts.items() if v != "ok"}
    assert failing == {"cupy's module cupy_backends.cuda.libs.cutensor"}


@pytest.mark.parametrize("wheel", WHEELS)
def test_a_removal_breaks_exactly_what_the_judge_sees(
    env: Path, stub: Path, before: dict[str, dict[str, str]], wheel: str, tmp_path: Path
) -> None:
    _, plan = _json("remove", wheel, "--dry-run", "--python", str(env))
    said = {p for p in predicted(plan) if p[0].startswith(JUDGED)}
    copy = copy_env(env, tmp_path)
    done = subprocess.run(
        [uv_bin(), "pip", "uninstall", "--python", str(copy), wheel],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    after = {context: judge(copy, stub, context) for context in ("alone", "torch")}
    assert said == actual(before, after), (plan["broken_roots"], plan["contexts"], after)
    # Where `import torch` itself stops, the plan says so by torch's own extension module.
    assert torch_broken_in(plan) == torch_breaks(after), plan["broken_roots"]
    assert not plan["safe"]


def test_a_change_touching_none_of_their_libraries_is_safe(env: Path) -> None:
    rc, plan = _json("remove", "pip", "--dry-run", "--python", str(env))
    assert rc == 0 and plan["safe"], plan
    assert plan["contexts"] == [] and plan["broken_roots"] == []
