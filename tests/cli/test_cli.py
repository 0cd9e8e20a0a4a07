"""The command line as a user meets it: `python -m cudatx ...` in a real subprocess, against
real uv venvs holding real wheels with real compiled libraries.

Checked for every refusal: one `cudatx: error:` line on stderr, no traceback, the exit code
README.md documents ("Exit codes"), and not one byte of the environment changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from cudatx import __version__
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    site_packages,
    uv_install,
    venv_python,
)
from tests.support.cli import cudatx
from tests.support.ext_world import ExtWorld, build_ext_world

LIB = "libcudatxclidep.so.1"


def snapshot(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under root: kind, size and sha256 (link target for symlinks)."""
    found: dict[str, tuple[str, int, str]] = {}
    for folder, subfolders, files in os.walk(root):
        for name in subfolders + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", 0, "")
            else:
                with open(path, "rb") as f:
                    digest = hashlib.file_digest(f, "sha256").hexdigest()
                found[rel] = ("file", st.st_size, digest)
    return found


@dataclass(frozen=True)
class Env(ExtWorld):
    version: str  # platform.python_version() of the venv's interpreter


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    root = tmp_path_factory.mktemp("cli")
    world = build_ext_world(root, dist="Cli_Fixture", package="clifix", lib=LIB)
    python = venv_python(world.venv)
    # The fixture really loads: the extension imports and calls into the library.
    done = subprocess.run(
        [python, "-I", "-c", "import platform, clifix._ext; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Env(**vars(world), version=done.stdout.strip())


def _using_line(env: Env) -> str:
    return f"Using Python {env.version} environment at: {env.venv}"


# -------------------------------------------------------------------------------------
# Answers
# -------------------------------------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    done = cudatx("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip() == f"cudatx, version {__version__}" == "cudatx, version 0.1.0"


def test_help_lists_why(tmp_path: Path) -> None:
    done = cudatx("--help", cwd=tmp_path)
    assert done.returncode == 0
    commands = done.stdout.split("Commands:", 1)[1]
    assert any(line.split()[:1] == ["why"] for line in commands.splitlines())


def test_short_version_and_bare_command(tmp_path: Path) -> None:
    assert cudatx("-V", cwd=tmp_path).stdout == f"cudatx, version {__version__}\n"
    bare = cudatx(cwd=tmp_path)
    # The help, as pip prints it: no usage error for a command not yet chosen.
    assert bare.returncode == 0, bare.stderr
    # Only cudatx's own words: click's usage line differs between releases ("COMMAND" in
    # one, "[COMMAND]" in another) and CI installs the newest.
    assert bare.stdout.startswith("Usage: cudatx [OPTIONS] ")
    assert "Commands:" in bare.stdout
    assert bare.stdout == cudatx("--help", cwd=tmp_path).stdout


COMMANDS = [
    "why",
    "doctor",
    "graph",
    "remove",
    "install",
    "sync",
    "check-requirements",
    "rollback",
    "trace",
    "history",
    "demo",
    "completion",
]


def test_help_summaries_whole_with_examples(tmp_path: Path) -> None:
    done = cudatx("--help", cwd=tmp_path)
    listed = done.stdout.split("Commands:", 1)[1].split("\n\n", 1)[0].splitlines()
    assert sorted(line.split()[0] for line in listed if line.strip()) == sorted(COMMANDS)
    assert not any(line.endswith("...") for line in listed), listed  # never cut
    assert "CUDATX_CACHE_DIR" in done.stdout and "NO_COLOR" in done.stdout
    for command in (*COMMANDS, "history show", "history prune"):
        helped = cudatx(*command.split(), "--help", cwd=tmp_path)
        assert helped.returncode == 0, helped.stderr
        examples = helped.stdout.split("Examples:\n", 1)[1]
        first = examples.splitlines()[0]
        assert f"cudatx {command.split()[0]}" in first, (command, helped.stdout)
        assert "--color" in helped.stdout and "--quiet" in helped.stdout
        # Every command that asks an interpreter about itself says how long it waits.
        asks = command != "completion"
        assert ("CUDATX_QUERY_TIMEOUT" in helped.stdout) == asks, (command, helped.stdout)


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in sorted(group.commands.items()):
        found.append((*path, name))
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
    return found


def test_every_command_takes_quiet(tmp_path: Path) -> None:
    """-q/--quiet, after the name of every command the group runs (a subgroup's too), and
    before it: enumerated from the group, so a command added without it fails here."""
    from cudatx.cli import cli

    commands = _commands(cli)
    assert ("history", "show") in commands and len(commands) >= len(COMMANDS) + 2
    for path in commands:
        for args in ((*path, "-q", "--help"), ("--quiet", *path, "--help")):
            done = cudatx(*args, cwd=tmp_path)
            assert done.returncode == 0, (args, done.stderr)
            assert "-q, --quiet" in done.stdout, (args, done.stdout)


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "_CUDATX_COMPLETE=bash_complete"),
        ("zsh", "#compdef cudatx"),
        ("fish", "_CUDATX_COMPLETE=fish_complete"),
    ],
)
def test_completion_scripts(tmp_path: Path, shell: str, marker: str) -> None:
    done = cudatx("completion", shell, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert marker in done.stdout
    # The script calls cudatx back; that protocol answers with the commands.
    asked = cudatx(
        cwd=tmp_path,
        env={"_CUDATX_COMPLETE": "bash_complete", "COMP_WORDS": "cudatx wh", "COMP_CWORD": "1"},
    )
    assert asked.returncode == 0 and asked.stdout == "plain,why\n", asked.stdout


def test_why_help_documents_python_option(tmp_path: Path) -> None:
    done = cudatx("why", "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "--python" in done.stdout and "--json" in done.stdout


def test_why_libc_text(env: Env) -> None:
    done = cudatx("why", "libc.so.6", "--python", env.venv, cwd=env.work)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("libc.so.6 => ")
    assert done.stderr.splitlines() == [_using_line(env)]


def test_why_libc_json(env: Env) -> None:
    done = cudatx("why", "libc.so.6", "--python", env.venv, "--json", cwd=env.work)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert report["schema_version"] == 1
    assert (report["query"], report["kind"]) == ("libc.so.6", "soname")
    assert report["prefix"] == str(env.venv)
    first = report["routes"][0]
    assert first["status"] == "resolved"
    assert first["how"] == "ld.so.cache"
    assert os.path.basename(first["path"]) == "libc.so.6"
    assert first["owners"] == []  # the system's libc belongs to no distribution
    interpreter = os.path.realpath(venv_python(env.venv))
    assert first["needed_by"][0]["object"] == interpreter
    assert first["needed_by"][0]["evidence"] == "DT_NEEDED"
    assert all(r["status"] == "resolved" for r in report["routes"])
    assert done.stderr.splitlines() == [_using_line(env)]


def test_why_installed_library_by_path(env: Env) -> None:
    done = cudatx("why", env.lib, "--python", env.venv, "--json", cwd=env.work)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["kind"] == "path"
    owner = [{"name": "cli-fixture", "version": "1.0", "kind": "dist-info"}]
    assert [f["owners"] for f in report["files"]] == [owner]
    (route,) = report["routes"]
    assert route["status"] == "resolved"
    assert route["how"] == "rpath"
    assert route["owners"] == owner
    assert route["path"] == str(env.site / "clifix" / "lib" / LIB)
    (needer,) = route["needed_by"]
    assert needer["object"] == str(env.ext)
    assert needer["distributions"] == owner


def test_why_installed_library_by_path_text(env: Env) -> None:
    done = cudatx("why", env.lib, "--python", env.venv, cwd=env.work)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # The answer first, in one line: the file, whose bytes, CUDA major, how it was found.
    assert lines[0] == (
        f"{LIB} => clifix/lib/{LIB} (bytes of cli-fixture 1.0, no CUDA major known); "
        f"by rpath of clifix/{env.ext.name}, for clifix/{env.ext.name} (DT_NEEDED)"
    )
    assert lines[2] == f"{LIB} => clifix/lib/{LIB}"
    assert "  listed by  cli-fixture 1.0" in lines
    assert any(ln.startswith("  found by   rpath of clifix/_ext") for ln in lines)


def test_why_installed_library_by_soname(env: Env) -> None:
    done = cudatx("why", LIB, "--python", env.venv, "--json", cwd=env.work)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["kind"] == "soname"
    (route,) = report["routes"]
    assert (route["status"], route["how"]) == ("resolved", "rpath")
    assert route["source"] == str(env.ext)
    assert [o["name"] for o in route["owners"]] == ["cli-fixture"]


def test_why_says_who_loaded_a_reused_copy_in_each_process(tmp_path: Path) -> None:
    """libuser.so finds libshared.so already loaded in two processes, mapped first by a
    different object in each (pk.a's extension in one, libmid in the other): two answers,
    each with its own mapper (one route, with the first process's mapper, told the other
    wrongly; a framework's XLA plugin was told it reused what torch/__init__.py preloaded
    in torch's process)."""
    build = tmp_path / "build"
    shared = compile_lib(build / "libshared.so", soname="libshared.so")
    user = compile_lib(build / "libuser.so", soname="libuser.so", needed=[shared], rpath="$ORIGIN")
    mid = compile_lib(build / "libmid.so", soname="libmid.so", needed=[shared], rpath="$ORIGIN")
    # Breadth-first: a's extension maps libshared itself before libuser asks; in b's
    # process libmid maps it (on the level libuser asks from, and first).
    ext_a = compile_extension(build / "a", "_ext", needed=[shared, user], rpath="$ORIGIN/../lib")
    ext_b = compile_extension(build / "b", "_ext", needed=[mid, user], rpath="$ORIGIN/../lib")
    files = {f"pk/{p}__init__.py": b"" for p in ("", "a/", "b/")}
    files |= {f"pk/a/_ext{ext_suffix()}": ext_a, f"pk/b/_ext{ext_suffix()}": ext_b}
    files |= {f"pk/lib/{lib.name}": lib for lib in (shared, user, mid)}
    wheel = build_wheel(tmp_path / "wheels", "reuse", "1.0", files, tag="py3-none-linux_x86_64")
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, [wheel])
    done = cudatx("why", "libshared.so", "--python", venv, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    routes = json.loads(done.stdout)["routes"]
    mapped = {
        os.path.relpath(r["earlier"]["needed_by"], site_packages(venv))
        for r in routes
        if r["how"] == "already loaded" and r["needed_by"][0]["object"].endswith("/libuser.so")
    }
    assert mapped == {f"pk/a/_ext{ext_suffix()}", "pk/lib/libmid.so"}, routes


# -------------------------------------------------------------------------------------
# Refusals: one error line, no traceback, documented exit code, environment untouched
# -------------------------------------------------------------------------------------


def assert_refused(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stderr.splitlines()
    errors = [ln for ln in lines if ln.startswith("cudatx: error:")]
    assert len(errors) == 1, done.stderr
    # Nothing else on stderr but the environment line the command printed before failing.
    assert all(ln == errors[0] or ln.startswith("Using Python ") for ln in lines), done.stderr
    assert lines[-1] == errors[0]
    assert done.stdout == ""
    return errors[0]


@pytest.fixture
def untouched(env: Env) -> Iterator[None]:
    before = snapshot(env.venv)
    yield
    assert snapshot(env.venv) == before


@pytest.mark.usefixtures("untouched")
def test_unknown_soname(env: Env) -> None:
    done = cudatx("why", "libcudatx-no-such.so.7", "--python", env.venv, cwd=env.work)
    line = assert_refused(done, 4)
    assert "libcudatx-no-such.so.7" in line


@pytest.mark.usefixtures("untouched")
def test_unknown_soname_json(env: Env) -> None:
    # --json changes nothing about refusals: stdout stays empty, stderr has the line.
    done = cudatx("why", "libcudatx-no-such.so.7", "--json", "--python", env.venv, cwd=env.work)
    assert_refused(done, 4)


@pytest.mark.usefixtures("untouched")
def test_python_pointing_at_nothing(env: Env) -> None:
    missing = env.venv / "bin" / "no-such-python"
    done = cudatx("why", "libc.so.6", "--python", missing, cwd=env.work)
    line = assert_refused(done, 3)
    assert str(missing) in line


@pytest.mark.usefixtures("untouched")
def test_python_at_a_folder_without_interpreter(env: Env) -> None:
    done = cudatx("why", "libc.so.6", "--python", env.site, cwd=env.work)
    assert_refused(done, 3)


@pytest.mark.usefixtures("untouched")
def test_python_at_a_text_file(env: Env) -> None:
    text = env.site / "clifix" / "__init__.py"
    done = cudatx("why", "libc.so.6", "--python", text, cwd=env.work)
    assert_refused(done, 3)


@pytest.mark.usefixtures("untouched")
def test_python_at_bin_true(env: Env) -> None:
    done = cudatx("why", "libc.so.6", "--python", "/bin/true", cwd=env.work)
    line = assert_refused(done, 3)
    assert "not a working Python interpreter" in line


@pytest.mark.usefixtures("untouched")
def test_virtual_env_without_interpreter(env: Env) -> None:
    done = cudatx("why", "libc.so.6", cwd=env.work, hide=(), env={"VIRTUAL_ENV": str(env.site)})
    line = assert_refused(done, 3)
    assert "VIRTUAL_ENV" in line


@pytest.mark.usefixtures("untouched")
def test_path_query_to_a_missing_file(env: Env) -> None:
    missing = env.site / "clifix" / "lib" / "libgone.so.1"
    done = cudatx("why", missing, "--python", env.venv, cwd=env.work)
    line = assert_refused(done, 4)
    assert str(missing) in line


@pytest.mark.usefixtures("untouched")
def test_path_query_to_a_file_outside_the_environment(env: Env, tmp_path: Path) -> None:
    stray = tmp_path / LIB
    stray.write_bytes(env.lib.read_bytes())
    done = cudatx("why", stray, "--python", env.venv, cwd=env.work)
    assert_refused(done, 4)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
@pytest.mark.usefixtures("untouched")
def test_unreadable_file(env: Env, tmp_path: Path) -> None:
    locked = tmp_path / "locked.so"
    locked.write_bytes(env.lib.read_bytes())
    locked.chmod(0)
    try:
        done = cudatx("why", locked, "--python", env.venv, cwd=env.work)
    finally:
        locked.chmod(0o644)
    assert_refused(done, 5)


@pytest.mark.usefixtures("untouched")
def test_unknown_option(env: Env) -> None:
    done = cudatx("why", "libc.so.6", "--python", env.venv, "--no-such-option", cwd=env.work)
    line = assert_refused(done, 2)
    assert "--no-such-option" in line


@pytest.mark.usefixtures("untouched")
def test_unknown_command(env: Env) -> None:
    done = cudatx("whyy", "libc.so.6", "--python", env.venv, cwd=env.work)
    assert_refused(done, 2)


@pytest.mark.usefixtures("untouched")
def test_missing_argument(env: Env) -> None:
    done = cudatx("why", "--python", env.venv, cwd=env.work)
    assert_refused(done, 2)


@pytest.mark.usefixtures("untouched")
def test_option_missing_its_value(env: Env) -> None:
    done = cudatx("why", "libc.so.6", "--python", cwd=env.work)
    assert_refused(done, 2)


def test_relative_python_path(env: Env) -> None:
    done = cudatx("why", "libc.so.6", "--python", "./python", cwd=env.venv / "bin")
    assert done.returncode == 0, done.stderr
    assert _using_line(env) in done.stderr


# -------------------------------------------------------------------------------------
# A RECORD full of garbage is a finding, never a failure
# -------------------------------------------------------------------------------------

GARBAGE = (
    b"only,two\n\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x01junk\n,,,\nx,sha256,abc\n"
    b"y,sha256=AAAA,zz\n\n\xc3\x28\xa0\xa1 not utf-8,1,2\n"
)


@pytest.fixture(scope="module")
def garbage_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("garbage")
    wheel = build_wheel(root / "wheels", "trashed", "0.1", {"trashed/__init__.py": b""})
    venv = make_venv(root / "venv")
    uv_install(venv, [wheel])
    return venv


def _trash_record(venv: Path, content: bytes) -> None:
    (record,) = site_packages(venv).glob("trashed-*.dist-info/RECORD")
    record.write_bytes(content)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(GARBAGE, id="garbage"),
        pytest.param(b"", id="empty"),
        pytest.param(
            "trashed/__init__.py,,\u00b2\n".encode(),
            id="non-ascii-digit-size",
        ),
    ],
)
def test_garbage_record_still_answers(garbage_venv: Path, content: bytes) -> None:
    _trash_record(garbage_venv, content)
    before = snapshot(garbage_venv)
    done = cudatx("why", "libc.so.6", "--python", garbage_venv, cwd=garbage_venv.parent)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.startswith("libc.so.6 => ")
    assert snapshot(garbage_venv) == before


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("remove", "cudatx-no-such-dist", "--yes"), id="remove"),
        pytest.param(("remove", "click", "--dry-run"), id="remove-dry-run"),
        pytest.param(("install", "click", "--dry-run", "--offline"), id="install-dry-run"),
        pytest.param(("sync", "requirements.txt", "--dry-run", "--offline"), id="sync-dry-run"),
        pytest.param(("rollback", "--yes"), id="rollback"),
    ],
)
def test_a_change_never_falls_back_to_cudatxs_own_interpreter(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    # Nothing names an environment: no --python, VIRTUAL_ENV, CONDA_PREFIX, nor a .venv
    # here or above. Read-only commands may look at cudatx's own Python; a change refuses,
    # as uv does, before it reads anything.
    assert not any((p / ".venv").exists() for p in (tmp_path, *tmp_path.parents))
    (tmp_path / "requirements.txt").write_text("click\n")
    own = Path(os.path.realpath(sys.prefix))
    before = sorted(p.name for p in own.iterdir())
    done = cudatx(*args, cwd=tmp_path)
    line = assert_refused(done, 3)
    assert "No virtual environment found" in line and "--python" in line, line
    assert sorted(p.name for p in own.iterdir()) == before  # no .cudatx store made there
    assert cudatx("doctor", "--json", cwd=tmp_path).returncode in (0, 1)
