"""Real torch environments for the slow tests, built once each and reused.

`pip install torch==VERSION` (pip, not uv: on these machines pip finds the CUDA 13 build of
torch 2.14.1 and its nvidia wheels in the machine's wheel store, offline; older releases, a
CUDA 12 build with the `nvidia-*-cu12` wheels, come from the package index). Where pip
cannot get torch the tests are skipped, saying why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TORCH = "2.14.1"


def torch_env(version: str = TORCH) -> Path:
    """~/.cache/cudatx-tests/torch-VERSION (for 2.14.1: CUDATX_TEST_TORCH_ENV if set)."""
    default = Path.home() / ".cache" / "cudatx-tests" / f"torch-{version}"
    override = os.environ.get("CUDATX_TEST_TORCH_ENV") if version == TORCH else None
    path = Path(override or default)
    done = path / ".cudatx-complete"
    if done.exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    pip = subprocess.run(
        [str(path / "bin" / "python"), "-m", "pip", "install", "-q", f"torch=={version}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if pip.returncode != 0:
        shutil.rmtree(path, ignore_errors=True)
        tail = (pip.stderr or pip.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.skip(f"pip could not install torch=={version}: {tail[0]}")
    done.write_text(f"torch=={version}\n")
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


def torch_with(wheels: list[Path], into: Path, version: str = TORCH) -> Path:
    """A copy of a torch environment with `wheels` installed over it (real uv, --no-deps,
    offline): the last one installed wins the bytes of any path two wheels share."""
    from tests.support import uv_bin

    env = copy_env(torch_env(version), into)
    install = [uv_bin(), "pip", "install", "--python", str(env), "--no-deps", "--offline"]
    done = subprocess.run(
        [*install, *map(str, wheels)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return env


def local_store() -> Path | None:
    """This machine's wheel store, where pip finds torch 2.14.1 and its CUDA 13 wheels
    offline (pip's find-links, `pip config list`), or None where it has none."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    values = [v for k, _, v in (line.partition("=") for line in listed) if k.endswith("find-links")]
    values.append(os.environ.get("PIP_FIND_LINKS", ""))
    for value in values:
        for part in value.strip().strip("'\"").split():
            if Path(part).is_dir():
                return Path(part)
    return None
