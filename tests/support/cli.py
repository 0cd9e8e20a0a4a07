"""Running cudatx as a user does: `python -m cudatx` in a subprocess.

Every test that runs the command line goes through :func:`cudatx` (or :func:`start_cudatx`
for one left running in the background): the interpreter that runs the tests (so this
checkout's cudatx, never whatever ``python3`` PATH finds), in an environment that is this
process's less the variables in `hide` (by default :data:`HIDDEN`), with `env` set over it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Collection, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO, Any

# Variables that would pick another environment or change the answer behind a test's back.
HIDDEN = frozenset({"VIRTUAL_ENV", "CONDA_PREFIX", "CUDATX_DEBUG", "LD_LIBRARY_PATH"})

Arg = str | os.PathLike[str]
Stream = int | IO[Any] | None  # what subprocess takes for stdin, stdout or stderr


def argv(*args: Arg) -> list[str]:
    """``python -m cudatx ARGS`` with the interpreter running the tests."""
    return [sys.executable, "-m", "cudatx", *(os.fspath(a) for a in args)]


def environ(hide: Collection[str] = HIDDEN, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment less `hide` (names, or patterns such as ``UV_*``), then
    `env` set over it."""
    kept = {k: v for k, v in os.environ.items() if not any(fnmatchcase(k, p) for p in hide)}
    return kept | dict(env or {})


def cudatx(
    *args: Arg,
    cwd: Path | None = None,
    hide: Collection[str] = HIDDEN,
    env: Mapping[str, str] | None = None,
    stdin: Stream = None,
    stderr: Stream = subprocess.PIPE,
    text: bool = True,
    timeout: float | None = 120,
) -> subprocess.CompletedProcess[Any]:
    """Run ``python -m cudatx ARGS`` to the end: stdout (and, unless `stderr` says otherwise,
    stderr) captured, as text unless `text` is false; never raises for its exit status.
    Without `cwd` it runs in this process's working folder; `timeout=None` waits for ever."""
    how = _how(cwd, hide, env, stdin, stderr, text)
    return subprocess.run(argv(*args), **how, timeout=timeout, check=False)


def start_cudatx(
    *args: Arg,
    cwd: Path | None = None,
    hide: Collection[str] = HIDDEN,
    env: Mapping[str, str] | None = None,
    stdin: Stream = None,
    text: bool = True,
) -> subprocess.Popen[Any]:
    """Start ``python -m cudatx ARGS`` and return at once; stdout and stderr are pipes."""
    return subprocess.Popen(argv(*args), **_how(cwd, hide, env, stdin, subprocess.PIPE, text))


def _how(
    cwd: Path | None,
    hide: Collection[str],
    env: Mapping[str, str] | None,
    stdin: Stream,
    stderr: Stream,
    text: bool,
) -> dict[str, Any]:
    """What both give subprocess: the folder, the environment, the streams (stdout a pipe)."""
    return {
        "cwd": cwd,
        "env": environ(hide, env),
        "stdin": stdin,
        "stdout": subprocess.PIPE,
        "stderr": stderr,
        "text": text,
    }
