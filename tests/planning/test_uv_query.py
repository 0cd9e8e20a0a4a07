"""docs/reliability.md, "Exactly where uv runs the environment's interpreter", held to uv.

cudatx asks the interpreter with `-I -S`; uv asks it with `-I -B` (its own query), so the
environment's `.pth` import lines and `sitecustomize` run when cudatx hands uv the
environment, once per uncached interpreter. The docs say exactly that; this test fails the
day uv (the pinned one) does otherwise, so the docs are corrected with it.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support import make_venv
from tests.support.cli import cudatx
from tests.support.venvs import site_packages
from tests.support.wheels import build_wheel


def test_uv_runs_the_environments_start_up_once_per_uncached_interpreter(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "plain", "1.0", {"plain/__init__.py": b""})
    witness = tmp_path / "witness"
    witness.mkdir()
    venv = make_venv(tmp_path / "venv")
    site = site_packages(venv)
    (site / "start.pth").write_text(
        "import os, tempfile; "
        f"tempfile.NamedTemporaryFile(dir={os.fspath(witness)!r}, prefix='pth-', delete=False)\n"
    )
    (site / "sitecustomize.py").write_text(
        "import tempfile\n"
        f"tempfile.NamedTemporaryFile(dir={os.fspath(witness)!r}, prefix='sc-', delete=False)\n"
    )
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("plain==1.0\n")
    env = {"UV_CACHE_DIR": os.fspath(tmp_path / "uv-cache"), "UV_NO_CONFIG": "1"}
    args = ("check-requirements", requirements, "--python", venv, "--no-cache")
    where = ("--offline", "--find-links", wheels)

    def ran() -> set[str]:
        return {p.name.split("-")[0] for p in witness.iterdir()}

    # cudatx's own reading (no uv): nothing of the environment runs.
    done = cudatx("doctor", "--python", venv, env=env)
    assert ran() == set(), done.stderr
    # The first command that hands the environment to uv: uv's query runs its start-up
    # (uv 0.13.9: twice, for the dry run and for the staging).
    done = cudatx(*args, *where, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ran() == {"pth", "sc"}
    count = len(list(witness.iterdir()))
    # uv keeps its answer for that interpreter: the next command runs nothing more.
    done = cudatx(*args, *where, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list(witness.iterdir())) == count
