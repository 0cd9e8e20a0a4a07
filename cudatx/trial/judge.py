"""The trial's judge: the real interpreter and the real loader, in the shadow.

Every top-level package of every distribution is imported in a fresh interpreter of the
environment (`python -B -c 'import X'`: -B writes no bytecode), each with a timeout, as many
at once as there are cores; then each framework's load steps (cudatx.trial.steps) and the
user's own commands (`--trial-cmd`), with the environment's bin/ first on PATH. A check
passes when its process exits 0; otherwise its error is the last line the interpreter (or
the command) printed on stderr: for a failed import, the exception and its message
("ImportError: libcudnn.so.9: cannot open shared object file: ...").
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

from cudatx.models import Distribution
from cudatx.names import counted
from cudatx.trial.steps import GPU_PROBE, framework_steps

# seconds for one import: a large framework's takes 3 to 10 on a loaded machine
IMPORT_TIMEOUT = 120.0
COMMAND_TIMEOUT = 1800.0  # a user's own check may run a test suite


class Stepped(NamedTuple):
    """Whose a framework's step is (cudatx.discover.frameworks.FrameworkStep): what the
    verdict pairs its outcome with."""

    framework: str
    gpu: bool  # a GPU start


@dataclass(frozen=True)
class Check:
    label: str  # "import numpy", "--trial-cmd 'pytest -x'", a step's label
    argv: tuple[str, ...]
    timeout: float
    step: Stepped | None = None  # a framework's step: whose


@dataclass(frozen=True)
class Outcome:
    ok: bool
    error: str = ""  # the last line on stderr (else stdout), or why it did not finish


# Where a check writes what it read (cudatx.trial.kept): the variable names a file the
# check's interpreter writes at exit, and leaves the environment of anything it starts.
READS_VARIABLE = "CUDATX_TRIAL_READS"
_MAX_READS = 16 << 20  # bytes of one check's report read back (torch's import: 0.3 MB)

# Run before a check's own code where what it reads is asked for: at exit (a failed import
# included: atexit runs after the traceback), every module's file, every sys.path entry and
# package folder (a module added there would be found), and every file mapped into the
# process (/proc/self/maps: the libraries, the interpreter).
READS_PREAMBLE = """\
import atexit as _cudatx_atexit, os as _cudatx_os
def _cudatx_reads(out=_cudatx_os.environ.pop("CUDATX_TRIAL_READS", "")):
    import json, sys
    if not out:
        return
    files, folders = set(), set(p for p in sys.path if isinstance(p, str))
    for module in list(sys.modules.values()):
        try:  # a module may be anything: a class namespace with a __path__ that is no list
            where = getattr(module, "__file__", None)
            if isinstance(where, str):
                files.add(where)
            searched = getattr(module, "__path__", None)
            if isinstance(searched, list) or type(searched).__name__ == "_NamespacePath":
                folders.update(p for p in searched if isinstance(p, str))
        except Exception:
            return  # unsure of what it read: no report, and the judgement is not kept
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.rstrip("\\n").split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    files.add(parts[5])
    except OSError:
        return
    absolute = _cudatx_os.path.abspath
    found = {"files": sorted(map(absolute, files)), "folders": sorted(map(absolute, folders))}
    with open(out, "w") as report:
        json.dump(found, report)
_cudatx_atexit.register(_cudatx_reads)
"""


class Reads:
    """What the checks of one judgement read, as each reports it (READS_PREAMBLE): the
    files and the folders searched; `complete` until one check says nothing (killed, timed
    out, a report too large or unreadable)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder  # where the reports are written, then removed
        self.files: set[str] = set()
        self.folders: set[str] = set()
        self.complete = True
        self._lock = threading.Lock()
        self._count = 0

    def report_path(self) -> str:
        with self._lock:
            self._count += 1
            return os.path.join(self.folder, f"reads-{self._count}.json")

    def unsure(self) -> None:
        """A check said nothing of what it read."""
        with self._lock:
            self.complete = False

    def take(self, path: str) -> None:
        """One check's report, read and removed."""
        import json

        try:
            with open(path, "rb") as handle:
                data = json.loads(handle.read(_MAX_READS + 1)[:_MAX_READS])
            files = [str(f) for f in data["files"]]
            folders = [str(f) for f in data["folders"]]
        except (OSError, ValueError, KeyError, TypeError):
            self.unsure()
            return
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        with self._lock:
            self.files.update(files)
            self.folders.update(folders)


def _is_module_name(name: str) -> bool:
    return name.isidentifier() and name != "__pycache__"


def top_levels(dist: Distribution) -> tuple[str, ...]:
    """The top-level modules a distribution installs: its top_level.txt where it has one
    (setuptools writes it), else the first component of each RECORD path under the site
    folder that is a package, a .py module or an extension module."""
    listed = os.path.join(dist.metadata_dir, "top_level.txt")
    try:
        with open(listed, encoding="utf-8") as handle:
            names = [ln.strip().replace("/", ".").partition(".")[0] for ln in handle]
        found = {n: None for n in names if _is_module_name(n)}
        if found:
            return tuple(found)
    except (OSError, UnicodeDecodeError):
        pass
    out: dict[str, None] = {}
    for entry in dist.records:
        parts = entry.path.split("/")
        if parts[0] in (os.curdir, os.pardir) or parts[0].endswith((".dist-info", ".data")):
            continue
        if len(parts) > 1:
            name = parts[0]
        elif parts[0].endswith(".py"):
            name = parts[0][:-3]
        elif parts[0].endswith(".so"):
            name = parts[0].partition(".")[0]
        else:
            continue
        if _is_module_name(name):
            out.setdefault(name)
    return tuple(out)


def import_checks(
    python: str, dists: Iterable[Distribution], timeout: float = IMPORT_TIMEOUT
) -> tuple[dict[str, tuple[str, ...]], list[Check]]:
    """One `import X` per top-level module of `dists`; and which distributions install each
    module (a namespace such as `nvidia` has many)."""
    owners: dict[str, list[str]] = {}
    for dist in dists:
        for name in top_levels(dist):
            owners.setdefault(name, []).append(dist.name)
    checks = [
        Check(f"import {name}", (python, "-B", "-c", f"import {name}"), timeout)
        for name in sorted(owners)
    ]
    return {k: tuple(v) for k, v in owners.items()}, checks


def step_checks(
    python: str, sites: Sequence[str], timeout: float = IMPORT_TIMEOUT, *, gpu: bool = False
) -> list[Check]:
    """The frameworks' steps (cudatx.trial.steps) whose module is installed in `sites`;
    with `gpu` (the probe found a device), the GPU start steps too."""

    def installed(needs: str) -> bool:
        for site in sites:
            folder, stem = os.path.split(os.path.join(site, needs))
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            if any(n == stem or n.startswith(stem + ".") for n in names):
                return True
        return False

    steps = [s for s in framework_steps(sites) if (gpu or not s.gpu) and installed(s.needs)]
    return [
        Check(
            step.label, (python, "-B", "-c", step.code), timeout, Stepped(step.framework, step.gpu)
        )
        for step in steps
    ]


def gpu_present(python: str, environ: Mapping[str, str], timeout: float) -> tuple[bool, str]:
    """Whether the driver reports a device to the environment's interpreter, in the judge's
    environment (its LD_LIBRARY_PATH); and what that is, in words: the GPU start steps run
    only where it does, and the trial says which."""
    try:
        done = _spawn((python, "-B", "-c", GPU_PROBE), environ, None, timeout)
    except subprocess.TimeoutExpired:
        return False, f"no GPU (the driver did not answer within {timeout:g} s)"
    except OSError as exc:
        return False, f"no GPU (cannot run the probe: {exc.strerror or exc})"
    count = done.stdout.strip()
    if done.returncode != 0 or not count.isdigit():
        said = _last_line(done.stderr) or _last_line(done.stdout) or f"exit {done.returncode}"
        return False, f"no GPU ({said})"
    return True, counted(int(count), "GPU")


def command_checks(commands: Sequence[str], timeout: float = COMMAND_TIMEOUT) -> list[Check]:
    return [Check(f"--trial-cmd {cmd!r}", ("/bin/sh", "-c", cmd), timeout) for cmd in commands]


def judge_environ(
    prefix: str, ld_library_path: str | None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment every check runs in: the shadow's bin/ first on PATH, its prefix as
    VIRTUAL_ENV, no bytecode written, and nothing that would make the interpreter import
    from elsewhere (PYTHONPATH, PYTHONHOME, the user's site folder). PYTHONPYCACHEPREFIX
    goes too: it moves where bytecode is read from, and an import that finds none there
    compiles every module from source (a large framework's import took twice as long)."""
    env = dict(os.environ if base is None else base)
    hidden = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX")
    for name in hidden:
        env.pop(name, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    env["VIRTUAL_ENV"] = prefix
    env["PATH"] = os.path.join(prefix, "bin") + os.pathsep + env.get("PATH", "")
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = ld_library_path
    return env


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _spawn(
    argv: Sequence[str], environ: Mapping[str, str], cwd: str | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """One check's process: no stdin, its output captured as text (bad bytes replaced)."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
        stdin=subprocess.DEVNULL,
        env=dict(environ),
        cwd=cwd,
        timeout=timeout,
    )


def _run(
    check: Check, environ: Mapping[str, str], cwd: str | None, reads: Reads | None = None
) -> Outcome:
    argv = check.argv
    report = None
    # A `from __future__` import must come first: such code runs as it is, and says nothing.
    if reads is not None and argv[1:3] == ("-B", "-c") and "__future__" not in argv[3]:
        report = reads.report_path()
        argv = (*argv[:3], READS_PREAMBLE + argv[3], *argv[4:])
        environ = {**environ, READS_VARIABLE: report}
    elif reads is not None:
        reads.unsure()  # a user's command, or code that cannot take the preamble
    try:
        return _outcome(check, environ, cwd, argv)
    finally:
        if report is not None:
            assert reads is not None
            reads.take(report)


def _outcome(
    check: Check, environ: Mapping[str, str], cwd: str | None, argv: Sequence[str]
) -> Outcome:
    try:
        done = _spawn(argv, environ, cwd, check.timeout)
    except subprocess.TimeoutExpired:
        return Outcome(False, f"did not finish within {check.timeout:g} s")
    except OSError as exc:
        return Outcome(False, f"cannot run: {exc.strerror or exc}")
    if done.returncode == 0:
        return Outcome(True)
    said = _last_line(done.stderr) or _last_line(done.stdout)
    if done.returncode < 0:
        said = f"killed by signal {-done.returncode}" + (f" ({said})" if said else "")
    return Outcome(False, said or f"exit status {done.returncode}")


def judge(
    checks: Sequence[Check],
    environ: Mapping[str, str],
    *,
    jobs: int | None = None,
    cwd: str | None = None,
    told: Callable[[int, int, str], None] | None = None,
    reads: Reads | None = None,
) -> dict[str, Outcome]:
    """Run every check, up to `jobs` at once (default: the cores); outcomes by label. The
    user's commands run one at a time, after the rest: they may be heavy, and may depend on
    each other. `told`: (finished, of all, the label of the oldest still running), as each
    check starts and ends; `reads`: what each interpreter check read is added to it (a
    user's command reports nothing)."""
    plain = [c for c in checks if not c.label.startswith("--trial-cmd")]
    commands = [c for c in checks if c.label.startswith("--trial-cmd")]
    workers = max(1, jobs or os.cpu_count() or 1)
    running: dict[str, float] = {}
    finished = [0]
    lock = threading.Lock()

    def tell() -> None:
        if told is not None:
            oldest = min(running, key=running.__getitem__) if running else ""
            told(finished[0], len(checks), oldest)

    def run(check: Check, where: str | None) -> Outcome:
        with lock:
            running[check.label] = time.monotonic()
            tell()
        try:
            return _run(check, environ, where, reads)
        finally:
            with lock:
                del running[check.label]
                finished[0] += 1
                tell()

    out: dict[str, Outcome] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for check, outcome in zip(plain, pool.map(lambda c: run(c, cwd), plain), strict=True):
            out[check.label] = outcome
    for check in commands:
        out[check.label] = run(check, os.getcwd())
    return out
