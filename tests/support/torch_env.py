"""Real torch environments for the slow tests, built once each and reused.

`pip install torch==VERSION` (pip, not uv: on these machines pip finds the CUDA 13 build of
torch 2.14.1 and its nvidia wheels in the machine's wheel store, offline; older releases, a
CUDA 12 build with the `nvidia-*-cu12` wheels, come from the package index). Where pip
cannot get torch the tests are skipped, saying why.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name, parse_wheel_filename

TORCH = "2.14.1"


def built_once(path: Path, build: Callable[[Path], str]) -> None:
    """Make sure the folder `path` is built: `build(path)` fills it and returns what to
    write in its completion mark, `path/.cudatx-complete`; a folder without the mark is
    half-built and is removed first.

    Under an exclusive lock (`.NAME.lock` beside it): several pytest runs share these
    folders, and two that build one at once remove each other's files while pip writes
    them (a torch environment came out with nvidia-cudnn-cu13 hollow so). The second waits,
    then finds the mark."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the run dies
        done = path / ".cudatx-complete"
        if done.exists():
            return
        shutil.rmtree(path, ignore_errors=True)
        mark = build(path)
        done.write_text(mark)


def torch_env(version: str = TORCH) -> Path:
    """~/.cache/cudatx-tests/torch-VERSION (for 2.14.1: CUDATX_TEST_TORCH_ENV if set)."""
    default = Path.home() / ".cache" / "cudatx-tests" / f"torch-{version}"
    override = os.environ.get("CUDATX_TEST_TORCH_ENV") if version == TORCH else None
    path = Path(override or default)

    _venv_with(path, (f"torch=={version}",))
    return path


def _venv_with(path: Path, specs: Sequence[str]) -> None:
    """A fresh venv at `path` with `specs` installed by pip; built once, then reused."""

    def build(path: Path) -> str:
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        pip_install_or_skip(path, specs, built=path)
        return "\n".join(specs) + "\n"

    built_once(path, build)


def pip_install_or_skip(env: Path, specs: Sequence[str], *, built: Path) -> None:
    """`pip install -q SPECS` into the environment at `env`; where pip fails, the folder
    `built` (the half-made environment) is removed and the test skipped with pip's last line."""
    pip = subprocess.run(
        [str(env / "bin" / "python"), "-m", "pip", "install", "-q", *specs],
        capture_output=True,
        text=True,
        check=False,
    )
    if pip.returncode != 0:
        shutil.rmtree(built, ignore_errors=True)
        tail = (pip.stderr or pip.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.skip(f"pip could not install {' '.join(specs)}: {tail[0]}")


def download_wheels(names: list[str], folder: Path, *, deps: bool = False) -> list[Path]:
    """Wheels from the package index, with pip (which knows this machine's indexes): one per
    name (or `name==version`) is returned; with `deps`, what they require is fetched too.

    Each wheel is downloaded once into ~/.cache/cudatx-tests/wheels and kept there, and the
    paths returned are that store's: uv keys a wheel installed from a file by its path, so
    the same file in a fresh folder per test was a new unpacked copy in uv's cache each
    time (the CUDA 12 cuDNN eighteen times over, 20 GB, in one CI run). `folder` gets hard
    links to every wheel of this call, for a test that hands it to uv as --find-links."""
    store = Path.home() / ".cache" / "cudatx-tests" / "wheels"
    store.mkdir(parents=True, exist_ok=True)
    no_deps = [] if deps else ["--no-deps"]
    with open(store.parent / ".wheels.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs downloading one file would tear it
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", *no_deps, "-d", str(store), *names],
            capture_output=True,
            text=True,
            check=False,
            cwd=store,
        )
    if done.returncode != 0:
        pytest.skip(f"pip could not download {' '.join(names)}: {done.stderr.strip()[-200:]}")
    # pip names each file it saved, or found already there: "Saved ./x.whl", "File was
    # already downloaded /path/x.whl".
    said = re.findall(r"(?:Saved|File was already downloaded) (\S+\.whl)", done.stdout)
    got = [store / Path(path).name for path in said]
    folder.mkdir(parents=True, exist_ok=True)
    for wheel in got:
        linked = folder / wheel.name
        if not linked.exists():
            try:
                os.link(wheel, linked)
            except OSError:  # another filesystem
                shutil.copy2(wheel, linked)
    wheels = []
    for spec in names:
        name = canonicalize_name(re.split(r"[=<>!~;\[ @]", spec, maxsplit=1)[0])
        found = [w for w in got if parse_wheel_filename(w.name)[0] == name]
        if not found:
            pytest.skip(f"pip downloaded no wheel for {name}: {done.stdout.strip()[-200:]}")
        wheels.append(found[0])
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


FRAMEWORKS = (
    "jax-cuda13-plugin[with-cuda]==0.10.2",
    "jax-cuda13-pjrt==0.10.2",
    "onnxruntime-gpu[cuda,cudnn]==1.31.1",
    "cupy-cuda13x==14.2.0",
)


def frameworks_env() -> Path:
    """~/.cache/cudatx-tests/frameworks-15: a copy of the torch 2.14.1 environment with the
    real JAX CUDA 13 plugin, onnxruntime-gpu and cupy-cuda13x installed by pip from the
    package index (their own nvidia wheels resolved beside torch's); built once, then reused.
    Where pip cannot get them the tests are skipped, saying why."""
    path = Path.home() / ".cache" / "cudatx-tests" / "frameworks-15"

    def build(path: Path) -> str:
        pristine = torch_env()
        path.mkdir(parents=True)
        env = copy_env(pristine, path)
        pip_install_or_skip(env, FRAMEWORKS, built=path)
        return "\n".join(FRAMEWORKS) + "\n"

    built_once(path, build)
    return path / "env"


# The torch 2.9.1 trio: a CUDA 12.8 build (the package index's default for 2.9.1), with the
# `nvidia-*-cu12` wheels; torchaudio loads its own libraries by path before its extensions.
TRIO = ("torch==2.9.1", "torchvision==0.24.1", "torchaudio==2.9.1")

# Popular binary wheels beside the trio: each ships extension modules, several load their
# own bundled libraries by path (llvmlite, bitsandbytes) or carry optional layers whose
# library nothing installs (numba's TBB threading layer).
POPULAR = (
    *TRIO,
    "numba",
    "llvmlite",
    "scipy",
    "scikit-learn",
    "opencv-python",
    "pyarrow",
    "pandas",
    "lxml",
    "grpcio",
    "h5py",
    "bitsandbytes",
    "onnxruntime",
)

# The CUDA 12 builds of JAX, onnxruntime-gpu and CuPy, beside the trio: named with the trio
# in one pip command, so that their nvidia wheels are resolved within torch's pins (pip does
# not keep an installed distribution's requirements met unless it is part of the request).
FRAMEWORKS_CU12 = (
    *TRIO,
    "jax[cuda12]==0.10.2",
    "onnxruntime-gpu==1.26.0",
    "cupy-cuda12x[ctk]==14.2.0",
)


def _cache_env(name: str, base: Callable[[], Path], specs: Sequence[str]) -> Path:
    """~/.cache/cudatx-tests/NAME/env: a copy of the environment `base()` gives (hard links)
    with `specs` installed over it by pip; built once, then reused."""
    path = Path.home() / ".cache" / "cudatx-tests" / name

    def build(path: Path) -> str:
        pristine = base()
        path.mkdir(parents=True)
        env = copy_env(pristine, path)
        pip_install_or_skip(env, specs, built=path)
        return "\n".join(specs) + "\n"

    built_once(path, build)
    return path / "env"


def trio_env() -> Path:
    """torch 2.9.1 (CUDA 12.8), torchvision, torchaudio: the torch 2.9.1 environment, hard
    linked, with the other two added, so that its 7 GB of torch are on disk once."""
    return _cache_env("trio-2.9.1-2", lambda: torch_env("2.9.1"), TRIO)


def popular_env() -> Path:
    """The trio with popular binary wheels (POPULAR)."""
    return _cache_env("popular-1", trio_env, POPULAR)


def frameworks_cu12_env() -> Path:
    """The trio with the CUDA 12 builds of JAX, onnxruntime-gpu and CuPy (FRAMEWORKS_CU12)."""
    return _cache_env("frameworks-cu12-1", trio_env, FRAMEWORKS_CU12)
