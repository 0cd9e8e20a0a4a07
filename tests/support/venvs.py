"""Real virtual environments made and changed by real uv, offline."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "UvError",
    "make_venv",
    "site_packages",
    "uv_bin",
    "uv_env",
    "uv_install",
    "uv_run",
    "uv_uninstall",
    "venv_python",
]


class UvError(RuntimeError):
    """uv exited non-zero; carries the command and uv's stderr."""

    def __init__(self, cmd: Sequence[str], returncode: int, stderr: str) -> None:
        self.cmd = tuple(cmd)
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"uv failed (rc={returncode}): {' '.join(cmd)}\n{stderr.rstrip()}")


@functools.cache
def uv_bin() -> str:
    """The uv binary of the ``uv`` PyPI package installed for this interpreter."""
    from uv import find_uv_bin

    return os.fspath(find_uv_bin())


@functools.cache
def _session_cache_dir() -> str:
    """A uv cache private to this test process, removed at exit.

    Private so that fixture wheels that reuse a name and version across tests can never be
    served from a cache entry of another test, and so tests never touch the user's cache.
    """
    path = tempfile.mkdtemp(prefix="cudatx-uv-cache-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.pop("VIRTUAL_ENV", None)
    env.pop("CONDA_PREFIX", None)
    env["UV_CACHE_DIR"] = _session_cache_dir()
    env["UV_NO_CONFIG"] = "1"
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["UV_NO_PROGRESS"] = "1"
    return env


def uv_env() -> dict[str, str]:
    """The environment uv runs in here: offline-friendly, no user config, the private cache."""
    return _uv_env()


def uv_run(args: Sequence[str], *, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run ``uv <args>`` offline in a clean environment; raise :class:`UvError` on failure."""
    cmd = [uv_bin(), *args]
    proc = subprocess.run(
        cmd, env=_uv_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise UvError(cmd, proc.returncode, proc.stderr)
    return proc


def venv_python(venv: Path) -> Path:
    return Path(venv) / "bin" / "python"


def make_venv(path: Path, python: str = sys.executable) -> Path:
    """``uv venv --offline --python <python> <path>``; returns the venv path."""
    path = Path(path).absolute()
    uv_run(["venv", "--offline", "--no-config", "--python", python, os.fspath(path)])
    return path


def site_packages(venv: Path) -> Path:
    """The venv's purelib/platlib folder (``lib/pythonX.Y/site-packages``)."""
    found = sorted(Path(venv).glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one site-packages in {venv}, found {found}")
    return found[0]


def uv_install(
    venv: Path,
    wheels: Sequence[Path],
    *,
    no_deps: bool = True,
    reinstall: bool = False,
    link_mode: str = "copy",
) -> None:
    """``uv pip install --offline --no-index --find-links <their folders> <wheels>``.

    ``link_mode="copy"`` by default: uv's default hardlinks files from its cache, and two
    venvs holding the same inode would look like one object to the loader.
    """
    if not wheels:
        raise ValueError("no wheels to install")
    dirs = list(dict.fromkeys(os.fspath(Path(w).absolute().parent) for w in wheels))
    args = ["pip", "install", "--offline", "--no-config", "--no-index"]
    args += ["--python", os.fspath(venv_python(venv)), "--link-mode", link_mode]
    for d in dirs:
        args += ["--find-links", d]
    if no_deps:
        args.append("--no-deps")
    if reinstall:
        args.append("--reinstall")
    args += [os.fspath(Path(w).absolute()) for w in wheels]
    uv_run(args)


def uv_uninstall(venv: Path, names: Sequence[str]) -> None:
    """``uv pip uninstall --python <venv> <names>`` (removes what each RECORD lists)."""
    if not names:
        raise ValueError("no distributions to uninstall")
    uv_run(
        [
            "pip",
            "uninstall",
            "--offline",
            "--no-config",
            "--python",
            os.fspath(venv_python(venv)),
            *names,
        ]
    )
