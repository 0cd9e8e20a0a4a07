"""The `.rodata` names of many objects, read by a child process beside the scan.

Scanning `.rodata` for soname-shaped strings (cudatx.elf.reader.rodata_sonames) is a third of
a cold scan of a CUDA environment: 300 MB of sections, read and matched, while the scan's own
work (distributions, the loader's replay, symbol checks) has no need of them until a root's
run-time loads. A child forked for the purpose does that reading on another CPU and sends
each result down a pipe as it has it; the scan takes them in whatever order it asks.

Nothing here is needed for an answer: a child that cannot be forked, dies, or says nothing
of a file leaves that file to be read in the scan's own process, as it would be without it.
The child touches nothing but the files it reads and the pipe (no cache, no output), and
leaves with os._exit, running none of the parent's exit handlers. The scan has no threads
when it forks (nothing of cudatx starts one), so no lock is copied held.
"""

from __future__ import annotations

import json
import os
import select
import signal
from collections.abc import Sequence
from typing import IO

from cudatx.errors import ElfReadError


class RodataPrefetch:
    """rodata_sonames of `paths`, in that order, computed by a forked child."""

    def __init__(self, paths: Sequence[str]) -> None:
        self._waiting = set(paths)
        self._got: dict[str, tuple[str, ...]] = {}
        self._stream: IO[bytes] | None = None
        self._pid = 0
        if not paths:
            return
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            self._waiting.clear()
            return
        if pid == 0:  # the child: it never returns
            os.close(read)
            _serve(paths, write)
        os.close(write)
        self._pid = pid
        self._stream = os.fdopen(read, "rb")

    def take(self, path: str) -> tuple[str, ...] | None:
        """The names of `path` as the child read them; None where it did not, and the
        caller reads the file itself."""
        if path in self._got:
            return self._got.pop(path)
        if path not in self._waiting:
            return None
        while self._stream is not None:
            said = _said(self._stream.readline())
            if said is None:  # the child is gone, or said something else
                self._got.update(self.close())
                break
            done, names = said
            self._waiting.discard(done)
            if done == path:
                return names
            self._got[done] = names
        return None

    def close(self) -> dict[str, tuple[str, ...]]:
        """Stop the child, wherever it is, and reap it; what it had sent and no one took
        (files the scan never asked about, for the scan cache to keep all the same)."""
        self._waiting.clear()
        if self._stream is not None:
            while select.select([self._stream], [], [], 0)[0]:
                said = _said(self._stream.readline())
                if said is None:
                    break
                self._got[said[0]] = said[1]
            self._stream.close()
            self._stream = None
        if self._pid:
            try:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self._pid = 0
        left, self._got = self._got, {}
        return left


def _said(line: bytes) -> tuple[str, tuple[str, ...]] | None:
    try:
        done, names = json.loads(line)
    except (ValueError, TypeError):  # no line (the child is gone), or not a pair
        return None
    if not isinstance(done, str) or not isinstance(names, list):
        return None
    return done, tuple(str(n) for n in names)


def _serve(paths: Sequence[str], fd: int) -> None:
    """The child's work: one JSON line [path, names] per file it could read."""
    from cudatx.elf.reader import rodata_sonames

    code = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for path in paths:
                try:
                    names = list(rodata_sonames(path))
                except ElfReadError as exc:
                    if exc.passing:
                        continue  # a passing failure: the scan reads it again itself
                    names = []  # what the scan keeps for a file that is no ELF object
                out.write(json.dumps([path, names]).encode() + b"\n")
                out.flush()
    except BaseException:  # a broken pipe (the scan is done), an interrupt: just leave
        code = 1
    finally:
        os._exit(code)
