"""check-requirements without an environment, on the real wheels of the package index: the
seed's requirements change (torch 2.9.1, a CUDA 12.8 build, and the CUDA 13 cuDNN) through
real pre-commit in a fresh clone; opencv-python beside opencv-python-headless; numpy and six.

uv resolves against its configured index (PyPI here); the suite's uv cache starts empty, so
the RECORDs are read by range requests, and the JSON says how many bytes that took.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import HIDDEN, cudatx
from tests.support.precommit_story import run_clone_story

pytestmark = pytest.mark.slow

FINDINGS = 1


def _check(project: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    (project / "requirements.txt").write_text(text)
    done = cudatx("check-requirements", "requirements.txt", *args, cwd=project, hide=HIDDEN)
    if done.returncode not in (0, FINDINGS):
        pytest.skip(f"uv could not resolve against the index: {done.stderr.strip()[-300:]}")
    return done


def test_the_seeds_change_is_refused_in_a_fresh_clone(tmp_path: Path) -> None:
    story = run_clone_story(tmp_path, "torch==2.9.1\n", "nvidia-cudnn-cu13", [], "local")
    if story.base.returncode != 0 and "uv" in story.base.output:
        pytest.skip(f"the index could not be reached: {story.base.output[-300:]}")
    assert story.base.returncode == 0, story.base.output
    assert story.added.returncode != 0, story.added.output
    said = story.added.output
    assert re.search(
        r"nvidia-cudnn-cu12 and nvidia-cudnn-cu13 both install nvidia/cudnn/lib/libcudnn\.so\.9 "
        r"\(and \d+ more\) with different bytes: whichever uv installs last wins, and removing "
        r"either later breaks the other",
        said,
    ), said
    assert re.search(r"nvidia-cudnn-cu13 \S+ <- line 3 \(this change\): nvidia-cudnn-cu13", said)
    assert re.search(
        r"nvidia-cudnn-cu12 \S+ <- line 2 \(unchanged since the last commit\): torch==2\.9\.1",
        said,
    )
    assert "fix: drop line 3 (nvidia-cudnn-cu13)" in said
    assert (
        "ask for nvidia-cudnn-cu12 instead of nvidia-cudnn-cu13: the CUDA 12 build that line 2 "
        "(torch==2.9.1) requires" in said
    )
    assert story.removed.returncode == 0, story.removed.output


def test_the_seeds_records_cost_a_few_megabytes(tmp_path: Path) -> None:
    done = _check(tmp_path, "torch==2.9.1\nnvidia-cudnn-cu13\n", "--json", "--no-cache")
    assert done.returncode == FINDINGS, done.stderr
    (check,) = json.loads(done.stdout)["files"]
    wheels = check["wheels"]
    assert {w["name"] for w in wheels} >= {"torch", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"}
    moved = sum(w["transferred"] for w in wheels)
    size = sum(w["size"] or 0 for w in wheels)
    assert size > 2_000_000_000  # torch and the CUDA wheels: gigabytes
    ranged = [w for w in wheels if w["source"] == "range requests"]
    if ranged:  # a cold cache: the index serves ranges, so only directories and RECORDs move
        assert moved < 16_000_000, moved
    (conflict,) = check["conflicts"]
    assert (conflict["first"]["name"], conflict["second"]["name"]) == (
        "nvidia-cudnn-cu12",
        "nvidia-cudnn-cu13",
    )
    assert "nvidia/__init__.py" not in conflict["paths"]  # the same empty file in every wheel


def test_opencv_twice_is_refused_and_numpy_with_six_passes(tmp_path: Path) -> None:
    both = _check(tmp_path, "opencv-python\nopencv-python-headless\n")
    assert both.returncode == FINDINGS, both.stdout + both.stderr
    assert re.search(
        r"opencv-python and opencv-python-headless both install cv2/\S+ .*with different bytes",
        both.stdout,
    ), both.stdout
    clean = _check(tmp_path, "numpy\nsix\n")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout == ""
