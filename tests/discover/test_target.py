"""cudatx.discover.target: which interpreter is the target, and what it says about itself.

Every environment here is a real venv made by real uv; every answer comes from really
running that interpreter. ``environ`` and ``cwd`` are passed explicitly, so the test process's
own VIRTUAL_ENV or working folder never leaks in.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker

from cudatx.discover.target import Query, find_target, locate_interpreter
from cudatx.errors import EnvironmentNotFound, ExitCode
from cudatx.models import PythonTarget
from tests.support import make_venv, site_packages, venv_python


@dataclass(frozen=True)
class Venvs:
    root: Path
    explicit: Path  # given with --python
    virtual_env: Path  # named by VIRTUAL_ENV
    conda: Path  # named by CONDA_PREFIX (any prefix with bin/python will do)
    project: Path  # a folder holding .venv
    dotvenv: Path  # project/.venv
    deep: Path  # project/a/b: .venv is two parents up
    bare: Path  # a folder with no .venv at or above it


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> Venvs:
    root = tmp_path_factory.mktemp("target")
    project = root / "project"
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    bare = root / "elsewhere" / "x"
    bare.mkdir(parents=True)
    found = Venvs(
        root=root,
        explicit=make_venv(root / "explicit"),
        virtual_env=make_venv(root / "virtual_env"),
        conda=make_venv(root / "conda"),
        project=project,
        dotvenv=make_venv(project / ".venv"),
        deep=deep,
        bare=bare,
    )
    # The fallback test relies on no .venv above `bare`; say so if the machine has one.
    for folder in (bare, *bare.parents):
        assert not (folder / ".venv").exists(), f"unexpected {folder / '.venv'}"
    return found


def _ask(python: Path | str, code: str) -> str:
    done = subprocess.run(
        [os.fspath(python), "-I", "-c", code], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def explicit_target(venvs: Venvs) -> PythonTarget:
    return find_target(os.fspath(venvs.explicit), environ={}, cwd=venvs.bare)


# -------------------------------------------------------------------------------------
# Precedence, as uv: --python > VIRTUAL_ENV > CONDA_PREFIX > .venv here or above > own
# -------------------------------------------------------------------------------------


def test_python_option_beats_everything(venvs: Venvs) -> None:
    environ = {"VIRTUAL_ENV": str(venvs.virtual_env), "CONDA_PREFIX": str(venvs.conda)}
    target = find_target(os.fspath(venvs.explicit), environ=environ, cwd=venvs.deep)
    assert target.found_by == "--python"
    assert target.prefix == str(venvs.explicit)


def test_virtual_env_beats_conda_and_dotvenv(venvs: Venvs) -> None:
    environ = {"VIRTUAL_ENV": str(venvs.virtual_env), "CONDA_PREFIX": str(venvs.conda)}
    target = find_target(None, environ=environ, cwd=venvs.deep)
    assert target.found_by == "VIRTUAL_ENV"
    assert target.prefix == str(venvs.virtual_env)


def test_conda_prefix_beats_dotvenv(venvs: Venvs) -> None:
    target = find_target(None, environ={"CONDA_PREFIX": str(venvs.conda)}, cwd=venvs.deep)
    assert target.found_by == "CONDA_PREFIX"
    assert target.prefix == str(venvs.conda)


def test_empty_variables_are_not_set(venvs: Venvs) -> None:
    target = find_target(None, environ={"VIRTUAL_ENV": "", "CONDA_PREFIX": ""}, cwd=venvs.project)
    assert target.found_by == ".venv"
    assert target.prefix == str(venvs.dotvenv)


@pytest.mark.parametrize("where", ["project", "deep"])
def test_dotvenv_in_cwd_or_a_parent(venvs: Venvs, where: str) -> None:
    cwd = venvs.project if where == "project" else venvs.deep
    target = find_target(None, environ={}, cwd=cwd)
    assert target.found_by == ".venv"
    assert target.prefix == str(venvs.dotvenv)


def test_dotvenv_file_or_empty_folder_is_passed_over(venvs: Venvs, tmp_path: Path) -> None:
    # A `.venv` that is a file (or a folder with no interpreter) is not an environment; the
    # search goes on upwards and finds the real one.
    inner = venvs.project / "a" / "b" / "c"
    inner.mkdir(exist_ok=True)
    (venvs.project / "a" / ".venv").write_text("not a venv\n")
    (inner / ".venv").mkdir(exist_ok=True)
    try:
        interpreter, found_by = locate_interpreter(None, {}, inner)
        assert found_by == ".venv"
        assert interpreter.parent.parent == venvs.dotvenv
    finally:
        (venvs.project / "a" / ".venv").unlink()
        (inner / ".venv").rmdir()


def test_fallback_is_cudatx_own_interpreter(venvs: Venvs) -> None:
    target = find_target(None, environ={}, cwd=venvs.bare)
    assert target.found_by == "cudatx's interpreter"
    assert target.prefix == sys.prefix
    assert target.version == platform.python_version()
    assert target.executable == os.path.realpath(sys.executable)


# -------------------------------------------------------------------------------------
# What --python accepts
# -------------------------------------------------------------------------------------


def test_python_option_accepts_an_interpreter_path(venvs: Venvs) -> None:
    target = find_target(os.fspath(venv_python(venvs.explicit)), environ={}, cwd=venvs.bare)
    assert target.found_by == "--python"
    assert target.prefix == str(venvs.explicit)
    assert target.python == str(venv_python(venvs.explicit))


def test_python_option_accepts_a_venv_folder(explicit_target: PythonTarget, venvs: Venvs) -> None:
    assert explicit_target.found_by == "--python"
    assert explicit_target.prefix == str(venvs.explicit)


def test_python_option_accepts_a_bare_name_on_path(venvs: Venvs) -> None:
    on_path = shutil.which("python3")
    if on_path is None:
        pytest.skip("no python3 on PATH")
    # The name is looked up on the PATH of the environment given, as a shell would.
    target = find_target("python3", environ={"PATH": os.environ["PATH"]}, cwd=venvs.bare)
    assert target.found_by == "--python"
    # PATH may hold a launcher (pyenv shim): compare with what that name really runs.
    expected = json.loads(
        _ask(
            "python3",
            "import json, os, sys; print(json.dumps([sys.prefix, os.readlink('/proc/self/exe')]))",
        )
    )
    assert [target.prefix, target.executable] == expected


def test_python_option_relative_interpreter_path(
    venvs: Venvs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `cd .venv/bin && cudatx ... --python ./python` must inspect that venv's python, not
    # whatever `python` PATH finds (pathlib turns "./python" into "python").
    monkeypatch.chdir(venvs.explicit / "bin")
    target = find_target("./python", environ={}, cwd=venvs.bare)
    assert target.prefix == str(venvs.explicit)


# -------------------------------------------------------------------------------------
# The PythonTarget of a uv venv
# -------------------------------------------------------------------------------------


def test_target_of_a_uv_venv(explicit_target: PythonTarget, venvs: Venvs) -> None:
    python = venv_python(venvs.explicit)
    facts = json.loads(
        _ask(
            python,
            "import json, platform, sys; print(json.dumps([platform.python_version(),"
            " platform.machine(), sys.platform, sys.base_prefix]))",
        )
    )
    version, machine, plat, base_prefix = facts
    target = explicit_target
    assert target.prefix == str(venvs.explicit)
    assert target.base_prefix == base_prefix != target.prefix
    assert target.version == version
    assert target.executable == os.path.realpath(python)
    assert target.python == str(python)
    site = str(site_packages(venvs.explicit))
    assert site in target.sys_path
    assert site in target.site_packages
    assert all(p for p in target.sys_path)  # '' (the working folder) is left out
    assert any(s.endswith(".so") for s in target.extension_suffixes)
    assert target.stdlib and all(os.path.isdir(p) for p in target.stdlib)
    markers = target.markers
    assert markers["python_version"] == ".".join(version.split(".")[:2])
    assert markers["python_full_version"] == version
    assert markers["sys_platform"] == plat
    assert markers["platform_machine"] == machine
    # The marker environment is usable by packaging as it is.
    assert Marker(f"python_version == '{markers['python_version']}'").evaluate(markers)
    assert not Marker("sys_platform == 'win32'").evaluate(markers)


def test_query_interpreter_keeps_found_by(venvs: Venvs) -> None:
    target = Query(venv_python(venvs.conda), "CONDA_PREFIX").result()
    assert target.found_by == "CONDA_PREFIX"
    assert target.prefix == str(venvs.conda)


def test_query_is_isolated_from_pythonpath(
    venvs: Venvs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The target is asked with -I, as uv does: a PYTHONPATH of the caller must not show up.
    extra = tmp_path / "extra"
    extra.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(extra))
    target = Query(venv_python(venvs.explicit), "--python").result()
    assert str(extra) not in target.sys_path


# -------------------------------------------------------------------------------------
# Errors: EnvironmentNotFound, exit code 3
# -------------------------------------------------------------------------------------


def _refused(python: str | None, environ: dict[str, str], cwd: Path) -> EnvironmentNotFound:
    with pytest.raises(EnvironmentNotFound) as caught:
        find_target(python, environ=environ, cwd=cwd)
    error = caught.value
    assert error.exit_code == ExitCode.NO_ENVIRONMENT == 3
    assert error.message and "\n" not in error.message
    return error


def test_missing_path(venvs: Venvs) -> None:
    missing = venvs.root / "no" / "such" / "python"
    error = _refused(str(missing), {}, venvs.bare)
    assert str(missing) in error.message


def test_unknown_bare_name(venvs: Venvs) -> None:
    error = _refused("cudatx-no-such-python-3.99", {}, venvs.bare)
    assert "PATH" in error.message


def test_folder_without_interpreter(venvs: Venvs) -> None:
    error = _refused(str(venvs.bare), {}, venvs.bare)
    assert "bin/python" in error.message


def test_non_python_executable() -> None:
    true = shutil.which("true") or "/bin/true"
    error = _refused(true, {}, Path("/"))
    assert "not a working Python interpreter" in error.message


def test_executable_script_that_is_not_python(tmp_path: Path) -> None:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho I am no python\n")
    script.chmod(0o755)
    error = _refused(str(script), {}, tmp_path)
    assert "not a working Python interpreter" in error.message


def test_non_executable_text_file(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("print('hello')\n")
    error = _refused(str(text), {}, tmp_path)
    assert str(text) in error.message


def test_virtual_env_without_interpreter(venvs: Venvs) -> None:
    error = _refused(None, {"VIRTUAL_ENV": str(venvs.bare)}, venvs.project)
    assert "VIRTUAL_ENV" in error.message


def test_conda_prefix_without_interpreter(venvs: Venvs) -> None:
    error = _refused(None, {"CONDA_PREFIX": str(venvs.bare)}, venvs.project)
    assert "CONDA_PREFIX" in error.message
