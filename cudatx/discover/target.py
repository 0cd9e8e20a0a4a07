"""Find the target environment the way uv does, and ask its interpreter about itself once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cudatx.errors import EnvironmentNotFound, NoVirtualEnvironment

if TYPE_CHECKING:
    from cudatx.models import PythonTarget

# Runs inside the target interpreter (any Python >= 3.8), so it may use nothing but the
# standard library. The marker environment is computed as packaging.markers does (PEP 508).
_QUERY = r"""
import importlib.machinery, json, os, platform, site, sys, sysconfig
def _impl_version():
    v = sys.implementation.version
    s = "{0.major}.{0.minor}.{0.micro}".format(v)
    if v.releaselevel != "final":
        s += v.releaselevel[0] + str(v.serial)
    return s
sites = []
for key in ("purelib", "platlib"):
    p = sysconfig.get_paths()[key]
    if p not in sites:
        sites.append(p)
try:
    for p in site.getsitepackages():
        if p not in sites:
            sites.append(p)
except AttributeError:
    pass
try:
    exe = os.readlink("/proc/self/exe")
except OSError:
    exe = os.path.realpath(sys.executable)
print("@@cudatx@@" + json.dumps({
    "python": sys.executable,
    "executable": exe,
    "version": platform.python_version(),
    "prefix": sys.prefix,
    "base_prefix": getattr(sys, "base_prefix", sys.prefix),
    "sys_path": [p for p in sys.path if p],
    "site_packages": sites,
    "stdlib": sorted({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}),
    "extension_suffixes": importlib.machinery.EXTENSION_SUFFIXES,
    "markers": {
        "implementation_name": sys.implementation.name,
        "implementation_version": _impl_version(),
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    },
}))
"""

# What found the interpreter when nothing named one: the interpreter cudatx runs on.
FALLBACK = "cudatx's interpreter"

_MARK = "@@cudatx@@"
_QUERY_TIMEOUT_S = 60


def _interpreter_in(folder: Path) -> Path | None:
    for name in ("bin/python", "bin/python3"):
        candidate = folder / name
        if candidate.exists():
            return candidate
    return None


def _from_option(value: str, environ: Mapping[str, str]) -> Path:
    path = Path(value).expanduser()
    if not path.exists() and os.sep not in value:
        found = shutil.which(value, path=environ.get("PATH", os.defpath))
        if found is None:
            raise EnvironmentNotFound(f"no Python interpreter named {value!r} on PATH")
        return Path(found)
    if not path.exists():
        raise EnvironmentNotFound(f"--python {value}: no such file or directory")
    path = path.absolute()  # subprocess would look a bare "python" up on PATH
    if path.is_dir():
        interpreter = _interpreter_in(path)
        if interpreter is None:
            raise EnvironmentNotFound(f"--python {value}: folder holds no bin/python")
        return interpreter
    return path


def locate_interpreter(
    python: str | None, environ: Mapping[str, str], cwd: Path
) -> tuple[Path, str]:
    """The interpreter to inspect and what chose it, in uv's order of precedence."""
    if python:
        return _from_option(python, environ), "--python"
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        value = environ.get(variable)
        if value:
            interpreter = _interpreter_in(Path(value))
            if interpreter is None:
                raise EnvironmentNotFound(f"{variable}={value} holds no bin/python")
            return interpreter, variable
    for folder in (cwd, *cwd.parents):
        venv = folder / ".venv"
        found = _interpreter_in(venv) if venv.is_dir() else None
        if found is not None:
            return found, ".venv"
    return Path(sys.executable), FALLBACK


def require_environment(
    python: str | None, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> None:
    """Refuse a change when nothing names an environment (no --python, VIRTUAL_ENV,
    CONDA_PREFIX or .venv): changing cudatx's own interpreter is never what was meant. uv
    refuses the same way ("No virtual environment found", `uv pip install` without --system).
    """
    env = os.environ if environ is None else environ
    _, found_by = locate_interpreter(python, env, cwd or Path.cwd())
    if found_by == FALLBACK:
        raise NoVirtualEnvironment(
            "No virtual environment found; pass --python PATH (an interpreter or an "
            "environment folder), or activate one (VIRTUAL_ENV, CONDA_PREFIX, a .venv here or "
            "above)"
        )


class Query:
    """The interpreter, asked about itself in the background (isolated: no PYTHON* variables,
    no user site, as uv does): a command starts it first and collects the answer once its own
    imports are done, so the two overlap."""

    def __init__(self, interpreter: Path, found_by: str) -> None:
        self.interpreter = interpreter
        self.found_by = found_by
        self._started: subprocess.Popen[str] | None = None
        self._error: str | None = None
        try:
            self._started = subprocess.Popen(
                [str(interpreter), "-I", "-c", _QUERY],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        except OSError as exc:
            self._error = (
                f"{interpreter} cannot be run ({exc.strerror}); is it a Python interpreter?"
            )

    def result(self) -> PythonTarget:
        from cudatx.models import PythonTarget  # pydantic: after the query has started

        interpreter = self.interpreter
        if self._started is None:
            raise EnvironmentNotFound(self._error or f"{interpreter} cannot be run")
        try:
            stdout, _ = self._started.communicate(timeout=_QUERY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._started.kill()
            self._started.communicate()
            raise EnvironmentNotFound(
                f"{interpreter} did not answer within {_QUERY_TIMEOUT_S} s; is it a Python?"
            ) from None
        line = next((ln for ln in stdout.splitlines() if ln.startswith(_MARK)), None)
        if self._started.returncode != 0 or line is None:
            raise EnvironmentNotFound(f"{interpreter} is not a working Python interpreter")
        try:
            data = json.loads(line[len(_MARK) :])
            return PythonTarget(found_by=self.found_by, **data)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise EnvironmentNotFound(
                f"{interpreter} gave an answer cudatx cannot use: {exc}"
            ) from None


def start_query(
    python: str | None, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Query:
    """Find the interpreter as uv does and start asking it (see Query)."""
    env = os.environ if environ is None else environ
    return Query(*locate_interpreter(python, env, cwd or Path.cwd()))


def find_target(
    python: str | None, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> PythonTarget:
    return start_query(python, environ, cwd).result()


def hook_target(
    python: str | None, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> str | None:
    """The environment `check-requirements` checks, or None when there is none to check.

    pre-commit runs hooks with VIRTUAL_ENV pointing at its own environment (for Python
    hooks), so under pre-commit (PRE_COMMIT set) VIRTUAL_ENV is never trusted: --python
    from the hook's args, else the project's .venv. Elsewhere, uv's discovery, but never
    cudatx's own interpreter: a requirements file is not about the tool's environment.
    """
    env = os.environ if environ is None else environ
    here = cwd or Path.cwd()
    if python:
        return python
    if env.get("PRE_COMMIT"):
        venv = here / ".venv"
        return str(venv) if venv.is_dir() else None
    try:
        target = find_target(None, env, here)
    except EnvironmentNotFound:
        return None
    return None if target.found_by == FALLBACK else target.prefix
