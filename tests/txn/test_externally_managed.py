"""Externally managed means refused (PEP 668): a Python whose standard library folder holds an
`EXTERNALLY-MANAGED` marker (Debian's /usr/bin/python3) is refused by a dry run and by an
apply, as uv refuses it, in one line with the marker's own message, before anything is
written under its prefix; `--break-system-packages` lets it through as it lets uv through; a
venv made from that Python is never externally managed; doctor's fixes there run as printed.

The Debian cases need Debian's system Python (`apt-get install python3`) and skip, saying so,
where the machine lacks one. The marker's reading is tested on markers written here.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from cudatx.discover.target import externally_managed
from cudatx.models import PythonTarget
from tests.support.cli import cudatx
from tests.support.txn_world import error
from tests.support.venvs import make_venv

pytestmark = pytest.mark.reliability
UV_REFUSED = 13  # cudatx/errors.py ExitCode.UV: uv's refusal
SYSTEM_PYTHON = "/usr/bin/python3"


def _debian_marker() -> Path:
    """The system Python's marker, or a skip saying why there is none."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} here (Debian: apt-get install python3)")
    found = glob.glob("/usr/lib/python3*/EXTERNALLY-MANAGED")
    if not found:
        pytest.skip(f"{SYSTEM_PYTHON} carries no EXTERNALLY-MANAGED marker (not Debian's, or < 12)")
    return Path(found[0])


def _first_words(marker: Path) -> str:
    """The start of the marker's Error message, its lines joined as one."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(marker.read_text())
    return " ".join(parser["externally-managed"]["Error"].split()[:6])


def test_a_dry_run_and_an_apply_on_debians_python_are_refused_with_the_markers_message() -> None:
    """remove and install, dry runs and an apply: exit 13, one line with the marker's own
    message, and no `.cudatx/` made under /usr (the apply made one before: its store,
    journal and lock, then uv refused)."""
    marker = _debian_marker()
    store = Path("/usr/.cudatx")
    if store.exists():
        pytest.skip(f"{store} is there already: cannot tell whether this test made it")
    words = _first_words(marker)
    for args in (
        ("remove", "pip", "--dry-run"),
        ("install", "pip", "--dry-run", "--offline"),
        ("remove", "no-such-distribution-here", "--yes", "--ignore-running"),
    ):
        done = cudatx(*args, "--python", SYSTEM_PYTHON)
        assert done.returncode == UV_REFUSED, (args, done.stdout, done.stderr)
        line = error(done)
        assert "externally managed" in line and str(marker) in line, line
        assert words in line, line  # the marker's message, whole, not cut at its first line
        assert "Would uninstall" not in done.stdout and "Safe" not in done.stdout
        assert not store.exists(), args


def test_break_system_packages_lets_a_dry_run_through_as_it_lets_uv_through() -> None:
    _debian_marker()
    args = ("remove", "pip", "--dry-run", "--python", SYSTEM_PYTHON)
    done = cudatx(*args, "--break-system-packages")
    assert done.returncode in (0, 1), done.stderr
    assert "Would uninstall" in done.stdout, done.stdout
    # uv reads the same permission from its variable: cudatx then lets the change through too
    done = cudatx(*args, env={"UV_BREAK_SYSTEM_PACKAGES": "1"})
    assert done.returncode in (0, 1), done.stderr


def test_break_system_packages_reaches_each_uv_of_the_plan(tmp_path: Path) -> None:
    """An install's dry run asks uv to resolve and stage for the system Python: uv refuses
    both unless it is given the flag too, so a plan that comes back shows it reached them."""
    from tests.support.wheels import build_wheel

    _debian_marker()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "cudatx-pep668-probe", "1.0", {"cudatx_pep668_probe/__init__.py": b""})
    args = ("install", "cudatx-pep668-probe", "--dry-run", "--offline", "--find-links", wheels)
    env = {"UV_CACHE_DIR": os.fspath(tmp_path / "uv-cache")}
    done = cudatx(*args, "--python", SYSTEM_PYTHON, "--break-system-packages", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "+ cudatx-pep668-probe==1.0" in done.stdout, done.stdout


def test_a_venv_of_debians_python_is_not_externally_managed(tmp_path: Path) -> None:
    """PEP 668: a virtual environment is never externally managed, whatever its base has."""
    _debian_marker()
    venv = make_venv(tmp_path / "venv", SYSTEM_PYTHON)
    done = cudatx("remove", "pip", "--dry-run", "--python", venv)
    assert "externally managed" not in done.stderr, done.stderr
    assert done.returncode in (0, 1, 4), done.stderr


def test_doctors_fixes_on_debians_python_are_commands_uv_and_pip_accept_there() -> None:
    _debian_marker()
    done = cudatx("doctor", "--python", SYSTEM_PYTHON, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    fixes = [ln.split("fix: ", 1)[1] for ln in done.stdout.splitlines() if "fix: " in ln]
    changing = [f for f in fixes if f.startswith(("cudatx ", "uv ")) or " -m pip " in f]
    for fix in changing:
        assert "--break-system-packages" in fix, fix


def _target(prefix: Path, base: Path, stdlib: Path) -> PythonTarget:
    return PythonTarget(
        python=str(prefix / "bin" / "python3"),
        executable=str(prefix / "bin" / "python3"),
        version="3.12.0",
        prefix=str(prefix),
        base_prefix=str(base),
        sys_path=(),
        site_packages=(),
        stdlib=(str(stdlib),),
        extension_suffixes=(),
        markers={},
        found_by="--python",
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "[externally-managed]\nError=Use the distro's tools,\n please.\n\n more\n",
            "Use the distro's tools, please. more",
        ),
        ("[externally-managed]\nError-de=Nein\n", "its distributor manages what it imports"),
        ("[other]\nError=x\n", "its distributor manages what it imports"),
        ("not an ini file at all\n", "its distributor manages what it imports"),
        (b"\xff\xfe", "its distributor manages what it imports"),
    ],
    ids=["message", "no-error-key", "no-section", "not-ini", "not-utf8"],
)
def test_a_marker_marks_whatever_it_holds_and_its_error_is_the_message(
    tmp_path: Path, text: str | bytes, said: str
) -> None:
    """As uv: a marker that exists marks the Python; its message is the Error key of its
    [externally-managed] section, else one of cudatx's own. A venv is never marked."""
    stdlib = tmp_path / "lib" / "python3.12"
    stdlib.mkdir(parents=True)
    target = _target(tmp_path, tmp_path, stdlib)
    assert externally_managed(target) is None
    marker = stdlib / "EXTERNALLY-MANAGED"
    if isinstance(text, bytes):
        marker.write_bytes(text)
    else:
        marker.write_text(text)
    assert externally_managed(target) == (str(marker), said)
    assert externally_managed(_target(tmp_path / "venv", tmp_path, stdlib)) is None
