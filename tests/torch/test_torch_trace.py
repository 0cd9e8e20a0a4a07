"""`cudatx trace` on the real torch 2.14.1 environment (a hard-linked copy): the run's loads
are recorded as glibc reported them, a plan reads them, and doctor stays quiet.

No GPU is needed: `torch.zeros(1)` runs on the CPU, and `import torch` already maps what
torch's __init__.py preloads (cuDNN and the CUDA 13 libraries, with ctypes) and its own
libraries through torch._C's DT_NEEDED.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cudatx
from tests.support.torch_env import copy_env, torch_env

pytestmark = pytest.mark.slow

WORKLOAD = "import torch; torch.zeros(1)"


def _json(*args: object) -> dict[str, Any]:
    done = cudatx(*args, "--json", timeout=None)
    assert done.returncode in (0, 1), done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    env = copy_env(torch_env(), tmp_path_factory.mktemp("torch-trace"))
    done = cudatx("trace", "--python", env, "--", "python", "-c", WORKLOAD, timeout=None)
    assert done.returncode == 0, done.stderr
    (record,) = _json("trace", "--list", "--python", env)["traces"]
    return env, record


def test_the_record_holds_torch_s_loads(traced: tuple[Path, dict[str, Any]]) -> None:
    _, record = traced
    assert record["stale"] is None and record["exit_code"] == 0
    loads = [ld for p in record["processes"] for ld in p["loads"]]
    by_file = {os.path.basename(ld["path"]): ld for ld in loads}
    # torch's own libraries, by DT_NEEDED from torch._C's import ...
    cpu = by_file["libtorch_cpu.so"]
    assert cpu["kind"] == "needed" and cpu["by"].endswith("torch/lib/libtorch_python.so")
    module = next(ld for ld in loads if "torch/_C." in ld["path"])
    assert module["kind"] == "dlopen" and "libpython" in module["by"]
    # ... and what its __init__.py preloads, by path with ctypes.
    for name in ("libcudnn.so.9", "libcublas.so.13", "libnccl.so.2", "libcusparseLt.so.0"):
        preload = by_file[name]
        assert preload["kind"] == "dlopen" and preload["name"] == preload["path"], preload
        assert "_ctypes" in preload["by"], preload
    # Each file of the environment it mapped has its state kept (its staleness is judged by).
    inside = {ld["path"] for ld in loads if "site-packages" in ld["path"]}
    assert record["files"] == len({os.path.realpath(p) for p in inside}) > 20


def test_a_plan_names_the_traced_run(traced: tuple[Path, dict[str, Any]]) -> None:
    env, record = traced
    plan = _json("remove", "nvidia-cudnn-cu13", "--dry-run", "--python", env)
    assert not plan["safe"]
    cudnn = [b for b in plan["broken"] if b["soname"] == "libcudnn.so.9"]
    observed = [b for b in cudnn if b["evidence"] == "observed"]
    assert observed and observed[0]["traces"] == [record["id"]], cudnn
    # torch's DT_NEEDED of it was met in the traced run too: the run is named there as well.
    needed = next(b for b in cudnn if b["needed_by"].endswith("torch/lib/libtorch_cuda.so"))
    assert needed["evidence"] == "DT_NEEDED" and needed["traces"] == [record["id"]]
    (run,) = plan["traces"]
    assert run["id"] == record["id"] and run["stale"] is None
    text = cudatx("remove", "nvidia-cudnn-cu13", "--dry-run", "--python", env, timeout=None)
    assert f"loaded by the traced run `python -c '{WORKLOAD}'`" in text.stdout


def test_doctor_stays_healthy_and_notes_the_run(traced: tuple[Path, dict[str, Any]]) -> None:
    """The replay of the run agrees with what the run did: no error, no warning from it."""
    env, record = traced
    report = _json("doctor", "--python", env)
    assert report["errors"] == 0 and report["warnings"] == 0, report["problems"]
    assert any(record["id"] in n and "count as observed" in n for n in report["notes"])
