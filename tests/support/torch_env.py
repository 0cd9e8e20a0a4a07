"""A real torch 2.14.1 environment for the slow tests, built once and reused.

`pip install torch==2.14.1` (pip, not uv: on these machines pip finds the CUDA build of
torch and its nvidia wheels in the machine's wheel store, offline). Where pip cannot get
torch the tests are skipped, saying why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TORCH = "torch==2.14.1"


def torch_env() -> Path:
    default = Path.home() / ".cache" / "cudatx-tests" / "torch-2.14.1"
    path = Path(os.environ.get("CUDATX_TEST_TORCH_ENV", default))
    done = path / ".cudatx-complete"
    if done.exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    pip = subprocess.run(
        [str(path / "bin" / "python"), "-m", "pip", "install", "-q", TORCH],
        capture_output=True,
        text=True,
        check=False,
    )
    if pip.returncode != 0:
        shutil.rmtree(path, ignore_errors=True)
        tail = (pip.stderr or pip.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.skip(f"pip could not install {TORCH}: {tail[0]}")
    done.write_text(TORCH + "\n")
    return path


def download_wheels(names: list[str], folder: Path, *, deps: bool = False) -> list[Path]:
    """Wheels from the package index, with pip (which knows this machine's indexes): one per
    name (or `name==version`) is returned; with `deps`, what they require lands in `folder`
    too."""
    no_deps = [] if deps else ["--no-deps"]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", *no_deps, "-d", str(folder), *names],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"pip could not download {' '.join(names)}: {done.stderr.strip()[-200:]}")
    wheels = []
    for spec in names:
        name = re.split(r"[=<>!~;\[ ]", spec, maxsplit=1)[0]
        found = sorted(folder.glob(name.replace("-", "_") + "-*.whl"))
        if not found:
            pytest.skip(f"pip downloaded no wheel for {name}")
        wheels.append(found[-1])
    return wheels


def copy_env(pristine: Path, into: Path) -> Path:
    """A copy to change, its files hard-linked to the pristine ones (5 GB that cost no space).

    Safe for what the tests do to it: uv and pip unlink or rename over a file before writing
    it, and cudatx restores by rename (the same fact cudatx/txn/snapshot.py relies on), so no
    write lands in a shared inode. Where the folders are on different filesystems, a copy.
    """
    copy = into / "env"
    if os.stat(pristine).st_dev != os.stat(into).st_dev:
        subprocess.run(["cp", "-a", "--reflink=auto", str(pristine), str(copy)], check=True)
    else:
        subprocess.run(["cp", "-a", "--link", str(pristine), str(copy)], check=True)
    return copy


def torch_with(wheels: list[Path], into: Path) -> Path:
    """A copy of the torch environment with `wheels` installed over it (real uv, --no-deps,
    offline): the last one installed wins the bytes of any path two wheels share."""
    from tests.support import uv_bin

    env = copy_env(torch_env(), into)
    install = [uv_bin(), "pip", "install", "--python", str(env), "--no-deps", "--offline"]
    done = subprocess.run(
        [*install, *map(str, wheels)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return env
