"""The records of traced runs (`cudatx trace`), as the environment's store keeps them.

    <prefix>/.cudatx/traces/          0700, made by cudatx.txn.trace
        <id>.json                     0600, one traced run (TraceRecord), written atomically

A record says what one run of a command mapped, process by process (cudatx.discover.lddebug),
and the state (device, inode, size, mtime) of each file it mapped inside the environment.
It is trusted as the transaction store is (cudatx.trust: this user's, private, one name) and
used only while it is fresh: made in this environment (its path and its identity, so a copy
of the environment, store included, does not count its original's runs) and every file it
lists still in the state the run saw. A record whose files changed says what loaded before
the change, not now: it is *stale*, shown as such and never evidence.

The state leaves out ctime on purpose, where the scan cache keeps it: a transaction's
snapshot hard-links the files it saves, which changes their ctime and nothing the loader
reads. A rewrite in place that puts back the size and the mtime (`cp -p` over the file) is
therefore not seen; uv, pip and cudatx's rollback replace a file by a new inode.
"""

from __future__ import annotations

import datetime
import os
import shlex
from pathlib import Path

from cudatx.discover.confinement import STORE_DIR
from cudatx.discover.lddebug import DLOPEN, TracedProcess, absolute
from cudatx.documents import load_json
from cudatx.errors import StoreError, first_invalid
from cudatx.models import Finding, Frozen
from cudatx.trust import identity, read_private, refuse_foreign

TRACES = "traces"
SCHEMA_VERSION = 1


class FileState(Frozen):
    """What a fresh record asks of a file the run mapped: the same inode, size and mtime."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileState:
        return cls(dev=st.st_dev, ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns)


class TraceRecord(Frozen):
    """One traced run, as `<id>.json` holds it."""

    schema_version: int = SCHEMA_VERSION
    id: str
    created: str  # ISO 8601, UTC
    command: tuple[str, ...]
    cwd: str  # where it started: relative names it printed are from here
    prefix: str
    prefix_id: str  # cudatx.trust.identity of the prefix
    ld_library_path: str | None  # the run's own; its loads are replayed with it
    exit_code: int  # as the shell says it: 128+N for a run killed by signal N
    processes: tuple[TracedProcess, ...]  # those that mapped a file of the environment
    files: dict[str, FileState]  # each file mapped inside the environment, absolute
    others: int = 0  # programs that mapped nothing of the environment (a shell, `env`)

    @property
    def command_line(self) -> str:
        """The command as a shell reads it; a character that is not printable (the newlines
        of a `python -c` script) shown escaped, so that the run's name stays one line
        wherever a plan or doctor says it."""
        joined = shlex.join(self.command)
        if joined.isprintable():
            return joined
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in joined)

    @property
    def when(self) -> str:
        """`2026-12-02 14:00` (UTC), as a person reads it."""
        try:
            at = datetime.datetime.fromisoformat(self.created)
        except ValueError:
            return self.created
        return f"{at:%Y-%m-%d %H:%M} UTC"

    @property
    def label(self) -> str:
        """How plans and doctor name the run: "the traced run `python -c ...` (2026-...)"."""
        return f"the traced run `{self.command_line}` ({self.when})"

    def mapped(self) -> int:
        """Objects the kept processes mapped, each once per process."""
        return sum(len({load.path for load in p.loads}) for p in self.processes)


class Trace(Frozen):
    """A record as read: where it is, and why it is not trusted now (None: fresh)."""

    record: TraceRecord
    path: str
    stale: str | None = None

    @property
    def id(self) -> str:
        return self.record.id

    def root(self, index: int) -> str:
        """The load root that replays process `index` of the run (cudatx.loader.roots)."""
        return f"{self.path}#{index}"

    def replayed(self) -> tuple[int, ...]:
        """The processes worth a replay: one of each set of dlopens (the eight ranks of a
        `torchrun`, a pool's workers that exec the same program load alike)."""
        seen: set[tuple[tuple[str, str | None, str], ...]] = set()
        out = []
        for index, process in enumerate(self.record.processes):
            key = tuple((ld.name, ld.by, ld.path) for ld in process.loads if ld.kind == DLOPEN)
            if key and key not in seen:
                seen.add(key)
                out.append(index)
        return tuple(out)


def traces_dir(prefix: str) -> Path:
    return Path(prefix) / STORE_DIR / TRACES


def staleness(record: TraceRecord, prefix: str) -> str | None:
    """Why `record` no longer says what loads in the environment at `prefix`, or None."""
    try:
        here = identity(prefix)
    except StoreError:
        here = "?"
    if record.prefix != prefix or record.prefix_id != here:
        return f"made in {record.prefix} ({record.prefix_id}), not this environment ({here})"
    for path, state in record.files.items():
        try:
            now = FileState.of(os.stat(absolute(path, record.cwd)))
        except OSError as exc:
            return f"{path}: {exc.strerror or 'cannot stat'} since the run"
        if now != state:
            return f"{path} changed since the run"
    return None


def read_traces(prefix: str, *, strict: bool) -> tuple[tuple[Trace, ...], tuple[Finding, ...]]:
    """The records of the environment at `prefix`, oldest first, each with its staleness.

    A store or a record cudatx did not make, or cannot read, raises StoreError when
    `strict` (`cudatx trace --list`); otherwise it is a finding and the rest are read (a
    scan: doctor says it, a plan goes on without that record)."""
    folder = traces_dir(prefix)
    findings: list[Finding] = []
    try:
        for part in (folder.parent, folder):
            refuse_foreign(part, os.lstat(part), folder=True)
        names = sorted(
            n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith(".")
        )
    except FileNotFoundError:
        return (), ()
    except (OSError, StoreError) as exc:
        failed = _failure(folder, exc)
        if strict:
            raise failed from None
        return (), (_finding(failed),)
    out = []
    for name in names:
        path = folder / name
        try:
            record = load_json(TraceRecord, read_private(path))
        except FileNotFoundError:
            continue  # cleared while this read the folder
        except (OSError, StoreError, ValueError) as exc:  # ValueError: pydantic's refusal
            failed = _failure(path, exc)
            if strict:
                raise failed from None
            findings.append(_finding(failed))
            continue
        out.append(Trace(record=record, path=str(path), stale=staleness(record, prefix)))
    return tuple(out), tuple(findings)


def _failure(path: Path, exc: Exception) -> StoreError:
    if isinstance(exc, StoreError):
        return exc
    if not isinstance(exc, OSError):
        from pydantic import ValidationError  # load_json imported it: its refusal

        if isinstance(exc, ValidationError):
            why = first_invalid(exc, "record")
            return StoreError(f"trace record {path} is corrupt ({why})", path=str(path))
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StoreError(f"cannot read {path}: {reason}", path=str(path))


def _finding(failed: StoreError) -> Finding:
    return Finding(
        kind="untrusted trace record",
        path=failed.path or "",
        message=f"{failed.message}; its loads are not counted",
    )
