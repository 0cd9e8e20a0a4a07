"""Requirements files as uv reads them: cudatx's reading judged by the real, pinned uv.

Each case of the corpus below is a folder of requirements files (and the local wheels,
projects and variables they name). The judge is uv itself (the exact version the `test` extra
pins): `uv pip compile --no-deps --format pylock.toml` for the target interpreter of an empty
venv gives, for every package the file asks for there, its name, the version uv chose, where
from (the find-links folder, a direct path or URL, an editable folder), without building or
installing anything. cudatx's reading must name the same packages, the same pinned versions,
the same references and editables; and the file cudatx hands uv in place of the user's (the
pins as `check-requirements` writes them, with the file's options) must resolve to the same
packages. A file uv refuses, cudatx refuses: one line, a CudatxError, never a traceback.

Relative paths read as uv reads them: `-r`/`-c`/`-f` relative to the file that names them,
the requirements' own paths (`./x.whl`, `-e ./pkg`) relative to the working folder, so the
judge and cudatx run in the case's folder.

Beside the corpus: files generated from pieces of the same syntax, judged the same way
(`oracle`, CUDATX_ORACLE_EXAMPLES of them); and the corpus, generated files and uv's own
samples read under the oldest `packaging` pyproject.toml allows as well as the installed one,
which must agree (the reading must not drift with packaging's releases).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

from cudatx.errors import CudatxError
from cudatx.planning.checkreq import _write
from cudatx.planning.reqfiles import RequirementsFile, read_requirements
from tests.support.examples import ORACLE_EXAMPLES
from tests.support.venvs import make_venv, uv_bin, uv_env
from tests.support.wheels import build_wheel

# name -> versions built into the shared find-links folder (`<<wheels>>` in the corpus)
WHEELS = {
    "foo_bar.baz": ["1.0", "1.5", "2.0"],
    "six": ["1.16.0", "1.17.0"],
    "legacy": ["1.0", "2.0"],  # not 1.0.0 too: uv keeps one of two equal versions
    "alpha": ["1.0", "2.0", "3.0"],
    "beta": ["1.0", "1.9", "2.0"],
    "zeta": ["1.0+cu12", "1.1"],
    "winonly": ["1.0"],
    "localpkg": ["3.1"],
}
STATIC_PROJECT = '[project]\nname = "Ed_Pkg"\nversion = "0.3"\n'


@dataclass(frozen=True)
class Case:
    files: Mapping[str, str | bytes]  # relative path -> text (`<<key>>` filled in) or bytes
    env: Mapping[str, str] = field(default_factory=dict)  # variables set for both readers
    main: str = "r.txt"


CASES: dict[str, Case] = {
    "specifiers-and-names": Case(
        {
            "r.txt": "Foo_Bar.baz>=1.0,<2\nsix~=1.16.0\nlegacy===1.0\nalpha!=3.0\n"
            "beta==1.*\nzeta==1.0\n"
        }
    ),
    "more-operators": Case({"r.txt": "alpha>1.0\nbeta<=1.9\nsix<1.17\nlegacy==2.0.0\n"}),
    "extras-and-spaces": Case(
        {"r.txt": "  six [ cli ] == 1.16.0   \n\tFOO-bar_BAZ\t<2\t\n  \nalpha ==2.0\n"}
    ),
    "markers": Case(
        {
            "r.txt": "six==1.16.0 ; python_version >= '3.8'\n"
            "winonly ; sys_platform == 'win32'\n"
            'alpha==1.0; platform_machine == "not-a-machine"\n'
            "beta==2.0 ;implementation_name=='cpython' and os_name == 'posix'\n"
            "legacy ; python_version < '3'\n"
        }
    ),
    "direct-references": Case(
        {
            "r.txt": "localpkg @ file://<<wheels>>/localpkg-3.1-py3-none-any.whl\n"
            "./wheels/six-1.16.0-py3-none-any.whl\n"
            "alpha @ ./wheels/alpha-2.0-py3-none-any.whl\n"
            "<<wheels>>/beta-1.9-py3-none-any.whl\n"
        }
    ),
    "url-fragment-is-not-a-comment": Case(
        {
            "r.txt": "localpkg @ file://<<wheels>>/localpkg-3.1-py3-none-any.whl"
            "#sha256=<<sha:localpkg-3.1>> # but this is\n"
            "six==1.16.0 # a comment\n"
            "# alpha==1.0\n"
        }
    ),
    "includes": Case(
        {
            "r.txt": "-r sub/a.txt\n--requirement=sub/b.in\n  -r   sub/a.txt  \nbeta==1.0\n",
            "sub/a.txt": "six==1.16.0\n-r ../c.txt\n",
            "sub/b.in": "alpha==2.0\n",
            "c.txt": "legacy==1.0\n-r r.txt\n",
        }
    ),
    "constraints": Case(
        {
            "r.txt": "-c cons/c.txt\nsix\nalpha>=1\n",
            "cons/c.txt": "six<1.17\nalpha==2.0\nbeta==1.0\n-c more.txt\n",
            "cons/more.txt": "alpha<3\n",
        }
    ),
    "editable": Case(
        {"r.txt": "-e ./edpkg\n--editable=./edpkg2\n", "edpkg/pyproject.toml": STATIC_PROJECT}
        | {"edpkg2/pyproject.toml": STATIC_PROJECT.replace("Ed_Pkg", "ed.two")}
    ),
    "hashes-and-continuations": Case(
        {
            "r.txt": "six==1.16.0 \\\n    --hash=sha256:<<sha:six-1.16.0>> \\\n"
            "    --hash=sha256:<<sha:six-1.17.0>>\n"
            "beta==1.0 --hash=sha256:<<sha:beta-1.0>>\n"
        }
    ),
    "options": Case(
        {
            "r.txt": "--index-url https://pypi.invalid/simple\n"
            "--extra-index-url=https://extra.invalid/simple\n"
            "-f ./more\n"
            "--trusted-host pypi.invalid\n--pre\n--prefer-binary\n"
            "--no-binary :none:\n--only-binary :all:\n"
            "winonly==1.0\n",
            "more/winonly-1.0-py3-none-any.whl": b"<<copy:winonly-1.0>>",
        }
    ),
    "variables": Case(
        {
            "r.txt": "-r ${SUBDIR}/a.txt\n"
            "localpkg @ file://${WHEELS}/localpkg-3.1-py3-none-any.whl\n"
            "${WHEELS}/six-1.16.0-py3-none-any.whl\n"
            "-f ${EMPTY}more\n",
            "sub/a.txt": "alpha==2.0\n",
            "more/winonly-1.0-py3-none-any.whl": b"<<copy:winonly-1.0>>",
        },
        env={"SUBDIR": "sub", "WHEELS": "<<wheels>>", "EMPTY": ""},
    ),
    "variable-unset-in-a-path": Case(
        {"r.txt": "-r ${UNSET_H26R}/a.txt\n", "sub/a.txt": "six\n"},
    ),
    "variable-in-a-version": Case({"r.txt": "six==${SIXV}\n"}, env={"SIXV": "1.16.0"}),
    "crlf": Case(
        {
            "r.txt": "six==1.16.0 \\\r\n  --hash=sha256:<<sha:six-1.16.0>>\r\n-r b.txt\r\n# c\r\n"
            "\r\nalpha==1.0 ; python_version > '3' # c\r\n",
            "b.txt": "beta==2.0\r\n",
        }
    ),
    "continuation-inside-a-requirement": Case(
        {"r.txt": "alpha==1.0 \\\n  ; python_version > '3'\n"}
    ),
    "cr-only": Case({"r.txt": "six==1.16.0\ralpha==1.0\r"}),
    "utf8-bom": Case({"r.txt": b"\xef\xbb\xbfsix==1.16.0\nalpha==1.0\n"}),
    "utf16-bom": Case({"r.txt": "\ufeffsix==1.16.0\nalpha==1.0\n".encode("utf-16-le")}),
    "no-final-newline": Case({"r.txt": "six==1.16.0\nalpha==1.0"}),
    "empty": Case({"r.txt": "\n# nothing\n   \n"}),
    "cycle-of-includes": Case({"r.txt": "six\n-r b.txt\n", "b.txt": "-r r.txt\nalpha==1.0\n"}),
    "cycle-reads-the-top-file-twice": Case(
        {"r.txt": "-r b.txt\n-i https://a.invalid/simple\n", "b.txt": "-r r.txt\n"}
    ),
    "more-variables": Case(
        {
            "r.txt": "${PROJECT_ROOT}/wheels/six-1.16.0-py3-none-any.whl\n"
            "${EMPTY}./wheels/alpha-1.0-py3-none-any.whl\n"
            "beta @ file://${WHEELS}/beta-1.0-py3-none-any.whl ; python_version > '3'\n"
            "-r ${lower}.txt\n",
            "${lower}.txt": "legacy==1.0\n",
        },
        env={"EMPTY": "", "WHEELS": "<<wheels>>"},
    ),
    "option-values": Case(
        {
            "r.txt": "-f ./more#not-part-of-it\n-r\t'sub dir/a.txt'\n--requirement\n  sub/b.txt\n",
            "more/winonly-1.0-py3-none-any.whl": b"<<copy:winonly-1.0>>",
            "sub dir/a.txt": "winonly\n",
            "sub/b.txt": "alpha==1.0\n",
        }
    ),
    "unnamed-with-markers": Case(
        {
            "r.txt": "./wheels/six-1.16.0-py3-none-any.whl ; sys_platform == 'win32'\n"
            "./wheels/alpha-1.0-py3-none-any.whl; python_version >= '3'\n"
            "six[cli] @ file://<<wheels>>/six-1.17.0-py3-none-any.whl\n"
        }
    ),
    "semicolon-and-extra-markers": Case(
        {
            "r.txt": "six==1.16.0;python_version>'3'\nalpha ; extra == 'x'\n"
            "beta==1.0 ; extra != 'x'\n"
        }
    ),
    "editable-forms": Case(
        {"r.txt": "-e edpkg\n", "edpkg/pyproject.toml": STATIC_PROJECT},
    ),
    "editable-named": Case(
        {"r.txt": "-e ed-pkg @ ./edpkg\n", "edpkg/pyproject.toml": STATIC_PROJECT},
    ),
    "odd-whitespace": Case(
        {"r.txt": "six==1.16.0\x0c\nalpha==1.0\u00a0\nbeta\u3000==1.0\x0b; os_name\xa0== 'posix'\n"}
    ),
    "vertical-tab-first": Case({"r.txt": "six\n\x0bbeta==1.0\n"}),
    "continuation-in-a-name": Case({"r.txt": "alpha \\\n  ==2.0\n"}),
    # the markers packaging 25 and 26 evaluate differently, and uv's own rules
    "string-field-markers": Case(
        {
            "r.txt": "six ; sys_platform < 'win32'\n"
            "alpha ; platform_machine > 'aarch64'\n"
            "beta ; platform_release >= '5'\n"
            "legacy ; implementation_version >= '3.8'\n"
            "zeta ; python_version == '3.*'\n"
            "winonly ; 'linux' in sys_platform\n"
            "localpkg ; python_version > 'x'\n"
            "foo_bar.baz ; os_name ~= '1.0'\n"
        }
    ),
    "more-markers": Case(
        {
            "r.txt": "six ; platform_version == '#1 SMP'\n"
            "alpha ; python_version in '3.110'\n"
            "beta ; python_version > '3' and python_version > 'x'\n"
            "legacy ; sys_platform >= 'linux'\n"
            "zeta ; platform_release < '0'\n"
            "winonly ; extra == 'x' or python_version >= '3'\n"
            "localpkg ; '3.8' <= python_full_version and 'cpython' == implementation_name\n"
        }
    ),
    # refused by uv
    "index-url-twice": Case(
        {"r.txt": "-i https://a.invalid/simple\n-i https://b.invalid/simple\n"}
    ),
    "nested-index-urls": Case(
        {"r.txt": "-i https://a.invalid/simple\n-r b.txt\n", "b.txt": "-i https://b.invalid/s\n"}
    ),
    "index-url-not-a-url": Case({"r.txt": "--index-url = https://a.invalid/simple\nsix\n"}),
    "no-binary-not-a-name": Case({"r.txt": "--no-binary 'not a name!'\nsix\n"}),
    "editable-from-the-index": Case({"r.txt": "-e six\n"}),
    "editable-git": Case({"r.txt": "-e git+https://github.invalid/org/repo@v1#egg=Repo_Tool\n"}),
    "editable-wheel": Case({"r.txt": "-e ./wheels/six-1.16.0-py3-none-any.whl\n"}),
    "editable-with-a-version": Case({"r.txt": "-e alpha==1.0 ; python_version < '3'\n"}),
    "editable-named-wheel": Case({"r.txt": "-e\nalpha @ ./wheels/alpha-2.0-py3-none-any.whl\n"}),
    "editable-file-url": Case(
        {
            "r.txt": "-e ed-pkg @ file://${PROJECT_ROOT}/edpkg\n",
            "edpkg/pyproject.toml": STATIC_PROJECT,
        }
    ),
    "unnamed-constraint": Case(
        {"r.txt": "-c c.txt\nsix\n", "c.txt": "./wheels/six-1.16.0-py3-none-any.whl\n"}
    ),
    "odd-first-character": Case({"r.txt": "six\n_private\n"}),
    "odd-last-character": Case({"r.txt": "six\nBeta_==1.0\n"}),
    "arbitrary-equality-not-a-version": Case({"r.txt": "legacy===1.0-custom\n"}),
    "arbitrary-equality-and-a-hash-sign": Case({"r.txt": "legacy===1.0#c\n"}),
    "comment-without-space": Case({"r.txt": "six==1.16.0#c\n"}),
    "unknown-option": Case({"r.txt": "--config-settings a=b\nsix\n"}),
    "requirement-option-not-a-hash": Case({"r.txt": "six==1.16.0 --config-settings=a=b\n"}),
    "missing-r": Case({"r.txt": "six\nb.txt\n", "b.txt": "alpha\n"}),
    "not-a-requirement": Case({"r.txt": "six\nthis is not one!\n"}),
    "missing-include": Case({"r.txt": "-r nowhere.txt\n"}),
    "option-without-value": Case({"r.txt": "--index-url\n"}),
    "bad-version": Case({"r.txt": "six==1.16.0.*.x\n"}),
}


# The cases uv refuses (the rest it reads): cudatx must refuse them too, in one line.
REFUSED = {
    "cycle-reads-the-top-file-twice",  # its -i, read in the cycle, then again: two
    "arbitrary-equality-and-a-hash-sign",
    "arbitrary-equality-not-a-version",
    "odd-last-character",
    "bad-version",
    "comment-without-space",
    "continuation-in-a-name",
    "continuation-inside-a-requirement",
    "editable-from-the-index",
    "editable-git",
    "editable-named-wheel",
    "editable-with-a-version",
    "editable-wheel",
    "index-url-not-a-url",
    "index-url-twice",
    "missing-include",
    "missing-r",
    "nested-index-urls",
    "no-binary-not-a-name",
    "not-a-requirement",
    "odd-first-character",
    "option-without-value",
    "requirement-option-not-a-hash",
    "unknown-option",
    "unnamed-constraint",
    "variable-in-a-version",
    "variable-unset-in-a-path",
    "vertical-tab-first",
}


@dataclass(frozen=True)
class World:
    wheels: Path
    venv: Path
    markers: dict[str, str]
    hashes: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("uvreq")
    wheels = root / "wheels"
    wheels.mkdir()
    hashes = {}
    for name, versions in WHEELS.items():
        for version in versions:
            module = f"{name.replace('.', '_')}_{version.replace('.', '_').replace('+', '_')}"
            path = build_wheel(wheels, name, version, {f"{module}.py": b""})
            hashes[f"{name}-{version}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    markers = default_environment()  # the venv's interpreter is this one
    return World(wheels, make_venv(root / "venv"), dict(markers), hashes)


def _fill(text: str, world: World) -> str:
    out = text.replace("<<wheels>>", str(world.wheels))
    for key, digest in world.hashes.items():
        out = out.replace(f"<<sha:{key}>>", digest)
    return out


def _materialize(case: Case, folder: Path, world: World) -> None:
    (folder / "wheels").symlink_to(world.wheels)
    for rel, content in case.files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes) and content.startswith(b"<<copy:"):
            key = content.decode()[len("<<copy:") : -2]
            name, version = key.rsplit("-", 1)
            source = next(world.wheels.glob(f"{name}-{version}-*.whl"))
            path.write_bytes(source.read_bytes())
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(_fill(content, world).encode())


def _uv(args: list[str], folder: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [uv_bin(), *args],
        cwd=folder,
        env={**uv_env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _compile(
    file: str, options: list[str], folder: Path, world: World, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    args = ["pip", "compile", "-q", "--no-deps", "--offline", "--no-index", "--no-header"]
    args += ["--find-links", str(world.wheels), "--python", str(world.venv / "bin/python")]
    args += ["--format", "pylock.toml", *options, file]
    return _uv(args, folder, env)


def _uv_packages(pylock: str, folder: Path) -> dict[str, tuple[str | None, str | None, bool]]:
    """name -> (version, a direct reference made absolute or None, editable)."""
    out: dict[str, tuple[str | None, str | None, bool]] = {}
    for package in tomllib.loads(pylock).get("packages", []):
        source: dict[str, Any] = package.get("archive") or package.get("directory") or {}
        reference = source.get("url") or source.get("path")
        if reference and "://" not in reference:
            reference = os.path.normpath(folder / reference)
        elif reference and reference.startswith("file://"):
            reference = reference[len("file://") :]
        out[package["name"]] = (package.get("version"), reference, bool(source.get("editable")))
    return out


def _cudatx_packages(found: RequirementsFile) -> dict[str, tuple[str | None, str | None, bool]]:
    out: dict[str, tuple[str | None, str | None, bool]] = {}
    for pin in found.entries:
        url = pin.url
        if url is not None and url.startswith("file://"):  # uv's pylock: the path, no fragment
            url = url[len("file://") :].split("#", 1)[0]
        out[pin.name] = (pin.version, url, pin.editable)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_cudatx_reads_requirements_as_uv_does(
    name: str, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    _materialize(case, tmp_path, world)
    env = {key: _fill(value, world) for key, value in case.env.items()}
    for key in ("UNSET_H26R",):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    judged = _compile(case.main, [], tmp_path, world, env)
    assert (judged.returncode != 0) == (name in REFUSED), judged.stderr  # the corpus holds
    try:
        found = read_requirements(case.main, markers=world.markers)
    except CudatxError as exc:
        assert "\n" not in exc.message
        assert judged.returncode != 0, f"uv reads it, cudatx refused: {exc.message}"
        return
    assert judged.returncode == 0, f"uv refused, cudatx read it:\n{judged.stderr}"
    uv = _uv_packages(judged.stdout, tmp_path)
    mine = _cudatx_packages(found)
    assert sorted(mine) == sorted(uv)
    for pin in found.entries:
        uv_version, uv_reference, uv_editable = uv[pin.name]
        if pin.version is not None:  # `==1.0` holds for 1.0+cu12 (PEP 440), and uv takes it
            spec = Requirement(pin.requirement).specifier
            assert uv_version is not None and spec.contains(uv_version, prereleases=True)
        assert mine[pin.name][1:] == (uv_reference, uv_editable), pin.name
    # what check-requirements hands uv in place of the file resolves the same
    handed = tmp_path / "handed"
    handed.mkdir()
    written = _write(found.entries, str(handed))
    again = _compile(written, list(found.options), tmp_path, world, env)
    assert again.returncode == 0, again.stderr
    assert _uv_packages(again.stdout, tmp_path) == uv


def test_the_judge_is_the_pinned_uv() -> None:
    """The corpus is judged by the uv the `test` extra pins, not whichever one is about."""
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    pins = [p for p in pyproject["project"]["optional-dependencies"]["test"] if p.startswith("uv")]
    assert len(pins) == 1 and pins[0].startswith("uv==")
    version = subprocess.run(
        [uv_bin(), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert version == pins[0].removeprefix("uv=="), f"installed uv {version}, pinned {pins[0]}"


# --- the reading does not drift with the installed `packaging` ---------------------------------

# Markers whose evaluation packaging changed between 25 and 26 (26.0: "only try to parse as
# Version on certain marker keys, return False on unequal ordered comparisons", pypa/packaging
# #939; "return False instead of raising for .contains with invalid version", #932).
DRIFTING_MARKERS = [
    "sys_platform < 'win32'",
    "platform_release >= '5'",
    "platform_machine > 'aarch64'",
    "implementation_version >= '3.8'",
    "python_full_version >= '3.8'",
    "python_version == '3.*'",
    "platform_version == '#1 SMP'",
    "'linux' in sys_platform",
    "python_version > 'x'",
    "os_name ~= '1.0'",
]

_PROBE = """
import json, os, sys
import packaging
from cudatx.errors import CudatxError
from cudatx.planning.reqfiles import read_requirements
from cudatx.planning.reqfiles.common import marker_holds, parse_marker_at

spec = json.load(sys.stdin)
out = {"packaging": packaging.__version__, "files": {}, "markers": {}}
for name, case in sorted(spec["cases"].items()):
    os.chdir(case["folder"])
    os.environ.update(case["env"])
    try:
        markers = case.get("markers", spec["markers"])
        extras = tuple(case.get("extras", ()))
        found = read_requirements(case["main"], markers=markers, extras=extras)
        out["files"][name] = [
            [[p.name, p.requirement, p.version, p.url, p.editable] for p in found.entries],
            list(found.options),
        ]
    except CudatxError as exc:
        out["files"][name] = "refused" if "\\n" not in exc.message else exc.message
    for key in case["env"]:
        del os.environ[key]
for text in spec["marker_texts"]:
    try:
        out["markers"][text] = marker_holds(parse_marker_at(text, "m"), spec["markers"], "m")
    except CudatxError:
        out["markers"][text] = "refused"
print(json.dumps(out))
"""


def _probe(spec: dict[str, Any], path: list[str]) -> dict[str, Any]:
    repo = str(Path(__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, repo])}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        input=json.dumps(spec),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture(scope="module")
def packaging_floor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """packaging at the floor pyproject.toml allows, installed beside (pip, from its
    configured indexes or cache); skipped where pip cannot fetch it."""
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    floor = (
        next(d for d in pyproject["project"]["dependencies"] if d.startswith("packaging>="))
        .split(">=")[1]
        .split()[0]
    )
    target = tmp_path_factory.mktemp("packaging-floor")
    version = f"{floor}.0" if "." not in floor else floor
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--retries", "0"]
    pip += ["--timeout", "20", "--target", str(target), f"packaging=={version}"]
    try:
        done = subprocess.run(pip, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip could not fetch packaging {version} within 120 s")
    if done.returncode != 0:
        pytest.skip(f"pip could not fetch packaging {version}: {done.stderr.strip()[-200:]}")
    return target


def test_the_reading_does_not_drift_with_packaging(
    world: World, tmp_path: Path, packaging_floor: Path
) -> None:
    """The corpus, 300 generated files, the samples uv wrote (pyproject, uv.lock, pylock;
    for Python 3.11 and 3.10, with and without an extra) and the markers packaging 26
    changed read the same under the oldest packaging pyproject.toml allows and under the one
    installed here."""
    cases: dict[str, dict[str, Any]] = {}
    for name, case in CASES.items():
        folder = tmp_path / name
        folder.mkdir()
        _materialize(case, folder, world)
        env = {key: _fill(value, world) for key, value in case.env.items()}
        cases[name] = {"folder": str(folder), "main": case.main, "env": env}
    rng = random.Random(26)
    for n in range(300):
        folder = tmp_path / f"generated-{n}"
        folder.mkdir()
        _materialize(Case({"r.txt": _random_text(rng).encode()} | _BESIDE), folder, world)
        cases[f"generated-{n}"] = {"folder": str(folder), "main": "r.txt", "env": {}}
    samples = Path(__file__).parents[1] / "data" / "reqfiles"
    older = {**world.markers, "python_full_version": "3.10.4", "python_version": "3.10"}
    for sample in ("freeze.txt", "compiled.txt", *(f"project/{n}" for n in _LOCKS)):
        for label, markers in (("3.11", world.markers), ("3.10", older)):
            for extras in ([], ["cli"]):
                key = f"{sample} {label} {extras}"
                path = str(samples / sample)
                cases[key] = {"folder": str(samples), "main": path, "env": {}, "extras": extras}
                cases[key]["markers"] = markers
    cases["pylock.multi.toml"] = {"folder": str(samples), "main": "pylock.multi.toml", "env": {}}
    spec = {"cases": cases, "markers": world.markers, "marker_texts": DRIFTING_MARKERS}
    oldest = _probe(spec, [str(packaging_floor)])
    newest = _probe(spec, [])
    assert Version(oldest["packaging"]) < Version(newest["packaging"])
    assert oldest["files"] == newest["files"]
    assert oldest["markers"] == newest["markers"]
    read = [v for v in newest["files"].values() if v != "refused"]
    assert len(read) > 100  # the comparison is of readings, not of refusals


_LOCKS = ("pyproject.toml", "uv.lock", "pylock.toml")
# What a generated file may include or name beside it.
_BESIDE: dict[str, str | bytes] = {
    "inc.txt": "legacy==1.0\n-r r.txt\n",
    "c.txt": "alpha<2\n",
    "edpkg/pyproject.toml": STATIC_PROJECT,
}


def _random_text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 5)):
        if rng.randint(0, 3) == 0:
            lines.append(rng.choice(_LINES))
        else:
            lines.append("".join(rng.choice(p) for p in (_NAMES, _SPECS, _MARKERS, _TAILS)))
    separator = rng.choice(["\n", "\r\n", "\r"])
    return separator.join(lines) + rng.choice([separator, ""])


# --- generated files, judged by uv -------------------------------------------------------------

_NAMES = ["alpha", "Alpha", "ALPHA", "beta", "Beta_", "legacy", "zeta", "al.pha", "Foo_Bar.baz"]
_SPECS = ["", "==1.0", "== 1.0", ">=1.0", "<2", "!=2.0", "~=1.0", "==1.*", "===1.0", ">1,<3"]
_SPECS += [" >= 1.0 , < 3 ", "[cli]", "[cli]==1.0", " [ a , b ] ", "\u3000==1.0", "\xa0==1.0"]
_MARKERS = [
    "",
    " ; python_version >= '3'",
    ";python_version<'3'",
    " ; sys_platform == 'linux'",
    " ; platform_machine == 'x86_64' and os_name == 'posix'",
    " ; 'linux' in sys_platform",
    " ; python_full_version < '3.11.7' or implementation_name == 'cpython'",
    " ; sys_platform < 'win32'",
    " ; extra == 'a'",
]
_TAILS = ["", "  # comment", "\t#c", " --hash=sha256:abc", " \\\n  --hash=sha256:abc", "#x", "  "]
_TAILS += [" \\", " --no-deps"]
_LINES = [
    "./wheels/alpha-1.0-py3-none-any.whl",
    "alpha @ ./wheels/alpha-2.0-py3-none-any.whl",
    "${W}/beta-1.0-py3-none-any.whl",
    "beta @ file://${W}/beta-2.0-py3-none-any.whl",
    "-r inc.txt",
    "--requirement=inc.txt",
    "-r 'inc.txt'",
    "-r\tinc.txt",
    "-rinc.txt",
    "-c c.txt",
    "--constraint c.txt # x",
    "-i https://x.invalid/simple",
    "--extra-index-url https://y.invalid/simple#frag",
    "-e ./edpkg",
    "-e edpkg",
    "--editable=./edpkg # e",
    "-e",
    "--hash=sha256:x",
    "\\",
    "#",
    "-f ${W}",
    "--find-links=${NOPE_H26R}",
    "--index-url=",
    "--no-binary alpha",
    "--only-binary=Alpha_",
    "--use-feature=x",
    "--pre",
    "--trusted-host x",
    "--no-index",
    "-f ./wheels",
    "--no-binary=:all:",
    "# c",
    "",
    "   ",
    "\t",
]


@st.composite
def _generated(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 3)) == 0:
            lines.append(draw(st.sampled_from(_LINES)))
        else:
            parts = (_NAMES, _SPECS, _MARKERS, _TAILS)
            lines.append("".join(draw(st.sampled_from(p)) for p in parts))
    separator = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return separator.join(lines) + draw(st.sampled_from([separator, ""]))


@pytest.mark.oracle
def test_generated_files_read_as_uv_reads_them(world: World) -> None:
    """Files drawn from pieces of uv's syntax (names, operators, markers, comments, hashes,
    continuations, options, includes, constraints, editables, variables, line endings):
    cudatx reads the packages uv reads, and refuses what uv refuses to read. A file uv reads
    but cannot resolve (no such version here) must be read by cudatx too."""
    env = {"W": str(world.wheels)}

    @settings(
        max_examples=ORACLE_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(text=_generated())
    def check(text: str) -> None:
        folder = Path(tempfile.mkdtemp(dir=world.wheels.parent))
        try:
            _materialize(
                Case({"r.txt": text.encode()} | _BESIDE),
                folder,
                world,
            )
            judged = _compile("r.txt", [], folder, world, env)
            here = os.getcwd()
            os.chdir(folder)
            try:
                with mock.patch.dict(os.environ, env):
                    found = read_requirements("r.txt", markers=world.markers)
            except CudatxError as exc:
                assert "\n" not in exc.message
                assert judged.returncode != 0, f"uv reads {text!r}; cudatx: {exc.message}"
                # uv reads a path that is not there and fails to find it; cudatx, which
                # must name the project, fails to read it: both refuse the file
                missing = "Distribution not found" in judged.stderr
                assert missing or not _unresolved(judged.stderr), f"uv reads {text!r}: {exc}"
                return
            finally:
                os.chdir(here)
            if _unresolved(judged.stderr):
                return
            assert judged.returncode == 0, f"uv refuses {text!r}: {judged.stderr}"
            assert {p.name for p in found.entries} == set(_uv_packages(judged.stdout, folder))
        finally:
            shutil.rmtree(folder)

    check()


_UNRESOLVED = (
    "No solution found",
    "Distribution not found",
    "conflicting URLs for package",  # two references to one name: uv's resolver refuses
)


def _unresolved(stderr: str) -> bool:
    """uv read the file, then could not resolve it (no such version or file here; two
    references for one name): the plan, which runs uv, says so."""
    return any(text in stderr for text in _UNRESOLVED)
