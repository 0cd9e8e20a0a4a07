"""The seed user's loop, ended: one doctor names the whole damage, and its fixes cure it in
one round (tests.support.twin_world: four twins installed over torch's four, then a plain
`uv pip uninstall` of the twins; every one of torch's four left hollow).

The real loader names only the first missing library at each try (glibc stops there); the
user who fixes that one meets the next. cudatx must name all four at once, and its fixes,
run as printed without a terminal, must bring the import back and leave doctor at exit 0.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import observe_import, venv_python
from tests.support.cli import cudatx
from tests.support.twin_world import (
    COMPONENTS,
    CU12,
    CU13,
    TwinWheels,
    aftermath,
    build_twin_world,
    contaminated,
)
from tests.support.venvs import uv_bin


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> TwinWheels:
    return build_twin_world(tmp_path_factory.mktemp("twins"))


def _doctor(venv: Path) -> tuple[int, dict[str, Any]]:
    done = cudatx("doctor", "--json", "--python", venv)
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def _run_as_printed(fix: str, wheels: TwinWheels) -> subprocess.CompletedProcess[str]:
    """A fix in a shell, as a user pastes it: no terminal, uv and cudatx on PATH as an
    install puts them; the only addition is where this test's wheels are (no index here)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    bins = [os.path.dirname(sys.executable), os.path.dirname(uv_bin())]
    environ["PATH"] = os.pathsep.join([*bins, environ.get("PATH", "")])
    environ["UV_FIND_LINKS"] = os.fspath(wheels.folder)
    environ["UV_OFFLINE"] = "1"
    environ["PYTHONPATH"] = os.fspath(Path(__file__).resolve().parents[2])
    return subprocess.run(
        ["bash", "-c", fix], env=environ, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )


def test_one_doctor_names_every_library_the_import_misses(
    wheels: TwinWheels, tmp_path: Path
) -> None:
    venv = aftermath(wheels, tmp_path / "venv")
    seen = observe_import(venv_python(venv), "torch._C")
    assert not seen.ok and "libcudnn.so.9" in (seen.error or "")  # glibc names one
    code, report = _doctor(venv)
    assert code == 1
    errors = [p for p in report["problems"] if p["severity"] == "error"]
    assert sorted(d for p in errors for d in p["distributions"]) == sorted(CU12)
    assert all(p["code"] == "hollow" for p in errors), errors
    for _, soname, stem, _, _ in COMPONENTS:
        (mine,) = [p for p in errors if p["distributions"] == [f"{stem}-cu12"]]
        assert any(soname in line for line in mine["consequences"]), mine
    assert report["warnings"] == 0, report["problems"]


def test_its_fixes_run_as_printed_cure_it_in_one_round(wheels: TwinWheels, tmp_path: Path) -> None:
    venv = aftermath(wheels, tmp_path / "venv")
    _, report = _doctor(venv)
    fixes = report["fixes"]
    assert len(fixes) == 1, fixes  # every hollow twin reinstalled together
    assert all(name in fixes[0] for name in CU12)
    done = _run_as_printed(fixes[0], wheels)
    assert done.returncode == 0, done.stderr
    assert observe_import(venv_python(venv), "torch._C").ok
    code, after = _doctor(venv)
    assert code == 0 and after["errors"] == 0 and after["warnings"] == 0, after["problems"]


def test_the_verdict_line_is_the_one_command(wheels: TwinWheels, tmp_path: Path) -> None:
    venv = aftermath(wheels, tmp_path / "venv")
    _, report = _doctor(venv)
    assert report["verdict"].startswith("4 errors: ")
    assert report["verdict"].endswith(f"To fix them, run: {report['fixes'][0]}")
    argv = shlex.split(report["fixes"][0])
    assert os.path.basename(argv[0]) == "uv" and argv[1:3] == ["pip", "install"]


def test_contaminated_the_cure_plan_says_what_it_cures(wheels: TwinWheels, tmp_path: Path) -> None:
    """Before the uninstall: the twins' bytes over torch's own. `remove` of the twins with
    `--repair` is safe and says it cures every error doctor reports now."""
    venv = contaminated(wheels, tmp_path / "venv")
    code, report = _doctor(venv)
    assert code == 1 and report["errors"] >= 1
    done = cudatx(
        "remove", *CU13, "--repair", "--dry-run", "--json", "--python", venv,
        "--offline", "--find-links", wheels.folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    plan = json.loads(done.stdout)
    assert plan["safe"] and plan["preexisting"] == []
    errors = [(p["code"], p["what"]) for p in report["problems"] if p["severity"] == "error"]
    assert [(c["kind"], c["what"]) for c in plan["cures"]] == errors
    text = cudatx(
        "remove", *CU13, "--repair", "--dry-run", "--python", venv,
        "--offline", "--find-links", wheels.folder,
    ).stdout  # fmt: skip
    n = len(errors)
    assert f"Cures {n} error{'s' * (n != 1)} doctor reports now:" in text
    assert "Already broken" not in text
