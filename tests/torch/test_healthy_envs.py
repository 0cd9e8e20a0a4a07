"""Healthy environments are quiet: the torch 2.9.1 trio (torchaudio loads its own libraries by
path), and the trio with popular binary wheels (numba's optional TBB layer, llvmlite's and
bitsandbytes' bundled libraries, opencv, pyarrow, onnxruntime ...), all importing.

Judged by the real interpreter first: every top-level package imports. Then doctor must exit
0 with no warning; what only an optional layer needs is a note, never an error (issue 24).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import cudatx
from tests.support.torch_env import popular_env, trio_env

pytestmark = pytest.mark.slow

# What each environment's users import: the real interpreter says they work.
IMPORTS = {
    "trio": ("torch", "torchvision", "torchaudio", "torchaudio.models.decoder"),
    "popular": (
        "torch", "torchvision", "torchaudio", "numba", "llvmlite.binding", "scipy.linalg",
        "sklearn", "cv2", "pyarrow", "pandas", "lxml.etree", "grpc", "h5py",
        "bitsandbytes", "onnxruntime",
    ),
}  # fmt: skip
ENVS: dict[str, Callable[[], Path]] = {"trio": trio_env, "popular": popular_env}


@pytest.mark.parametrize("kind", sorted(ENVS))
def test_a_healthy_environment_has_no_error_and_no_warning(kind: str) -> None:
    env = ENVS[kind]()
    python = str(env / "bin" / "python")
    for module in IMPORTS[kind]:
        done = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"import {module}: {done.stderr[-1500:]}"
    doctor = cudatx("doctor", "--json", "--python", env, hide=(), timeout=None)
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0, report["problems"]
    assert report["errors"] == 0 and report["warnings"] == 0, report["problems"]
