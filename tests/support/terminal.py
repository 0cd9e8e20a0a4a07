"""Running cudatx in a real pseudo-terminal, as a person at a terminal does.

stdout and stderr each get a pty of their own (so each is a terminal, and the two stay
apart); stdin is the stderr one. Output processing (OPOST: "\\n" -> "\\r\\n") is turned off
so that what a test reads is the bytes cudatx wrote, comparable with a pipe's.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import termios
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from tests.support.cli import HIDDEN, Arg, argv, environ

# Variables that decide colour: a test sets the ones it means.
COLOUR_VARIABLES = frozenset({"NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "TERM"})


@dataclass(frozen=True)
class Session:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode()

    @property
    def err(self) -> str:
        return self.stderr.decode()


def _raw_output(fd: int) -> None:
    attrs = termios.tcgetattr(fd)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


def in_terminal(
    *args: Arg,
    env: Mapping[str, str] | None = None,
    hide: Collection[str] = HIDDEN | COLOUR_VARIABLES,
    timeout: float = 120,
    typed: str = "",
) -> Session:
    """``python -m cudatx ARGS`` with stdout and stderr on terminals (TERM=xterm-256color
    unless `env` says otherwise); waits for it to end. `typed`: what the person types, ahead
    (a prompt's answer and its newline)."""
    out_master, out_slave = pty.openpty()
    err_master, err_slave = pty.openpty()
    for fd in (out_slave, err_slave):
        _raw_output(fd)
    try:
        process = subprocess.Popen(
            argv(*args),
            stdin=err_slave,
            stdout=out_slave,
            stderr=err_slave,
            env=environ(hide, {"TERM": "xterm-256color", **dict(env or {})}),
            close_fds=True,
        )
    finally:
        os.close(out_slave)
        os.close(err_slave)
    if typed:
        os.write(err_master, typed.encode())  # the terminal keeps it until the prompt reads
    read: dict[int, bytearray] = {out_master: bytearray(), err_master: bytearray()}
    open_fds = set(read)
    deadline = time.monotonic() + timeout
    try:
        while open_fds:
            if time.monotonic() > deadline:
                process.kill()
                raise TimeoutError(f"cudatx {args} ran past {timeout}s")
            ready, _, _ = select.select(list(open_fds), [], [], 0.2)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the other end is closed
                    chunk = b""
                if chunk:
                    read[fd] += chunk
                else:
                    open_fds.discard(fd)
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(out_master)
        os.close(err_master)
    return Session(code, bytes(read[out_master]), bytes(read[err_master]))
