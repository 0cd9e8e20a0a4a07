"""`--python` naming a folder that is not there is "no such environment" (issue 34 item 5):
one line, exit 3, whatever the command; a bare interpreter's name is still looked up on PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import HIDDEN, cudatx

NO_ENVIRONMENT = 3  # cudatx/errors.py, docs/commands.md "Exit codes"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (".venv", "no such environment: .venv"),
        (".venv/", "no such environment: .venv/"),
        ("envs/cuda12", "no such environment: envs/cuda12"),
        ("~/no-such-env", "no such environment: ~/no-such-env"),
        ("python3.99", "no Python interpreter named 'python3.99' on PATH"),
        (
            "no-such-env",
            "no such environment: no-such-env (nor a Python interpreter of that name on PATH)",
        ),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ("doctor",),
        ("remove", "x", "--dry-run"),
        ("install", "x"),
        # These scan nothing, and take --python as the others do (cudatx.cli.options.Target).
        ("history",),
        ("history", "show"),
        ("history", "prune", "--keep", "1"),
        ("rollback", "--dry-run"),
        ("rollback", "--yes"),
        ("trace", "--list"),
    ],
)
def test_a_missing_environment_is_one_line(
    tmp_path: Path, value: str, said: str, command: tuple[str, ...]
) -> None:
    # Outside pre-commit: under it, a missing folder means no environment to check against
    # (tests/planning/test_hook_snippet.py).
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = cudatx(*command, "--python", value, cwd=tmp_path, hide=(*HIDDEN, "PRE_COMMIT"), env=env)
    assert done.returncode == NO_ENVIRONMENT, done.stderr
    assert done.stderr == f"cudatx: error: {said}\n"
    assert done.stdout == ""
