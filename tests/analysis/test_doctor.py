"""`cudatx doctor` on real broken environments, as a user runs it.

The story of design.md section 1: a fake CUDA 13 torch with nvidia-cudnn-cu13 (healthy, a
venv of its own); in a second venv the same, then `uv pip install --no-deps
nvidia-cudnn-cu12`, whose wheel installs the same paths with other bytes (mixed); then `uv pip
uninstall nvidia-cudnn-cu12`, which deletes those paths and leaves nvidia-cudnn-cu13 installed
but hollow (removed); then the fix doctor prints, run as printed (fixed). Each state's doctor
output (text and --json, `python -m cudatx doctor` in a subprocess) is taken when the state is
reached; the real loader says whether `import torch._C` works there.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zipfile import ZipFile

import pytest

from tests.support import (
    ext_suffix,
    observe_import,
    site_packages,
    uv_uninstall,
    venv_python,
)
from tests.support.cli import cudatx
from tests.support.cudnn_world import (
    CU12,
    CU12_VERSION,
    CU13,
    CU13_VERSION,
    CUDNN,
    Wheels,
    build_cudnn_world,
    install_cudnn_world,
)
from tests.support.venvs import uv_bin, uv_run


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    return build_cudnn_world(tmp_path_factory.mktemp("doctor"))


@dataclass(frozen=True)
class State:
    """One state of the venv, with what doctor said and whether `import torch._C` worked."""

    venv: Path
    site: Path
    text: subprocess.CompletedProcess[str]
    json: subprocess.CompletedProcess[str]
    imports: bool
    import_error: str | None
    cudnn_on_disk: bool

    @property
    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.json.stdout)
        return data

    def problems(self, code: str) -> list[dict[str, Any]]:
        return [p for p in self.report["problems"] if p["code"] == code]


def _state(venv: Path, work: Path) -> State:
    seen = observe_import(venv_python(venv), "torch._C")
    return State(
        venv=venv,
        site=site_packages(venv),
        text=cudatx("doctor", "--python", venv, cwd=work),
        json=cudatx("doctor", "--python", venv, "--json", cwd=work),
        imports=seen.ok,
        import_error=seen.error,
        cudnn_on_disk=os.path.exists(site_packages(venv) / CUDNN),
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


@pytest.fixture(scope="module")
def healthy(wheels: Wheels, work: Path, tmp_path_factory: pytest.TempPathFactory) -> State:
    venv = install_cudnn_world(wheels, tmp_path_factory.mktemp("healthy") / "venv")
    return _state(venv, work)


@pytest.fixture(scope="module")
def mixed(wheels: Wheels, work: Path, tmp_path_factory: pytest.TempPathFactory) -> State:
    # cu12 by `uv pip install --no-deps`, last: overwrites cu13's files
    venv = install_cudnn_world(wheels, tmp_path_factory.mktemp("story") / "venv", cu12_last=True)
    return _state(venv, work)


@pytest.fixture(scope="module")
def removed(mixed: State, work: Path) -> State:
    uv_uninstall(mixed.venv, [CU12])  # the same venv, one step further
    return _state(mixed.venv, work)


@pytest.fixture(scope="module")
def fixed(removed: State, wheels: Wheels, work: Path) -> tuple[list[str], State]:
    """Run the fix doctor printed for the hollow cu13, as printed, offline."""
    (hollow,) = [p for p in removed.problems("hollow") if p["distributions"] == [CU13]]
    argv = shlex.split(hollow["fix"])
    assert os.path.basename(argv[0]) == "uv" and argv[1:3] == ["pip", "install"], argv
    # Only additions: no network and no user cache here; the spec printed is kept as is.
    offline = ["--offline", "--no-index", "--find-links", os.fspath(wheels.folder)]
    uv_run([*argv[1:], *offline, "--link-mode", "copy"])
    return argv, _state(removed.venv, work)


# -- healthy ----------------------------------------------------------------------------------


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout.rstrip("\n").splitlines()[-1]


def test_healthy_env_has_no_problems(healthy: State) -> None:
    assert healthy.imports, healthy.import_error
    assert healthy.text.returncode == 0, healthy.text.stdout + healthy.text.stderr
    assert _last_line(healthy.text) == "no problems"
    assert healthy.json.returncode == 0
    report = healthy.report
    assert report["errors"] == 0 and report["warnings"] == 0 and report["problems"] == []
    assert report["torch_cuda"] == "13.0"


def test_output_ends_with_one_newline(healthy: State) -> None:
    assert healthy.text.stdout.endswith("no problems\n")
    assert not healthy.text.stdout.endswith("\n\n")
    assert healthy.json.stdout.endswith("}\n")


# -- mixed: cu12 installed over cu13 ----------------------------------------------------------


def test_mixed_exits_1(mixed: State) -> None:
    assert mixed.text.returncode == 1, mixed.text.stderr
    assert mixed.json.returncode == 1, mixed.json.stderr
    # the real import works: glibc takes whatever bytes are there
    assert mixed.imports, mixed.import_error


def _fix(problem: dict[str, Any]) -> list[str]:
    fix = problem["fix"]
    assert isinstance(fix, str), problem
    return shlex.split(fix)


def _reinstalls_cu13(argv: list[str], venv: Path) -> None:
    """`uv pip install --python VENV --reinstall-package nvidia-cudnn-cu13 --no-deps SPEC`,
    SPEC naming the wheel uv installed it from (its direct_url.json)."""
    assert os.path.basename(argv[0]) == "uv" and argv[1:3] == ["pip", "install"], argv
    assert argv[argv.index("--python") + 1] == os.fspath(venv)
    assert argv[argv.index("--reinstall-package") + 1] == CU13
    assert "--no-deps" in argv
    assert argv[-1].startswith(f"{CU13} @ file://"), argv
    assert argv[-1].endswith(f"/nvidia_cudnn_cu13-{CU13_VERSION}-py3-none-any.whl")


def _mixed_error(state: State) -> dict[str, Any]:
    (error,) = state.report["problems"]  # the co-owned paths and what follows: one finding
    assert error["code"] == "mixed-cuda-major" and error["severity"] == "error"
    return error


def test_mixed_is_one_error_with_its_consequences_and_the_one_cure(mixed: State) -> None:
    error = _mixed_error(mixed)
    assert error["what"] == (
        f"{CU12} {CU12_VERSION} was installed over {CU13} {CU13_VERSION}: torch (CUDA 13.0) "
        "loads its CUDA 12 build"
    )
    assert error["why"].startswith(
        f"they list the same paths in nvidia/cudnn/lib, and the bytes on disk are {CU12}'s"
    )
    site = os.path.realpath(mixed.site)
    assert os.path.join(site, CUDNN) in error["paths"] and len(error["paths"]) == 8
    assert error["distributions"] == [CU12, CU13] and error["removes"] == [CU12]
    assert error["consequences"][0].startswith("torch loads 8 of its libraries: libcudnn.so.9")
    # torch is a CUDA 13 build: keep cu13, i.e. remove cu12, and put cu13's bytes back
    cure = ["cudatx", "remove", CU12, "--repair", "--yes", "--python", os.fspath(mixed.venv)]
    assert shlex.split(error["fix"]) == cure
    assert mixed.report["fixes"] == [error["fix"]]
    assert mixed.report["verdict"] == f"1 error: {error['what']}. To fix it, run: {error['fix']}"
    lines = mixed.text.stdout.splitlines()
    assert lines[0] == mixed.report["verdict"]
    assert "error: " + error["what"] in lines and "  fix: " + error["fix"] in lines
    assert mixed.report["warnings"] == 0  # the co-owned paths are this error's, not a warning


def test_mixed_cu12_sub_libraries_miss_their_cuda_12_loads(mixed: State) -> None:
    # cu12's cuDNN now dlopens libcublasLt.so.12 and libnvrtc.so.12, which only CUDA 13
    # builds provide here: consequences of the same cause.
    failing = {
        line.split(" loads ")[1].split(" at run time")[0]
        for line in _mixed_error(mixed)["consequences"]
        if " at run time: " in line
    }
    assert failing == {"libcublasLt.so.12", "libnvrtc.so.12"}


def test_mixed_cure_run_as_printed_cures_it(wheels: Wheels, work: Path, tmp_path: Path) -> None:
    venv = install_cudnn_world(wheels, tmp_path / "venv", cu12_last=True)
    (fix,) = _state(venv, work).report["fixes"]
    done = subprocess.run(
        ["bash", "-c", fix], env=_uv_shell_env(wheels.folder), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    after = _state(venv, work)
    assert after.report["problems"] == [] and after.report["errors"] == 0, after.text.stdout
    assert after.imports, after.import_error
    with ZipFile(wheels.cudnn13) as wheel:
        assert (after.site / CUDNN).read_bytes() == wheel.read(CUDNN)
    assert not list(after.site.glob("nvidia_cudnn_cu12-*"))


# -- removed: cu12 uninstalled, cu13 left hollow ----------------------------------------------


def test_removed_exits_1_and_the_real_import_fails(removed: State) -> None:
    assert removed.text.returncode == 1
    assert removed.json.returncode == 1
    assert not removed.imports
    assert "libcudnn.so.9" in (removed.import_error or "")
    assert not removed.cudnn_on_disk


def test_removed_hollow_error_with_what_it_breaks_and_the_reinstall(removed: State) -> None:
    (hollow,) = removed.problems("hollow")
    assert hollow["severity"] == "error"  # torch/_C needs its file
    assert hollow["distributions"] == [CU13]
    assert hollow["what"] == (
        f"{CU13} {CU13_VERSION} is installed but hollow: 8 of its 14 files are missing"
    )
    assert (
        f"importing torch/_C{ext_suffix()} would fail: libcudnn.so.9 not found"
        in (hollow["consequences"])
    )
    _reinstalls_cu13(_fix(hollow), removed.venv)
    assert "  fix: " + hollow["fix"] in removed.text.stdout.splitlines()
    assert [p["code"] for p in removed.report["problems"]] == ["hollow"]  # one cause
    assert removed.report["fixes"] == [hollow["fix"]]


def test_fix_as_printed_restores_the_env(fixed: tuple[list[str], State], wheels: Wheels) -> None:
    argv, after = fixed
    _reinstalls_cu13(argv, after.venv)
    assert after.text.returncode == 0, after.text.stdout
    assert _last_line(after.text) == "no problems"
    assert after.json.returncode == 0 and after.report["problems"] == []
    assert after.imports, after.import_error
    with ZipFile(wheels.cudnn13) as wheel:
        assert (after.site / CUDNN).read_bytes() == wheel.read(CUDNN)


def test_a_fix_runs_as_printed_where_the_prefix_holds_a_space(
    wheels: Wheels, work: Path, tmp_path: Path
) -> None:
    """doctor's fix lines are shell commands: every word quoted, so one pasted into a shell
    works for an environment under a folder with a space in its name."""
    venv = install_cudnn_world(wheels, tmp_path / "my envs" / "venv", cu12_last=True)
    uv_uninstall(venv, [CU12])
    (hollow,) = _state(venv, work).problems("hollow")
    _reinstalls_cu13(_fix(hollow), venv)
    # The command as printed, through a shell; uv's offline settings from the environment.
    environ = _uv_shell_env(wheels.folder)
    done = subprocess.run(
        ["bash", "-c", hollow["fix"]], env=environ, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    after = _state(venv, work)
    assert after.report["problems"] == [], after.text.stdout
    assert after.imports, after.import_error


def _uv_shell_env(find_links: Path) -> dict[str, str]:
    """This environment with `uv` and `cudatx` on PATH, and uv offline, finding wheels in
    `find_links` (as a user's uv configuration would say)."""
    hidden = ("VIRTUAL_ENV", "CONDA_PREFIX")
    environ = {k: v for k, v in os.environ.items() if k not in hidden and not k.startswith("UV_")}
    tools = [os.path.dirname(uv_bin()), os.path.dirname(sys.executable)]
    return environ | {
        "PATH": os.pathsep.join([*tools, environ.get("PATH", "")]),
        "UV_OFFLINE": "1",
        "UV_FIND_LINKS": os.fspath(find_links),
        "UV_LINK_MODE": "copy",
        "UV_CACHE_DIR": os.fspath(find_links.parent / "uv-cache"),
    }


# -- --json and bad input -----------------------------------------------------------------------


def test_json_is_the_whole_stdout_and_counts_match(
    healthy: State, mixed: State, removed: State
) -> None:
    for state in (healthy, mixed, removed):
        report = json.loads(state.json.stdout)  # nothing else on stdout
        assert state.json.stdout.lstrip().startswith("{")
        assert report["schema_version"] == 1
        severities = [p["severity"] for p in report["problems"]]
        assert report["errors"] == severities.count("error")
        assert report["warnings"] == severities.count("warning")
        assert set(severities) <= {"error", "warning"}
        assert report["prefix"] == os.fspath(state.venv)
        assert state.json.stderr.startswith("Using Python ")
        # text and JSON tell the same problems
        for problem in report["problems"]:
            assert f"{problem['severity']}: {problem['what']}" in state.text.stdout


def test_python_at_nothing_exits_3(work: Path) -> None:
    for flags in ((), ("--json",)):
        done = cudatx("doctor", "--python", work / "no-such-venv", *flags, cwd=work)
        assert done.returncode == 3
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("cudatx: error:"), done.stderr
