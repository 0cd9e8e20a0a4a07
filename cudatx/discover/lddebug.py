"""What glibc's loader says it did in a real run: `LD_DEBUG=libs,files` output, read back.

`cudatx trace` runs a command with `LD_DEBUG=libs,files` and `LD_DEBUG_OUTPUT=<folder>/ld`:
each process's ld.so opens `<folder>/ld.<pid>` (O_APPEND, so an exec'd program writes after
the one it replaced) and writes every line as `"%5d:\\t"` (its pid, right-aligned) and the
text (elf/dl-misc.c _dl_debug_vdprintf). A forked child keeps its parent's descriptor: its
lines land in the parent's file under its own pid. The lines read here, from glibc 2.36:

    file=NAME [NS];  needed by L_NAME [NS]               elf/dl-load.c _dl_map_object, a
    file=NAME [NS];  dynamically loaded by L_NAME [NS]   DT_NEEDED entry or a dlopen call
    find library=NAME [NS]; searching                    (no '/' in NAME)
      trying file=PATH                                   open_path; the cache's answer too
    file=NAME [NS];  generating link map                 _dl_map_object_from_fd: mapped
    initialize program: ARGV0                            elf/rtld.c, before main's
    transferring control: ARGV0                          constructors and main

`_dl_map_object` prints nothing for a name an object already loaded answers to (its loop
over the loaded objects runs first), so every request read here mapped a new object, or
failed, or (a search ending on a file already mapped under another name) mapped nothing.
Only the mapped ones are kept: the file is the last `trying file=` of the search, or the
name itself when it holds a '/' (already expanded: elf/dl-deps.c expands $ORIGIN first).
L_NAME is the requester's link-map name: the path it was opened at, and for the main
program argv[0] (DSO_FILENAME). For a dlopen it is the object whose code called dlopen
(elf/dl-open.c: _dl_find_dso_for_object on the caller's address): `_ctypes` for
ctypes.CDLL, libpython (or the interpreter, when built static) for an import.

A line holding a character terminals and str.splitlines break lines at (\v, \f, \x1c-\x1e,
\x85, U+2028, U+2029: a file name may hold them) is passed over, so no name cudatx keeps
and prints later can pass for two lines.

A process that execs writes its next program into the same file; that program's first
request is a DT_NEEDED of its main program, which the program before never mapped: a
`needed by` naming an object not mapped since the last `transferring control` starts a new
image.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from cudatx.models import Frozen

# A pid has at most 7 digits (PID_MAX_LIMIT, 2**22) and a namespace index 2 (DL_NNS, 16):
# a longer run of digits is no line of ld.so's, and int() refuses over 4,300 digits
# (CPython's limit against quadratic conversion; found by tests/test_fuzz.py).
_LINE = re.compile(r"^\s*(?P<pid>\d{1,10}):\t(?P<text>.*)$")
_REQUEST = re.compile(
    r"^file=(?P<name>.*) \[(?P<ns>\d{1,10})\];  (?P<kind>needed by|dynamically loaded by) "
    r"(?P<by>.*) \[\d+\]$"
)
_MAPPED = re.compile(r"^file=(?P<name>.*) \[(?P<ns>\d{1,10})\];  generating link map$")
_FIND = re.compile(r"^find library=(?P<name>.*) \[(?P<ns>\d{1,10})\]; searching$")
_TRYING = re.compile(r"^  trying file=(?P<path>.*)$")
_PROGRAM = re.compile(r"^(?P<step>initialize program|transferring control): (?P<argv0>.*)$")

NEEDED = "needed"  # a DT_NEEDED entry of `by`
DLOPEN = "dlopen"  # a dlopen called from code in `by`
UNKNOWN = "unknown"  # mapped with no requester printed (an LD_PRELOAD, an audit module)


class TracedLoad(Frozen):
    """One object a traced process mapped, and who asked for it."""

    name: str  # as asked: a DT_NEEDED entry (DSTs expanded) or dlopen's argument
    kind: str  # NEEDED, DLOPEN or UNKNOWN
    by: str | None  # the requester's link-map name as glibc printed it
    path: str  # the file mapped, as opened (relative where the name was)
    namespace: int = 0  # the link-map namespace (dlmopen makes others than 0)


class TracedProcess(Frozen):
    """One program a traced process ran (an exec starts another), with what it mapped."""

    pid: int
    program: str | None  # argv[0], as `initialize program:` prints it
    loads: tuple[TracedLoad, ...]


@dataclass
class _Request:
    name: str
    kind: str
    by: str | None
    namespace: int
    tried: str | None = None


@dataclass
class _Image:
    pid: int
    program: str | None = None
    started: bool = False  # `transferring control` seen: main runs
    loads: list[TracedLoad] = field(default_factory=list)
    names: set[str] = field(default_factory=set)  # link-map names of what it mapped

    def done(self) -> TracedProcess:
        return TracedProcess(pid=self.pid, program=self.program, loads=tuple(self.loads))


def read_report(lines: Iterable[str], pid: int) -> list[TracedProcess]:
    """The programs the process `pid` ran, from its file `ld.<pid>`: lines of other pids
    (children it forked) count as its own, each line to its pid's pending request."""
    images = [_Image(pid)]
    pending: dict[int, _Request] = {}
    for raw in lines:
        line = _LINE.match(raw.rstrip("\n"))
        if line is None:
            continue
        who, text = int(line["pid"]), line["text"]
        if len(text.splitlines()) > 1:
            continue  # a name holding \v, \x85, U+2028...: it would print as two lines
        image = images[-1]
        if m := _REQUEST.match(text):
            by = m["by"]
            needed = m["kind"] == "needed by"
            if who == pid and needed and image.started and by not in image.names:
                image = _Image(pid)  # the program an exec started (module docstring)
                images.append(image)
            kind = NEEDED if needed else DLOPEN
            pending[who] = _Request(m["name"], kind, by, int(m["ns"]))
        elif m := _FIND.match(text):
            request = pending.get(who)
            if request is None or request.name != m["name"]:
                pending[who] = _Request(m["name"], UNKNOWN, None, int(m["ns"]))
        elif m := _TRYING.match(text):
            if who in pending:
                pending[who].tried = m["path"]
        elif m := _MAPPED.match(text):
            request = pending.pop(who, None)
            if request is None or request.name != m["name"]:
                request = _Request(m["name"], UNKNOWN, None, int(m["ns"]))
            path = request.name if "/" in request.name else request.tried or request.name
            image.loads.append(
                TracedLoad(
                    name=request.name,
                    kind=request.kind,
                    by=request.by,
                    path=path,
                    namespace=request.namespace,
                )
            )
            image.names.add(path)
        elif (m := _PROGRAM.match(text)) and who == pid:
            image.program = m["argv0"]
            image.started |= m["step"] == "transferring control"
    return [i.done() for i in images if i.loads or i.program]


def report_files(folder: str, prefix: str) -> list[tuple[int, str]]:
    """(pid, path) of each `<prefix>.<pid>` file glibc wrote in `folder`, by pid."""
    found = []
    for name in os.listdir(folder):
        head, dot, tail = name.rpartition(".")
        if dot and head == prefix and tail.isdigit():
            found.append((int(tail), os.path.join(folder, name)))
    return sorted(found)


def absolute(path: str, cwd: str) -> str:
    """A path a traced process printed, made absolute against the folder it started in
    (glibc keeps a relative name as given)."""
    return path if path.startswith("/") else os.path.join(cwd, path)
