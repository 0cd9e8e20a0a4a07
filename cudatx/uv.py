"""uv, run as a program: cudatx never reimplements installing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cudatx.errors import CudatxError, ExitCode, UsageError


@dataclass(frozen=True)
class UvOptions:
    """The options a user gives for where wheels come from, passed on to every uv that
    resolves, stages or installs (the dry run, the staging, the apply, a repair)."""

    offline: bool = False
    find_links: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    no_deps: bool = False  # install only what is named (prebuilt extensions, NVIDIA wheels)

    def args(self) -> list[str]:
        out = ["--offline"] if self.offline else []
        if self.no_deps:
            out.append("--no-deps")
        out += [a for link in self.find_links for a in ("--find-links", link)]
        if self.index_url is not None:
            out += ["--index-url", self.index_url]
        out += [a for url in self.extra_index_urls for a in ("--extra-index-url", url)]
        return out


def pip_argv(
    command: str, prefix: str, *flags: str, options: UvOptions | Sequence[str] = ()
) -> list[str]:
    """`uv pip COMMAND --python PREFIX FLAGS... OPTIONS...`: every uv cudatx runs, built here;
    the caller appends what to act on. OPTIONS are the user's (UvOptions, or uv's words for
    them as a requirements file gives them): uv refuses a flag given twice (the staging's
    own --no-deps and the user's), and `uv pip sync` has no --no-deps, since it installs
    exactly what its files list anyway."""
    words = options.args() if isinstance(options, UvOptions) else list(options)
    if command == "sync" or "--no-deps" in flags:
        words = [w for w in words if w != "--no-deps"]
    return ["pip", command, "--python", prefix, *flags, *words]


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


def run_uv(
    uv: str, args: Sequence[str], *, tied: bool = False, pass_fds: Sequence[int] = ()
) -> str:
    """Run uv; its stdout and stderr together. A failure is UvFailed with uv's own error.

    `tied`: uv dies with cudatx (see _dies_with), for the uv that changes an environment;
    `pass_fds`: descriptors it inherits (the transaction's lock, so that no rollback can
    start while a uv of the transaction still runs)."""
    argv = [uv, *args]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            preexec_fn=_dies_with(os.getpid()) if tied else None,
            pass_fds=tuple(pass_fds),
        )
    except OSError as exc:
        raise UvFailed(f"cannot run {uv}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        # Without a terminal uv prints "error: ...", then "cause: ..." lines, then hints: the
        # error and its causes, on one line, are uv's own message; the last line is the
        # fallback for anything else.
        at = next((i for i, ln in enumerate(lines) if ln.startswith("error:")), None)
        if at is None:
            last = lines[-1] if lines else ""
        else:
            causes = [ln for ln in lines[at + 1 :] if ln.startswith("cause:")]
            last = "; ".join([lines[at], *causes])
        if done.returncode < 0:
            last = f"killed by signal {-done.returncode}"
        raise UvFailed(f"uv {' '.join(args[:2])} failed: {last or done.returncode}")
    return done.stdout + done.stderr
