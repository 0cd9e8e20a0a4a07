"""Loaders compiled into a library (cudatx.discover.frameworks.tsl), judged by the loader
itself: a TensorFlow-like package (tests/support/tsl_world.py) whose GPU check, exported by
its library as TSL's is, dlopens seven CUDA libraries by bare name through that library's
own DT_RUNPATH. cudatx's verdicts are compared with the check really called in a fresh
process (ctypes, no GPU), after a real uninstall in a copy of the environment.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import make_venv, uv_install
from tests.support.cli import cudatx
from tests.support.tsl_world import LIBRARIES, build, gpu_check
from tests.support.venvs import uv_uninstall

ALL = sorted({folder for _, folder, _ in LIBRARIES})


def _venv(root: Path, folders: list[str]) -> Path:
    venv = make_venv(root / "venv")
    uv_install(venv, build(root, folders))
    return venv


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every library's folder on the loader's RUNPATH: the check passes."""
    return _venv(tmp_path_factory.mktemp("tsl-whole"), ALL)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cuSOLVER's folder missing from the RUNPATH, as TF 2.21's libtensorflow_framework.so.2
    leaves it: the check fails on libcusolver.so.11 as installed."""
    return _venv(tmp_path_factory.mktemp("tsl-fresh"), [f for f in ALL if f != "cusolver"])


def _json(*args: object) -> tuple[int, dict[str, object]]:
    done = cudatx(*map(str, args), "--json")
    return done.returncode, json.loads(done.stdout)


def _copy(venv: Path, to: Path) -> Path:
    shutil.copytree(venv, to, symlinks=True)
    return to


def test_the_check_passes_and_doctor_agrees(whole: Path) -> None:
    assert gpu_check(whole).returncode == 0
    rc, report = _json("doctor", "--python", whole)
    assert rc == 0 and report["errors"] == 0, report["problems"]
    notes = report["notes"]
    assert isinstance(notes, list)
    # What the check opens is read; the one required wheel it does not open is said.
    unread = [n for n in notes if n.startswith("not modelled: tfake")]
    assert len(unread) == 1 and "it requires nvidia-curand-fake," in unread[0], notes


@pytest.mark.parametrize("wheel", ["nvidia-cudnn-fake", "nvidia-cuda-runtime-fake"])
def test_a_removal_the_check_fails_after_is_unsafe(whole: Path, tmp_path: Path, wheel: str) -> None:
    rc, plan = _json("remove", wheel, "--dry-run", "--python", whole)
    assert rc == 1 and plan["safe"] is False, plan
    soname = next(s for w, _, s in LIBRARIES if w == wheel)
    text = cudatx("remove", wheel, "--dry-run", "--python", str(whole)).stdout
    said = "tfake's GPU check (TSL's DSO loader; where it fails it logs"
    assert said in text and f"would fail: {soname} not found" in text, text
    assert "runs on the CPU" in text
    # `import tfake` still works: the verdict names the framework context, not an import.
    assert "framework context would break" in text.splitlines()[0], text
    assert "import would fail" not in text.splitlines()[0], text
    copy = _copy(whole, tmp_path / "copy")
    uv_uninstall(copy, [wheel])
    done = gpu_check(copy)
    assert done.returncode == 1 and f"'{soname}'" in done.stderr


def test_a_removal_the_check_survives_is_safe(whole: Path, tmp_path: Path) -> None:
    """nvidia-curand-fake is required (the extra), but the check opens nothing of it."""
    done = cudatx("remove", "nvidia-curand-fake", "--dry-run", "--python", str(whole))
    assert "GPU check" not in done.stdout, done.stdout
    assert "not modelled: tfake" in done.stdout
    copy = _copy(whole, tmp_path / "copy")
    uv_uninstall(copy, ["nvidia-curand-fake"])
    assert gpu_check(copy).returncode == 0


def test_why_names_the_compiled_loader(whole: Path) -> None:
    done = cudatx("why", "libcudart.so.12", "--python", str(whole))
    assert "tfake's GPU check" in done.stdout, done.stdout


def test_doctor_names_what_the_check_fails_on_in_a_fresh_install(fresh: Path) -> None:
    done = gpu_check(fresh)
    assert done.returncode == 1 and "'libcusolver.so.11'" in done.stderr
    rc, report = _json("doctor", "--python", fresh)
    text = json.dumps(report)
    assert rc == 1 and report["errors"] == 1, text
    assert "libcusolver.so.11" in text and "Cannot dlopen some GPU libraries" in text
    assert "nvidia/cusolver/lib" in text  # the fix: the folder its search path lacks


STEP = "tfake's GPU check (TSL's DSO loader in tfake/libtfake_framework.so.2)"


def _step(plan: dict[str, object]) -> dict[str, object]:
    trial = plan["trial"]
    assert isinstance(trial, dict), plan
    return next(r for r in trial["roots"] if r["check"] == STEP)


def test_the_trial_calls_the_compiled_check(whole: Path) -> None:
    """The check itself, exported by the library, is a framework step of `--trial`: it
    breaks where the model says so, and only there."""
    how = ("--dry-run", "--trial", "--python", whole)
    _, plan = _json("remove", "nvidia-cudnn-fake", *how)
    step = _step(plan)
    assert (step["model"], step["trial"]) == ("breaks", "breaks"), step
    assert "Cannot dlopen some GPU libraries" in str(step["error"])
    trial = plan["trial"]
    assert isinstance(trial, dict) and trial["disagreements"] == [], trial  # import tfake: no
    _, plan = _json("remove", "nvidia-curand-fake", *how)
    step = _step(plan)
    assert (step["model"], step["trial"], step["disagreement"]) == ("loads", "loads", None)


def _only(root: Path, wheels: list[str]) -> Path:
    """tfake with only `wheels` of its CUDA libraries installed (no extra)."""
    built = build(root, ALL)
    venv = make_venv(root / "venv")
    uv_install(venv, [w for w in built if w.name.split("-")[0].replace("_", "-") in wheels])
    return venv


def test_a_plain_install_without_the_cuda_wheels_is_healthy(tmp_path: Path) -> None:
    """`pip install tensorflow` with no CUDA wheel: the check fails (TF would log "Cannot
    dlopen some GPU libraries" and run on the CPU), as it does for every CPU user of the
    GPU-capable wheel. A feature not installed: a note, never an error."""
    venv = _only(tmp_path, ["tfake"])
    assert gpu_check(venv).returncode == 1
    rc, report = _json("doctor", "--python", venv)
    assert rc == 0 and report["errors"] == 0 and report["warnings"] == 0, report["problems"]
    notes = [n for n in report["notes"] if "GPU check" in n]  # type: ignore[union-attr]
    assert len(notes) == 1 and "none of the libraries it opens is installed here" in notes[0]


def test_a_partial_install_is_broken(tmp_path: Path) -> None:
    """Some of the check's libraries installed and not all: the user set the GPU up and the
    check fails on the rest, which doctor names."""
    venv = _only(tmp_path, ["tfake", "nvidia-cuda-runtime-fake", "nvidia-cudnn-fake"])
    assert gpu_check(venv).returncode == 1
    rc, report = _json("doctor", "--python", venv)
    assert rc == 1 and report["errors"] > 0, report["problems"]
    assert "libcublas.so.12" in json.dumps(report["problems"])


def test_a_release_whose_loader_names_are_not_shipped_is_not_modelled(tmp_path: Path) -> None:
    """TF 2.11 and older: the check exported under stream_executor's name and no
    cuda_config.h in the wheel. What it opens is read from nothing: said, never passed over
    in silence, and no GPU check is guessed."""
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, build(tmp_path, ALL, older=True))
    rc, report = _json("doctor", "--python", venv)
    assert rc == 0, report["problems"]
    notes = [n for n in report["notes"] if n.startswith("not modelled: tfake")]  # type: ignore[union-attr]
    assert len(notes) == 1 and "ships no cuda_config.h" in notes[0], report["notes"]
    text = cudatx("why", "libcudart.so.12", "--python", str(venv)).stdout
    assert "GPU check" not in text, text
