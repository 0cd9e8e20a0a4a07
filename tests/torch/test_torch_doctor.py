"""`cudatx doctor` on a real torch 2.14.1 environment, healthy and then caught in the trap.

The story of design.md section 1, with the real wheels: nvidia-cudnn-cu12 (from the
package index) installed with --no-deps over torch's nvidia-cudnn-cu13, then uninstalled.
The mutating steps run on a copy of the cached environment.
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
from tests.support.torch_env import copy_env, download_wheels, torch_env, torch_with

pytestmark = pytest.mark.slow


def _cudatx(*args: str) -> subprocess.CompletedProcess[str]:
    return cudatx(*args, hide=(), timeout=None)


def _doctor(env: Path) -> tuple[int, dict[str, Any]]:
    done = _cudatx("doctor", "--json", "--python", str(env))
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout)


def _codes(report: dict[str, Any], severity: str) -> list[str]:
    return [p["code"] for p in report["problems"] if p["severity"] == severity]


def _import_torch(env: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env / "bin" / "python"), "-c", "import torch; print(torch.version.cuda)"],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def pristine() -> Path:
    return torch_env()


@pytest.fixture(scope="module")
def cudnn_cu12_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return download_wheels(["nvidia-cudnn-cu12"], tmp_path_factory.mktemp("cu12"))[0]


@pytest.fixture(scope="module")
def trapped(pristine: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    copy = copy_env(pristine, tmp_path_factory.mktemp("torch"))
    yield copy
    shutil.rmtree(copy, ignore_errors=True)


def test_healthy_torch_has_no_error(pristine: Path) -> None:
    code, report = _doctor(pristine)
    assert code == 0, report["problems"]
    assert _codes(report, "error") == []
    assert report["torch_cuda"] == "13.0"
    assert "libcuda.so.1" in report["system_provided"]
    assert any("read from" in note for note in report["notes"])
    why = _cudatx("why", "libnvJitLink.so.13", "--python", str(pristine))
    assert why.returncode == 0
    # The route of cuSPARSE's DT_NEEDED: already loaded, by torch's preload.
    (cusparse,) = [
        b for b in why.stdout.split("\n\n") if "needed by  nvidia/cu13/lib/libcusparse" in b
    ]
    assert "preloaded by torch/__init__.py" in cusparse
    cuda = _cudatx("why", "libcuda.so.1", "--python", str(pristine), "--json")
    assert {r["status"] for r in json.loads(cuda.stdout)["routes"]} == {"system driver"}


def test_the_trap_step_by_step(trapped: Path, cudnn_cu12_wheel: Path) -> None:
    uv = uv_bin()
    install = subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--python",
            str(trapped),
            "--no-deps",
            "--offline",
            str(cudnn_cu12_wheel),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stderr

    # cu12 over cu13: one finding, the build installed over torch's, with what it breaks
    # (the co-owned paths are its evidence, not separate warnings) and the one cure.
    code, report = _doctor(trapped)
    assert code == 1
    (mixed,) = [p for p in report["problems"] if p["severity"] == "error"]
    assert mixed["code"] == "mixed-cuda-major"
    assert mixed["what"].startswith("nvidia-cudnn-cu12 ")
    assert "was installed over nvidia-cudnn-cu13 " in mixed["what"]
    assert mixed["what"].endswith("torch (CUDA 13.0) loads its CUDA 12 build")
    assert mixed["removes"] == ["nvidia-cudnn-cu12"]
    assert any(p.endswith("/nvidia/cudnn/lib/libcudnn.so.9") for p in mixed["paths"])
    assert not [p for p in report["problems"] if p["code"] == "co-owned"]
    assert report["fixes"] == [mixed["fix"]]
    assert "remove nvidia-cudnn-cu12 --repair" in mixed["fix"]
    assert report["verdict"].startswith("1 error: ")

    # `why` answers in its first line whose bytes torch maps, and for which CUDA major.
    why = _cudatx("why", "libcudnn.so.9", "--python", str(trapped))
    assert why.returncode == 0, why.stderr
    first = why.stdout.splitlines()[0]
    assert first.startswith(
        "libcudnn.so.9 => nvidia/cudnn/lib/libcudnn.so.9 (bytes of nvidia-cudnn-cu12 "
    ), first
    assert ", CUDA 12); by " in first, first
    answer = json.loads(_cudatx("why", "libcudnn.so.9", "--python", str(trapped), "--json").stdout)
    route = answer["routes"][answer["answer"]]
    assert route["effective_owner"]["name"] == "nvidia-cudnn-cu12"
    assert route["cuda_major"] == 12
    assert sorted(o["name"] for o in route["owners"]) == ["nvidia-cudnn-cu12", "nvidia-cudnn-cu13"]

    # The user's fix of design.md section 1: uninstall the cu12 one. cu13 is left hollow.
    removal = subprocess.run(
        [uv, "pip", "uninstall", "--python", str(trapped), "nvidia-cudnn-cu12"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert removal.returncode == 0, removal.stderr
    assert "libcudnn.so.9" in _import_torch(trapped).stderr
    code, report = _doctor(trapped)
    assert code == 1
    hollow = [p for p in report["problems"] if p["code"] == "hollow"]
    assert [p["distributions"] for p in hollow] == [["nvidia-cudnn-cu13"]]
    assert hollow[0]["severity"] == "error"
    assert any(
        line.startswith("importing torch/_C") and "libcudnn.so.9 not found" in line
        for line in hollow[0]["consequences"]
    )
    assert report["fixes"] == [hollow[0]["fix"]]
    fix = hollow[0]["fix"]
    assert "nvidia-cudnn-cu13==9.24.0.43" in fix

    # The command doctor gives, run as printed, repairs the environment.
    repaired = subprocess.run(fix, shell=True, capture_output=True, text=True, check=False)
    assert repaired.returncode == 0, repaired.stderr
    code, report = _doctor(trapped)
    assert code == 0, report["problems"]
    assert _import_torch(trapped).stdout.strip() == "13.0"


def test_a_cuda_12_library_torch_preloads_is_a_mix_only_where_its_libraries_bind_it(
    tmp_path: Path,
) -> None:
    """TensorFlow's CUDA 12 wheels beside a CUDA 13 torch: torch's preload globs
    nvidia/<lib>/lib before nvidia/cu13/lib (torch/__init__.py, _get_cuda_dep_paths) and
    opens CUDA 12 cuBLAS and cuSPARSE. No library of torch's needs libcublas.so.12: dead
    weight, no finding. libtorch_cuda.so needs libcusparse.so.12, and glibc reuses the
    loaded CUDA 12 file: a mix, named with the library that binds it. The judge is the real
    `import torch`'s /proc/self/maps."""
    names = ["nvidia-cublas-cu12", "nvidia-cusparse-cu12", "nvidia-nvjitlink-cu12"]
    env = torch_with(download_wheels(names, tmp_path / "wheels"), tmp_path)
    maps = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import torch; print(open('/proc/self/maps').read())"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert maps.returncode == 0, maps.stderr
    mapped = {
        line.split()[-1].rpartition("site-packages/")[2]
        for line in maps.stdout.splitlines()
        if "/nvidia/" in line
    }
    assert "nvidia/cublas/lib/libcublas.so.12" in mapped  # preloaded, bound by nothing
    assert "nvidia/cusparse/lib/libcusparse.so.12" in mapped  # torch's need, met by CUDA 12
    assert "nvidia/cu13/lib/libcusparse.so.12" not in mapped

    _, report = _doctor(env)
    mixed = [p for p in report["problems"] if p["code"] == "mixed-cuda-major"]
    assert any("resolves libcusparse.so.12 to a CUDA 12 build" in p["what"] for p in mixed)
    assert not any("libcublas" in json.dumps(p) for p in mixed), [p["what"] for p in mixed]
    why = _cudatx("why", "libcusparse.so.12", "--python", str(env)).stdout
    assert "needed by  torch/lib/libtorch_cuda.so" in why  # the binding the maps show
