"""The README's pre-commit snippets, as printed, under real pre-commit in a fresh clone with
no .venv: the `repo:`/`rev:` form (pre-commit installs cudatx from this repository with pip,
offline here: tests/support/wheelhouse.py) and the `repo: local` form. Their
`args: [--python, .venv]` names a folder that is not there, which under pre-commit means no
environment: the file is checked by itself, and the line saying so names the folder. A
requirements change that adds the CUDA 13 cuDNN beside the CUDA 12 one that torch requires
is refused; the file without it passes. Outside pre-commit that folder is an error that says
what is missing.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import cudatx
from tests.support.paths import REPO
from tests.support.precommit_story import run_clone_story
from tests.support.wheels import build_wheel

CUDNN = "nvidia/cudnn/lib/libcudnn.so.9"


def readme_snippets() -> dict[str, str]:
    """The YAML blocks of the README's pre-commit section, by form: `remote` and `local`."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("### As a pre-commit hook") :]
    section = section[: section.index("\n## ")]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "the README shows the repo:/rev: form, then repo: local"
    assert "rev:" in blocks[0] and "repo: local" in blocks[1], "the repo:/rev: form first"
    return {"remote": blocks[0], "local": blocks[1]}


def as_tested(snippet: str, style: str, wheels: Path) -> str:
    """The snippet with this repository (at its HEAD) as the repo, and the test's wheels as
    where uv finds them (offline); everything else as printed."""
    if style == "remote":
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        if rev.returncode != 0:
            pytest.skip("the checkout under test is not a git repository")
        snippet = re.sub(r"(?m)^(\s*- repo: )\S+.*$", rf"\g<1>{REPO}", snippet)
        snippet = re.sub(r"(?m)^(\s*rev: )\S+.*$", rf"\g<1>{rev.stdout.strip()}", snippet)
    where = f", --offline, --find-links, {wheels}]"
    tested, count = re.subn(r"(?m)^(\s*args: \[--python, \.venv)\]", rf"\g<1>{where}", snippet)
    assert count == 1, snippet
    return tested


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CUDA 12.8 torch stand-in that requires the CUDA 12 cuDNN, and the CUDA 13 cuDNN,
    which writes the same libcudnn.so.9 with other bytes."""
    out = tmp_path_factory.mktemp("hook-wheels")
    build_wheel(out, "torch", "2.8.0", {"torch/__init__.py": b""}, requires=["nvidia-cudnn-cu12"])
    build_wheel(out, "nvidia-cudnn-cu12", "9.10.2.21", {CUDNN: b"cuDNN for CUDA 12\n"})
    build_wheel(out, "nvidia-cudnn-cu13", "9.13.0.50", {CUDNN: b"cuDNN for CUDA 13\n"})
    return out


@pytest.mark.parametrize("style", ["remote", "local"])
def test_the_readme_snippet_in_a_fresh_clone_without_venv(
    wheels: Path, tmp_path: Path, style: str
) -> None:
    config = as_tested(readme_snippets()[style], style, wheels)
    # The repo:/rev: form runs the cudatx pre-commit installed, whatever is on PATH.
    story = run_clone_story(
        tmp_path,
        "torch==2.8.0\n",
        "nvidia-cudnn-cu13",
        [],
        style,
        config,
        own_cudatx=style == "remote",
    )
    assert story.base.returncode == 0, story.base.output
    added = story.added.output
    assert story.added.returncode != 0, added
    assert f"nvidia-cudnn-cu13 and nvidia-cudnn-cu12 both install {CUDNN}" in added or (
        f"nvidia-cudnn-cu12 and nvidia-cudnn-cu13 both install {CUDNN}" in added
    ), added
    assert "nvidia-cudnn-cu13 9.13.0.50 <- line 3 (this change): nvidia-cudnn-cu13" in added
    # One line says which check ran, and why: the hook's .venv is not there.
    said = [ln for ln in added.splitlines() if "no such environment: .venv" in ln]
    assert len(said) == 1 and "checking the wheels" in said[0], added
    assert "on PATH" not in added, added
    assert story.removed.returncode == 0, story.removed.output


def test_a_missing_venv_outside_precommit_is_no_such_environment(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.8.0\n")
    done = cudatx("check-requirements", "requirements.txt", "--python", ".venv", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("cudatx: error: no such environment: .venv"), done.stderr
    assert done.stderr.count("\n") == 1 and "no Python interpreter named" not in done.stderr


def test_cudatx_own_environment_is_not_the_target(wheels: Path, tmp_path: Path) -> None:
    """cudatx installed into the environment that is active (VIRTUAL_ENV is the one it runs
    from, as after `pip install .` there) and no other: the file is checked by itself, and
    the line saying so names that environment and the --python that would check it."""
    import sys

    (tmp_path / "requirements.txt").write_text("torch==2.8.0\nnvidia-cudnn-cu13\n")
    links = ("--offline", "--find-links", wheels)
    env = {"VIRTUAL_ENV": sys.prefix, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    done = cudatx("check-requirements", "requirements.txt", *links, cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"both install {CUDNN}" in done.stdout, done.stdout
    (said,) = [ln for ln in done.stderr.splitlines() if "checking the wheels" in ln]
    assert said.startswith("cudatx: no environment to check ("), said
    assert f"--python {sys.prefix} checks it" in said, said
    assert "Using Python" not in done.stderr, done.stderr  # no plan against it
