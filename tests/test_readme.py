"""The README's quick start, run as printed on the demo environment.

Each line of the block between `<!-- quickstart -->` markers runs in a fresh folder, in
order, with `cudatx` being this checkout's; a line's `# exit N` comment is the exit code it
must have (else 0). A README whose quick start does not work fails here, not for a user.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

_BLOCK = re.compile(r"<!-- quickstart -->\n```sh\n(.*?)```\n<!-- /quickstart -->", re.S)


def quick_start() -> list[str]:
    found = _BLOCK.search((REPO / "README.md").read_text())
    assert found is not None, "README.md has no quick start block"
    return [line for line in found.group(1).splitlines() if line.strip()]


def test_the_quick_start_runs_as_printed(tmp_path: Path) -> None:
    lines = quick_start()
    assert len(lines) <= 6, "a quick start of at most five or six commands"
    for line in lines:
        command, _, comment = line.partition("#")
        expected = re.search(r"\bexit (\d+)", comment)
        argv = shlex.split(command)
        assert argv[0] == "cudatx", line
        done = subprocess.run(
            [sys.executable, "-m", "cudatx", *argv[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        want = int(expected.group(1)) if expected else 0
        assert done.returncode == want, f"{line}\n{done.stdout}\n{done.stderr}"
