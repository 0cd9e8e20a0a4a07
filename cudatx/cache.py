"""What reading an environment's files costs, kept between runs.

ELF facts (what the loader reads, the `PyInit_*` names, the soname-shaped strings of .rodata),
file digests and parsed dist-info folders live in one SQLite file in the user's cache folder:
`CUDATX_CACHE_DIR`, else `$XDG_CACHE_HOME/cudatx`, else `~/.cache/cudatx`.

A file's facts are keyed by its state: (st_dev, st_ino) find the entry, and (st_size,
st_mtime_ns, st_ctime_ns) must match it. The ctime goes beyond size and mtime on purpose:
`cp -p`, `touch -r` and `rsync -t` can rewrite a file in place with its old size and mtime,
and no call sets a ctime back. A file whose ctime is younger than RACY_NS is used but not
stored, as git does with racily clean files: a second write in the same timestamp tick (a
second, on some filesystems) would leave every field the same.

Safety, as the design asks of a cache nobody should have to think about:
- every reader holds a shared flock on `scan.lock` for as long as it has the database open;
  only a holder of the exclusive lock deletes a corrupt database and starts a new one, so no
  process ever has the file removed under an open connection (SQLite's journal is tied to
  the file's name);
- the database is in rollback-journal mode with a busy timeout; a run's writes are one
  transaction, at the end;
- anything wrong with the file (not a database, shorter than its header says, a row whose
  checksum or shape is wrong) gets it rebuilt; a cache that cannot be used is no cache,
  never an error of the command; another cudatx version or schema empties it;
- the folder is created 0700 and must be a real folder (not a symlink) of this user that
  nobody else can write to; the lock is opened without following symlinks, and a database
  path that is not a regular file counts as corrupt.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import sqlite3
import stat
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from cudatx import __version__

# 2: version definitions, DT_FLAGS, dynamic symbols; a rowid table, since a WITHOUT ROWID
# table keeps whole rows in its interior pages and a large value (a library's symbols)
# then slowed every lookup to milliseconds. 3: a library's references only, no definitions.
SCHEMA = 3
DATABASE = "scan.sqlite"
LOCK = "scan.lock"
RACY_NS = 2_000_000_000  # FAT stamps have 2 s steps; ext3 and HFS+ have 1 s
KEEP_DAYS = 30  # entries nobody used for this long are dropped
_BUSY_S = 2.0
_READ_S = 0.2  # the longest a read transaction is held
_DAY_S = 86_400
# SQLite's primary result codes for a damaged file.
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


class _Corrupt(Exception):
    """The database file cannot be trusted."""


def cache_folder(environ: Mapping[str, str] | None = None) -> Path:
    """Where the cache lives: CUDATX_CACHE_DIR, else $XDG_CACHE_HOME/cudatx (an absolute one,
    as the XDG spec says), else ~/.cache/cudatx."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("CUDATX_CACHE_DIR")
    if explicit:
        return Path(os.path.abspath(explicit))
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg, "cudatx")
    home = environ.get("HOME") or str(Path.home())
    return Path(home, ".cache", "cudatx")


def file_key(st: os.stat_result) -> tuple[str, str]:
    """(where the entry is, what must match) for a file in state `st`."""
    return f"{st.st_dev}:{st.st_ino}", f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def settled(st: os.stat_result) -> bool:
    """Whether a later write is sure to change the file's ctime (see RACY_NS)."""
    return time.time_ns() - st.st_ctime_ns > RACY_NS


def _storable(*texts: str) -> bool:
    """Whether SQLite can take these as TEXT: a file name that is not UTF-8 (os.fsdecode
    gives lone surrogates) cannot be encoded, and is simply never cached."""
    try:
        for text in texts:
            text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _corrupt(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


class ScanCache:
    """One run's view of the cache: reads as it goes, writes once, on close."""

    def __init__(self, folder: Path, connection: sqlite3.Connection, lock: int) -> None:
        self.folder = folder
        self._db = connection
        self._lock = lock
        self._today = int(time.time() // _DAY_S)
        self._pending: dict[tuple[str, str], tuple[str, str, int]] = {}
        self._touched: set[tuple[str, str]] = set()
        self._broken = False
        self._read_since: float | None = None  # when the open read transaction began
        self.hits = 0
        self.misses = 0

    # -- reading and writing ------------------------------------------------------------

    def get(self, kind: str, key: str, state: str) -> str | None:
        """The text stored for (kind, key) in this state, or None. Its reader validates it
        and calls invalid() when it is not what it should be."""
        if self._broken or not _storable(key, state):
            return None
        pending = self._pending.get((kind, key))
        if pending is not None:
            return pending[1] if pending[0] == state else None
        try:
            self._reading()
            row = self._db.execute(
                "SELECT state, value, crc, used FROM entries WHERE kind = ? AND key = ?",
                (kind, key),
            ).fetchone()
        except sqlite3.Error as exc:
            self._fail(exc)
            return None
        if row is None or row[0] != state:
            self.misses += 1
            return None
        _, text, crc, used = row
        if not isinstance(text, str) or zlib.crc32(text.encode()) != crc:
            self._broken = True  # damaged bytes that SQLite did not notice: rebuild
            return None
        if used != self._today:
            self._touched.add((kind, key))
        self.hits += 1
        return text

    def _reading(self) -> None:
        """Reads share one transaction (a lock taken once, not per read), for at most
        _READ_S at a time: a writer waits for readers in rollback-journal mode."""
        now = time.monotonic()
        if self._read_since is not None and now - self._read_since > _READ_S:
            self._db.execute("COMMIT")
            self._read_since = None
        if self._read_since is None:
            self._db.execute("BEGIN")
            self._read_since = now

    def put(self, kind: str, key: str, state: str, text: str) -> None:
        """Store a value, written when the run ends (not one SQLite cannot hold)."""
        if _storable(key, state, text):
            self._pending[(kind, key)] = (state, text, zlib.crc32(text.encode()))

    def invalid(self) -> None:
        """A stored value was unusable (its shape is not what this version reads): rebuild."""
        self._broken = True

    def get_file(self, kind: str, st: os.stat_result) -> str | None:
        return self.get(kind, *file_key(st))

    def put_file(self, kind: str, st: os.stat_result, text: str) -> None:
        if settled(st):
            self.put(kind, *file_key(st), text)

    # -- the end of a run ---------------------------------------------------------------

    def close(self) -> None:
        """Write what this run learnt in one transaction; rebuild a broken file. Never raises."""
        try:
            if self._read_since is not None:
                self._read_since = None
                self._db.execute("COMMIT")
            if not self._broken and (self._pending or self._touched):
                self._write()
        except sqlite3.Error as exc:
            self._fail(exc)
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            if self._broken:
                _rebuild(self.folder, self._lock)
            os.close(self._lock)

    def _write(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT OR REPLACE INTO entries (kind, key, state, value, crc, used) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(k, key, s, v, c, self._today) for (k, key), (s, v, c) in self._pending.items()],
        )
        db.executemany(
            "UPDATE entries SET used = ? WHERE kind = ? AND key = ?",
            [(self._today, kind, key) for kind, key in self._touched],
        )
        db.execute("DELETE FROM entries WHERE used < ?", (self._today - KEEP_DAYS,))
        db.execute("COMMIT")

    def _fail(self, exc: sqlite3.Error) -> None:
        # Busy, read-only, disk full: this run goes on without the cache. Damage: rebuild.
        self._broken = self._broken or _corrupt(exc)
        self._pending.clear()
        self._touched.clear()


_T = TypeVar("_T")


class Stale(Exception):
    """Raised by a `load` of memo(): the kept answer was right but what it was read from has
    changed since (a folder listing whose folders moved on). Computed again; the cache is
    sound, unlike an answer `load` cannot read (TypeError, KeyError, ValueError)."""


class Unkept(Exception):
    """Raised by a `compute` of memo() with its answer for this run only: a passing failure
    (the file could not be read now, or the reading code failed on it) is never kept as a
    fact of the file."""

    def __init__(self, answer: object) -> None:
        super().__init__()
        self.answer = answer


def memo(
    cache: ScanCache | None,
    kind: str,
    key: str,
    state: str,
    compute: Callable[[], _T],
    *,
    load: Callable[[str], _T],
    dump: Callable[[_T], str | None],
) -> _T:
    """The one way an answer is kept between runs: the text stored under (kind, key) while
    `state` is the same, read back by `load`; else `compute()`, stored as `dump` makes it
    (None: not to be kept, such as an answer read from files not yet settled). `load` raises
    Stale, or TypeError, KeyError or ValueError on a text this version cannot read (then the
    cache is rebuilt); `compute` raises Unkept for an answer of this run only."""
    if cache is not None:
        text = cache.get(kind, key, state)
        if text is not None:
            try:
                return load(text)
            except Stale:
                pass
            except (TypeError, KeyError, ValueError):  # cudatx.codec.Invalid is a ValueError
                cache.invalid()
    try:
        answer = compute()
    except Unkept as unkept:
        return cast(_T, unkept.answer)
    if cache is not None:
        text = dump(answer)
        if text is not None:
            cache.put(kind, key, state, text)
    return answer


def memo_file(
    cache: ScanCache | None,
    kind: str,
    st: os.stat_result,
    compute: Callable[[], _T],
    *,
    load: Callable[[str], _T],
    dump: Callable[[_T], str | None],
) -> _T:
    """memo() for a fact of one file in state `st` (file_key), kept only once the file has
    settled (see RACY_NS)."""
    key, state = file_key(st)
    keep = settled(st)
    return memo(
        cache, kind, key, state, compute, load=load, dump=lambda a: dump(a) if keep else None
    )


def remembered(
    cache: ScanCache | None,
    kind: str,
    key: str,
    facts: Callable[[], object],
    compute: Callable[[], _T],
    *,
    read: Callable[[Any], _T],
    write: Callable[[_T], object],
) -> _T:
    """memo() of `compute()` for as long as `facts()` (JSON: all that the answer depends on)
    stays the same; `write` makes the answer JSON and `read` makes it back."""
    if cache is None:
        return compute()
    import hashlib  # an OpenSSL load: only where an answer is kept (see _fingerprint)

    state = hashlib.sha256(json.dumps(facts()).encode()).hexdigest()
    return memo(
        cache,
        kind,
        key,
        state,
        compute,
        load=lambda text: read(json.loads(text)),
        dump=lambda answer: json.dumps(write(answer)),
    )


def open_cache(environ: Mapping[str, str] | None = None) -> ScanCache | None:
    """The cache, or None where it cannot be used (never an error)."""
    try:
        folder = _folder(cache_folder(environ))
        lock = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # another process is rebuilding it right now
        os.close(lock)
        return None
    for _ in range(2):
        connection: sqlite3.Connection | None = None
        try:
            connection = _connect(folder / DATABASE)
            _prepare(connection, folder / DATABASE)
            return ScanCache(folder, connection, lock)
        except (_Corrupt, sqlite3.Error, OSError) as exc:
            if connection is not None:
                with contextlib.suppress(sqlite3.Error):
                    connection.close()
            damaged = isinstance(exc, _Corrupt) or (
                isinstance(exc, sqlite3.Error) and _corrupt(exc)
            )
            if not damaged or not _rebuild(folder, lock):
                break
    os.close(lock)
    return None


def _folder(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{path} is not a folder")  # a symlink, whatever it points at
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise OSError(f"{path} is not this user's alone")
    return path


def _connect(path: Path) -> sqlite3.Connection:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(st.st_mode):
            raise _Corrupt(f"{path} is not a regular file")
        # A second name of the inode (a hard link planted from elsewhere) would have sqlite
        # write into that other file; a file of another user is not ours to write.
        if st.st_nlink != 1 or st.st_uid != os.geteuid():
            raise _Corrupt(f"{path} is not this user's alone")
    # Autocommit: reads take no lasting lock; the one write transaction is explicit.
    return sqlite3.connect(path, timeout=_BUSY_S, isolation_level=None)


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    """Check the file and the schema; create or empty the table where needed."""
    db.execute("BEGIN")  # one snapshot: no writer can change the file while we look
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError as exc:
        if _corrupt(exc):
            raise
        meta = {}  # a new file: no tables yet
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    if os.path.getsize(path) < pages * page_size:
        raise _Corrupt(f"{path} is shorter than its header says")  # truncated
    db.execute("COMMIT")
    if meta == {"schema": str(SCHEMA), "version": _fingerprint()}:
        return
    db.execute("BEGIN IMMEDIATE")
    db.execute("DROP TABLE IF EXISTS entries")
    db.execute("DROP TABLE IF EXISTS meta")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE entries (kind TEXT NOT NULL, key TEXT NOT NULL, state TEXT NOT NULL, "
        "value TEXT NOT NULL, crc INTEGER NOT NULL, used INTEGER NOT NULL, "
        "PRIMARY KEY (kind, key))"
    )
    db.executemany(
        "INSERT INTO meta VALUES (?, ?)", [("schema", str(SCHEMA)), ("version", _fingerprint())]
    )
    db.execute("COMMIT")


def _rebuild(folder: Path, lock: int) -> bool:
    """Delete the database if no other process has it open. True when it is gone and this
    process holds its shared lock again."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    removed = True
    for name in (DATABASE, DATABASE + "-journal"):
        try:
            os.unlink(folder / name)
        except FileNotFoundError:
            pass
        except OSError:
            removed = False
    try:
        # Not atomic (flock(2)): another process may take the lock in between.
        fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return False
    return removed


# What the fingerprint covers: every module and data file of the package, found by walking
# it (a hand-kept list of "the modules whose output is stored" went stale: a fix in one it
# omitted left an upgraded cudatx serving the old answers for unchanged files).
_SOURCES = (".py", ".json")


@functools.cache
def _fingerprint() -> str:
    """cudatx's version and the bytes of every module and data file of the package, by path:
    a checkout that changes anything never meets facts read the old way (crc32: no one is
    trying to collide it, and hashlib would cost an OpenSSL load on every run; the walk reads
    under a megabyte)."""
    return f"{__version__}+{source_crc(Path(__file__).parent):08x}"


def source_crc(package: Path) -> int:
    """crc32 of SCHEMA, then of each source file's path (relative to `package`) and bytes, in
    sorted order; an unreadable file counts by its path alone."""
    crc = zlib.crc32(str(SCHEMA).encode())
    for top, folders, files in os.walk(package):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for name in sorted(files):
            if not name.endswith(_SOURCES):
                continue
            path = os.path.join(top, name)
            crc = zlib.crc32(os.path.relpath(path, package).encode(), crc)
            try:
                with open(path, "rb") as handle:
                    crc = zlib.crc32(handle.read(), crc)
            except OSError:
                pass
    return crc
