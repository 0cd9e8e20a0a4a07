"""The real torch 2.14.1+cu130 environment with JAX's CUDA 13 plugin, onnxruntime-gpu and
cupy-cuda13x (tests/support/torch_env.frameworks_env): healthy, and the real loader as the
judge of what a removal does to onnxruntime's CUDA provider.

No GPU is needed: the judge (tests/support/frameworks_judge.py) loads the provider as ORT's
provider bridge does, after onnxruntime's own `preload_dlls()`, in a fresh interpreter; the
provider links the driver's `libcuda.so.1`, absent here, so the judge first loads a stub of
that name built with the system C compiler (cudatx itself never needs one). The failure is
judged by the library the error names.
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
from tests.support.torch_env import copy_env, download_wheels, frameworks_env

pytestmark = pytest.mark.slow

PROVIDER = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
ORT = "onnxruntime's CUDA provider"


def _json(*args: str) -> tuple[int, dict[str, Any]]:
    done = cudatx(*args, "--json", hide=(), timeout=None)
    return done.returncode, json.loads(done.stdout)


def _judge(env: Path, stub: Path, after: str = "alone") -> str:
    """Whether the provider loads in a fresh interpreter after `onnxruntime.preload_dlls()`
    (or `after="torch"`: after `import torch`, with no preload_dlls), as the provider bridge
    loads it (tests/support/frameworks_judge.py)."""
    verdict = judge(env, stub, after)[ORT]
    return "LOADED" if verdict == "ok" else verdict


@pytest.fixture(scope="module")
def env() -> Path:
    return frameworks_env()


@pytest.fixture(scope="module")
def stub(env: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return libcuda_stub(env, tmp_path_factory.mktemp("driver"))


def test_healthy_doctor_exit_0_no_warning(env: Path) -> None:
    rc, report = _json("doctor", "--python", str(env))
    assert rc == 0, report["problems"]
    assert report["errors"] == 0 and report["warnings"] == 0, report["problems"]
    notes = "\n".join(report["notes"])
    assert "jax_plugins/xla_cuda13 load list: read from" in notes
    assert "onnxruntime load list: read from" in notes
    assert "cupy load list: read from" in notes
    assert f"{ORT}: loads after `onnxruntime.preload_dlls()`; loads after `import torch`" in notes
    assert "libcuda.so.1" in report["system_provided"]


# What the judge loads; a plan may name more of CuPy's modules (cupyx._cusolver, jitify),
# which the judge does not import.
JUDGED = (
    "jax_plugins/",
    "onnxruntime's",
    "cupy's module cupy_backends",
    "cupy's module cupy.cuda.cufft",
)


def test_each_removal_breaks_exactly_what_the_judge_sees(
    env: Path, stub: Path, tmp_path: Path
) -> None:
    """For every NVIDIA wheel here (a distribution with files under nvidia/), removed by a
    real `uv pip uninstall` in a copy: the framework roots and contexts the plan says stop
    loading are those the judge sees stop loading (tests/support/frameworks_judge.py)."""
    before = {context: judge(env, stub, context) for context in ("alone", "torch")}
    listed = subprocess.run(
        [uv_bin(), "pip", "list", "--format", "json", "--python", str(env)],
        capture_output=True,
        text=True,
        check=True,
    )
    wheels = sorted(
        p["name"]
        for p in json.loads(listed.stdout)
        if p["name"].startswith("nvidia-") and p["name"] != "nvidia-cuda-nvcc"
    )
    assert wheels
    wrong = {}
    for index, wheel in enumerate(wheels):
        _, plan = _json("remove", wheel, "--dry-run", "--python", str(env))
        # Only roots the judge can run here: this environment has JAX's CUDA 13 plugin but
        # not `jax` (FRAMEWORKS), so `import jax_plugins.xla_cuda13` fails before any change
        # (tests/torch/test_frameworks_cu12_env.py judges JAX, with jax installed).
        said = {
            p
            for p in predicted(plan)
            if p[0].startswith(JUDGED) and any(v.get(p[0]) == "ok" for v in before.values())
        }
        folder = tmp_path / str(index)
        folder.mkdir()
        copy = copy_env(env, folder)
        done = subprocess.run(
            [uv_bin(), "pip", "uninstall", "--python", str(copy), wheel],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        after = {context: judge(copy, stub, context) for context in ("alone", "torch")}
        seen = actual(before, after)
        if said != seen or torch_broken_in(plan) != torch_breaks(after):
            wrong[wheel] = (said, seen)
        subprocess.run(["rm", "-rf", str(folder)], check=True)
    assert not wrong, wrong


def test_why_names_the_frameworks(env: Path) -> None:
    done = cudatx("why", "libcudnn.so.9", "--python", str(env), hide=(), timeout=None)
    assert "(loaded by jax_plugins/xla_cuda13 (preload))" in done.stdout
    # JAX's version check opens cuDNN by name through `_versions`' RPATH (TSL's dso_loader)
    # before the plugin is made; the plugin's own opens are checked only where installed.
    assert (
        "(opened by jax_cuda13_plugin/_versions.so for JAX's version check (run-time root))"
    ) in done.stdout
    done = cudatx("why", "libcurand.so.10", "--python", str(env), hide=(), timeout=None)
    assert f"(needed by {ORT} (run-time root))" in done.stdout
    # The version check reuses what JAX's own preloads mapped in its process, not torch's.
    _, report = _json("why", "libcudnn.so.9", "--python", str(env))
    plugin = [
        r
        for r in report["routes"]
        if any(n["object"].endswith("/jax_cuda13_plugin/_versions.so") for n in r["needed_by"])
    ]
    assert plugin and all(
        r["earlier"]["needed_by"].endswith("/jax_plugins/xla_cuda13/__init__.py") for r in plugin
    ), plugin


def test_cuda_13_selects_the_frameworks(env: Path) -> None:
    _, plan = _json("remove", "cuda:13", "--dry-run", "--python", str(env))
    names = {p["name"] for p in plan["remove"]}
    assert {"jax-cuda13-pjrt", "jax-cuda13-plugin", "onnxruntime-gpu", "cupy-cuda13x"} <= names


def test_change_touching_none_of_their_libraries_is_safe(env: Path) -> None:
    rc, plan = _json("remove", "pip", "--dry-run", "--python", str(env))
    assert rc == 0 and plan["safe"], plan
    assert plan["contexts"] == []


def test_removing_torch_says_where_the_provider_still_loads(env: Path) -> None:
    rc, plan = _json("remove", "torch", "--dry-run", "--python", str(env))
    said = [c for c in plan["contexts"] if c["label"] == ORT]
    assert said == [
        {
            "framework": "onnxruntime",
            "root": said[0]["root"],
            "label": ORT,
            "context": "after `import torch`",
            "before": True,
            "after": None,
            "failing": None,
            "still": ["after `onnxruntime.preload_dlls()`"],
        }
    ]
    assert rc == 0 and plan["safe"], plan  # it still loads after preload_dlls()


def test_where_the_provider_loads_only_after_torch_removing_torch_is_unsafe(
    env: Path, stub: Path, tmp_path: Path
) -> None:
    """onnxruntime in a sys.path entry of its own (a .pth; as a venv over system site
    packages has it): preload_dlls() looks for the NVIDIA wheels beside onnxruntime and finds
    none, and the provider loads only after `import torch`, whose preloads search all of
    sys.path. The plan of removing torch says so, and is unsafe."""
    copy = copy_env(env, tmp_path)
    (site,) = copy.glob("lib/python3*/site-packages")
    extra = tmp_path / "extra"
    extra.mkdir()
    for name in ("onnxruntime", "onnxruntime_gpu-1.31.1.dist-info"):
        (site / name).rename(extra / name)  # a rename: the pristine's files are not touched
    (site / "zz-extra.pth").write_text(f"{extra}\n")
    assert _judge(copy, stub).startswith("FAILED")  # after preload_dlls()
    assert _judge(copy, stub, after="torch") == "LOADED"
    rc, plan = _json("remove", "torch", "--dry-run", "--python", str(copy))
    said = [c for c in plan["contexts"] if c["label"] == ORT]
    assert [(c["context"], c["before"], c["after"], c["still"]) for c in said] == [
        ("after `import torch`", True, None, [])
    ]
    assert rc == 1 and not plan["safe"]
    text = cudatx("remove", "torch", "--dry-run", "--python", str(copy), hide=(), timeout=None)
    assert (
        f"  {ORT} loads today after `import torch`, which the change removes; it would load in "
        "none of its contexts"
    ) in text.stdout.splitlines()


def test_removing_curand_breaks_the_provider_as_the_loader_says(
    env: Path, stub: Path, tmp_path: Path
) -> None:
    rc, plan = _json("remove", "nvidia-curand", "--dry-run", "--python", str(env))
    assert rc == 1 and not plan["safe"]
    provider = [r for r in plan["broken_roots"] if r["framework"] == ORT]
    assert provider and provider[0]["first_missing"] == "libcurand.so.10"
    assert provider[0]["context"] == "after `onnxruntime.preload_dlls()`"
    assert any(
        "onnxruntime-gpu requires nvidia-curand" in r["dist"] + " requires " + r["requirement"]
        for r in plan["requirements_broken"]
    )
    copy = copy_env(env, tmp_path)
    assert _judge(copy, stub) == "LOADED"  # the judge can pass
    done = subprocess.run(
        [uv_bin(), "pip", "uninstall", "--python", str(copy), "nvidia-curand"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    after = _judge(copy, stub)
    assert after.startswith("FAILED") and "libcurand.so.10" in after, after


def test_a_cu12_cudnn_over_theirs_is_a_mixed_major_for_each_framework(
    env: Path, tmp_path: Path
) -> None:
    """JAX's CUDA 13 plugin and the CUDA 13 ORT provider loading the cu12 cuDNN that a later
    install put in nvidia/cudnn/lib: doctor's `framework-mixed-cuda-major`, one each, beside
    torch's own finding, all cured by the one repair."""
    (wheel,) = download_wheels(["nvidia-cudnn-cu12"], tmp_path / "wheels")
    copy = copy_env(env, tmp_path)
    done = subprocess.run(
        [uv_bin(), "pip", "install", "--python", str(copy), "--no-deps", "--offline", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rc, report = _json("doctor", "--python", str(copy))
    assert rc == 1
    mixed = sorted(
        p["what"] for p in report["problems"] if p["code"] == "framework-mixed-cuda-major"
    )
    assert mixed == [
        "jax_plugins/xla_cuda13's XLA plugin (CUDA 13) jax alone resolves libcudnn.so.9 to a "
        "CUDA 12 build",
        f"{ORT} (CUDA 13) after `onnxruntime.preload_dlls()` resolves libcudnn.so.9 to a CUDA "
        "12 build",
    ]
    assert report["fixes"][0].startswith("cudatx remove nvidia-cudnn-cu12 --repair ")
