"""The transaction store inside the environment: `<prefix>/.cudatx/`.

It lives inside the environment on purpose: the snapshot's hard links and every rename the
store does must stay on the filesystem of the files they protect, because POSIX rename(2) is
atomic only within one filesystem (across filesystems it fails with EXDEV). Layout:

    <prefix>/.cudatx/                 0700
        lock                          flock(2) target; holds the holder's pid (never deleted)
        transactions/                 0700
            <id>/                     0700
                journal.json          rewritten whole with atomic_write at every step
                snapshot/             see cudatx.txn.snapshot

Nothing here prints or exits; failures are StoreError or Busy (cudatx.errors).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from cudatx.discover.confinement import STORE_DIR
from cudatx.documents import dump, load_json
from cudatx.errors import Busy, StoreError, first_invalid
from cudatx.trust import PRIVATE, holder_of, lock_holder, read_private, refuse_foreign
from cudatx.txn.journal import Journal

TRANSACTIONS = "transactions"
JOURNAL = "journal.json"
LOCK = "lock"


def fsync_dir(path: Path | str) -> None:
    """Make the names in a folder durable.

    fsync(2) on a file does not persist the directory entry naming it: after creating,
    renaming or removing an entry, POSIX requires an fsync of the folder itself before the
    change is known to survive a crash (Linux ext4/xfs honour this; without it a power loss
    can bring back the old name).
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_private_dir(path: Path) -> bool:
    """Create `path` (one level) with mode 0700 unless it is there; True if it was created.

    mkdir(2) never follows a symlink in the last component (it fails with EEXIST), and the
    lstat check below refuses a symlink planted where a store folder should be, so writes
    into the store cannot be redirected elsewhere.
    """
    created = False
    try:
        os.mkdir(path, PRIVATE)
        created = True
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror}", path=str(path)) from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(f"{path} should be a folder of the cudatx store", path=str(path))
    if not created:
        refuse_foreign(path, st, folder=True)
    if created:
        # The umask can only remove bits, but set the mode exactly so a permissive ACL default
        # or an odd umask never leaves the store readable by others.
        os.chmod(path, PRIVATE)
        fsync_dir(path.parent)
    return created


def write_and_sync(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (os.write may write less), fsync it, and close it."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: a crash leaves the old content or the new, never a mix.

    The bytes go to a temporary file in the same folder, are fsync'ed, and then rename(2)
    (os.replace) swaps the name over: POSIX guarantees that rename atomically replaces the
    target, so every reader sees either the old file or the new one. The folder is fsync'ed
    last so the rename itself survives a power loss. A symlink at `path` is replaced, not
    written through (rename acts on the name). The new file has mode 0600 (mkstemp).
    """
    folder = path.parent
    fd, tmp = tempfile.mkstemp(prefix=".cudatx-", suffix=".tmp", dir=folder)
    try:
        write_and_sync(fd, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)


_ids_lock = threading.Lock()
_last_stamp: datetime.datetime | None = None


def _unique_stamp() -> datetime.datetime:
    # Two ids asked for within one microsecond by one process would collide (the pid is the
    # same), so each id's time is strictly later than the previous one's.
    global _last_stamp
    with _ids_lock:
        now = datetime.datetime.now(datetime.UTC)
        if _last_stamp is not None and now <= _last_stamp:
            now = _last_stamp + datetime.timedelta(microseconds=1)
        _last_stamp = now
        return now


class Store:
    """The store of the environment at `prefix`; nothing is created until the first write."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.root = Path(prefix) / STORE_DIR

    # -- layout -------------------------------------------------------------------------

    def _ensure(self) -> Path:
        """Create root and transactions/ (0700) as needed; returns transactions/."""
        make_private_dir(self.root)
        transactions = self.root / TRANSACTIONS
        make_private_dir(transactions)
        return transactions

    @staticmethod
    def new_id() -> str:
        """A sortable, unique id: UTC time to the microsecond, then the pid.

        The time part has a fixed width, so ids sort as strings in the order they were made.
        """
        return f"{_unique_stamp():%Y%m%dT%H%M%S.%fZ}-{os.getpid()}"

    def txn_dir(self, txn: str) -> Path:
        """The folder of transaction `txn` (not created here)."""
        if not txn or txn.startswith(".") or "/" in txn or "\0" in txn:
            raise StoreError(f"{txn!r} is not a transaction id")
        return self.root / TRANSACTIONS / txn

    def ids(self) -> list[str]:
        """Recorded transactions, oldest first: folders that hold a journal.json."""
        transactions = self.root / TRANSACTIONS
        try:
            for folder in (self.root, transactions):
                refuse_foreign(folder, os.lstat(folder), folder=True)
            entries = list(os.scandir(transactions))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(
                f"cannot list {transactions}: {exc.strerror}", path=str(transactions)
            ) from None
        return sorted(
            e.name
            for e in entries
            if not e.name.startswith(".")
            and e.is_dir(follow_symlinks=False)
            # lexists, not isfile: a journal that is no regular file (a FIFO) is read, and
            # refused, rather than passed over
            and os.path.lexists(os.path.join(e.path, JOURNAL))
        )

    # -- journal --------------------------------------------------------------------------

    def read_journal(self, txn: str) -> Journal:
        folder = self.txn_dir(txn)
        path = folder / JOURNAL
        try:
            refuse_foreign(folder, os.lstat(folder), folder=True)
            return load_json(Journal, read_private(path))
        except FileNotFoundError:
            raise StoreError(f"transaction {txn} has no journal ({path})", path=str(path)) from None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror}", path=str(path)) from None
        except ValidationError as exc:  # not JSON, not UTF-8, or not a journal
            why = first_invalid(exc, "journal")
            raise StoreError(
                f"journal of transaction {txn} is corrupt ({path}: {why})",
                path=str(path),
            ) from None

    def write_journal(self, journal: Journal) -> None:
        """Write the whole journal atomically (creating the store and the folder as needed)."""
        self._ensure()
        folder = self.txn_dir(journal.id)
        make_private_dir(folder)
        data = dump(journal, mode="json")
        text = json.dumps(data, sort_keys=True, indent=2) + "\n"
        path = folder / JOURNAL
        try:
            atomic_write(path, text.encode())
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror}", path=str(path)) from None

    # -- lock ----------------------------------------------------------------------------

    def holder(self) -> str | None:
        """Who holds the lock now (`pid N`), or None (cudatx.trust.lock_holder)."""
        return lock_holder(self.prefix)

    @contextlib.contextmanager
    def lock(self, wait: float = 0.0) -> Iterator[int]:
        """Hold this environment's transaction lock (yields its descriptor), or raise Busy
        (at once, or after `wait` seconds of trying).

        The lock is an flock(2) on `<root>/lock`, held by the open file: the kernel drops it
        when the descriptor is closed, which also happens when the holder dies (even by
        SIGKILL or a crash). So a stale lock cannot outlive its process, unlike a lock file
        whose mere existence means "locked". For the same reason the file is never deleted:
        unlinking it while a second process has it open would let that process and a third
        one lock two different inodes at once. The descriptor is opened close-on-exec
        (PEP 446 default, made explicit): only a child given it on purpose (the uv that
        changes the environment, cudatx.txn.apply) holds the lock too, for as long as it
        runs, even past a cudatx killed with -9.

        The pid written into the file is only for the message a contender shows; it need not
        survive a crash (the lock does not either), so it is not fsync'ed.
        """
        self._ensure()
        path = self.root / LOCK
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open {path}: {exc.strerror}", path=str(path)) from None
        try:
            # Before the truncate below: a hard link planted at the lock's name is refused
            # rather than emptied.
            refuse_foreign(path, os.fstat(fd), folder=False)
            deadline = time.monotonic() + wait
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as exc:
                        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                            raise
                        if time.monotonic() >= deadline:
                            raise
                        time.sleep(0.05)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise StoreError(
                        f"cannot lock {path}: {exc.strerror}", path=str(path)
                    ) from None
                raise busy(holder_of(fd), self.prefix) from None
            # Only for a contender's message: a full disk must not stop the lock (a rollback
            # is what frees the space).
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            try:
                yield fd
            finally:
                # Clear the pid before the lock goes, so a later contender never names a
                # process that no longer holds it (a killed holder leaves its pid; the next
                # holder overwrites it).
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def busy(holder: str, prefix: str) -> Busy:
    """The refusal of a transaction while `holder` holds the lock of the environment at
    `prefix`: said by the lock itself, and by a change before it plans (refuse_busy)."""
    return Busy(
        f"another cudatx transaction ({holder}) holds {prefix}; wait for it or check that it "
        "is still running",
        path=str(Path(prefix) / STORE_DIR / LOCK),
    )


def refuse_busy(prefix: str) -> None:
    """Busy at once where another transaction holds the environment's lock: a change checks
    before its scan and plan, which would be made for nothing (the apply still takes the
    lock for real, and the plan is checked under it)."""
    holder = lock_holder(prefix)
    if holder is not None:
        raise busy(holder, prefix)
