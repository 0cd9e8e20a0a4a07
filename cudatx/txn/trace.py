"""`cudatx trace`: run a command in the environment under the real loader's own report, and
keep what it mapped in the environment's store (cudatx.discover.traces).

The command runs as `uv run` or an activated environment would run it: the environment's
`bin/` first on PATH, VIRTUAL_ENV set for a virtual environment, PYTHONHOME unset, with its
own stdin, stdout and stderr. glibc reports what it does when `LD_DEBUG` is set (elf/rtld.c
process_envvars); `LD_DEBUG_OUTPUT` sends the report to a file per process rather than the
command's stderr. `libs,files` is the least that says who asked for each object and where it
was found (cudatx.discover.lddebug). An `LD_AUDIT` module would say as much, but must be
compiled for the target (a compiler on every machine cudatx runs on) and is itself loaded
into the process it watches; the loader's own report needs neither.

Nothing is written until the command has run: the store is checked first (a store cudatx
did not make is refused before the command starts), and the record is written atomically.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from cudatx.discover.confinement import inside
from cudatx.discover.lddebug import TracedProcess, absolute, read_report, report_files
from cudatx.discover.traces import FileState, Trace, TraceRecord, read_traces, traces_dir
from cudatx.documents import dump_json
from cudatx.errors import CommandNotExecutable, CommandNotFound, StoreError, UsageError
from cudatx.models import PythonTarget
from cudatx.reading import open_regular
from cudatx.trust import identity, refuse_foreign, refuse_root_running_code
from cudatx.txn.store import Store, atomic_write, make_private_dir

REPORT = "ld"  # LD_DEBUG_OUTPUT's prefix: glibc appends ".<pid>"
DEBUG = "libs,files"


def activated(target: PythonTarget, environ: Mapping[str, str], report: str) -> dict[str, str]:
    """The command's environment: the target's bin/ first, as `activate` does it, and the
    loader told to report into `report`."""
    env = dict(environ)
    folder = os.path.join(target.prefix, "bin")
    env["PATH"] = folder + os.pathsep + env.get("PATH", os.defpath)
    if target.prefix != target.base_prefix:  # a virtual environment (venv's activate)
        env["VIRTUAL_ENV"] = target.prefix
    env.pop("PYTHONHOME", None)  # activate unsets it: it would point the interpreter elsewhere
    env["LD_DEBUG"] = DEBUG
    env["LD_DEBUG_OUTPUT"] = report
    return env


def _program(command: tuple[str, ...], env: Mapping[str, str], cwd: str) -> None:
    """Refuse, before anything runs, a command that cannot be started (126, 127)."""
    name = command[0]
    if "/" in name:
        path = os.path.join(cwd, name)
        if not os.path.exists(path):
            raise CommandNotFound(f"{name}: no such file")
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise CommandNotExecutable(f"{name}: not executable")
        return
    if shutil.which(name, path=env.get("PATH")) is None:
        raise CommandNotFound(f"{name}: command not found (PATH has the environment's bin/ first)")


def check_store(prefix: str) -> None:
    """Refuse a store, or a traces folder, cudatx did not make (StoreError), before the
    command runs; what is missing is made when the record is written."""
    folder = traces_dir(prefix)
    for part in (folder.parent, folder):
        try:
            st = os.lstat(part)
        except FileNotFoundError:
            return
        refuse_foreign(part, st, folder=True)


@contextlib.contextmanager
def _interrupts_to_the_command() -> Iterator[None]:
    """While the command runs, ^C and ^\\ are its own: the terminal sends them to the whole
    foreground group, and cudatx stays to record what the run mapped (as `time` does)."""
    saved = {}
    for sig in (signal.SIGINT, signal.SIGQUIT):
        with contextlib.suppress(ValueError):  # not the main thread: nothing to change
            saved[sig] = signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _run(command: tuple[str, ...], env: dict[str, str], cwd: str) -> int:
    try:
        child = subprocess.Popen(command, env=env, cwd=cwd)
    except FileNotFoundError:
        raise CommandNotFound(f"{command[0]}: command not found") from None
    except OSError as exc:  # EACCES, ENOEXEC
        raise CommandNotExecutable(f"{command[0]}: {exc.strerror or exc}") from None
    with _interrupts_to_the_command():
        code = child.wait()
    return 128 - code if code < 0 else code  # killed by signal N: 128+N, as shells say


def _processes(folder: str) -> list[TracedProcess]:
    found: list[TracedProcess] = []
    for pid, path in report_files(folder, REPORT):
        fd, _ = open_regular(path, follow=False)
        with open(fd, encoding="utf-8", errors="surrogateescape") as lines:
            found += read_report(lines, pid)
    return found


def _inside(processes: list[TracedProcess], prefix: str, cwd: str) -> dict[str, FileState]:
    """The state of each mapped file inside the environment, by its absolute path."""
    real_prefix = os.path.realpath(prefix)
    files: dict[str, FileState] = {}
    for process in processes:
        for load in process.loads:
            path = absolute(load.path, cwd)
            if path in files or not inside(path, real_prefix):
                continue
            with contextlib.suppress(OSError):  # gone already: no state to keep
                files[path] = FileState.of(os.stat(path))
    return files


def trace(
    target: PythonTarget,
    command: tuple[str, ...],
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    accepted: bool = False,
) -> Trace:
    """Run `command` in the environment of `target`, then record what it mapped. Raises
    UsageError for no command, UnsafePaths where root would run code another user can
    change (cudatx.trust.refuse_root_running_code; `accepted`: --allow-other-writers),
    CommandNotFound / CommandNotExecutable before it runs, StoreError for a store cudatx did
    not make (before) or cannot write (after)."""
    if not command:
        raise UsageError("trace needs a command: cudatx trace [--python ENV] -- CMD [ARGS...]")
    refuse_root_running_code(target, what="trace", accepted=accepted)
    where = cwd or os.getcwd()
    prefix = target.prefix
    check_store(prefix)
    prefix_id = identity(prefix)
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    base = dict(os.environ if environ is None else environ)
    with tempfile.TemporaryDirectory(prefix="cudatx-trace-") as folder:
        env = activated(target, base, os.path.join(folder, REPORT))
        _program(command, env, where)
        code = _run(command, env, where)
        processes = _processes(folder)
    files = _inside(processes, prefix, where)
    real_prefix = os.path.realpath(prefix)
    kept = [
        p
        for p in processes
        if any(inside(absolute(load.path, where), real_prefix) for load in p.loads)
    ]
    record = TraceRecord(
        id=Store.new_id(),
        created=created,
        command=command,
        cwd=where,
        prefix=prefix,
        prefix_id=prefix_id,
        ld_library_path=base.get("LD_LIBRARY_PATH"),
        exit_code=code,
        processes=tuple(kept),
        files=files,
        others=len(processes) - len(kept),
    )
    return Trace(record=record, path=write(record, code))


def write(record: TraceRecord, code: int) -> str:
    """Write `record` into its environment's store (made 0700 as needed); its path."""
    folder = traces_dir(record.prefix)
    path = folder / f"{record.id}.json"
    try:
        make_private_dir(folder.parent)
        make_private_dir(folder)
        atomic_write(path, (dump_json(record, indent=2) + "\n").encode())
    except (OSError, StoreError) as exc:
        reason = exc.message if isinstance(exc, StoreError) else (exc.strerror or str(exc))
        raise StoreError(
            f"the command ran (exit {code}) but its trace could not be recorded: {reason}",
            path=str(path),
        ) from None
    return str(path)


def clear(prefix: str, ids: tuple[str, ...]) -> tuple[str, ...]:
    """Remove the records `ids` (all of them when empty); the ids removed. An id that is
    not recorded is a UsageError, and then nothing is removed."""
    traces, _ = read_traces(prefix, strict=True)
    by_id = {t.id: t for t in traces}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise UsageError(f"no trace record {unknown[0]}; `cudatx trace --list` lists them")
    chosen = [by_id[i] for i in ids] if ids else list(traces)
    for found in chosen:
        try:
            Path(found.path).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(
                f"cannot remove {found.path}: {exc.strerror}", path=found.path
            ) from None
    return tuple(t.id for t in chosen)
