"""What cudatx trusts of the store it keeps inside an environment (`<prefix>/.cudatx/`).

The store holds the snapshots of transactions (cudatx.txn.store) and the records of traced
runs (cudatx.discover.traces). It lies inside the environment, where a wheel's data files
can write too, so an entry is trusted only if cudatx could have made it; and a record names
its environment by identity (device and inode), so that a copy of the environment, store
included, is told from the original. The stages that read the store and the one that writes
it share these rules.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cudatx.errors import StoreError
from cudatx.reading import MAX_STORE, open_regular, read_fd

PRIVATE = 0o700  # the store holds copies of every file a change touches: its owner's only


def refuse_foreign(path: Path, st: os.stat_result, *, folder: bool) -> None:
    """Trust a store entry only if cudatx could have made it: this user's, a folder of mode
    0700 or a file no one else may read or write, with one name (a hard link planted from
    elsewhere would have a write here land in that other file; O_NOFOLLOW cannot see it).
    A store a wheel's data files planted (uv makes folders with the umask's mode) fails."""
    uid = os.geteuid()
    mode = stat.S_IMODE(st.st_mode)
    what = None
    if folder and not stat.S_ISDIR(st.st_mode):
        what = "not a folder"
    elif not folder and not stat.S_ISREG(st.st_mode):
        what = "not a regular file"
    elif st.st_uid != uid:
        what = f"owned by uid {st.st_uid}, not {uid}"
    elif not folder and st.st_nlink != 1:
        what = f"{st.st_nlink} hard links"
    elif folder and mode != PRIVATE:
        what = f"mode {mode:04o}, not 0700"
    elif not folder and mode & 0o077:
        what = f"mode {mode:04o}: not private to its owner"
    if what is not None:
        raise StoreError(
            f"{path} is not part of a store cudatx made ({what}); not trusting it (if no "
            "transaction of yours is in it, remove it)",
            path=str(path),
        )


def read_private(path: Path) -> bytes:
    """The bytes of a file of the store (a journal, a manifest): a regular file, trusted
    (refuse_foreign), at most MAX_STORE of them. Raises OSError or StoreError."""
    fd, st = open_regular(path, follow=False)
    try:
        refuse_foreign(path, st, folder=False)
        return read_fd(fd, MAX_STORE, path)
    finally:
        os.close(fd)


def identity(path: str) -> str:
    """`device:inode` of a folder: what stays the same when it is renamed and differs in a
    copy, so a journal can tell its environment from one moved or copied from it."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise StoreError(f"cannot stat {path}: {exc.strerror}", path=path) from None
    return f"{st.st_dev}:{st.st_ino}"
