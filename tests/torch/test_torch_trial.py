"""The trial on the real torch 2.14.1 environment (CUDA 13 build): the judge is the real
`import torch` with its real preloads, in an overlay of the environment (issue 25)."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.cli import cudatx
from tests.support.torch_env import torch_env

pytestmark = pytest.mark.slow

LOST = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"


def test_a_cudnn_removal_trial_fails_import_torch_and_agrees_with_the_model() -> None:
    env = torch_env()
    start = time.monotonic()
    done = cudatx("remove", "nvidia-cudnn-cu13", "--python", env, "--dry-run", "--trial", "--json")
    seconds = time.monotonic() - start
    assert done.returncode == 1, done.stderr
    trial = json.loads(done.stdout)["trial"]
    rows = {r["check"]: r for r in trial["roots"]}
    assert (rows["import torch"]["model"], rows["import torch"]["trial"]) == ("breaks", "breaks")
    assert rows["import torch"]["error"] == LOST
    # functorch imports torch as it is imported: the model carries torch's break to it
    assert rows["import functorch"]["model"] == "breaks"
    assert trial["disagreements"] == []
    assert seconds < 60, f"the removal trial took {seconds:.1f} s"


def test_doctor_trial_imports_everything_in_the_torch_environment() -> None:
    env = torch_env()
    start = time.monotonic()
    done = cudatx("doctor", "--python", env, "--trial", "--json")
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stdout + done.stderr
    trial = json.loads(done.stdout)["trial"]
    assert trial["failing"] == [] and trial["checks"] >= 15
    assert seconds < 45, f"the doctor trial took {seconds:.1f} s"
