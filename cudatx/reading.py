"""Reading a file someone else wrote: bounded, and only if it is a regular file.

Every file cudatx reads from an environment or its store was written by someone else (a
wheel's RECORD, a requirements file, a journal). Opened plainly, a FIFO planted at such a
path blocks open(2) for ever, and /dev/zero fills memory. So each is opened with O_NONBLOCK
(open(2): a FIFO opens at once, without waiting for a writer), checked to be a regular file
with fstat, and read up to a limit. Failures are OSError with an errno and a strerror, so
that the callers' own handlers say them in one line.
"""

from __future__ import annotations

import errno
import os
import stat

MIB = 1 << 20
# Limits, each far above any real file (torch 2.14's RECORD is about 2 MiB with 15,000 rows;
# a snapshot manifest of 100,000 files about 30 MiB). README.md lists them ("Reliability").
MAX_RECORD = 64 * MIB  # RECORD, installed-files.txt
# Rows of one RECORD (or installed-files.txt): each costs a plan a few objects and lookups,
# so a million (40 MB of short rows, under MAX_RECORD) took `doctor` 0.9 GB and a dry run
# 1.4 GB (issue 23). The largest real ones hold tens of thousands (torch 15,000); above
# this every command refuses the environment, naming the file (UnreadableFile, exit 5).
MAX_RECORD_ROWS = 250_000
MAX_METADATA = 16 * MIB  # METADATA, PKG-INFO, INSTALLER, direct_url.json, entry points
MAX_REQUIREMENTS = 16 * MIB  # requirements files and their -r includes, pyproject, locks
MAX_STORE = 256 * MIB  # journals and snapshot manifests
MAX_ANSWER = 64 * MIB  # what the target interpreter prints about itself

_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(
    path: str | os.PathLike[str], *, follow: bool = True
) -> tuple[int, os.stat_result]:
    """An fd open for reading on the regular file at `path`, and its fstat.

    `follow=False` adds O_NOFOLLOW (a symlink at the last component is refused, ELOOP).
    Raises OSError, with EINVAL for something that is not a regular file."""
    fd = os.open(path, _OPEN | (0 if follow else os.O_NOFOLLOW))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):  # what read(2) would say
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_fd(fd: int, limit: int, path: str | os.PathLike[str]) -> bytes:
    """At most `limit` bytes from `fd`, or OSError(EFBIG) when it holds more."""
    chunks = []
    total = 0
    while chunk := os.read(fd, min(MIB, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise OSError(errno.EFBIG, f"larger than {limit // MIB} MiB", os.fspath(path))
    return b"".join(chunks)


def read_bounded(path: str | os.PathLike[str], limit: int, *, follow: bool = True) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them (open_regular)."""
    fd, _ = open_regular(path, follow=follow)
    try:
        return read_fd(fd, limit, path)
    finally:
        os.close(fd)
