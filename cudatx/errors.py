"""One exception root for everything cudatx refuses to do, with the exit code it maps to.

The CLI turns a CudatxError into one line on stderr and its exit code; nothing else in
cudatx prints or exits. The codes are documented in README.md ("Exit codes").
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class ExitCode(IntEnum):
    FINDINGS = 1  # the command ran and found something wrong (later: doctor errors, unsafe plan)
    USAGE = 2  # bad command line (click's own code for usage errors)
    NO_ENVIRONMENT = 3  # the target Python could not be found or asked
    NOT_FOUND = 4  # the library or path asked about is not in the environment
    UNREADABLE = 5  # a file cudatx must read could not be read
    DEMO_FAILED = 6  # `cudatx demo` could not build its environment (no compiler, uv failed)
    BUSY = 7  # another cudatx transaction holds this environment's lock
    INTERRUPTED = 8  # an interrupted transaction must be rolled back first
    IN_USE = 9  # running processes map files the change would delete or overwrite
    ROLLED_BACK = 10  # applying or verifying failed; the environment was rolled back
    CONFLICT = 11  # rollback refused: the environment changed since the transaction
    STORE = 12  # the snapshot store is missing, incomplete or corrupt
    UV = 13  # uv could not say what it would do, or stage it (resolution, index, network)
    NOTHING_TO_ROLL_BACK = 14  # rollback found no transaction recorded for the environment
    CONDA_OWNED = 15  # the change would act on what conda installed; cudatx applies through uv
    NEEDS_BUILD = 16  # a requirement can only be had by building it; --allow-build builds it
    UNSAFE_PATHS = 17  # another user can write the environment, or a folder leads outside it
    TRIAL = 18  # a trial (--trial) could not be run: no shadow, or its session failed
    DECLINED = 19  # the user answered no at a prompt: nothing was changed (^C stays 130)
    # `cudatx trace`: the command could not be started (the codes shells and env(1) use)
    COMMAND_NOT_EXECUTABLE = 126
    COMMAND_NOT_FOUND = 127
    INTERNAL = 70  # a bug in cudatx (EX_SOFTWARE)


class CudatxError(Exception):
    """Root of every error cudatx reports; `message` is one line a user can act on."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str, *, path: str | None = None, output: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        # What a command cudatx ran said before it failed (--verify's output), shown above
        # the one-line message; empty for most errors.
        self.output = output


class Refused(CudatxError):
    """cudatx will not carry out a plan it found unsafe (exit 1, as the dry run's verdict)."""

    exit_code = ExitCode.FINDINGS


class UsageError(CudatxError):
    """The command line asks for something that cannot be (a bad SPEC, a bad -r line)."""

    exit_code = ExitCode.USAGE


class EnvironmentNotFound(CudatxError):
    exit_code = ExitCode.NO_ENVIRONMENT


class NoVirtualEnvironment(EnvironmentNotFound):
    """A command that changes an environment was given none: it never changes cudatx's own."""


class NotInEnvironment(CudatxError):
    exit_code = ExitCode.NOT_FOUND


class UnreadableFile(CudatxError):
    exit_code = ExitCode.UNREADABLE


class Busy(CudatxError):
    exit_code = ExitCode.BUSY


class Interrupted(CudatxError):
    exit_code = ExitCode.INTERRUPTED


class InUse(CudatxError):
    exit_code = ExitCode.IN_USE


class RolledBack(CudatxError):
    exit_code = ExitCode.ROLLED_BACK


class VerificationFailed(RolledBack):
    """After uv ran, the environment is not what the plan said (or --verify failed); the
    transaction rolls it back."""


class Conflict(CudatxError):
    exit_code = ExitCode.CONFLICT


class StoreError(CudatxError):
    exit_code = ExitCode.STORE


class Declined(CudatxError):
    """The user answered no to "Proceed?" or "Roll back ...?": nothing was changed. Its own
    code: a script tells it from an interrupt (130) and from a failure."""

    exit_code = ExitCode.DECLINED


class NothingToRollBack(CudatxError):
    """No transaction is recorded for the environment: nothing is wrong with the store."""

    exit_code = ExitCode.NOTHING_TO_ROLL_BACK


class ForeignOwned(CudatxError):
    """The change would uninstall or replace a package an owner cudatx does not change
    installed (conda's; cudatx.discover.owners): cudatx applies changes through uv only, and
    never changes what conda installed (its records would no longer say what is there). The
    message names the command a user would run (conda's)."""

    exit_code = ExitCode.CONDA_OWNED


class NeedsBuild(CudatxError):
    """A requirement can only be had by building it (an sdist, a local folder, an editable, a
    VCS checkout): building runs its setup.py or build backend, code from whoever wrote it.
    Nothing builds unless the user passes --allow-build; a dry run and a check never build
    behind a user's back."""

    exit_code = ExitCode.NEEDS_BUILD


def needs_build(what: list[str]) -> str:
    """The one line NeedsBuild says: what can only be had by building it."""
    shown = ", ".join(what[:5]) + (f" and {len(what) - 5} more" if len(what) > 5 else "")
    return one_line(f"{shown} can only be checked by building it: pass --allow-build")


class ExternallyManaged(CudatxError):
    """The target Python is externally managed (PEP 668): a change of it is refused, as uv
    refuses it, unless --break-system-packages. Exit 13, uv's own refusal, which a script
    already reads as "uv would not do this"."""

    exit_code = ExitCode.UV


class UnsafePaths(CudatxError):
    """What cudatx would act on is not safely its to act on: another user than the one
    running cudatx can write the environment or its interpreter (and so swap a folder for a
    symlink between cudatx's checks and uv's deletions), or a metadata or package folder of
    what changes is a symlink leading outside the environment. Refused before anything is
    touched."""

    exit_code = ExitCode.UNSAFE_PATHS


class CommandNotFound(CudatxError):
    """`cudatx trace`: no such command on the environment's PATH."""

    exit_code = ExitCode.COMMAND_NOT_FOUND


class CommandNotExecutable(CudatxError):
    """`cudatx trace`: the command is there but cannot be executed."""

    exit_code = ExitCode.COMMAND_NOT_EXECUTABLE


class ElfReadError(UnreadableFile):
    """A file is not a loadable ELF object (not ELF, truncated, unreadable).

    The scan turns these into findings; they reach the user as errors only when the file was
    asked about by name.
    """

    def __init__(self, path: str, reason: str, *, passing: bool = False) -> None:
        super().__init__(f"{path}: {reason}", path=path)
        self.reason = reason
        # Not a fact of the file's bytes, so never cached: it could not be read (permissions,
        # I/O), or the reading code itself failed on it in a way no check of ours names.
        self.passing = passing


# What cudatx shows escaped of a string that came from outside it (a RECORD path, METADATA,
# a wheel's name, an index's or uv's message, a requirements line, a file name on disk): each
# C0 control and DEL (a terminal acts on ESC, BEL, BS, CR; a line break forges a line), each
# C1 control (U+0080-U+009F: U+009B is an 8-bit CSI, U+0085 a line break), the bidi embeddings,
# overrides and isolates (they reorder what a reader sees: Trojan Source, CVE-2021-42574), the
# line and paragraph separators, and lone surrogates (a file name's undecodable byte, which a
# surrogateescape stream would write back raw: 0x9b, the CSI again). Shown as Python writes
# them, `\n`, `\x1b`, `\u202e`, so a reader sees what the bytes were. The backslash is kept as
# it is: an ordinary value reads as it did, and escaping twice changes nothing.
_ESCAPED = (
    [chr(c) for c in range(0x20)]
    + ["\x7f"]
    + [chr(c) for c in range(0x80, 0xA0)]
    + [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
    + ["\u2028", "\u2029"]
)
_LAYOUT = "\n\t"  # what cudatx's own text means by a line break and a tab
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(c: str) -> str:
    code = ord(c)
    return _NAMED.get(c) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def _class(chars: list[str]) -> re.Pattern[str]:
    listed = "".join(f"\\u{ord(c):04x}" for c in chars)
    return re.compile(f"[{listed}\\ud800-\\udfff]")


# Regular expressions rather than str.translate: a report is long and almost never holds one
# of these, and a search that finds nothing costs a fraction of a translation.
_ANY = _class(_ESCAPED)
_BUT_LAYOUT = _class([c for c in _ESCAPED if c not in _LAYOUT])


def _shown(match: re.Match[str]) -> str:
    return _escape(match.group())


def one_line(text: str) -> str:
    """`text`, a value from outside cudatx, as one line of data: every control character in
    it shown escaped, line breaks and tabs too (see _ESCAPED), so it can neither act on the
    terminal nor make a line that passes for cudatx's own."""
    return _ANY.sub(_shown, text)


def printable(text: str) -> str:
    """`text`, a whole message or report cudatx laid out, with every control character
    escaped but its own line breaks and tabs: the printer's net (cudatx.cli.output), for a
    value a renderer did not escape. Run before colour is painted: cudatx's own ANSI styles
    come after it."""
    return _BUT_LAYOUT.sub(_shown, text)


def first_invalid(exc: ValidationError, whole: str) -> str:
    """`where: why` of the first thing pydantic rejected, as one line (`whole` names the
    document when the fault is in it as a whole, as "not JSON")."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or whole
    return one_line(f"{where}: {first['msg']}")


# What JSON may hold raw but a terminal acts on: DEL, the C1 controls, the bidi controls and
# the separators (json escapes C0 itself; pydantic writes the rest as they are). Escaped as
# JSON does, `\u009b`, which reads back as the same string.
_JSON_RAW = re.compile("[" + "".join(f"\\u{ord(c):04x}" for c in _ESCAPED[0x20:]) + "]")


def json_text(document: str) -> str:
    """A JSON document with every character that would act on a terminal written as a JSON
    escape: outside its strings a document holds none, so the escapes land in strings only."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
