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
import time
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


def test_fallback_is_the_first_python3_on_path(venvs: Venvs) -> None:
    """As uv does with no environment: the first python3 on PATH, never cudatx's own
    interpreter (pipx's or `uv tool`'s private venv once installed as a tool)."""
    path = os.pathsep.join([str(venvs.bare / "nothing-here"), str(venvs.explicit / "bin")])
    target = find_target(None, environ={"PATH": path}, cwd=venvs.bare)
    assert target.found_by == "the first python3 on PATH"
    assert os.path.samefile(target.prefix, venvs.explicit)
    assert target.version == platform.python_version()
    with pytest.raises(EnvironmentNotFound, match="no python3 on PATH"):
        find_target(None, environ={"PATH": str(venvs.bare)}, cwd=venvs.bare)


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


# --- The target's own code never runs; its answer cannot be forged or hang cudatx --------

EVIL_PTH = (
    "import os; open(os.path.join({folder!r}, 'pth-ran'), 'w').close(); "
    "print('@@cudatx@@' + '{{\"prefix\": \"/\"}}')\n"
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A venv whose site-packages holds a .pth with an import line (it writes a file and
    prints a forged answer), a .pth path line, and a sitecustomize that writes a file."""
    root = tmp_path_factory.mktemp("hostile")
    witness = root / "witness"
    witness.mkdir()
    venv = make_venv(root / "venv")
    site = site_packages(venv)
    (site / "evil.pth").write_text(EVIL_PTH.format(folder=os.fspath(witness)))
    (root / "extra").mkdir()
    (site / "extra.pth").write_text(f"# a comment\n{root / 'extra'}\n../../../../missing\n")
    (site / "sitecustomize.py").write_text(
        f"open({os.fspath(witness / 'sitecustomize-ran')!r}, 'w').close()\n"
    )
    (root / "requirements.txt").write_text("")
    return venv, witness


@pytest.mark.parametrize(
    "args",
    [
        ("doctor",),
        ("why", "libc.so.6"),
        ("history",),
        ("graph",),
        ("check-requirements", "REQ"),
        # uv itself starts the interpreter with site (its own query) where cudatx asks it to
        # resolve: a dry run that needs no uv is the one cudatx answers alone.
        ("remove", "--dry-run", "cuda:13"),
    ],
    ids=lambda a: a[0],
)
def test_no_code_of_the_target_runs(hostile: tuple[Path, Path], args: tuple[str, ...]) -> None:
    from tests.support.cli import cudatx

    venv, witness = hostile
    requirements = os.fspath(venv.parent / "requirements.txt")
    argv = [requirements if a == "REQ" else a for a in args]
    done = cudatx(*argv, "--python", venv, cwd=venv.parent, env={"UV_NO_CONFIG": "1"})
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert sorted(p.name for p in witness.iterdir()) == [], done.stderr
    if args[0] in ("doctor", "why", "graph", "remove"):
        assert f"environment at: {venv}" in done.stderr, done.stderr


def test_pth_path_lines_are_read_and_import_lines_reported(hostile: tuple[Path, Path]) -> None:
    venv, witness = hostile
    target = find_target(os.fspath(venv), environ={}, cwd=venv.parent)
    site = os.fspath(site_packages(venv))
    assert target.prefix == os.fspath(venv)
    assert target.sys_path[-2:] == (site, os.fspath(venv.parent / "extra"))
    assert [i.split(":")[0] for i in target.pth_imports] == ["evil.pth"]
    assert list(witness.iterdir()) == []


def test_a_fifo_named_pth_is_passed_over(tmp_path: Path) -> None:
    """cudatx reads the .pth files itself (the interpreter's query does not): a FIFO named
    x.pth, which no writer ever opens, is passed over instead of hanging the scan, and the
    .pth beside it is still read."""
    venv = make_venv(tmp_path / "venv")
    site = site_packages(venv)
    os.mkfifo(site / "a-fifo.pth")
    (tmp_path / "extra").mkdir()
    (site / "b-extra.pth").write_text(f"{tmp_path / 'extra'}\n")
    started = time.monotonic()
    target = find_target(os.fspath(venv), environ={}, cwd=tmp_path)
    assert time.monotonic() - started < 30
    assert target.sys_path[-1] == os.fspath(tmp_path / "extra")


def _fake_python(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\nimport os, sys\n{body}")
    path.chmod(0o755)
    return path


def test_a_hanging_interpreter_and_what_it_started_are_killed(tmp_path: Path) -> None:
    from tests.support.cli import cudatx

    marker = f"cudatx-orphan-{os.getpid()}"
    fake = _fake_python(
        tmp_path / "python",
        # A child that keeps every inherited pipe open, then the interpreter sleeps.
        f"import subprocess, time\nsubprocess.Popen(['sleep', '300', {marker!r}], "
        "close_fds=False)\ntime.sleep(300)\n",
    )
    (tmp_path / "sleep").write_text('#!/bin/sh\nexec /bin/sleep "$1"\n')
    (tmp_path / "sleep").chmod(0o755)
    env = {"CUDATX_QUERY_TIMEOUT": "2", "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = cudatx("doctor", "--python", fake, cwd=tmp_path, env=env, timeout=60)
    assert done.returncode == ExitCode.NO_ENVIRONMENT, done.stderr
    assert "did not answer within 2 s" in done.stderr
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    left.append(pid)
        except OSError:
            pass
    assert left == []


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("'[' * 100000 + ']' * 100000", id="nested"),
        pytest.param("json.dumps({'python': 1, 'version': []})", id="wrong-types"),
        pytest.param("'\"' + 'x' * (65 << 20) + '\"'", id="too-large"),
    ],
)
def test_an_answer_cudatx_cannot_use_is_one_line(tmp_path: Path, answer: str) -> None:
    from tests.support.cli import cudatx

    # Said both ways: on the answer's own fd (argv[-1]) and on stdout, as an answer was
    # once taken.
    fake = _fake_python(
        tmp_path / "python",
        f"import json\ntext = {answer}\nprint('@@cudatx@@' + text)\n"
        "if sys.argv[-1].isdigit():\n    os.write(int(sys.argv[-1]), text.encode())\n",
    )
    done = cudatx("doctor", "--python", fake, cwd=tmp_path, timeout=60)
    assert done.returncode == ExitCode.NO_ENVIRONMENT, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cudatx: error: "), done.stderr
    assert len(lines[0]) < 400
