"""What comes from outside cudatx is printed as data (issue 31): a RECORD path holding an
OSC title sequence, a clear-screen, BEL, the 8-bit CSI U+009B, a bidi override and a line
break reaches neither a terminal nor a pipe raw, in check-requirements' conflict line,
doctor's hollow finding, `why` and a plan; each is shown escaped, on the line it belongs to,
and cudatx's own colours still show at a terminal. JSON keeps the value exact and writes
what would act on a terminal as JSON escapes.

Real wheels built here, real uv: RECORD rows are data anyone can write (uv refuses such
names as members of a wheel, so the rows name files the wheel does not hold, or are added
to an installed RECORD, as a tool or a person can).
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from cudatx.errors import json_text, one_line, printable
from tests.support.cli import HIDDEN, Arg, cudatx
from tests.support.terminal import COLOUR_VARIABLES, Session, in_terminal
from tests.support.venvs import make_venv, site_packages, uv_install
from tests.support.wheels import build_wheel, record_hash

# Each of them acts on a terminal or on what a reader sees: the window title (OSC ... BEL,
# even in a pipe: click strips only CSI sequences there), clear-screen, the 8-bit CSI, a
# right-to-left override, and a line break that would start a line of its own.
EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b\u202e\u2066\nforged"
SHOWN = r"\x1b]0;pwned\x07\x1b[2J\x9b\u202e\u2066\nforged"
QUIET = HIDDEN | COLOUR_VARIABLES
FINDINGS = 1

# What cudatx's own colours are (click.style: SGR sequences); anything else a terminal acts
# on is not cudatx's to write.
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _raw(data: bytes | str, *, coloured: bool = False) -> list[str]:
    """The control characters in `data` that are not cudatx's own layout (line breaks,
    tabs) or, where `coloured`, its own SGR colours."""
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    if coloured:
        text = _SGR.sub("", text)
    return _CONTROL.findall(text) + re.findall("[\ud800-\udfff]", text)


def _record_rows(rows: Sequence[tuple[str, bytes]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for path, data in rows:
        writer.writerow([path, record_hash(data), len(data)])
    return buf.getvalue()


def _listing(wheel: Path, rows: Sequence[tuple[str, bytes]]) -> Path:
    """`wheel` with `rows` added to its RECORD: paths it does not hold, as a RECORD may say."""
    with zipfile.ZipFile(wheel) as z:
        members = [(info, z.read(info)) for info in z.infolist()]
    with zipfile.ZipFile(wheel, "w") as z:
        for info, data in members:
            if info.filename.endswith(".dist-info/RECORD"):
                data += _record_rows(rows).encode()
            z.writestr(info, data)
    return wheel


# -- check-requirements, no environment: the conflict line --------------------------------------


@pytest.fixture(scope="module")
def conflicting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpha and beta both list shared/EVIL.so in their RECORD, with other bytes."""
    out = tmp_path_factory.mktemp("outside-wheels")
    for name in ("alpha", "beta"):
        wheel = build_wheel(out, name, "1.0", {f"{name}/__init__.py": b""})
        _listing(wheel, [(f"shared/{EVIL}.so", f"{name}'s build\n".encode())])
    return out


def _conflict_check(wheels: Path, file: Path | str) -> list[Arg]:
    return ["check-requirements", file, "--offline", "--find-links", wheels, "--no-cache"]


def test_check_requirements_conflict_line_escapes_a_record_path(
    conflicting: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("alpha\nbeta\n")
    env = {"UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    args = _conflict_check(conflicting, "requirements.txt")
    piped = cudatx(*args, cwd=project, hide=QUIET, env=env, text=False)
    assert piped.returncode == FINDINGS, piped.stderr
    assert _raw(piped.stdout) == [] and _raw(piped.stderr) == []
    out = piped.stdout.decode()
    # The whole path on the conflict line, its line break shown: no line starts "forged".
    (line,) = [ln for ln in out.splitlines() if "pwned" in ln]
    assert f"shared/{SHOWN}.so with different bytes" in line, out
    assert not any(ln.startswith("forged") for ln in out.splitlines())

    # in_terminal runs where the tests run: the file named whole.
    whole = _conflict_check(conflicting, project / "requirements.txt")
    seen = in_terminal(*whole, "--no-progress", env=env)
    assert seen.returncode == FINDINGS, seen.err
    assert _raw(seen.stdout, coloured=True) == [] and _raw(seen.stderr, coloured=True) == []
    assert f"shared/{SHOWN}.so with different bytes" in seen.out

    as_json = cudatx(*args, "--json", cwd=project, hide=QUIET, env=env, text=False)
    assert _raw(as_json.stdout) == []
    (conflict,) = json.loads(as_json.stdout)["files"][0]["conflicts"]
    assert conflict["paths"] == [f"shared/{EVIL}.so"]  # the value itself, exact


# -- an environment: doctor, why, a plan --------------------------------------------------------


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpha, beta and gamma installed by uv (copies, not links to its cache); alpha and beta
    both list shared/EVIL.txt (there, with their bytes); gamma lists gamma/EVIL.py, which is
    not there: gamma lost a module, an error doctor names by its path."""
    root = tmp_path_factory.mktemp("outside-venv")
    wheels = [
        build_wheel(root / "wheels", name, "1.0", {f"{name}/__init__.py": b""})
        for name in ("alpha", "beta", "gamma")
    ]
    venv = make_venv(root / "venv")
    uv_install(venv, wheels, link_mode="copy")
    site = site_packages(venv)
    shared = f"shared/{EVIL}.txt"
    (site / "shared").mkdir()
    (site / shared).write_bytes(b"shared\n")
    for name, rows in (
        ("alpha", [(shared, b"shared\n")]),
        ("beta", [(shared, b"shared\n")]),
        ("gamma", [(f"gamma/{EVIL}.py", b"lost\n")]),
    ):
        record = site / f"{name}-1.0.dist-info" / "RECORD"
        record.write_text(record.read_text() + _record_rows(rows))
    return venv


def _clean(piped: subprocess.CompletedProcess[bytes], seen: Session) -> None:
    assert _raw(piped.stdout) == [], piped.stdout
    assert _raw(piped.stderr) == [], piped.stderr
    assert _raw(seen.stdout, coloured=True) == [], seen.stdout
    assert _raw(seen.stderr, coloured=True) == [], seen.stderr


def _lines_with_evil(text: str) -> list[str]:
    lines = text.splitlines()
    assert not any(ln.startswith("forged") for ln in lines), text  # no forged line
    return [ln for ln in lines if "pwned" in ln]


def test_doctor_names_what_a_hollow_distribution_lost_escaped(venv: Path) -> None:
    args = ("doctor", "--python", venv, "--no-cache")
    piped = cudatx(*args, hide=QUIET, text=False)
    seen = in_terminal(*args, "--no-progress")
    assert piped.returncode == seen.returncode == FINDINGS, piped.stderr
    _clean(piped, seen)
    (lost,) = [ln for ln in _lines_with_evil(piped.stdout.decode()) if "it lost" in ln]
    assert f"it lost gamma/{SHOWN}.py, which" in lost
    assert f"it lost gamma/{SHOWN}.py, which" in _SGR.sub("", seen.out)
    assert "\x1b[31m" in seen.out  # cudatx's own red, for the error, still there


def test_why_shows_the_file_and_its_path_escaped(venv: Path) -> None:
    path = site_packages(venv) / f"shared/{EVIL}.txt"
    args = ("why", path, "--python", venv, "--no-cache")
    piped = cudatx(*args, hide=QUIET, text=False)
    seen = in_terminal(*args, "--no-progress")
    assert piped.returncode == seen.returncode == 0, piped.stderr
    _clean(piped, seen)
    lines = _lines_with_evil(piped.stdout.decode())
    assert f"  file shared/{SHOWN}.txt [alpha 1.0, beta 1.0]" in lines
    assert f"  file shared/{SHOWN}.txt [alpha 1.0, beta 1.0]" in seen.out.splitlines()


def test_a_plan_names_the_shared_path_escaped(venv: Path) -> None:
    args = ("remove", "alpha", "--dry-run", "--python", venv, "--no-cache")
    piped = cudatx(*args, hide=QUIET, text=False)
    seen = in_terminal(*args, "--no-progress")
    assert piped.returncode == seen.returncode == 0, piped.stderr
    _clean(piped, seen)
    (note,) = _lines_with_evil(piped.stdout.decode())
    assert f"(shared/{SHOWN}.txt)" in note and note.startswith("note: alpha's RECORD")
    assert f"(shared/{SHOWN}.txt)" in seen.out
    assert "\x1b[32m\x1b[1mSafe\x1b[0m" in seen.out  # cudatx's own green verdict


@pytest.mark.parametrize("command", ["doctor", "why", "remove"])
def test_json_keeps_the_value_and_escapes_what_a_terminal_acts_on(venv: Path, command: str) -> None:
    """JSON escapes C0 itself; DEL, C1 and the bidi controls pydantic wrote raw."""
    shared = site_packages(venv) / f"shared/{EVIL}.txt"
    args = {
        "doctor": ("doctor",),
        "why": ("why", shared),
        "remove": ("remove", "alpha", "--dry-run"),
    }
    done = cudatx(*args[command], "--python", venv, "--no-cache", "--json", hide=QUIET, text=False)
    assert _raw(done.stdout) == [], done.stdout
    report = json.loads(done.stdout)
    if command == "doctor":
        (hollow,) = [p for p in report["problems"] if p["code"] == "hollow"]
        assert f"gamma/{EVIL}.py" in hollow["paths"]  # the value itself, exact
    elif command == "why":
        (fact,) = report["files"]
        assert fact["path"].endswith(f"shared/{EVIL}.txt")
    else:
        assert any(EVIL in note for note in report["notes"])


def test_an_error_line_escapes_what_it_quotes(venv: Path) -> None:
    """A refusal that quotes the argument back: one line, nothing raw."""
    args = ("remove", f"no-such-{EVIL}", "--dry-run", "--python", venv, "--no-cache")
    piped = cudatx(*args, hide=QUIET, text=False)
    seen = in_terminal(*args, "--no-progress")
    assert piped.returncode == seen.returncode != 0
    _clean(piped, seen)
    (error,) = [ln for ln in piped.stderr.decode().splitlines() if "error" in ln]
    assert "pwned" in error and "\\x1b]0;pwned" in error


def test_the_printer_escapes_what_no_renderer_did(tmp_path: Path) -> None:
    """An environment whose own path holds them: the `Using Python ... at:` line (the
    printer's info, no renderer's) is one line with each shown escaped."""
    venv = make_venv(tmp_path / f"v{EVIL}")
    args = ("doctor", "--python", venv, "--no-cache")
    piped = cudatx(*args, hide=QUIET, text=False)
    seen = in_terminal(*args, "--no-progress")
    assert piped.returncode == seen.returncode == 0, piped.stderr
    _clean(piped, seen)
    (using,) = [ln for ln in piped.stderr.decode().splitlines() if ln.startswith("Using")]
    assert using.endswith(f"/v{SHOWN}")


def test_the_net_runs_before_cudatx_s_own_colours(capsys: pytest.CaptureFixture[str]) -> None:
    from cudatx.cli.output import Output
    from cudatx.render import colour

    Output(color="always").echo(f"error: {EVIL}\n", nl=False, paint=colour.doctor)
    said = capsys.readouterr().out
    assert said == f"\x1b[31m\x1b[1merror\x1b[0m: {printable(EVIL)}\n"
    assert _raw(said, coloured=True) == []


# -- the one escaping function ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("\x1b]0;t\x07", "\\x1b]0;t\\x07"),
        ("\x9b31m", "\\x9b31m"),
        ("\x7f\x85\x00", "\\x7f\\x85\\x00"),
        ("a\nb\rc\td", "a\\nb\\rc\\td"),
        ("\u202a\u202e\u2066\u2069\u2028\u2029", "\\u202a\\u202e\\u2066\\u2069\\u2028\\u2029"),
        ("\udc9b", "\\udc9b"),  # a file name's undecodable byte
    ],
)
def test_one_line_shows_each_control_escaped(raw: str, shown: str) -> None:
    assert one_line(raw) == shown
    assert one_line(shown) == shown  # escaping twice changes nothing


def test_printable_keeps_cudatx_s_own_layout() -> None:
    assert printable("a\tb\nc\x1b[2J\x9b") == "a\tb\nc\\x1b[2J\\x9b"


@pytest.mark.parametrize("text", ["", "nvidia/cudnn/lib/libcudnn.so.9", "é ü 日本 \\x1b", "a b"])
def test_ordinary_text_stays_as_it_is(text: str) -> None:
    assert one_line(text) == printable(text) == text


def test_json_text_escapes_what_json_would_leave_raw() -> None:
    document = json.dumps({"p": "\x7f\x9b\u202e\u2028é"}, ensure_ascii=False)
    written = json_text(document)
    assert _raw(written) == [] and "é" in written
    assert json.loads(written) == json.loads(document)
