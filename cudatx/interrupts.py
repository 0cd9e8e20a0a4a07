"""Signals end what cudatx started: SIGTERM and SIGHUP become an exception, as SIGINT is one.

Python turns SIGINT into KeyboardInterrupt, raised in the main thread wherever it is, so that
every `with` block and `finally` on the way out runs: a temporary folder is removed, a
shadow is taken down, a child is killed by subprocess.run. SIGTERM and SIGHUP kill the
process by default (their default action, signal(7)) and nothing runs: a trial's shadow, a
full copy in copy mode, stayed in $TMPDIR, and its session and the user's `--trial-cmd` went
on running. Here they raise Terminated the same way, and `exit_code` gives the code the
shell convention gives a process a signal ended: 128 + the signal's number (bash(1), "EXIT
STATUS"; 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), which docs/commands.md documents.

A child cudatx starts and must not outlive it runs in a process group of its own
(`run_in_group`, setsid(2)): the whole group is killed on the way out, whatever ended the
wait (a signal, an error, its own end), so what the child started (the trial's imports, a
`--trial-cmd`'s shell and what that shell runs) goes with it. A process that leaves the group
itself (setsid, a daemon's double fork) is out of its reach: only a PID namespace holds
those (the sandbox of issue 32, item 1).

The entry point installs the handlers once (`install`, cudatx.cli.app.main); a stage that
must clean up even when called otherwise (a trial, run by a test or a library caller) holds
them for its block (`raised`). A handler SIGHUP is ignored under (nohup(1) sets SIG_IGN) is
left as it is: a cudatx started to survive its terminal keeps running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the entry point imports this module at start-up
    import subprocess

# What raises Terminated; SIGINT stays Python's own KeyboardInterrupt.
RAISED = (signal.SIGTERM, signal.SIGHUP)
# What ends cudatx from outside, all three: held back while a cleanup must not be cut short.
ENDING = (signal.SIGINT, *RAISED)


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (a BaseException, as KeyboardInterrupt: no `except
    Exception` of the code it interrupts may take it for a failure of its own)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"terminated by {self.name}")


def exit_code(exc: BaseException) -> int:
    """The exit status for an interrupt: 128 + the signal's number (130 for SIGINT)."""
    if isinstance(exc, Terminated):
        return 128 + exc.signum
    return 128 + signal.SIGINT


def _raise(signum: int, frame: object) -> None:
    raise Terminated(signum)


def _default(handler: Any) -> bool:
    return handler is signal.SIG_DFL


def _not_ignored(handler: Any) -> bool:
    return handler is not signal.SIG_IGN


def _install(
    signals: Sequence[int] = RAISED, replaces: Callable[[Any], bool] = _default
) -> dict[int, Any]:
    """Set _raise for each of `signals` whose handler `replaces` accepts (by default: where
    it is the default, not an ignored SIGHUP, not a handler someone else set); the handlers
    it replaced."""
    old: dict[int, Any] = {}
    for signum in signals:
        if replaces(signal.getsignal(signum)):
            old[signum] = signal.signal(signum, _raise)
    return old


def install() -> None:
    """For the rest of the process: SIGTERM and SIGHUP raise Terminated in the main thread
    (Python runs signal handlers there only; elsewhere nothing is installed)."""
    if threading.current_thread() is threading.main_thread():
        _install()


@contextlib.contextmanager
def _raising(signals: Sequence[int], replaces: Callable[[Any], bool]) -> Iterator[None]:
    """_install for the block's length, the handlers put back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = _install(signals, replaces)
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


def raised() -> contextlib.AbstractContextManager[None]:
    """While the block runs, SIGTERM and SIGHUP raise Terminated (install, undone after)."""
    return _raising(RAISED, _default)


def every_one_raised() -> contextlib.AbstractContextManager[None]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP all raise Terminated, SIGINT too (not
    KeyboardInterrupt): for a block that must say which signal ended it (a transaction rolls
    back and names it). A signal that is ignored (nohup's SIGHUP) stays ignored."""
    return _raising(ENDING, _not_ignored)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back (pthread_sigmask) while the block runs, so a
    cleanup (removing a shadow) is not cut short; one that came meanwhile is delivered, and
    raised, when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, ENDING)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def kill_group(pgid: int) -> None:
    """SIGKILL to every process of the group (killpg(2)); nothing if none is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP noted, not acted on, while the block runs; the first one
    noted is sent again as the block ends, to the handlers it would have met (raised as
    KeyboardInterrupt or Terminated, or ending the process where that is their default).
    For a step an exception must not cut in two: starting a child, whose pid the caller has
    only once Popen returns (a signal while Popen waits for the exec would leave a child no
    one kills). Not pthread_sigmask: a child inherits a blocked mask across exec(2)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def note(signum: int, frame: object) -> None:
        pending.append(signum)

    old = {}
    for signum in ENDING:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            old[signum] = signal.signal(signum, note)
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if pending:
            signal.raise_signal(pending[0])


def run_in_group(
    argv: Sequence[str],
    *,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """subprocess.run(argv, input=input, capture_output=True, text=True), the child in a
    session and process group of its own (start_new_session: setsid(2), its pid the group's
    id), and that whole group killed when the wait ends, however it ends: by the child's
    end (what it left running in the background goes too), an exception, or an interrupt
    (KeyboardInterrupt, Terminated), which is raised again once the group is gone."""
    import subprocess

    child: subprocess.Popen[str] | None = None
    try:
        with deferred():  # a signal now is raised once `child` is known
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                start_new_session=True,
            )
        out, err = child.communicate(input)
    except BaseException:
        if child is not None:
            kill_group(child.pid)
            with held():
                child.wait()  # reaped before the caller removes what it worked in
        raise
    # What it left behind (a `--trial-cmd`'s `sleep &`). The leader is reaped by now, but its
    # id stays the group's while a member lives (a pid is not reused while a process group
    # holds it), and with none left killpg finds nothing.
    kill_group(child.pid)
    return subprocess.CompletedProcess(list(argv), child.returncode, out, err)


@contextlib.contextmanager
def temporary_folder(prefix: str) -> Iterator[str]:
    """tempfile.TemporaryDirectory's folder (mkdtemp: mode 0700, in $TMPDIR), removed when
    the block ends however it ends, its removal not cut short by a second signal (held)."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix=prefix)
    try:
        yield folder
    finally:
        with held():
            shutil.rmtree(folder, ignore_errors=True)
