"""No build without `--allow-build`, whatever says `no-binary` (issue 31).

cudatx keeps uv from building with `--only-binary :all:`; a `no-binary` setting beats it
in uv (crates/uv-configuration/src/build_options.rs, `no_build_package`: a package that
`no-binary` names may build even under `NoBuild::All`). Each test here puts one such
setting where uv reads it (a requirements file's line, an include's, a constraints file's,
uv.toml, pyproject.toml's `[tool.uv]`, the user's configuration, UV_CONFIG_FILE, a file
UV_CONSTRAINT names) beside a package that has both a wheel and an sdist, and runs the
dry runs and checks. The sdist's build backend writes a marker file whenever any of its
hooks runs (tests/support/builds.py), and a setup.py variant writes one when it is run, so
"nothing ran" is read from the marker: each is refused in one line naming the setting
(exit 16), or judged without building. `--allow-build` then builds, which shows the
marker is written when anything builds.

Real uv (the uv package's), offline, a find-links folder; uv's cache is the test's own
and the configuration uv and cudatx read is only the test's (XDG_CONFIG_HOME,
UV_NO_SYSTEM_CONFIG, no UV_* variable of the machine).
"""

from __future__ import annotations

import glob
import io
import os
import subprocess
import sysconfig
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cudatx.errors import NeedsBuild
from cudatx.uv import pip_argv
from tests.support.builds import runs, sdist_of, tattling_project
from tests.support.cli import HIDDEN, cudatx
from tests.support.venvs import make_venv
from tests.support.wheels import build_wheel

NEEDS_BUILD = 16  # cudatx/errors.py ExitCode.NEEDS_BUILD
ASKED = "can only be checked by building it: pass --allow-build"
# Without an environment --allow-build alone is refused: the line says what builds it.
NO_ENV = (
    "can only be checked by building it: the check without an environment never builds; "
    "pass --fresh (or --python) with --allow-build"
)


def asked_of(command: str) -> str:
    """What the refusal of `command` asks the user to pass."""
    return NO_ENV if command == "check, no environment" else ASKED


@dataclass(frozen=True)
class Links:
    folder: Path  # tattle 1.0: a wheel and an sdist; lonely 1.0: an sdist only
    marker: Path  # written by the sdists' build backends


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Links:
    root = tmp_path_factory.mktemp("no-build")
    folder, marker = root / "links", root / "ran.log"
    build_wheel(folder, "tattle", "1.0", {"tattle.py": b"BUILT = False\n"})
    sdist_of(
        tattling_project(root / "src" / "tattle", "tattle", "1.0", marker), folder, "tattle", "1.0"
    )
    sdist_of(
        tattling_project(root / "src" / "lonely", "lonely", "1.0", marker), folder, "lonely", "1.0"
    )
    return Links(folder, marker)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("no-build-env") / "venv")


@pytest.fixture
def marker(links: Links) -> Path:
    links.marker.unlink(missing_ok=True)
    return links.marker


def _env(tmp: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """uv's cache the test's own (nothing built before is reused), its configuration only
    what the test writes."""
    (tmp / "xdg").mkdir(exist_ok=True)
    return {
        "UV_CACHE_DIR": str(tmp / "uv-cache"),
        "XDG_CONFIG_HOME": str(tmp / "xdg"),
        "UV_NO_SYSTEM_CONFIG": "1",
        **(env or {}),
    }


def _run(
    project: Path, links: Links, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    where = ("--offline", "--find-links", str(links.folder), "--no-cache")
    return cudatx(*args, *where, cwd=project, hide={*HIDDEN, "UV_*"}, env=_env(project.parent, env))


# How each command is asked, given the file to check and the environment.
COMMANDS: dict[str, Callable[[str, Path], tuple[str, ...]]] = {
    "check --python": lambda f, v: ("check-requirements", f, "--python", str(v)),
    "check --fresh": lambda f, v: ("check-requirements", f, "--fresh"),
    "check, no environment": lambda f, v: ("check-requirements", f),
    "install -r --dry-run": lambda f, v: ("install", "-r", f, "--dry-run", "--python", str(v)),
}


@dataclass(frozen=True)
class Form:
    files: dict[str, str]  # written into the project folder (uv.toml, requirements, ...)
    named: str  # what the refusal must say
    env: dict[str, str] = field(default_factory=dict)  # set for cudatx (and so for uv)
    xdg: str = ""  # the user's uv.toml


FILE = "requirements.txt"
FORMS = {
    "--no-binary NAME": Form(
        {FILE: "--no-binary tattle\ntattle\n"}, f"tattle ({FILE}:1: --no-binary tattle)"
    ),
    "--no-binary=NAME": Form(
        {FILE: "tattle\n--no-binary=tattle\n"}, f"tattle ({FILE}:2: --no-binary=tattle)"
    ),
    "--no-binary :all:": Form(
        {FILE: "--no-binary :all:\ntattle\n"}, f"every package ({FILE}:1: --no-binary :all:)"
    ),
    "in an include": Form(
        {FILE: "-r more.txt\n", "more.txt": "# more\n--no-binary tattle\ntattle\n"},
        "tattle (more.txt:2: --no-binary tattle)",
    ),
    "in a constraints file": Form(
        {FILE: "-c constraints.txt\ntattle\n", "constraints.txt": "--no-binary tattle\n"},
        "tattle (constraints.txt:1: --no-binary tattle)",
    ),
    "uv.toml [pip]": Form(
        {FILE: "tattle\n", "uv.toml": '[pip]\nno-binary = ["tattle"]\n'},
        'tattle ({project}/uv.toml:2: pip.no-binary = ["tattle"])',
    ),
    "uv.toml no-binary-package": Form(
        {FILE: "tattle\n", "uv.toml": 'no-binary-package = ["tattle"]\n'},
        'tattle ({project}/uv.toml:1: no-binary-package = ["tattle"])',
    ),
    "uv.toml no-binary": Form(
        {FILE: "tattle\n", "uv.toml": "no-binary = true\n"},
        "every package ({project}/uv.toml:1: no-binary = true)",
    ),
    "pyproject [tool.uv]": Form(
        {
            FILE: "tattle\n",
            "pyproject.toml": '[project]\nname = "app"\nversion = "1"\n\n'
            '[tool.uv]\nno-binary-package = ["tattle"]\n',
        },
        'tattle ({project}/pyproject.toml:6: tool.uv.no-binary-package = ["tattle"])',
    ),
    "the user's uv.toml": Form(
        {FILE: "tattle\n"},
        'tattle ({xdg}/uv/uv.toml:2: pip.no-binary = ["tattle"])',
        xdg='[pip]\nno-binary = ["tattle"]\n',
    ),
    "UV_CONFIG_FILE": Form(
        {FILE: "tattle\n", "elsewhere.toml": '[pip]\nno-binary = ["tattle"]\n'},
        'tattle ({project}/elsewhere.toml:2: pip.no-binary = ["tattle"])',
        env={"UV_CONFIG_FILE": "elsewhere.toml"},
    ),
    "UV_CONSTRAINT": Form(
        {FILE: "tattle\n", "c.txt": "--no-binary tattle\n"},
        "tattle (UV_CONSTRAINT: c.txt:1: --no-binary tattle)",
        env={"UV_CONSTRAINT": "c.txt"},
    ),
}


def _project(tmp_path: Path, form: Form) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for name, text in form.files.items():
        (project / name).write_text(text)
    if form.xdg:
        (tmp_path / "xdg" / "uv").mkdir(parents=True)
        (tmp_path / "xdg" / "uv" / "uv.toml").write_text(form.xdg)
    return project


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("form", FORMS)
def test_no_binary_is_refused_not_built(
    links: Links, venv: Path, marker: Path, tmp_path: Path, form: str, command: str
) -> None:
    """Each `no-binary` setting, wherever uv reads it, makes every dry run and check refuse
    in one line naming it (exit 16); the sdist's backend never runs."""
    asked = FORMS[form]
    project = _project(tmp_path, asked)
    done = _run(project, links, *COMMANDS[command](FILE, venv), env=asked.env)
    named = asked.named.format(project=project, xdg=tmp_path / "xdg")
    assert runs(marker) == [], f"built: {runs(marker)}\n{done.stderr}"
    assert done.returncode == NEEDS_BUILD, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line == f"cudatx: error: {named} {asked_of(command)}", done.stderr


@pytest.mark.parametrize("form", ["--no-binary NAME", "uv.toml [pip]", "UV_CONSTRAINT"])
def test_allow_build_builds_as_asked(
    links: Links, venv: Path, marker: Path, tmp_path: Path, form: str
) -> None:
    """The control: with --allow-build the same setting builds the sdist (its backend runs),
    so the marker does say when anything builds."""
    asked = FORMS[form]
    project = _project(tmp_path, asked)
    args = COMMANDS["check --python"](FILE, venv)
    _run(project, links, *args, "--allow-build", env=asked.env)
    assert runs(marker), "--allow-build should have built tattle from its sdist"


@pytest.mark.parametrize("command", COMMANDS)
def test_only_binary_none_builds_nothing(
    links: Links, venv: Path, marker: Path, tmp_path: Path, command: str
) -> None:
    """`--only-binary :none:` asks uv to allow every build; cudatx's `--only-binary :all:`
    comes after it (uv reads them in order), so what has only an sdist is refused, by uv,
    named, and nothing runs. Where there is a wheel, it is what is judged: `:none:` forbids
    no wheel, so the real install takes it too."""
    form = Form({FILE: "--only-binary :none:\nlonely\n"}, "lonely")
    project = _project(tmp_path, form)
    done = _run(project, links, *COMMANDS[command](FILE, venv))
    assert runs(marker) == [], f"built: {runs(marker)}\n{done.stderr}"
    assert done.returncode == NEEDS_BUILD, done.stdout + done.stderr
    assert f"lonely {asked_of(command)}" in done.stderr, done.stderr

    (project / FILE).write_text("--only-binary :none:\ntattle\n")
    judged = _run(project, links, *COMMANDS[command](FILE, venv))
    assert runs(marker) == [], f"built: {runs(marker)}\n{judged.stderr}"
    assert judged.returncode == 0, judged.stdout + judged.stderr


@pytest.mark.parametrize("variable", ["UV_NO_BINARY", "UV_NO_BINARY_PACKAGE", "UV_NO_BUILD"])
def test_variables_uv_pip_does_not_read_build_nothing(
    links: Links, venv: Path, marker: Path, tmp_path: Path, variable: str
) -> None:
    """UV_NO_BINARY, UV_NO_BINARY_PACKAGE and UV_NO_BUILD(=false) are uv's project commands'
    (crates/uv-cli BuildOptionsArgs); `uv pip` does not read them, so the wheel is judged,
    as `uv pip install` installs it, and nothing builds."""
    value = {"UV_NO_BINARY": "1", "UV_NO_BINARY_PACKAGE": "tattle", "UV_NO_BUILD": "false"}
    project = _project(tmp_path, Form({FILE: "tattle\n"}, ""))
    for command in COMMANDS:
        done = _run(project, links, *COMMANDS[command](FILE, venv), env={variable: value[variable]})
        assert runs(marker) == [], f"{command}: built: {runs(marker)}\n{done.stderr}"
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


# -- a setup.py ---------------------------------------------------------------------------


def _setuptools_wheel() -> Path | None:
    """A setuptools wheel on this machine (ensurepip's, or the distribution's), for uv to
    build a setup.py offline; None where there is none."""
    stdlib = sysconfig.get_paths()["stdlib"]
    found = sorted(glob.glob(os.path.join(stdlib, "ensurepip", "_bundled", "setuptools-*.whl")))
    found += sorted(glob.glob("/usr/share/python-wheels/setuptools-*.whl"))
    return Path(found[-1]) if found else None


def test_a_setup_py_is_not_run(tmp_path: Path, venv: Path) -> None:
    """The same with a setup.py (no pyproject.toml: uv builds it with setuptools' legacy
    backend, which runs setup.py): `--no-binary` refused, setup.py never run; run with
    --allow-build (the control)."""
    setuptools = _setuptools_wheel()
    if setuptools is None:
        pytest.skip("no setuptools wheel on this machine to build a setup.py offline")
    folder, marker = tmp_path / "links", tmp_path / "setup-py-ran"
    build_wheel(folder, "oldstyle", "1.0", {"oldstyle.py": b""})
    (folder / setuptools.name).write_bytes(setuptools.read_bytes())
    setup = (
        f"open({str(marker)!r}, 'a').write('ran\\n')\n"
        "from setuptools import setup\nsetup(name='oldstyle', version='1.0')\n"
    )
    pkg_info = "Metadata-Version: 2.1\nName: oldstyle\nVersion: 1.0\n"
    with tarfile.open(folder / "oldstyle-1.0.tar.gz", "w:gz") as tar:
        for name, text in (("setup.py", setup), ("PKG-INFO", pkg_info)):
            data = text.encode()
            info = tarfile.TarInfo(f"oldstyle-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    project = tmp_path / "project"
    project.mkdir()
    (project / FILE).write_text("--no-binary oldstyle\noldstyle\n")
    here = Links(folder, marker)
    for command in COMMANDS:
        done = _run(project, here, *COMMANDS[command](FILE, venv))
        assert not marker.exists(), f"{command}: setup.py ran\n{done.stderr}"
        assert done.returncode == NEEDS_BUILD, f"{command}: {done.stdout}{done.stderr}"
        said = f"oldstyle ({FILE}:1: --no-binary oldstyle) {asked_of(command)}"
        assert said in done.stderr, f"{command}: {done.stderr}"
    _run(project, here, *COMMANDS["check --python"](FILE, venv), "--allow-build")
    assert marker.exists(), "--allow-build should have run setup.py"


# -- uv's command line, as cudatx builds it -------------------------------------------------


def test_only_binary_all_comes_last() -> None:
    """uv reads --only-binary's specifiers in order (a `:none:` clears those before it), so
    cudatx's `:all:` comes after the file's words, for install, sync and compile."""
    for command in ("install", "sync", "compile"):
        argv = pip_argv(command, "/env", "--dry-run", options=["--only-binary", ":none:"])
        assert argv[-2:] == ["--only-binary", ":all:"], argv
    assert pip_argv("install", "/env", options=["--only-binary", ":none:", "--allow-build"]) == [
        "pip",
        "install",
        "--python",
        "/env",
        "--only-binary",
        ":none:",
    ]


@pytest.mark.parametrize("words", [["--no-binary", "tattle"], ["--no-binary=tattle"]])
def test_a_no_binary_word_never_reaches_uv(words: list[str]) -> None:
    """The last check before uv runs: a `--no-binary NAME` among the words is NeedsBuild."""
    with pytest.raises(NeedsBuild, match="tattle"):
        pip_argv("install", "/env", options=words)
    assert pip_argv("install", "/env", options=[*words, "--allow-build"])[-len(words) :] == words
    assert pip_argv("install", "/env", options=["--no-binary", ":none:"])[-2:] == [
        "--only-binary",
        ":all:",
    ]


# -- errors quote a line as written ----------------------------------------------------------


SECRET = "s3cr3t-t0ken-value"


@pytest.mark.parametrize(
    "text",
    [
        "--extra-index-url ${TOKEN}\nsix\n",
        "--index-url ${TOKEN}\nsix\n",
        "-f ${TOKEN}\nsix\n",
        "-r ${TOKEN}/more.txt\n",
        "-r https://user:${TOKEN}@example.invalid/r.txt\n",
        "-e ${TOKEN}\n",
        "${TOKEN}/pkg.whl[x\n",
    ],
)
def test_an_error_shows_a_variable_as_written(tmp_path: Path, venv: Path, text: str) -> None:
    """A line that errors is quoted as the file writes it: `${TOKEN}`, never its value (a
    variable in a requirements file is where a token goes; uv prints `${TOKEN}` too)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / FILE).write_text(text)
    env = {"TOKEN": SECRET}
    for args in (("check-requirements", FILE, "--python", str(venv)), ("check-requirements", FILE)):
        done = cudatx(
            *args,
            "--offline",
            "--no-cache",
            cwd=project,
            hide={*HIDDEN, "UV_*"},
            env=_env(tmp_path, env),
        )
        assert done.returncode != 0, done.stdout + done.stderr
        assert SECRET not in done.stdout + done.stderr, done.stderr
        assert "${TOKEN}" in done.stderr, done.stderr
