"""check-requirements without an environment: the wheels a file resolves to, and the paths two
of them would write with different bytes; real uv, real wheels, a real HTTP index.

The index (tests/support/http_index.py) serves the wheels built here over HTTP on
127.0.0.1, with byte ranges or without; every RECORD cudatx reads is counted there, by
User-Agent, as well as in cudatx's own JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cudatx.errors import NeedsBuild
from cudatx.planning.resolve import read_pylock, read_via, selected, target_tags
from tests.support import make_venv, uv_bin
from tests.support.cli import HIDDEN, cudatx
from tests.support.http_index import serve_index
from tests.support.wheels import build_wheel

FINDINGS = 1
CUDATX_AGENT = "Python-urllib"
BIG = 4 << 20  # beta carries this many random bytes: its RECORD is a sliver of it


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpha and beta write pkg/_x.so with other bytes (a finding) and shared/__init__.py
    with the same bytes (none); alpha requires gamma; epsilon writes gamma's library with
    other bytes; delta shares only the identical file."""
    out = tmp_path_factory.mktemp("conflict-wheels")
    shared = {"shared/__init__.py": b""}
    build_wheel(out, "alpha", "1.0", {"pkg/_x.so": b"alpha build\n", **shared}, requires=["gamma"])
    build_wheel(
        out,
        "beta",
        "1.0",
        {"pkg/_x.so": b"beta build\n", "beta/blob.bin": os.urandom(BIG), **shared},
    )
    build_wheel(out, "gamma", "1.0", {"twin/lib/libtwin.so.1": b"gamma's twin\n"})
    build_wheel(out, "delta", "1.0", {"delta/__init__.py": b"", **shared})
    build_wheel(out, "epsilon", "1.0", {"twin/lib/libtwin.so.1": b"epsilon's twin\n"})
    return out


def _check(
    project: Path, *args: str, cache: Path | None = None, uv_cache: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"UV_CACHE_DIR": str(uv_cache or project / "uv-cache")}
    if cache is not None:
        env["CUDATX_CACHE_DIR"] = str(cache)
    extra = () if cache is not None else ("--no-cache",)
    return cudatx("check-requirements", *args, *extra, cwd=project, hide=HIDDEN, env=env)


def _project(tmp_path: Path, text: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text(text)
    return project


def _files(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.stdout.startswith("{"), done.stdout + done.stderr
    (check,) = json.loads(done.stdout)["files"]
    assert isinstance(check, dict)
    return check


def test_range_requests_read_the_record_not_the_wheel(wheels: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, "alpha\nbeta\n")
    with serve_index(wheels) as (index, served):
        done = _check(project, "requirements.txt", "--index-url", index, "--json")
    assert done.returncode == FINDINGS, done.stderr
    check = _files(done)
    assert check["check"] == "conflicts" and check["plan"] is None and not check["safe"]
    (conflict,) = check["conflicts"]  # type: ignore[misc]
    assert conflict["paths"] == ["pkg/_x.so"]  # shared/__init__.py: the same bytes
    assert conflict["same"] == 1
    assert conflict["message"].startswith("alpha and beta both install pkg/_x.so with different")
    reads = {w["name"]: w for w in check["wheels"]}  # type: ignore[union-attr]
    assert set(reads) == {"alpha", "beta", "gamma"}
    beta = reads["beta"]
    assert beta["source"] == "range requests"
    size = (wheels / "beta-1.0-py3-none-any.whl").stat().st_size
    assert size > BIG
    assert 0 < beta["transferred"] < size // 50  # the directory and RECORD only
    # The server's count agrees: cudatx's requests moved what its JSON says, all of it ranges.
    ours = served.asked_by(CUDATX_AGENT)
    assert ours and all(status == 206 and rng for _, _, rng, status in ours)
    assert served.sent_to(CUDATX_AGENT) == sum(w["transferred"] for w in reads.values())


def test_a_server_without_ranges_is_downloaded(wheels: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, "alpha\nbeta\n")
    with serve_index(wheels, ranges=False) as (index, served):
        done = _check(project, "requirements.txt", "--index-url", index, "--json")
    assert done.returncode == FINDINGS, done.stderr
    reads = {w["name"]: w for w in _files(done)["wheels"]}  # type: ignore[union-attr]
    size = (wheels / "beta-1.0-py3-none-any.whl").stat().st_size
    assert reads["beta"]["source"] == "download"
    assert reads["beta"]["transferred"] == size
    assert served.sent_to(CUDATX_AGENT) == sum(w["transferred"] for w in reads.values())


def test_uv_cache_is_read_first(wheels: Path, tmp_path: Path) -> None:
    """Wheels uv already unpacked are read from its cache: cudatx asks the index nothing."""
    project = _project(tmp_path, "alpha\nbeta\n")
    uv_cache = tmp_path / "uv-cache"
    venv = tmp_path / "warm"
    with serve_index(wheels) as (index, served):
        env = {**os.environ, "UV_CACHE_DIR": str(uv_cache)}
        env.pop("VIRTUAL_ENV", None)
        for argv in (
            [uv_bin(), "venv", "-q", str(venv)],
            [
                uv_bin(),
                "pip",
                "install",
                "-q",
                "--python",
                str(venv),
                "--index-url",
                index,
                "alpha",
                "beta",
            ],
        ):
            made = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            assert made.returncode == 0, made.stderr
        done = _check(
            project, "requirements.txt", "--index-url", index, "--json", uv_cache=uv_cache
        )
    assert done.returncode == FINDINGS, done.stderr
    reads = _files(done)["wheels"]
    assert {w["source"] for w in reads} == {"uv cache"}  # type: ignore[union-attr]
    assert served.asked_by(CUDATX_AGENT) == []


def test_cudatx_cache_keeps_what_ranges_read(wheels: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, "alpha\nbeta\n")
    cache = tmp_path / "cudatx-cache"
    with serve_index(wheels) as (index, served):
        first = _check(project, "requirements.txt", "-i", index, "--json", cache=cache)
        before = len(served.asked_by(CUDATX_AGENT))
        second = _check(project, "requirements.txt", "-i", index, "--json", cache=cache)
    assert first.returncode == second.returncode == FINDINGS, second.stderr
    assert {w["source"] for w in _files(second)["wheels"]} == {"cudatx cache"}  # type: ignore[union-attr]
    assert before > 0 and len(served.asked_by(CUDATX_AGENT)) == before
    assert _files(first)["conflicts"] == _files(second)["conflicts"]


def test_what_only_uv_can_fetch_uv_fetches(wheels: Path, tmp_path: Path) -> None:
    """An index that refuses cudatx's own requests (credentials, a proxy only uv knows):
    uv downloads the wheels into its cache, and the RECORDs come from there."""
    project = _project(tmp_path, "alpha\nbeta\n")
    with serve_index(wheels, refuse=(CUDATX_AGENT,)) as (index, served):
        done = _check(project, "requirements.txt", "--index-url", index, "--json")
    assert done.returncode == FINDINGS, done.stderr
    assert {status for *_, status in served.asked_by(CUDATX_AGENT)} == {403}
    check = _files(done)
    reads = {w["name"]: w for w in check["wheels"]}  # type: ignore[union-attr]
    assert {w["source"] for w in reads.values()} == {"uv download"}
    assert "HTTP 403" in reads["beta"]["why"]
    assert [c["paths"] for c in check["conflicts"]] == [["pkg/_x.so"]]  # type: ignore[union-attr]


def test_local_wheels_and_the_clean_case(wheels: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, "alpha\ndelta\n")
    links = ("--offline", "--find-links", str(wheels))
    done = _check(project, "requirements.txt", *links, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    check = _files(done)
    assert check["safe"] and check["conflicts"] == []
    assert {w["source"] for w in check["wheels"]} == {"file"}  # type: ignore[union-attr]
    quiet = _check(project, "requirements.txt", *links)
    assert quiet.returncode == 0 and quiet.stdout == ""
    assert "no environment to check" in quiet.stderr  # which check ran is said


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"}
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_blamed_on_the_line_this_change_made(wheels: Path, tmp_path: Path) -> None:
    """gamma comes in through alpha (line 1, committed); epsilon is the line this change
    adds: the finding is blamed on it, and the fix drops it or asks for gamma there."""
    project = _project(tmp_path, "alpha\n")
    _git(project, "init", "-q")
    _git(project, "add", "requirements.txt")
    _git(project, "commit", "-qm", "alpha")
    links = ("--offline", "--find-links", str(wheels))
    assert _check(project, "requirements.txt", *links).returncode == 0
    (project / "requirements.txt").write_text("alpha\nepsilon  # the new line\n")
    done = _check(project, "requirements.txt", *links)
    assert done.returncode == FINDINGS, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "requirements.txt: installing this file into an empty environment would write the "
        "same paths twice"
    )
    assert lines[1] == (
        "  epsilon and gamma both install twin/lib/libtwin.so.1 with different bytes: "
        "whichever uv installs last wins, and removing either later breaks the other"
    )
    assert lines[2] == "    epsilon 1.0 <- line 2 (this change): epsilon"
    assert lines[3] == (
        "    gamma 1.0 <- line 1 (unchanged since the last commit): alpha, which requires gamma"
    )
    assert lines[4:] == [
        "  fix: drop line 2 (epsilon)",
        "  fix: or, on line 2, ask for gamma instead of epsilon: the build that line 1 (alpha) "
        "requires",
    ]


def test_what_brings_a_wheel_in_is_asked_of_uv_only_to_blame(wheels: Path, tmp_path: Path) -> None:
    """uv's annotated resolution (what brings each wheel in) is asked for only where two
    wheels write one path with different bytes: a file that writes none is resolved once;
    one that does is blamed as before, from a second resolution."""
    log = tmp_path / "uv.log"
    logged = tmp_path / "uv"
    logged.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{uv_bin()}" "$@"\n')
    logged.chmod(0o755)
    links = ("--offline", "--find-links", str(wheels), "--uv", str(logged))

    def compiles(project: Path) -> list[str]:
        done = _check(project, "requirements.txt", *links)
        calls = [c for c in log.read_text().splitlines() if c.startswith("pip compile")]
        log.unlink()
        assert done.returncode == (FINDINGS if "epsilon" in done.stdout else 0), done.stderr
        return ["annotated" if "--annotation-style" in c else "locked" for c in calls]

    (tmp_path / "safe").mkdir()
    (tmp_path / "twins").mkdir()
    assert compiles(_project(tmp_path / "safe", "alpha\ndelta\n")) == ["locked"]
    twins = _project(tmp_path / "twins", "alpha\nepsilon\n")
    assert compiles(twins) == ["locked", "annotated"]
    blamed = _check(twins, "requirements.txt", *links).stdout.splitlines()
    assert blamed[2:4] == [
        "    epsilon 1.0 <- line 2 (not in git): epsilon",
        "    gamma 1.0 <- line 1 (not in git): alpha, which requires gamma",
    ]


@pytest.mark.parametrize("style", ["remote", "local"])
def test_precommit_in_a_fresh_clone(wheels: Path, tmp_path: Path, style: str) -> None:
    """No environment anywhere: the hook checks the file alone, through real pre-commit. The
    line that brings a second copy of gamma's library is refused, named and blamed; the file
    without it is accepted."""
    from tests.support.precommit_story import run_clone_story

    args = ["--offline", "--find-links", str(wheels)]
    story = run_clone_story(tmp_path, "alpha\n", "epsilon", args, style)
    assert story.base.returncode == 0, story.base.output
    assert story.added.returncode != 0, story.added.output
    assert "epsilon and gamma both install twin/lib/libtwin.so.1 with different bytes" in (
        story.added.output
    )
    assert "epsilon 1.0 <- line 3 (this change): epsilon" in story.added.output
    assert "fix: drop line 3 (epsilon)" in story.added.output
    assert "no environment to check" in story.added.output  # which check ran
    assert story.removed.returncode == 0, story.removed.output


def test_require_env_keeps_its_meaning(wheels: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, "alpha\nbeta\n")
    env = {"PRE_COMMIT": "1", "VIRTUAL_ENV": str(project)}  # pre-commit's own: never trusted
    command = ("check-requirements", "requirements.txt", "--offline", "--find-links", wheels)
    failed = cudatx(*command, "--require-env", cwd=project, env=env)
    assert failed.returncode == 3, failed.stderr
    assert failed.stderr.count("\n") == 1 and "no environment to check" in failed.stderr
    checked = cudatx(*command, cwd=project, env=env)
    assert checked.returncode == FINDINGS and "pkg/_x.so" in checked.stdout, checked.stderr


def test_what_can_only_be_built_is_not_built(tmp_path: Path) -> None:
    """A local project folder resolves only by building it: uv refuses (--no-build), and
    nothing runs its build backend."""
    source = tmp_path / "src-only"
    source.mkdir()
    marker = tmp_path / "built"
    (source / "setup.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (source / "pyproject.toml").write_text(
        '[project]\nname = "srconly"\nversion = "1.0"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    project = _project(tmp_path, f"srconly @ file://{source}\n")
    done = _check(project, "requirements.txt", "--offline", "-q")
    assert done.returncode == 16, done.stdout + done.stderr  # NeedsBuild, named by its line
    # What builds it here: --allow-build alone is refused without an environment (below).
    assert done.stderr == (
        f"cudatx: error: srconly (requirements.txt:1: srconly @ file://{source}) can only be "
        "checked by building it: the check without an environment never builds; pass --fresh "
        "(or --python) with --allow-build\n"
    )
    allowed = _check(project, "requirements.txt", "--offline", "-q", "--allow-build")
    assert allowed.returncode == 2, allowed.stdout + allowed.stderr
    assert "the check without an environment never builds; pass --fresh" in allowed.stderr
    assert not marker.exists()


# -- --fresh: the whole install planned into an empty environment --------------------------


@pytest.fixture(scope="module")
def cuda13_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of wheels: the fake CUDA 13 torch of tests/support/cudnn_world.py, but
    requiring no cuDNN, beside the cu12 cuDNN and the CUDA 13 libraries it needs."""
    import shutil
    import zipfile

    from tests.support.cudnn_world import build_cudnn_world

    world = build_cudnn_world(tmp_path_factory.mktemp("fresh-world"))
    out = tmp_path_factory.mktemp("fresh-wheels")
    torch, cublas, nvrtc = world.others
    with zipfile.ZipFile(torch) as zf:
        files = {
            n: zf.read(n) for n in zf.namelist() if not n.startswith("torch-2.14.1.dist-info/")
        }
    build_wheel(
        out,
        "torch",
        "2.14.1",
        files,
        requires=["nvidia-cublas==13.1.0.3", "nvidia-cuda-nvrtc==13.0.88"],
    )
    for wheel in (world.cudnn12, cublas, nvrtc):
        shutil.copy(wheel, out)
    return out


def test_fresh_judges_loads_the_paths_alone_cannot(cuda13_torch: Path, tmp_path: Path) -> None:
    """torch built for CUDA 13 and the CUDA 12 cuDNN write no path twice, so the file alone
    passes; planned into an empty environment, torch would load a cuDNN built for CUDA 12."""
    project = _project(tmp_path, "torch==2.14.1\nnvidia-cudnn-cu12\n")
    links = ("--offline", "--find-links", str(cuda13_torch))
    alone = _check(project, "requirements.txt", *links)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    done = _check(project, "requirements.txt", "--fresh", *links)
    assert done.returncode == FINDINGS, done.stdout + done.stderr
    assert "--fresh: planning requirements.txt into an empty Python" in done.stderr
    (broken,) = [ln for ln in done.stdout.splitlines() if ln.startswith("  broken: ")]
    assert "libcudnn.so.9" in broken.split(": ")[1].split(", ")
    assert "  nvidia-cudnn-cu12 9.10.2.21 <- line 2 (not in git): nvidia-cudnn-cu12" in done.stdout
    assert "  fix: drop line 2 (nvidia-cudnn-cu12)" in done.stdout
    check = _files(_check(project, "requirements.txt", "--fresh", "--json", *links))
    assert check["check"] == "fresh" and not check["safe"]
    plan = check["plan"]
    assert isinstance(plan, dict)
    assert ("libcudnn.so.9", 12) in [(m["soname"], m["major"]) for m in plan["mixed"]]
    assert [b["name"] for b in check["brought"]] == ["nvidia-cudnn-cu12"]  # type: ignore[union-attr]
    # Without the cu12 line, torch's CUDA 13 libraries alone: cuDNN is missing, a new break.
    (project / "requirements.txt").write_text("torch==2.14.1\n")
    missing = _check(project, "requirements.txt", "--fresh", *links)
    assert missing.returncode == FINDINGS and "libcudnn.so.9" in missing.stdout


# -- reading uv's answers ---------------------------------------------------------------


def test_a_locked_folder_uv_would_build_is_exit_16() -> None:
    """A package uv's lock gives no wheel for (a local folder, PEP 751's `directory`) is
    refused as the check refuses every requirement only a build could give: NeedsBuild,
    exit 16, as docs/commands.md's table says (it was a usage error, exit 2)."""
    lock = """
lock-version = "1.0"
[[packages]]
name = "pkg"
version = "1"
directory = { path = "pkg" }
"""
    with pytest.raises(NeedsBuild) as refused:
        read_pylock(lock, "/x/requirements.in", {}, lambda: [])
    assert refused.value.exit_code == 16
    assert refused.value.message.startswith("pkg (a local folder) can only be checked by building")


def test_the_wheel_uv_selects_among_several(tmp_path: Path) -> None:
    lock = """
lock-version = "1.0"
[[packages]]
name = "charset-normalizer"
version = "3.5.3"
wheels = [
    { url = "https://x.invalid/charset_normalizer-3.5.3-cp311-cp311-manylinux_2_28_x86_64.whl" },
    { url = "https://x.invalid/charset_normalizer-3.5.3-py3-none-any.whl", size = 5 },
]
"""
    said = (
        "DEBUG Selecting: charset-normalizer==3.5.3 [compatible] "
        "(charset_normalizer-3.5.3-py3-none-any.whl)\n"
    )
    (wheel,) = read_pylock(lock, "/x/requirements.in", selected(said), lambda: [])
    assert wheel.filename == "charset_normalizer-3.5.3-py3-none-any.whl" and wheel.size == 5
    # Without uv's word, the target's own tag order decides.
    ranked = ["cp311-cp311-manylinux_2_28_x86_64", "py3-none-any"]
    (wheel,) = read_pylock(lock, "/x/requirements.in", {}, lambda: ranked)
    assert wheel.filename.endswith("cp311-cp311-manylinux_2_28_x86_64.whl")
    # The order itself comes from the target interpreter (packaging.tags, run in it).
    asked = target_tags(str(make_venv(tmp_path / "venv")))
    assert asked[-1] == "py2.py3-none-any" or "py3-none-any" in asked
    assert asked.index("py3-none-any") > 0  # interpreter-specific tags rank first


def test_via_lines() -> None:
    text = (
        "gamma==1.0               # via alpha, -r /tmp/x/requirements.in\n"
        "alpha==1.0               # via -r /tmp/x/requirements.in\n"
        "beta @ file:///w/beta-1.0-py3-none-any.whl  # via gamma\n"
    )
    assert read_via(text, "/tmp/x/requirements.in") == {
        "gamma": ("alpha", ""),
        "alpha": ("",),
        "beta": ("gamma",),
    }
