"""uv, run as a program: cudatx never reimplements installing. Every command line of uv's
cudatx runs (or tells a user to run) is spelled here, by the builders below pip_argv."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cudatx.errors import CudatxError, ExitCode, NeedsBuild, UsageError, needs_build
from cudatx.models import Frozen

if TYPE_CHECKING:
    from cudatx.sandbox import Confinement

# The guarantee a confined uv runs under (the command's probe, cudatx.sandbox) and the folders
# it may write; every other mount is read-only to it.
Confining = tuple["Confinement", Sequence[str]]

# cudatx's own word among uv's for where wheels come from: building is allowed. pip_argv
# turns its absence into uv's `--only-binary :all:`, so nothing builds (runs a setup.py or a build
# backend) unless the user asked for it.
ALLOW_BUILD = "--allow-build"
# uv's flag for changing a Python its distributor manages (PEP 668): taken by the uv commands
# that change an environment, refused by `uv pip compile` (seen with uv 0.13.9).
BREAK_SYSTEM_PACKAGES = "--break-system-packages"
_CHANGES = ("install", "sync", "uninstall")


class UvOptions(Frozen, kw_only=False):
    """The options a user gives for where wheels come from, passed on to every uv that
    resolves, stages or installs (the dry run, the staging, the apply, a repair)."""

    offline: bool = False
    find_links: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    no_deps: bool = False  # install only what is named (prebuilt extensions, NVIDIA wheels)
    allow_build: bool = False  # sdists, local folders and VCS checkouts may be built
    # change a Python its distributor manages (PEP 668), as uv's own flag says
    break_system_packages: bool = False

    def args(self) -> list[str]:
        out = ["--offline"] if self.offline else []
        if self.allow_build:
            out.append(ALLOW_BUILD)
        if self.no_deps:
            out.append("--no-deps")
        if self.break_system_packages:
            out.append(BREAK_SYSTEM_PACKAGES)
        out += [a for link in self.find_links for a in ("--find-links", link)]
        if self.index_url is not None:
            out += ["--index-url", self.index_url]
        out += [a for url in self.extra_index_urls for a in ("--extra-index-url", url)]
        return out


def pip_argv(
    command: str, prefix: str, *flags: str, options: UvOptions | Sequence[str] = ()
) -> list[str]:
    """`uv pip COMMAND --python PREFIX FLAGS... OPTIONS...`: what every `uv pip` cudatx runs
    starts with (the builders below it); the caller appends what to act on. OPTIONS are the
    user's (UvOptions, or uv's words for them as a requirements file gives them): uv refuses
    a flag given twice (the staging's own --no-deps and the user's), and `uv pip sync` has
    no --no-deps, since it installs exactly what its files list anyway.

    An install, sync or compile gets `--only-binary :all:` unless OPTIONS hold ALLOW_BUILD:
    uv then resolves, stages and installs from wheels only ("resolving will not run code",
    uv's docs for --only-binary and --no-build). It is uv's --no-build for every package,
    spelled so that a requirements file's own --only-binary may come with it (uv refuses
    --no-build beside either), and it comes last: uv reads the specifiers of its
    --only-binary in order, and a `:none:` clears those before it (crates/uv-configuration,
    `PackageNameSpecifiers::from_iter`; seen with uv 0.13.9: `--only-binary :all:
    --only-binary :none:` built an sdist, the other order did not). No `--no-binary NAME` may
    come with it: uv builds NAME whatever --only-binary or --no-build say (build_options.rs,
    `no_build_package`), so one is NeedsBuild here, the last check before uv is run (cudatx
    names such a line by its file before: cudatx.planning.building). uv still builds an
    editable or a local folder to read its metadata this way (seen with uv 0.13.9: `-e DIR`
    ran its setup.py twice), so cudatx.planning.building refuses those before uv is asked
    at all."""
    words = options.args() if isinstance(options, UvOptions) else list(options)
    build = ALLOW_BUILD in words
    words = [w for w in words if w != ALLOW_BUILD]
    if command == "sync" or "--no-deps" in flags:
        words = [w for w in words if w != "--no-deps"]
    if command not in _CHANGES:
        words = [w for w in words if w != BREAK_SYSTEM_PACKAGES]
    last: tuple[str, ...] = ()
    if command in ("install", "sync", "compile") and not build:
        binary = _no_binary(words)
        if binary:
            raise NeedsBuild(needs_build([f"{n} (--no-binary {n})" for n in binary]))
        last = ("--only-binary", ":all:")
    return ["pip", command, "--python", prefix, *flags, *words, *last]


class UvStep(Frozen, kw_only=False):
    """One uv command of a change: its phase ("uninstall", "install" or "reinstall"), its
    whole command line (the uv binary first) and how many packages it changes."""

    phase: str
    argv: tuple[str, ...]
    packages: int


def reinstall_flags(name: str) -> tuple[str, ...]:
    """uv's words that reinstall NAME: `--reinstall-package` implies uv's
    `--refresh-package`, so uv reads a local wheel again where its cache holds an older file
    of that path and modification time (seen with uv 0.13.9)."""
    return ("--reinstall-package", name)


def change_steps(
    uv: str,
    prefix: str,
    removing: Sequence[str],
    installing: Sequence[str],
    reinstalling: Sequence[tuple[str, str]],
    options: UvOptions | Sequence[str],
    install_flags: Sequence[str] = (),
) -> list[UvStep]:
    """The uv commands that change the environment at `prefix`, in order: uninstall
    `removing` (names), install `installing` (specs) with --no-deps, then reinstall each of
    `reinstalling` ((name, spec)) with --no-deps. `install_flags` go to every install."""
    steps = []
    if removing:
        argv = (uv, *pip_argv("uninstall", prefix), *removing)
        steps.append(UvStep("uninstall", argv, len(removing)))
    flags = ("--no-deps", *install_flags)
    if installing:
        argv = (uv, *pip_argv("install", prefix, *flags, options=options), *installing)
        steps.append(UvStep("install", argv, len(installing)))
    for name, spec in reinstalling:
        words = pip_argv("install", prefix, *flags, *reinstall_flags(name), options=options)
        steps.append(UvStep("reinstall", (uv, *words, spec), 1))
    return steps


def dry_run_argv(
    command: str, prefix: str, args: Sequence[str], options: UvOptions | Sequence[str]
) -> list[str]:
    """`uv pip COMMAND --dry-run ... ARGS` (COMMAND: install or sync): what would change."""
    return [*pip_argv(command, prefix, "--dry-run", options=options), *args]


def staging_argv(
    prefix: str,
    folder: str,
    specs: Sequence[str],
    options: UvOptions | Sequence[str],
    flags: Sequence[str] = (),
) -> list[str]:
    """`uv pip install --prefix FOLDER --no-deps FLAGS ... SPECS`: `specs` installed under
    `folder` as uv would install them into the environment at `prefix` (the staging)."""
    argv = pip_argv("install", prefix, "--prefix", folder, "--no-deps", *flags, options=options)
    return [*argv, *specs]


def lock_argv(
    prefix: str, requirements: str, lock: str, options: Sequence[str], *, no_deps: bool
) -> list[str]:
    """`uv pip compile -v --format pylock.toml ... -o LOCK REQUIREMENTS`: uv's resolution of
    `requirements` for the environment at `prefix`, written to `lock` (which uv requires be
    named pylock.toml), its choices said on stderr (-v)."""
    flags = ("--no-deps",) if no_deps else ()
    argv = pip_argv("compile", prefix, *flags, "-v", "--format", "pylock.toml", options=options)
    return [*argv, "-o", lock, "--no-header", requirements]


def annotated_argv(
    prefix: str, requirements: str, options: Sequence[str], *, no_deps: bool
) -> list[str]:
    """`uv pip compile -q --annotation-style line ... REQUIREMENTS`: the same resolution,
    each pin with what brings it in."""
    flags = ("--no-deps",) if no_deps else ()
    argv = pip_argv("compile", prefix, *flags, "-q", "--annotation-style", "line", options=options)
    return [*argv, "--no-header", requirements]


def local_install_argv(prefix: str, flags: Sequence[str]) -> list[str]:
    """`uv pip install --python PREFIX FLAGS`, as given (no `--only-binary`): an install
    of wheels the caller made itself (the demo's); the caller appends what to install."""
    return ["pip", "install", "--python", prefix, *flags]


def reinstall_words(prefix: str, names: Sequence[str], flags: Sequence[str]) -> list[str]:
    """`uv pip install --python PREFIX --reinstall-package NAME... --no-deps FLAGS`: the
    reinstall cudatx tells a user to run (cudatx.analysis.commands); the caller puts uv's
    name first and appends what to reinstall."""
    again = [w for name in names for w in reinstall_flags(name)]
    return ["pip", "install", "--python", prefix, *again, "--no-deps", *flags]


def _no_binary(words: Sequence[str]) -> list[str]:
    """The packages (or `:all:`) the `--no-binary` words name, `:none:` aside (uv-cli: a
    value, or values separated by commas, after `--no-binary` or `--no-binary=`)."""
    out: list[str] = []
    for at, word in enumerate(words):
        if word == "--no-binary" and at + 1 < len(words):
            value = words[at + 1]
        elif word.startswith("--no-binary="):
            value = word.partition("=")[2]
        else:
            continue
        out += [v for v in value.split(",") if v and v != ":none:"]
    return out


def venv_argv(folder: str, python: str | None) -> list[str]:
    """`uv venv --quiet [--python PYTHON] FOLDER`: an empty environment (no seed packages),
    of PYTHON, else of the interpreter `uv venv` itself picks here (.python-version, the
    project's requires-python, then PATH)."""
    return ["venv", "--quiet", *(["--python", python] if python else []), folder]


def cache_dir(uv: str) -> str:
    """uv's cache folder, as uv finds it (UV_CACHE_DIR, --cache-dir in uv.toml, the
    platform's cache folder)."""
    said = [ln.strip() for ln in run_uv(uv, ["cache", "dir"]).splitlines()]
    return next((ln for ln in reversed(said) if ln.startswith("/")), "")


class UvFailed(CudatxError):
    """uv exited non-zero, was killed, or could not be started; `message` carries its error.

    Outside a transaction (a dry run, staging, finding uv) nothing was changed; inside one
    the transaction turns it into RolledBack."""

    exit_code = ExitCode.UV


class UvTimedOut(UvFailed):
    """uv did not finish within the wall-clock time it was given (run_uv's `timeout`)."""


def find_uv(explicit: str | None) -> str:
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise UsageError(f"--uv {explicit}: no such executable")
        return found
    try:
        from uv import find_uv_bin

        return os.fspath(find_uv_bin())
    except (ImportError, FileNotFoundError) as exc:
        raise UvFailed(
            f"cannot find uv ({exc}); install the uv package or pass --uv PATH"
        ) from None


def _dies_with(parent: int) -> Callable[[], None]:
    """A preexec_fn tying the child to `parent`: prctl(2) PR_SET_PDEATHSIG has the kernel
    send it SIGKILL when the parent dies (kept across execve, cleared only for set-uid
    programs), so a uv that changes an environment never outlives a cudatx killed with -9.
    The parent may have died before the prctl: then the child kills itself."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def tie() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return tie


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


# What uv 0.13.9 says when building is off and stops it (crates/uv-resolver's hint "Wheels are
# required for `X` because building from source is disabled ..." where only an sdist
# exists; crates/uv-distribution's "Building source distributions is disabled, but
# attempted to build `X`" when staging one). The first names what the resolution needed.
_NO_BUILD = re.compile(
    r"Wheels are required for `(?P<resolved>[^`]+)` because building from source is disabled"
    r"|Building source distributions (?:for `(?P<for>[^`]+)` )?(?:is|are) disabled"
    r"(?:, but attempted to build `(?P<built>[^`]+)`)?"
)


# A line of uv's that starts a part of its own ("cause: ...", "hint: ..."), not one that goes
# on with the error's message.
_LABELLED = re.compile(r"^(?:cause|hint|help|warning|tip|note|error):")

_FAILED_TO_BUILD = re.compile(r"Failed to (?:download and build|build|download) `([^`]+)`")


def _unbuilt(said: str) -> list[str]:
    """What uv refused to build under --no-build, as uv names it ("a source distribution"
    where it names none); empty when that was not why it failed."""
    names: list[str] = []
    found = False
    for match in _NO_BUILD.finditer(said):
        found = True
        name = match["resolved"] or match["built"] or match["for"]
        if name and name not in names:
            names.append(name)
    if found and not names:
        names = list(dict.fromkeys(_FAILED_TO_BUILD.findall(said)))
    return names or (["a source distribution"] if found else [])


def _run(
    argv: Sequence[str],
    *,
    tied: bool,
    pass_fds: Sequence[int],
    heard: Callable[[str], None] | None,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    options: dict[str, Any] = {
        "env": env,
        "text": True,
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "preexec_fn": _dies_with(os.getpid()) if tied else None,
        "pass_fds": tuple(pass_fds),
    }
    if heard is None:
        # subprocess.run kills uv and reaps it when the time is up (TimeoutExpired).
        return subprocess.run(argv, check=False, timeout=timeout, **options)
    with subprocess.Popen(argv, **options) as started:
        # The lines are read as uv writes them, so the time is kept by a timer that kills uv:
        # its pipes then close and the reads below end.
        fired = threading.Event()

        def kill() -> None:
            fired.set()
            started.kill()

        timer = threading.Timer(timeout, kill) if timeout is not None else None
        if timer is not None:
            timer.start()
        stdout, stderr = started.stdout, started.stderr
        assert stdout is not None and stderr is not None
        out: list[str] = []
        # stdout is drained beside stderr: a full pipe of one would stall uv on the other.
        reader = threading.Thread(target=lambda: out.append(stdout.read()), daemon=True)
        reader.start()
        err: list[str] = []
        try:
            for line in stderr:
                err.append(line)
                heard(line.strip())
        except BaseException:
            # An interrupt (SIGINT, or SIGTERM/SIGHUP: cudatx.interrupts) while uv runs: uv
            # goes too. Popen's __exit__ would wait for it (for ever, on an index that
            # trickles), where subprocess.run kills it.
            started.kill()
            raise
        finally:
            if timer is not None:
                timer.cancel()
        reader.join()
        code = started.wait()
        if fired.is_set() and timeout is not None:
            raise subprocess.TimeoutExpired(list(argv), timeout)
    return subprocess.CompletedProcess(list(argv), code, "".join(out), "".join(err))


def run_uv(
    uv: str,
    args: Sequence[str],
    *,
    tied: bool = False,
    pass_fds: Sequence[int] = (),
    heard: Callable[[str], None] | None = None,
    timeout: float | None = None,
    confined: Confining | None = None,
) -> str:
    """Run uv; its stdout and stderr together. A failure is UvFailed with uv's own error.

    `tied`: uv dies with cudatx (see _dies_with), for the uv that changes an environment;
    `pass_fds`: descriptors it inherits (the transaction's lock, so that no rollback can
    start while a uv of the transaction still runs); `heard`: told each line uv writes on
    stderr as it writes it (uv's "Downloading torch (846.0MiB)", which it prints off a
    terminal too), so that a wait can say what it waits for; `timeout`: seconds of wall clock
    uv may take before it is killed (UvFailed): uv's own HTTP timeout is per read, so an index
    that trickles holds it for ever (cudatx.planning.lazyzip); `confined`: uv runs in the
    sandbox the probe found (cudatx.sandbox), where only the folders given and a private
    temporary folder (its TMPDIR, removed after) can be written; a sandbox the helper could
    not make is SandboxFailed, and uv never ran. Where the probe found none, uv runs as it
    would without."""
    argv = [uv, *args]
    if confined is not None and confined[0].held:
        from cudatx import sandbox

        with tempfile.TemporaryDirectory(prefix="cudatx-uv-") as tmp:
            how = sandbox.confine(argv, confined[1], probed=confined[0], tmp=tmp)
            done = _started(how.argv, args, tied, pass_fds, heard, timeout, how.env)
        # Before uv's own error is read: the helper's failure is not uv's.
        how.check(done.returncode, done.stderr)
    else:
        done = _started(argv, args, tied, pass_fds, heard, timeout, None)
    return _answer(done, args)


def _started(
    argv: Sequence[str],
    args: Sequence[str],
    tied: bool,
    pass_fds: Sequence[int],
    heard: Callable[[str], None] | None,
    timeout: float | None,
    env: dict[str, str] | None,
) -> subprocess.CompletedProcess[str]:
    """uv run to its end, its failure to start or finish in time as UvFailed."""
    try:
        return _run(argv, tied=tied, pass_fds=pass_fds, heard=heard, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise UvTimedOut(
            f"uv {' '.join(args[:2])} was stopped after {timeout:.0f} s of wall clock, "
            "with no answer"
        ) from None
    except OSError as exc:
        raise UvFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def _answer(done: subprocess.CompletedProcess[str], args: Sequence[str]) -> str:
    """uv's stdout and stderr together; its failure as UvFailed (NeedsBuild where it
    refused to build), in uv's own words."""
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        # Without a terminal uv prints "error: ...", lines that go on with its message (the
        # text of an EXTERNALLY-MANAGED marker, indented), then "cause: ..." lines, then
        # hints: the error, what goes on with it and its causes, on one line, are uv's own
        # message; the last line is the fallback for anything else.
        at = next((i for i, ln in enumerate(lines) if ln.startswith("error:")), None)
        if at is None:
            last = lines[-1] if lines else ""
        else:
            rest = lines[at + 1 :]
            ends = next((i for i, ln in enumerate(rest) if _LABELLED.match(ln)), len(rest))
            causes = [ln for ln in rest if ln.startswith("cause:")]
            last = "; ".join([" ".join([lines[at], *rest[:ends]]), *causes])
        if done.returncode < 0:
            last = f"killed by signal {-done.returncode}"
        unbuilt = _unbuilt(done.stderr or done.stdout)
        if unbuilt:
            raise NeedsBuild(needs_build(unbuilt))
        raise UvFailed(f"uv {' '.join(args[:2])} failed: {last or done.returncode}")
    return done.stdout + done.stderr
