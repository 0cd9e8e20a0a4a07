"""Real twins from the index: a removal that leaves the other one hollow is a break.

Two pairs whose wheels install the same paths, each in a venv of its own (real uv, the last
one installed wins the bytes), judged by the real uninstall in a copy:

- opencv-python and opencv-python-headless of one release (both ship `cv2/`): removing the
  headless one leaves opencv-python installed with its extension module gone, and `import
  cv2` finds an empty namespace package;
- nvidia-cudnn-cu12 with nvidia-cudnn-cu13 installed over it, no torch: removing cu13
  leaves cu12 installed and its `libcudnn*.so.9` gone (design.md's "cu12 is metadata-only"
  illusion, made by nothing that loads the files).

The plan must say unsafe and name what the staying distribution loses; `--repair` makes it
safe; the real `uv pip uninstall` confirms every file the plan says is lost.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import make_venv, site_packages, uv_install, uv_uninstall, venv_python
from tests.support.cli import cudatx
from tests.support.torch_env import download_wheels

pytestmark = pytest.mark.slow


def _version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


@pytest.fixture(scope="module")
def opencv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, wheels): numpy, then opencv-python, then opencv-python-headless of the same
    release, each installed by its own uv call."""
    folder = tmp_path_factory.mktemp("opencv-wheels")
    (full,) = download_wheels(["opencv-python"], folder, deps=True)  # and its numpy
    (headless,) = download_wheels([f"opencv-python-headless=={_version(full)}"], folder)
    numpy = sorted(folder.glob("numpy-*.whl"))
    venv = make_venv(tmp_path_factory.mktemp("opencv") / "venv")
    for group in (numpy, [full], [headless]):
        uv_install(venv, group)
    return venv, folder


@pytest.fixture(scope="module")
def cudnn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, wheels): nvidia-cudnn-cu12, then nvidia-cudnn-cu13 over it (--no-deps)."""
    folder = tmp_path_factory.mktemp("cudnn-wheels")
    (cu12,) = download_wheels(["nvidia-cudnn-cu12"], folder)
    (cu13,) = download_wheels(["nvidia-cudnn-cu13"], folder)
    venv = make_venv(tmp_path_factory.mktemp("cudnn") / "venv")
    for wheel in (cu12, cu13):
        uv_install(venv, [wheel])
    return venv, folder


def _plan(venv: Path, wheels: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = cudatx(
        "remove", *args, "--dry-run", "--json", "--python", venv,
        "--offline", "--find-links", wheels, hide=(), timeout=None,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    plan: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, plan


def _copy(venv: Path, into: Path) -> Path:
    """A copy of the venv (its own inodes) that a real uninstall may change."""
    copy = into / "venv"
    shutil.copytree(venv, copy, symlinks=True)
    for script in (copy / "bin").iterdir():  # a venv's scripts name its own path
        if script.is_file() and not script.is_symlink():
            text = script.read_bytes().replace(bytes(venv), bytes(copy))
            script.write_bytes(text)
    cfg = copy / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(str(venv), str(copy)))
    return copy


def _check(venv: Path, wheels: Path, leaving: str, staying: str, tmp_path: Path) -> list[str]:
    code, plan = _plan(venv, wheels, leaving)
    assert code == 1 and not plan["safe"], plan
    (loss,) = [x for x in plan["losses"] if x["name"] == staying]
    assert loss["missing"], loss
    text = cudatx("remove", leaving, "--dry-run", "--python", venv, hide=(), timeout=None)
    assert re.search(rf"{staying}==\S+ would lose ", text.stdout), text.stdout
    code, repaired = _plan(venv, wheels, leaving, "--repair")
    assert code == 0 and repaired["safe"] and repaired["losses"] == [], repaired
    # Reality: every file the plan says is lost is gone after the real uninstall, and the
    # staying distribution is still installed.
    copy = _copy(venv, tmp_path)
    uv_uninstall(copy, [leaving])
    site = site_packages(copy)
    assert [m for m in loss["missing"] if (site / m).exists()] == []
    assert list(site.glob(f"{staying.replace('-', '_')}-*.dist-info"))
    missing: list[str] = loss["missing"]
    return missing


def test_removing_opencv_headless_leaves_opencv_python_hollow(
    opencv: tuple[Path, Path], tmp_path: Path
) -> None:
    venv, wheels = opencv
    python = str(venv_python(venv))
    probe = "import cv2; print(cv2.__file__, hasattr(cv2, 'imread'))"
    before = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    assert before.stdout.split()[-1:] == ["True"], before.stderr
    missing = _check(venv, wheels, "opencv-python-headless", "opencv-python", tmp_path)
    assert any(m.startswith("cv2/") and ".so" in m for m in missing), missing
    after = subprocess.run(
        [str(venv_python(tmp_path / "venv")), "-c", probe],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert after.returncode != 0 or after.stdout.split()[-1:] == ["False"], after


def test_removing_cudnn_cu13_leaves_cudnn_cu12_hollow(
    cudnn: tuple[Path, Path], tmp_path: Path
) -> None:
    venv, wheels = cudnn
    missing = _check(venv, wheels, "nvidia-cudnn-cu13", "nvidia-cudnn-cu12", tmp_path)
    assert "nvidia/cudnn/lib/libcudnn.so.9" in missing, missing
