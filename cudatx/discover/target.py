"""Find the target environment the way uv does, and ask its interpreter about itself once."""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudatx.errors import (
    EnvironmentNotFound,
    ExternallyManaged,
    NoVirtualEnvironment,
    one_line,
)
from cudatx.reading import MAX_ANSWER, MIB, open_regular, read_bounded
from cudatx.trust import interpreter_paths, other_writers, owner_to_run_as

if TYPE_CHECKING:
    from cudatx.models import Interpreter, PythonTarget

# Runs inside the target interpreter (any Python >= 3.8), started with -I -S: isolated (no
# PYTHON* variables, no user site) and without the site module's main(), so no .pth line and
# no sitecustomize of the target runs (-I alone still runs both: it does not imply -S). It
# answers only what the interpreter knows of itself: sys.path as it starts (before site), and
# the site folders site.main() would add, found as Lib/site.py finds them: venv() finds
# pyvenv.cfg next to the executable or one folder up and makes its folder the prefix (before
# 3.11 only site does this); getsitepackages() of those prefixes. What the `.pth` files in
# those folders add is read by cudatx itself (site_path), at every scan: an apply can add or
# remove one, and the post-apply rescan must see that without asking the interpreter again.
# The answer goes to the file descriptor named in argv[1], not to stdout. Standard library
# only; the marker environment is computed as packaging.markers does (PEP 508).
_QUERY = r"""
import importlib.machinery, json, os, platform, site, sys
def _impl_version():
    v = sys.implementation.version
    s = "{0.major}.{0.minor}.{0.micro}".format(v)
    if v.releaselevel != "final":
        s += v.releaselevel[0] + str(v.serial)
    return s
exe_dir = os.path.dirname(os.path.abspath(sys.executable))
venv = os.path.dirname(exe_dir)
conf = [c for c in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(venv, "pyvenv.cfg"))
        if os.path.isfile(c)]
prefixes = [sys.prefix, sys.exec_prefix]
if conf:
    system_site = "true"
    with open(conf[0], encoding="utf-8", errors="replace") as f:
        for line in f:
            key, eq, value = line.partition("=")
            if eq and key.strip().lower() == "include-system-site-packages":
                system_site = value.strip().lower()
    base = (sys.base_prefix, sys.base_exec_prefix)
    sys.prefix = sys.exec_prefix = venv
    prefixes = [venv, *base] if system_site == "true" else [venv]
import sysconfig
sites = []
for key in ("purelib", "platlib"):
    p = sysconfig.get_paths(vars={"base": sys.prefix, "platbase": sys.exec_prefix})[key]
    if p not in sites:
        sites.append(p)
try:
    for p in site.getsitepackages(prefixes):
        if p not in sites:
            sites.append(p)
except AttributeError:
    pass
try:
    exe = os.readlink("/proc/self/exe")
except OSError:
    exe = os.path.realpath(sys.executable)
with os.fdopen(int(sys.argv[1]), "w", encoding="utf-8", errors="surrogateescape") as out:
    out.write(json.dumps({
        "python": sys.executable,
        "executable": exe,
        "version": platform.python_version(),
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "path": [p for p in sys.path if p],
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

_PTH_BYTES = 1 << 20  # read of each .pth file, as the query read them before


def _head(path: str) -> bytes:
    """The first _PTH_BYTES bytes of the regular file at `path`, opened without blocking
    (cudatx.reading.open_regular): a .pth is read in cudatx's own process now, and a FIFO
    named x.pth must not hang it."""
    fd, _ = open_regular(path)
    try:
        chunks: list[bytes] = []
        total = 0
        while total < _PTH_BYTES and (chunk := os.read(fd, _PTH_BYTES - total)):
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def site_path(interpreter: Interpreter) -> PythonTarget:
    """The target as its site module would start it on the files as they are now: what
    site.main() adds to sys.path, computed by reading as Lib/site.py's addsitedir() and
    addpackage() do. For each site folder that exists: append it and, for each `*.pth` in it
    by sorted name (not starting with "."), each line that is not a comment or an `import`
    line, as a folder joined to the site folder, if it exists and is not on the path yet.
    `import` lines are reported (`name.pth: line`), never run.

    Read here, in cudatx, not by the interpreter's query: an apply can add or remove a .pth
    file, and the rescan after it sees that without running the interpreter again."""
    from cudatx.models import PythonTarget

    path = list(interpreter.path)
    known = {os.path.normcase(os.path.abspath(p)) for p in path}
    imports: list[str] = []

    def add(folder: str) -> None:
        key = os.path.normcase(os.path.abspath(folder))
        if key not in known and os.path.exists(folder):
            known.add(key)
            path.append(folder)

    for folder in interpreter.site_packages:
        if not os.path.isdir(folder):
            continue
        add(folder)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not name.endswith(".pth") or name.startswith("."):
                continue
            try:
                text = _head(os.path.join(folder, name)).decode("utf-8-sig", "replace")
            except OSError:  # a FIFO, a device, a dangling link: site.py would stall or fail
                continue
            for line in text.splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                if line.startswith(("import ", "import\t")):
                    imports.append(name + ": " + line.strip()[:200])
                    continue
                add(os.path.join(folder, line.rstrip()))
    return PythonTarget(
        python=interpreter.python,
        executable=interpreter.executable,
        version=interpreter.version,
        prefix=interpreter.prefix,
        base_prefix=interpreter.base_prefix,
        sys_path=tuple(path),
        site_packages=interpreter.site_packages,
        stdlib=interpreter.stdlib,
        extension_suffixes=interpreter.extension_suffixes,
        markers=interpreter.markers,
        pth_imports=tuple(imports),
        found_by=interpreter.found_by,
    )


# -- Externally managed (PEP 668) ----------------------------------------------------------
#
# A distributor marks the Python it manages with an `EXTERNALLY-MANAGED` file in its standard
# library folder (Debian's /usr/lib/python3.X): installers refuse to change what that Python
# imports, and say the marker's own message. cudatx changes an environment only through uv,
# so it refuses where uv would, and as uv decides it (crates/uv-python, interpreter.rs
# `is_externally_managed`): never for a virtual environment (sys.prefix != sys.base_prefix,
# PEP 668: "a virtual environment is never externally managed"); otherwise the marker's
# `[externally-managed]` section's `Error` key, read as configparser reads it (pip reads it so,
# src/pip/_internal/exceptions.py ExternallyManagedEnvironment); a marker that cannot be read
# as such, or holds no message, still marks the Python as managed, with a message of
# cudatx's own. `--break-system-packages` (uv's flag, or UV_BREAK_SYSTEM_PACKAGES, as uv reads
# it) lets the change through, where uv lets it through.

MARKER = "EXTERNALLY-MANAGED"
_MAX_MARKER = MIB  # Debian's is 700 bytes: a marker is a message, not a document


def _marker_message(path: str) -> str:
    """The `Error` of the marker at `path`, as one line; a message of cudatx's own where the
    marker has none (uv and pip still refuse then)."""
    import configparser

    try:
        text = read_bounded(path, _MAX_MARKER).decode("utf-8")
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text, source=path)
        message = parser.get("externally-managed", "Error", fallback="")
    except (OSError, UnicodeDecodeError, configparser.Error):
        message = ""
    message = " ".join(message.split())  # its lines and paragraphs, as one line
    return message or "its distributor manages what it imports"


def externally_managed(target: PythonTarget) -> tuple[str, str] | None:
    """(the marker's path, its message as one line) where the target is an externally
    managed Python, as uv decides it (see MARKER); None otherwise."""
    if os.path.realpath(target.prefix) != os.path.realpath(target.base_prefix):
        return None  # a virtual environment: never externally managed
    for folder in target.stdlib:
        path = os.path.join(folder, MARKER)
        if os.path.lexists(path):
            return path, _marker_message(path)
    return None


# clap's BoolishValueParser, which uv reads UV_BREAK_SYSTEM_PACKAGES with: anything else is an
# error of uv's own ("value was not a boolean"), so it breaks nothing.
_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})


def breaks_system_packages(environ: Mapping[str, str] | None = None) -> bool:
    """Whether uv would take UV_BREAK_SYSTEM_PACKAGES in `environ` as --break-system-packages."""
    value = (os.environ if environ is None else environ).get("UV_BREAK_SYSTEM_PACKAGES", "")
    return value.strip().lower() in _TRUE


def refuse_externally_managed(target: PythonTarget, *, allowed: bool) -> None:
    """Raise ExternallyManaged where the target is externally managed and neither
    `allowed` (--break-system-packages) nor UV_BREAK_SYSTEM_PACKAGES lets a change through;
    before anything is written under its prefix (no store, no lock)."""
    found = externally_managed(target)
    if found is None or allowed or breaks_system_packages():
        return
    path, message = found
    raise ExternallyManaged(
        f"the interpreter at {target.prefix} is externally managed ({path}, PEP 668), and "
        f"indicates the following: {one_line(message)} (uv refuses to change it too; "
        "--break-system-packages changes it anyway)",
        path=path,
    )


# What found the interpreter when nothing named one: the interpreter cudatx runs on.
FALLBACK = "the first python3 on PATH"

_QUERY_TIMEOUT_S = 60  # CUDATX_QUERY_TIMEOUT overrides (seconds)


def _interpreter_in(folder: Path) -> Path | None:
    for name in ("bin/python", "bin/python3"):
        candidate = folder / name
        if candidate.exists():
            return candidate
    return None


# A --python value that names an interpreter to look up on PATH as uv does (`python3.12`,
# `pypy3`), rather than an environment folder (`.venv`, `env`).
_INTERPRETER_NAME = re.compile(r"^(python|pypy|graalpy)[0-9.]*[a-z]?$")


def _path_like(value: str) -> bool:
    """Whether --python VALUE can only be a path (`.venv`, `~/envs/x`, `envs/x`), never a
    command PATH finds."""
    return os.sep in value or value.startswith((".", "~"))


def missing_environment(value: str, environ: Mapping[str, str], cwd: Path | None = None) -> bool:
    """Whether --python VALUE names an environment that is not there: nothing on disk (from
    `cwd`, else the working folder), and neither an interpreter's name (`python3.12`) nor a
    command found on PATH. Under pre-commit such a folder (`.venv` in a fresh clone, on CI)
    means no environment."""
    if ((cwd or Path()) / Path(value).expanduser()).exists():
        return False
    if _path_like(value):
        return True
    if _INTERPRETER_NAME.match(value):
        return False
    return shutil.which(value, path=environ.get("PATH", os.defpath)) is None


def _from_option(value: str, environ: Mapping[str, str]) -> Path:
    path = Path(value).expanduser()
    if missing_environment(value, environ):
        # A bare word may have meant an interpreter on PATH: say that it was looked for too.
        also = "" if _path_like(value) else " (nor a Python interpreter of that name on PATH)"
        raise EnvironmentNotFound(f"no such environment: {value}{also}")
    if not path.exists():  # a name: an interpreter on PATH, as uv looks one up
        found = shutil.which(value, path=environ.get("PATH", os.defpath))
        if found is None:
            raise EnvironmentNotFound(f"no Python interpreter named {value!r} on PATH")
        return Path(found)
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
    # As uv does without a virtual environment (`uv pip list`): the first Python on PATH,
    # never cudatx's own interpreter, which is pipx's or `uv tool`'s private venv once
    # cudatx is installed the way tools are (its own packages are not what anyone asked
    # about). Only reading commands get here: a change refuses (refuse_fallback).
    for name in ("python3", "python"):
        on_path = shutil.which(name, path=environ.get("PATH", os.defpath))
        if on_path is not None:
            return Path(on_path), FALLBACK
    raise EnvironmentNotFound(
        "no Python found: no --python, VIRTUAL_ENV, CONDA_PREFIX or .venv, and no python3 "
        "on PATH; pass --python PATH"
    )


def refuse_fallback(found_by: str) -> None:
    """Refuse a change when nothing named an environment (no --python, VIRTUAL_ENV,
    CONDA_PREFIX or .venv; `found_by` says what found the interpreter): changing cudatx's own
    interpreter is never what was meant. uv refuses the same way ("No virtual environment
    found", `uv pip install` without --system)."""
    if found_by == FALLBACK:
        raise NoVirtualEnvironment(
            "No virtual environment found; pass --python PATH (an interpreter or an "
            "environment folder), or activate one (VIRTUAL_ENV, CONDA_PREFIX, a .venv here or "
            "above)"
        )


def _timeout(environ: Mapping[str, str]) -> float:
    try:
        value = float(environ.get("CUDATX_QUERY_TIMEOUT", _QUERY_TIMEOUT_S))
    except ValueError:
        return _QUERY_TIMEOUT_S
    return value if value > 0 else _QUERY_TIMEOUT_S


class Query:
    """The interpreter, asked about itself in the background (-I -S: see _QUERY): a command
    starts it first and collects the answer once its own imports are done, so the two
    overlap.

    The answer comes over a pipe of its own (argv[1] names its fd), so nothing the target
    prints can pass for it; it is read up to MAX_ANSWER bytes and the JSON depth is bounded
    by Python's recursion limit (a RecursionError is a refusal). The interpreter runs in a
    session of its own, so a timeout kills everything it started (killpg), not only itself:
    a child that keeps the pipe open cannot make the command wait for ever.

    `run_as` (uid, gid): run it as that user rather than as cudatx's own (root), for an
    interpreter another user can write (cudatx.trust): what it runs, it runs as them."""

    def __init__(
        self,
        interpreter: Path,
        found_by: str,
        timeout: float = _QUERY_TIMEOUT_S,
        *,
        run_as: tuple[int, int] | None = None,
        writers: tuple[str, ...] = (),
    ) -> None:
        self.interpreter = interpreter
        self.found_by = found_by
        self.timeout = timeout
        self.run_as = run_as
        self.writers = writers  # who else can write the interpreter (cudatx.trust)
        self._started: subprocess.Popen[bytes] | None = None
        self._answer: int | None = None
        self._said: Interpreter | EnvironmentNotFound | None = None  # once collected
        self._error: str | None = None
        read, write = os.pipe()
        as_user: dict[str, Any] = {}
        if run_as is not None:
            # Its own groups only, and a working folder it may not be able to read left.
            as_user = {"user": run_as[0], "group": run_as[1], "extra_groups": [], "cwd": "/"}
        try:
            self._started = subprocess.Popen(
                [str(interpreter), "-I", "-S", "-c", _QUERY, str(write)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(write,),
                start_new_session=True,
                **as_user,
            )
            self._answer = read
        except OSError as exc:
            os.close(read)
            self._error = (
                f"{interpreter} cannot be run ({exc.strerror}); is it a Python interpreter?"
            )
        finally:
            os.close(write)

    def _read(self, started: subprocess.Popen[bytes], fd: int) -> bytes | None:
        """The answer, or None when the deadline passed or it grew past MAX_ANSWER (then the
        whole session is killed)."""
        deadline = time.monotonic() + self.timeout
        chunks: list[bytes] = []
        total = 0
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    break
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
                total += len(chunk)
                if total > MAX_ANSWER:
                    break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(started.pid, signal.SIGKILL)  # its session: pgid == its pid
        return None

    def result(self) -> PythonTarget:
        """The target: the interpreter's answer (collected once, however often this is
        called) with the sys.path its site folders make now (site_path)."""
        return site_path(self.answer())

    def answer(self) -> Interpreter:
        """What the interpreter said: waited for and read the first time only (a refusal
        too: asked again, it is raised again)."""
        if self._said is None:
            try:
                self._said = self._collect()
            except EnvironmentNotFound as exc:
                self._said = exc
        if isinstance(self._said, EnvironmentNotFound):
            raise self._said
        return self._said

    def _collect(self) -> Interpreter:
        from cudatx.codec import Invalid, convert
        from cudatx.models import Interpreter

        interpreter = self.interpreter
        started, fd = self._started, self._answer
        if started is None or fd is None:
            raise EnvironmentNotFound(self._error or f"{interpreter} cannot be run")
        try:
            answer = self._read(started, fd)
        finally:
            os.close(fd)
            self._answer = None
        try:
            code = started.wait(timeout=None if answer is None else self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(started.pid, signal.SIGKILL)
            started.wait()
            answer = None
            code = -1
        if answer is None:
            raise EnvironmentNotFound(
                f"{interpreter} did not answer within {self.timeout:g} s (or said more than "
                f"{MAX_ANSWER >> 20} MiB); is it a Python?"
            )
        if code != 0 or not answer:
            raise EnvironmentNotFound(f"{interpreter} is not a working Python interpreter")
        try:
            data = json.loads(answer.decode("utf-8", "surrogateescape"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return convert(Interpreter, {**data, "found_by": self.found_by})
        except Invalid as exc:
            raise EnvironmentNotFound(
                f"{interpreter} gave an answer cudatx cannot use ({one_line(str(exc))})"
            ) from None
        except (ValueError, TypeError, RecursionError) as exc:
            raise EnvironmentNotFound(
                f"{interpreter} gave an answer cudatx cannot use ({type(exc).__name__})"
            ) from None


def start_query(
    python: str | None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    *,
    accept_writers: bool = False,
) -> Query:
    """Find the interpreter as uv does and start asking it (see Query).

    Where another user can write the interpreter (cudatx.trust.other_writers: a binary, a
    folder on its way, a pyvenv.cfg), root never runs it: it runs as that user (unless
    `accept_writers`, --allow-other-writers); a change of such an environment is then
    refused whoever runs cudatx (cudatx.trust.refuse_other_writers)."""
    env = os.environ if environ is None else environ
    interpreter, found_by = locate_interpreter(python, env, cwd or Path.cwd())
    paths = interpreter_paths(str(interpreter))
    writers = tuple(other_writers(paths))
    run_as = None
    if writers and os.geteuid() == 0 and not accept_writers:
        run_as = owner_to_run_as(paths)
    return Query(interpreter, found_by, _timeout(env), run_as=run_as, writers=writers)


def find_target(
    python: str | None, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> PythonTarget:
    return start_query(python, environ, cwd).result()


def under_pre_commit(environ: Mapping[str, str] | None = None) -> bool:
    """Whether cudatx runs as a pre-commit hook (PRE_COMMIT set): its VIRTUAL_ENV is then
    pre-commit's own environment, never the one the hook checks (hook_target)."""
    return bool((os.environ if environ is None else environ).get("PRE_COMMIT"))


def hook_target(
    python: str | None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    *,
    asked: Query | None = None,
) -> str | None:
    """The environment `check-requirements` checks, or None when there is none to check.

    pre-commit runs hooks with VIRTUAL_ENV pointing at its own environment (for Python
    hooks), so under pre-commit (PRE_COMMIT set) VIRTUAL_ENV is never trusted: --python
    from the hook's args, else the project's .venv; a --python folder that is not there is
    no environment (missing_environment). Elsewhere, uv's discovery, but never the
    environment cudatx runs from (own_environment) nor its interpreter: a requirements file
    is not about the tool's environment.
    `asked`: that discovery's query, already started (the command's target), if any.
    """
    env = os.environ if environ is None else environ
    here = cwd or Path.cwd()
    if python and under_pre_commit(env) and missing_environment(python, env, here):
        # The hook's `args: [--python, .venv]` on CI or in a fresh clone, where no .venv
        # was made: the same as no environment, so that one snippet serves both.
        return None
    if python:
        return python
    if under_pre_commit(env):
        venv = here / ".venv"
        return str(venv) if venv.is_dir() else None
    try:
        query = asked or start_query(None, env, here)
        if query is asked and query.found_by == FALLBACK:
            # Never the target, and known without the answer, which the command (its
            # query) need not wait for here: the check without an environment goes on.
            return None
        target = query.result()
    except EnvironmentNotFound:
        return None
    if target.found_by == FALLBACK or own_environment(target.prefix):
        return None
    return target.prefix


def own_environment(prefix: str) -> bool:
    """Whether `prefix` is the environment cudatx itself runs from (its venv active, or
    installed into the .venv found): a requirements file is not about the tool's own
    environment, which is the target only where --python names it."""
    try:
        return os.path.samefile(prefix, sys.prefix)
    except OSError:
        return False
