"""The pre-commit story, run with real git and real pre-commit against a real environment.

A temporary git repository holds `requirements.txt`, the `uv pip freeze` of an environment
where the cu12 and the cu13 cuDNN wheels are both installed. A commit that drops the line
of the one whose bytes are on disk must be rejected, naming libcudnn.so.9; a harmless
change (a comment) must be accepted. Shared by the fast test (small fixture wheels) and the
slow one (real torch 2.14.1).

`run_clone_story` is the same hook where there is no environment at all: a fresh clone of a
project, whose commits the hook checks by the requirements file alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import uv_bin
from tests.support.paths import REPO
from tests.support.wheelhouse import wheelhouse


@dataclass(frozen=True)
class Commit:
    returncode: int
    output: str


def _git(repo: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False
    )


def _environ(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PRE_COMMIT")}
    # The cudatx under test, and git and pre-commit, found first; pre-commit's clones and
    # git's identity kept inside the test.
    scripts = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    env["PATH"] = os.pathsep.join([*scripts, env.get("PATH", "")])
    env["PRE_COMMIT_HOME"] = str(home / "pre-commit-home")
    env["HOME"] = str(home)
    # The `repo:` form: pre-commit installs cudatx from the repository with pip (the hook is
    # `language: python`), offline, from wheels of what this interpreter has installed.
    house = home / "wheelhouse"
    if not house.is_dir():
        wheelhouse(house)
    env["PIP_NO_INDEX"] = "1"
    env["PIP_FIND_LINKS"] = str(house)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    for key, value in (
        ("GIT_AUTHOR_NAME", "t"),
        ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
    ):
        env[key] = value
    return env


def hook_config(style: str, args: Sequence[str]) -> str:
    """The two configurations the README shows: this repository as a remote, or local."""
    quoted = ", ".join(f'"{a}"' for a in args)
    if style == "remote":
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        if rev.returncode != 0:
            pytest.skip("the checkout under test is not a git repository")
        return (
            "repos:\n"
            f"  - repo: {REPO}\n"
            f"    rev: {rev.stdout.strip()}\n"
            "    hooks:\n"
            "      - id: cudatx\n"
            f"        args: [{quoted}]\n"
        )
    return (
        "repos:\n"
        "  - repo: local\n"
        "    hooks:\n"
        "      - id: cudatx\n"
        "        name: cudatx check-requirements\n"
        "        entry: cudatx check-requirements\n"
        "        language: system\n"
        "        files: (^|/)(requirements[^/]*\\.(txt|in)|pyproject\\.toml|uv\\.lock"
        "|pylock(\\.[^/]+)?\\.toml)$\n"
        "        require_serial: true\n"
        f"        args: [{quoted}]\n"
    )


def freeze(venv: Path) -> str:
    done = subprocess.run(
        [uv_bin(), "pip", "freeze", "--python", str(venv)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def run_story(
    venv: Path, work: Path, drop: str, args: Sequence[str], style: str
) -> tuple[Commit, Commit]:
    """(the commit that drops `drop`'s line, the commit that only adds a comment)."""
    if shutil.which("pre-commit", path=_environ(work)["PATH"]) is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]' installs it)")
    repo = work / f"project-{style}"
    repo.mkdir()
    env = _environ(work)
    assert _git(repo, "init", "-q", env=env).returncode == 0
    requirements = repo / "requirements.txt"
    frozen = freeze(venv)
    line_of = (f"{drop}==", f"{drop} @ ")  # pinned from an index, or installed from a file
    assert any(line.startswith(line_of) for line in frozen.splitlines()), frozen
    requirements.write_text(frozen)
    (repo / ".pre-commit-config.yaml").write_text(hook_config(style, args))
    assert _git(repo, "add", ".", env=env).returncode == 0
    first = _git(repo, "commit", "-q", "-m", "freeze", env=env)
    assert first.returncode == 0, first.stderr
    installed = subprocess.run(
        ["pre-commit", "install"], cwd=repo, env=env, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr + installed.stdout

    def commit(text: str, message: str) -> Commit:
        requirements.write_text(text)
        _git(repo, "add", "requirements.txt", env=env)
        done = _git(repo, "commit", "-m", message, env=env)
        return Commit(done.returncode, done.stdout + done.stderr)

    dropped = "".join(ln for ln in frozen.splitlines(True) if not ln.startswith(line_of))
    rejected = commit(dropped, f"drop {drop}")
    _git(repo, "reset", "-q", "--hard", "HEAD", env=env)
    accepted = commit("# pinned by uv pip freeze\n" + frozen, "a comment")
    return rejected, accepted


@dataclass(frozen=True)
class CloneStory:
    base: Commit  # a comment added to the committed file
    added: Commit  # the line added
    removed: Commit  # that line gone again (with another comment)


def run_clone_story(
    work: Path,
    first: str,
    line: str,
    args: Sequence[str],
    style: str,
    config: str | None = None,
    *,
    own_cudatx: bool = False,
) -> CloneStory:
    """A project whose `requirements.txt` is `first`, cloned afresh (no environment, no
    .venv); in the clone, with the hook installed: commit a comment, then add `line`, then
    the file without it again. `config`: the project's .pre-commit-config.yaml, else
    hook_config(style, args). `own_cudatx`: the hook must run the cudatx pre-commit
    installed: the first `cudatx` on PATH is one that fails (exit 99), as where nobody
    installed cudatx by hand."""
    if shutil.which("pre-commit", path=_environ(work)["PATH"]) is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]' installs it)")
    env = _environ(work)
    if own_cudatx:
        decoy = work / "decoy-bin"
        decoy.mkdir()
        (decoy / "cudatx").write_text("#!/bin/sh\necho 'the cudatx on PATH ran' >&2\nexit 99\n")
        (decoy / "cudatx").chmod(0o755)
        env["PATH"] = os.pathsep.join([str(decoy), env["PATH"]])
    origin = work / f"origin-{style}"
    origin.mkdir()
    assert _git(origin, "init", "-q", env=env).returncode == 0
    (origin / "requirements.txt").write_text(first)
    (origin / ".pre-commit-config.yaml").write_text(config or hook_config(style, args))
    assert _git(origin, "add", ".", env=env).returncode == 0
    assert _git(origin, "commit", "-q", "-m", "first", env=env).returncode == 0
    clone = work / f"clone-{style}"
    cloned = subprocess.run(
        ["git", "clone", "-q", str(origin), str(clone)], env=env, capture_output=True, text=True
    )
    assert cloned.returncode == 0, cloned.stderr
    assert not (clone / ".venv").exists()
    installed = subprocess.run(
        ["pre-commit", "install"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr + installed.stdout
    requirements = clone / "requirements.txt"

    def commit(text: str, message: str) -> Commit:
        requirements.write_text(text)
        _git(clone, "add", "requirements.txt", env=env)
        done = _git(clone, "commit", "-m", message, env=env)
        return Commit(done.returncode, done.stdout + done.stderr)

    base = commit("# the project's requirements\n" + first, "a comment")
    added = commit("# the project's requirements\n" + first + line + "\n", f"add {line}")
    _git(clone, "reset", "-q", "--hard", "HEAD", env=env)
    removed = commit("# the project's requirements, reviewed\n" + first, "another comment")
    return CloneStory(base, added, removed)
