"""cudatx at a terminal, as uv behaves there: colour only where it is wanted, -q and -v,
progress lines and a summary for an apply; and nothing of it on stdout of --json.

Every run here is a real pseudo-terminal (tests.support.terminal) or a pipe, against the
demo environment as `cudatx demo --keep` builds it (real libraries, real wheels, real uv).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.cli import cudatx
from tests.support.terminal import COLOUR_VARIABLES, HIDDEN, in_terminal

ESC = b"\x1b["
CU13, CU12 = "nvidia-cudnn-cu13", "nvidia-cudnn-cu12"
QUIET = HIDDEN | COLOUR_VARIABLES


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's folder (venv/ and wheels/ in it), built by `cudatx demo --keep`."""
    folder = tmp_path_factory.mktemp("terminal") / "demo"
    done = cudatx("demo", "--keep", folder, hide=QUIET)
    assert done.returncode == 0, done.stderr
    return folder


def test_demo_keeps_what_it_prints(tmp_path: Path) -> None:
    """Without --keep too: every `--python` it prints names an environment still there."""
    done = cudatx("demo", hide=QUIET, env={"TMPDIR": os.fspath(tmp_path)})
    assert done.returncode == 0, done.stderr
    named = set(re.findall(r"--python (\S+)", done.stdout))
    assert named and all(Path(p, "pyvenv.cfg").is_file() for p in named), named
    last = done.stdout.splitlines()[-1]
    (folder,) = {str(Path(p).parent) for p in named}
    assert last == f"Remove it with: rm -rf {folder}"
    assert "stays at" in done.stdout


def test_demo_quiet_says_only_what_it_built(tmp_path: Path) -> None:
    """`demo -q`, as the README's quick start runs it: one line naming what it built, none
    of the walk through doctor, why and the plans; at a terminal nothing on stderr either."""
    done = in_terminal("demo", "-q", "--keep", tmp_path / "d", "--color", "never")
    assert done.returncode == 0, done.err
    assert done.out == (
        f"Built a demo environment at {tmp_path / 'd' / 'venv'} "
        f"(its wheels in {tmp_path / 'd' / 'wheels'}).\n"
    )
    assert done.err == ""
    assert Path(tmp_path, "d", "venv", "pyvenv.cfg").is_file()


@pytest.fixture()
def copy(demo: Path, tmp_path: Path) -> Path:
    """A copy of the demo folder for a test that changes it."""
    target = tmp_path / "demo"
    shutil.copytree(demo, target, symlinks=True)
    return target


def _venv(folder: Path) -> str:
    return os.fspath(folder / "venv")


# -- colour ---------------------------------------------------------------------------------


def test_colour_on_a_terminal(demo: Path) -> None:
    done = in_terminal("doctor", "--python", _venv(demo))
    assert done.returncode == 1, done.err
    assert ESC in done.stdout
    # The severity and the verdict's count, in red as uv colours an error.
    assert b"\x1b[31m\x1b[1merror\x1b[0m:" in done.stdout
    assert done.stdout.startswith(b"\x1b[31m\x1b[1m1 error\x1b[0m:")


def test_demo_colours_its_reports_as_their_commands_do(tmp_path: Path) -> None:
    """The first thing a new user runs: its doctor, why and plan in the colours their own
    commands use at a terminal, and none under NO_COLOR or in a pipe."""
    done = in_terminal("demo", "--keep", tmp_path / "tty")
    assert done.returncode == 0, done.err
    assert b"\n\x1b[31m\x1b[1m1 error\x1b[0m: " in done.stdout  # doctor's verdict
    assert b"\n\x1b[1mlibcudnn.so.9 =>\x1b[0m " in done.stdout  # why's answer
    assert b"\n\x1b[31m\x1b[1mUnsafe\x1b[0m: " in done.stdout  # the plan's verdict
    plain = in_terminal("demo", "--keep", tmp_path / "plain", env={"NO_COLOR": "1"})
    assert plain.returncode == 0 and ESC not in plain.stdout, plain.err
    piped = cudatx("demo", "--keep", tmp_path / "pipe", hide=QUIET)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout, piped.stderr


def test_no_color_turns_colour_off(demo: Path) -> None:
    done = in_terminal("doctor", "--python", _venv(demo), env={"NO_COLOR": "1"})
    assert done.returncode == 1, done.err
    assert ESC not in done.stdout and ESC not in done.stderr
    assert done.out.startswith("1 error: ")


def test_color_never_beats_force_color(demo: Path) -> None:
    done = in_terminal(
        "remove", CU13, "--dry-run", "--color", "never", "--python", _venv(demo),
        env={"FORCE_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 1, done.err
    assert ESC not in done.stdout
    assert done.out.startswith("Unsafe: ")


def test_off_a_terminal_colour_only_when_asked(demo: Path) -> None:
    plain = cudatx("remove", CU13, "--dry-run", "--python", _venv(demo), hide=QUIET)
    assert "\x1b[" not in plain.stdout and "\x1b[" not in plain.stderr
    forced = cudatx(
        "remove", CU13, "--dry-run", "--python", _venv(demo), hide=QUIET,
        env={"FORCE_COLOR": "1"},
    )  # fmt: skip
    assert forced.stdout.startswith("\x1b[31m\x1b[1mUnsafe\x1b[0m: ")
    always = cudatx(
        "--color", "always", "why", "libcudnn.so.9", "--python", _venv(demo), hide=QUIET
    )
    assert "\x1b[" in always.stdout
    assert plain.stdout == re.sub(r"\x1b\[[0-9;]*m", "", forced.stdout)  # colour only
    # An error in the subcommand's own options: said as the options before it asked.
    wrong = cudatx("--color", "always", "doctor", "--no-such-option", hide=QUIET)
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("cudatx: \x1b[31m\x1b[1merror\x1b[0m: "), wrong.stderr
    after = cudatx("doctor", "--python", "/no/such/python", "--color", "always", hide=QUIET)
    assert after.stderr.startswith("cudatx: \x1b[31m\x1b[1merror\x1b[0m: "), after.stderr


# -- -q and -v ------------------------------------------------------------------------------


def test_quiet_prints_the_verdict_line_alone(demo: Path) -> None:
    done = in_terminal("remove", CU13, "--dry-run", "-q", "--python", _venv(demo))
    assert done.returncode == 1, done.err
    lines = done.out.splitlines()
    assert len(lines) == 1 and "Unsafe" in lines[0]
    assert done.err == ""  # not even which environment
    # before the subcommand, as uv's global options go, too
    again = in_terminal("-q", "--color", "never", "why", "libcudnn.so.9", "--python", _venv(demo))
    assert again.out.splitlines() == [
        "libcudnn.so.9 => nvidia/cudnn/lib/libcudnn.so.9 "
        "(bytes of nvidia-cudnn-cu13 9.13.0.50+cudatxdemo, CUDA 13); by path, "
        "for torch/__init__.py (preload)"
    ]


def test_doctor_s_quiet_verdict_stands_alone(demo: Path) -> None:
    """`doctor -q` prints the verdict alone: it never points at findings "below" it."""
    done = in_terminal("doctor", "-q", "--color", "never", "--python", _venv(demo))
    assert done.returncode == 1, done.err
    (line,) = done.out.splitlines()
    assert line.startswith("1 error: ") and "below" not in line, line


def test_every_wait_on_uv_is_shown_as_it_starts(demo: Path, tmp_path: Path) -> None:
    """At a terminal, a plan's waits on uv (resolving, staging the wheels it downloads) are
    each a line as they start, ended with their time; never under --json or -q."""
    from tests.support import build_wheel

    extra = build_wheel(tmp_path, "waitpkg", "1.0", {"waitpkg/__init__.py": b""})
    links = ("--offline", "--find-links", demo / "wheels")
    done = in_terminal(
        "install", "waitpkg", "--dry-run", *links, "--find-links", extra.parent,
        "--color", "never", "--python", _venv(demo),
    )  # fmt: skip
    assert done.returncode in (0, 1), done.err
    assert re.search(r"cudatx: Resolving with uv \(uv pip install --dry-run\): done in ", done.err)
    assert re.search(r"cudatx: Staging 1 distribution with uv .*: done in ", done.err), done.err
    repair = in_terminal(
        "remove", CU13, "--repair", "--dry-run", *links, "--color", "never",
        "--python", _venv(demo),
    )  # fmt: skip
    assert re.search(r"cudatx: Staging 1 reinstall with uv: done in ", repair.err), repair.err
    for quiet in ("--json", "-q"):
        silent = in_terminal(
            "remove", CU13, "--repair", "--dry-run", *links, quiet, "--python", _venv(demo)
        )
        assert "Staging" not in silent.err, silent.err


def test_a_download_is_shown_with_its_size(demo: Path, tmp_path: Path) -> None:
    """A wait on uv that downloads says what, and how big, as uv says it (a 3 MiB wheel from
    a real index over HTTP on 127.0.0.1, which uv fetches while it stages)."""
    from tests.support import build_wheel
    from tests.support.http_index import serve_index

    store = tmp_path / "index"
    store.mkdir()
    payload = os.urandom(3 * 1024 * 1024)  # incompressible: the wheel stays 3 MiB
    build_wheel(store, "bigpkg", "1.0", {"bigpkg/__init__.py": b"", "bigpkg/blob.bin": payload})
    with serve_index(store) as (url, _):
        done = in_terminal(
            "install", "bigpkg", "--dry-run", "--no-deps", "--index-url", url,
            "--color", "never", "--python", _venv(demo),
        )  # fmt: skip
    assert done.returncode in (0, 1), done.err
    assert "\r\x1b[Kcudatx: Downloading bigpkg (3.0MiB)..." in done.err, done.err
    assert re.search(r"cudatx: Staging 1 distribution with uv .*: done in ", done.err), done.err


def test_quiet_keeps_errors(demo: Path) -> None:
    done = in_terminal("-q", "why", "libnothing.so.1", "--python", _venv(demo))
    assert done.returncode == 4
    assert "cudatx: " in done.err and "error" in done.err


def test_verbose_says_what_the_scan_read_and_every_search(demo: Path) -> None:
    plain = in_terminal("why", "libc.so.6", "--color", "never", "--python", _venv(demo))
    done = in_terminal("why", "libc.so.6", "-v", "--color", "never", "--python", _venv(demo))
    assert done.returncode == 0, done.err
    assert re.search(r"cudatx: scanned \d+ libraries and \d+ load roots in", done.err)
    assert "scan cache" in done.err
    # -v names every object that needs it, where the text alone names eight.
    assert "more (-v, --json)" in plain.out and "more (-v" not in done.out
    assert len(done.out.splitlines()) > len(plain.out.splitlines())


# -- graph ----------------------------------------------------------------------------------


def test_graph_is_the_same_tree_at_a_terminal_and_in_a_pipe(demo: Path) -> None:
    tree = in_terminal("graph", "--around", "libcudnn.so.9", "--python", _venv(demo))
    assert tree.returncode == 0, tree.err
    lines = tree.out.splitlines()
    assert f"{CU12} 9.10.2.21+cudatxdemo" in lines  # a distribution, its files under it
    # Both co-owners, the one whose bytes are on disk starred, in every file line.
    owners = f"[{CU12} 9.10.2.21+cudatxdemo, {CU13} 9.13.0.50+cudatxdemo*]"
    assert f"  nvidia/cudnn/lib/libcudnn.so.9 {owners}" in lines
    assert f"{CU13} 9.13.0.50+cudatxdemo" in lines
    assert lines[-1] == "* whose bytes are on disk, of a file several RECORDs list"
    assert not any("requires" in line for line in lines)  # not without --requires
    # `cudatx graph | less` shows what the terminal shows; JSON only when asked for.
    piped = cudatx("graph", "--around", "libcudnn.so.9", "--python", _venv(demo), hide=QUIET)
    assert piped.stdout.splitlines() == lines
    asked = cudatx(
        "graph", "--around", "libcudnn.so.9", "--format", "json", "--python", _venv(demo),
        hide=QUIET,
    )  # fmt: skip
    assert json.loads(asked.stdout)["schema_version"] == 1


def test_graph_json_is_the_tree_s_content(demo: Path) -> None:
    """`graph --json` is `--format json` (the README's "--json where it reports"), and what
    it holds is what the tree shows: the same distributions, each file under each owner
    with its owners (the one whose bytes are on disk starred), each need under its file."""
    args = ("graph", "--around", "libcudnn.so.9", "--python", _venv(demo))
    done = cudatx(*args, "--json", hide=QUIET)
    assert done.returncode == 0, done.stderr
    assert done.stdout == cudatx(*args, "--format", "json", hide=QUIET).stdout
    graph = json.loads(done.stdout)
    tree = cudatx(*args, hide=QUIET).stdout.splitlines()
    nodes = {node["id"]: node for node in graph["nodes"]}
    heads = {line for line in tree if not line.startswith((" ", "*", "("))}
    assert heads == {n["label"] for n in nodes.values() if n["kind"] == "distribution"}
    owns = sorted(
        (e["source"], e["target"], e["effective"]) for e in graph["edges"] if e["kind"] == "owns"
    )
    assert owns
    for dist, file, _ in owns:
        owners = ", ".join(
            nodes[s]["label"] + "*" * effective for s, f, effective in owns if f == file
        )
        under = tree[tree.index(nodes[dist]["label"]) + 1 :]
        under = under[: next((i for i, ln in enumerate(under) if not ln.startswith(" ")), None)]
        assert f"  {nodes[file]['label']} [{owners}]" in under, (dist, file)
    for edge in graph["edges"]:
        if edge["kind"] == "needs":
            soname = nodes[edge["target"]].get("label", edge["target"].split(":", 1)[1])
            assert any(line.startswith(f"    needs {soname}") for line in tree), soname
    # --json is that alias only: beside another format it is a usage error, said in a line.
    both = cudatx(*args, "--json", "--format", "dot", hide=QUIET)
    assert both.returncode == 2 and both.stdout == ""
    assert both.stderr.splitlines() == ["cudatx: error: --json is --format json, not --format dot"]


@pytest.mark.parametrize("rows", [12, 40, 400])
def test_around_s_default_radius_fits_the_screen(demo: Path, rows: int) -> None:
    """Without --radius, the largest radius whose tree fits the terminal's height (LINES),
    at least 1: never most of the graph on one screen."""
    env = {"LINES": str(rows)}
    done = cudatx("graph", "--around", "libcudnn.so.9", "--python", _venv(demo), env=env)
    assert done.returncode == 0, done.stderr
    one = cudatx(
        "graph", "--around", "libcudnn.so.9", "--radius", "1", "--python", _venv(demo)
    ).stdout.count("\n")
    shown = done.stdout.count("\n")
    assert shown <= rows or shown == one, (rows, shown, one)
    whole = cudatx("graph", "--python", _venv(demo)).stdout.count("\n")
    assert shown < whole


def test_graph_text_says_each_need_once(demo: Path) -> None:
    """libcublas.so.12 names libcublasLt.so.12 in DT_NEEDED and is known to dlopen it: one
    need, on one line with both counts; a name nothing provides says so once."""
    done = cudatx("graph", "--format", "text", "--python", _venv(demo), hide=QUIET)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    needs: list[str] = []
    for line in lines:
        if not line.startswith("    needs "):
            needs = []  # a new file (or distribution): its own needs
            continue
        name = line.split()[1]
        assert name not in needs, (name, line)
        needs.append(name)
    # Already loaded where torch preloads it first; found by RUNPATH in the demo plug-in's
    # process, which loads cuBLAS itself: the need's hows, each once.
    assert (
        "    needs libcublasLt.so.12 (DT_NEEDED, dlopen) -> nvidia/cublas/lib/libcublasLt.so.12 "
        "[nvidia-cublas-cu12 12.8.4.1+cudatxdemo] (already loaded, runpath)"
    ) in lines
    assert "    needs libnvrtc.so.13 (dlopen): not found" in lines
    assert not any(line.count("not found") > 1 for line in lines)


def test_graph_marks_the_effective_owner_in_dot_and_mermaid(demo: Path) -> None:
    args = ("--around", "libcudnn.so.9", "--python", _venv(demo))
    dot = cudatx("graph", "--format", "dot", *args, hide=QUIET).stdout
    marked = [ln for ln in dot.splitlines() if "owns (bytes on disk)" in ln]
    assert marked and all(ln.startswith(f'  "dist:{CU13}" -> ') for ln in marked)
    assert all("penwidth=2" in ln for ln in marked)
    mermaid = cudatx("graph", "--format", "mermaid", *args, hide=QUIET).stdout
    thick = [ln for ln in mermaid.splitlines() if "==>" in ln]
    assert thick and all(ln.startswith("  dist_nvidia_cudnn_cu13 ==>|") for ln in thick)
    assert all('"owns (bytes on disk)"' in ln for ln in thick)
    as_json = json.loads(cudatx("graph", "--format", "json", *args, hide=QUIET).stdout)
    effective = {e["source"] for e in as_json["edges"] if e.get("effective")}
    assert effective == {f"dist:{CU13}"}


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graph_svg_through_graphviz(demo: Path) -> None:
    done = cudatx("graph", "--format", "svg", "--around", CU13, "--python", _venv(demo), hide=QUIET)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout and "owns (bytes on disk)" in done.stdout


def test_graph_svg_without_graphviz_is_one_line(demo: Path) -> None:
    # PATH with only this interpreter's folder: no dot there.
    no_dot = {"PATH": os.path.dirname(sys.executable)}
    assert shutil.which("dot", path=no_dot["PATH"]) is None
    done = cudatx("graph", "--format", "svg", "--python", _venv(demo), hide=QUIET, env=no_dot)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "cudatx: error: --format svg needs Graphviz's `dot` on PATH (e.g. apt install "
        "graphviz); --format dot prints what it would draw"
    ]


# -- --json: the same bytes at a terminal and in a pipe ------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("doctor", "--json"),
        ("why", "libcudnn.so.9", "--json"),
        ("remove", CU13, "--dry-run", "--json"),
        ("graph", "--format", "json", "--around", CU13),
        ("history", "--json"),
    ],
    ids=lambda a: a[0],
)
def test_json_is_the_same_at_a_terminal(demo: Path, args: tuple[str, ...]) -> None:
    piped = cudatx(*args, "--python", _venv(demo), hide=QUIET, text=False)
    at_terminal = in_terminal(*args, "--python", _venv(demo), env={"FORCE_COLOR": "1"})
    assert piped.returncode == at_terminal.returncode
    assert at_terminal.stdout == piped.stdout
    json.loads(piped.stdout)


# -- an apply, as a person at a terminal sees it -------------------------------------------


def test_apply_at_a_terminal_shows_phases_summary_and_undo(copy: Path) -> None:
    venv = _venv(copy)
    done = in_terminal(
        "remove", CU13, "--repair", "--yes", "--offline", "--find-links", copy / "wheels",
        "--color", "never", "--python", venv,
    )  # fmt: skip
    assert done.returncode == 0, done.err
    err = done.err
    # One line for each phase, each ended with its time.
    for phase in (
        r"Saving a snapshot of \d+ files",
        r"Uninstalling 1 package",
        r"Reinstalling 1 package",
        r"Verifying: rescan",
        r"Committing",
    ):
        assert re.search(rf"cudatx: {phase}: done in \d", err), (phase, err)
    # The summary, in uv's words, and the snapshot's size with its hard links.
    assert re.search(
        rf"^Uninstalled 1 package in \d+(ms|\.\d\ds)\n - {CU13}==9\.13\.0\.50\+cudatxdemo$",
        err,
        re.M,
    )
    assert re.search(
        rf"^Reinstalled 1 package in .*\n ~ {CU12}==9\.10\.2\.21\+cudatxdemo$", err, re.M
    )
    size = re.search(
        r"^Snapshot: (\d+) files, ([\d.]+ \w+) on disk \(([\d.]+ \w+) of it hard", err, re.M
    )
    assert size, err
    assert int(size.group(1)) >= 8 and size.group(2) == size.group(3)  # same filesystem: links
    found = re.search(
        r"^Applied as transaction (\S+); undo it with: cudatx rollback (\S+) --python (\S+)$",
        err,
        re.M,
    )
    assert found and found.group(1) == found.group(2) and found.group(3) == venv, err
    # Every command it prints runs as printed: the prune it names too.
    prune = re.search(r"; `(cudatx history prune [^`]+)` frees the older ones", err)
    assert prune, err
    pruned = cudatx(*shlex.split(prune.group(1))[1:], hide=QUIET)
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout == "Freed the snapshots of 0 transactions.\n"  # the latest is kept
    assert done.stdout.startswith(b"Safe: ")  # the plan, on stdout; nothing of the steps
    assert b"Saving" not in done.stdout
    # The undo command it printed works, and a second rollback says so.
    undo = cudatx("rollback", found.group(1), "--yes", "--python", venv, hide=QUIET)
    assert undo.returncode == 0, undo.stderr
    assert undo.stdout == f"Transaction {found.group(1)}: rolled back.\n"
    # A mistyped ID is the command line's fault (2), as `history show` has it, not a
    # corrupt store (12).
    for args in (("rollback", "20990101T000000-0", "--yes"), ("history", "show", "nope")):
        wrong = cudatx(*args, "--python", venv, hide=QUIET)
        assert wrong.returncode == 2, wrong.stderr
        assert wrong.stderr.splitlines()[-1].startswith("cudatx: error: no transaction ")


def test_apply_off_a_terminal_has_no_step_lines(copy: Path) -> None:
    done = cudatx(
        "remove", CU13, "--repair", "--yes", "--offline", "--find-links", copy / "wheels",
        "--python", _venv(copy), hide=QUIET,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Saving a snapshot" not in done.stderr and "\r" not in done.stderr
    assert "Uninstalled 1 package in " in done.stderr


def _slow_uv(folder: Path, seconds: float) -> Path:
    """The real uv, started `seconds` late for every `uv pip install` (the apply's
    reinstall, the plan's staging): a wait as long as a real cuDNN's."""
    from uv import find_uv_bin

    script = folder / "slow-uv"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2" = "pip install" ]; then sleep {seconds}; fi\n'
        f'exec {shlex.quote(os.fspath(find_uv_bin()))} "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_a_uv_step_that_says_nothing_shows_its_seconds(copy: Path, tmp_path: Path) -> None:
    """uv draws no progress off a terminal, and cudatx reads its stderr through a pipe: while
    a reinstall runs, the phase's line says how long it has taken so far, redrawn in place;
    never in a pipe or a file, nor under -q."""
    venv = _venv(copy)
    args = (
        "remove", CU13, "--repair", "--yes", "--offline", "--find-links", copy / "wheels",
        "--uv", _slow_uv(tmp_path, 2.5), "--color", "never", "--python", venv,
    )  # fmt: skip
    done = in_terminal(*args)
    assert done.returncode == 0, done.err
    assert re.search(r"\r\x1b\[Kcudatx: Reinstalling 1 package\.\.\. [12]s\r", done.err), done.err
    assert re.search(r"\r\x1b\[Kcudatx: Reinstalling 1 package: done in [23]\.\d\ds\n", done.err)
    undo = ("rollback", "--yes", "--python", venv)
    assert cudatx(*undo, hide=QUIET).returncode == 0
    with open(tmp_path / "stderr", "w+") as stderr:
        piped = cudatx(*args, hide=QUIET, stderr=stderr)
        assert piped.returncode == 0
        stderr.seek(0)
        written = stderr.read()
    assert "Reinstalling" not in written and "\r" not in written, written
    assert "Reinstalled 1 package in " in written
    assert cudatx(*undo, hide=QUIET).returncode == 0
    quiet = in_terminal(*args, "-q")
    assert quiet.returncode == 0, quiet.err
    assert quiet.err.startswith("Applied as transaction ") and "\r" not in quiet.err, quiet.err


def test_a_trial_says_where_it_is(demo: Path, tmp_path: Path) -> None:
    """A trial at a terminal says which judgement it is in, its step, and its counts, with
    its seconds, on one line redrawn in place; not in a pipe, under --json or -q. (A slow
    uv and a slow check of the user's: a step that ends first may never be drawn.)"""
    args = (
        "remove", CU13, "--repair", "--dry-run", "--trial", "--trial-cmd", "sleep 1.5",
        "--offline", "--find-links", demo / "wheels", "--uv", _slow_uv(tmp_path, 1),
        "--color", "never", "--python", _venv(demo),
    )  # fmt: skip
    done = in_terminal(*args)
    assert done.returncode == 0, done.err
    drawn = done.err.split("\r\x1b[K")
    for said in (
        r"Trial, before the change: making a shadow of the environment\.\.\.( \d+s)?",
        r"Trial, before the change: checking \d+/\d+: --trial-cmd 'sleep 1\.5'\.\.\.( \d+s)?",
        r"Trial, after the change: making a shadow of the environment\.\.\.( \d+s)?",
        r"Trial, after the change: changing the shadow: 2/2: uv pip install\.\.\.( \d+s)?",
        r"Trial, after the change: checking \d+/\d+: --trial-cmd 'sleep 1\.5'\.\.\.( \d+s)?",
    ):
        assert any(re.fullmatch(f"cudatx: {said}", line) for line in drawn), (said, drawn)
    # -1: the one check not finished, the user's command, of every import and step
    counts = {int(m) for m in re.findall(r"checking (\d+)/\d+: --trial-cmd", done.err)}
    totals = {int(m) for m in re.findall(r"checking \d+/(\d+): --trial-cmd", done.err)}
    assert len(totals) == 1 and counts == {totals.pop() - 1}, done.err
    assert re.search(r"\r\x1b\[Kcudatx: Trial: done in \d+\.\d\ds\n", done.err)
    piped = cudatx(*args, hide=QUIET)
    assert piped.returncode == 0 and "Trial" not in piped.stderr, piped.stderr
    for quiet in ("--json", "-q"):
        silent = in_terminal(*args, quiet)
        assert silent.returncode == 0 and "Trial" not in silent.err, (quiet, silent.err)


def test_failing_verify_shows_its_output(copy: Path) -> None:
    venv = _venv(copy)
    script = "echo first-words-of-the-check; echo second >&2; exit 3"
    done = cudatx(
        "remove", CU13, "--repair", "--yes", "--offline", "--find-links", copy / "wheels",
        "--verify", script, "--python", venv, hide=QUIET,
    )  # fmt: skip
    assert done.returncode == 10, done.stderr
    lines = done.stderr.splitlines()
    assert "first-words-of-the-check" in lines and "second" in lines
    assert lines[-1].startswith("cudatx: error: --verify ") and "rolled back" in lines[-1]


def test_failing_verify_at_a_terminal_ends_its_step_line(copy: Path) -> None:
    """The phase that failed keeps its line, ended as failed; the rollback gets its own
    (the rollback's line was written over the open verify line, which vanished)."""
    done = in_terminal(
        "remove", CU13, "--repair", "--yes", "--offline", "--find-links", copy / "wheels",
        "--verify", "exit 3", "--color", "never", "--python", _venv(copy),
    )  # fmt: skip
    assert done.returncode == 10, done.err
    shown = [line.rsplit("\r\x1b[K", 1)[-1] for line in done.err.split("\n")]  # as drawn
    assert any(
        re.fullmatch(r"cudatx: Verifying: rescan and --verify: failed after \d\S*", line)
        for line in shown
    ), shown
    assert any(re.fullmatch(r"cudatx: Rolling back: done in \d\S*", line) for line in shown)


def test_nothing_to_roll_back_has_its_own_exit_code(copy: Path) -> None:
    done = cudatx("rollback", "--yes", "--python", _venv(copy), hide=QUIET)
    assert done.returncode == 14, done.stderr
    assert done.stderr.splitlines()[-1].startswith("cudatx: error: nothing to roll back")
    empty = cudatx("history", "--python", _venv(copy), hide=QUIET)
    assert empty.returncode == 0
    assert empty.stdout == f"No transactions recorded for {_venv(copy)}.\n"
    listed = json.loads(cudatx("history", "--json", "--python", _venv(copy), hide=QUIET).stdout)
    assert listed["transactions"] == []
    # `history show` takes the latest as rollback does: with none, the same exit code.
    shown = cudatx("history", "show", "--python", _venv(copy), hide=QUIET)
    assert shown.returncode == 14, shown.stderr
    assert shown.stderr.splitlines() == [
        f"cudatx: error: nothing to show: no cudatx transaction recorded in {_venv(copy)}"
    ]


# -- prompts ----------------------------------------------------------------------------------


def test_declining_is_its_own_exit_code_and_changes_nothing(copy: Path) -> None:
    """Answering no to "Proceed?" or to the rollback's question exits 19 (not 130, the code
    of ^C) and changes nothing; the rollback's prompt names the transaction and what it
    would restore, and `rollback --dry-run` says the same and changes nothing."""
    from tests.support.digest import diff, tree_digest

    venv = _venv(copy)
    links = ("--offline", "--find-links", copy / "wheels")
    before = tree_digest(Path(venv), exclude=(".cudatx",))
    change = ("remove", CU13, "--repair", *links, "--color", "never", "--python", venv)
    declined = in_terminal(*change, typed="n\n")
    assert declined.returncode == 19, declined.err
    assert "Proceed?" in declined.err and "declined: nothing was changed" in declined.err
    assert diff(before, tree_digest(Path(venv), exclude=(".cudatx",))) == []
    applied = in_terminal(*change, typed="y\n")
    assert applied.returncode == 0, applied.err
    (txn,) = re.findall(r"Applied as transaction (\S+);", applied.err)
    after = tree_digest(Path(venv), exclude=(".cudatx",))

    dry = cudatx("rollback", "--dry-run", "--python", venv, hide=QUIET)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"Would roll back transaction {txn} (committed, "), dry.stdout
    assert (
        f" + {CU13}==9.13.0.50+cudatxdemo" in dry.stdout
        and f" ~ {CU12}==9.10.2.21+cudatxdemo" in dry.stdout
    )
    no = in_terminal("rollback", "--color", "never", "--python", venv, typed="n\n")
    assert no.returncode == 19, no.err
    assert dry.stdout in no.err and f"Roll back transaction {txn}?" in no.err
    assert diff(after, tree_digest(Path(venv), exclude=(".cudatx",))) == []
    yes = in_terminal("rollback", "--color", "never", "--python", venv, typed="y\n")
    assert yes.returncode == 0, yes.err
    assert diff(before, tree_digest(Path(venv), exclude=(".cudatx",))) == []
