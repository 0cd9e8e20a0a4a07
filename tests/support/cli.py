"""Running cudatx as a user does: `python -m cudatx` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Variables that would pick another environment or change the answer behind a test's back.
_HIDDEN = {"VIRTUAL_ENV", "CONDA_PREFIX", "CUDATX_DEBUG", "LD_LIBRARY_PATH"}


def cudatx(*args: str | os.PathLike[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _HIDDEN}
    return subprocess.run(
        [sys.executable, "-m", "cudatx", *(os.fspath(a) for a in args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
