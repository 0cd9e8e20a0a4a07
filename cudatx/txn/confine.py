"""Before uv uninstalls: RECORD entries uv must not be given are taken out.

uninstalling deletes what the RECORD lists: uv 0.13 skips entries naming `../../x` or an
absolute path with a warning ("escapes the Python environment") but deletes one that leads
out through a symlink inside the environment, and older installers skip none. So before uv
runs, cudatx takes such entries (cudatx.discover.confinement) out of the RECORD of every
distribution uv will uninstall (or reinstall, which uninstalls first); the snapshot, taken
before, holds the original RECORD, which rollback puts back.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import os
import secrets
import stat
from collections.abc import Iterable, Mapping

from cudatx.discover.confinement import Folders, listing, listing_rows, withheld_row
from cudatx.errors import StoreError
from cudatx.models import Distribution
from cudatx.txn.beneath import Root, canonical
from cudatx.txn.store import write_and_sync

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _replace(path: str, prefix: str, data: bytes) -> None:
    """Replace the file at `path` with `data`, atomically, with the original's mode: written
    to a new file in the same folder and renamed over it, through that folder's descriptor."""
    rel = canonical(path, prefix)
    if not rel:
        raise OSError(errno.EXDEV, "outside the environment", path)
    name = os.path.basename(rel)
    with Root(prefix) as root:
        folder = root.parent(rel)
        mode = stat.S_IMODE(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
        temp = f".cudatx-{secrets.token_hex(8)}.tmp"
        fd = os.open(temp, _CREATE, 0o600, dir_fd=folder)
        try:
            try:
                os.fchmod(fd, mode)
            finally:
                write_and_sync(fd, data)  # and closes it
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise
        os.fsync(folder)


def withhold(
    dists: Iterable[Distribution], prefix: str, kept: Mapping[str, frozenset[str]] | None = None
) -> list[str]:
    """Rewrite each distribution's RECORD (installed-files.txt for an egg-info) without the
    entries uv must not be given (cudatx.discover.confinement.withheld_because: outside, a
    folder, empty, the prefix, the store), without the entries `kept` names for it (a path a
    staying distribution lists with the same bytes: cudatx.planning.simulate.kept_entries),
    and without rows csv cannot read (another reader may read them otherwise); returns the
    entries taken out, as `name: entry (why)`.

    The RECORD is read again here, under the transaction's lock, not taken from the scan. It
    is replaced by renameat in its folder's descriptor, reached from the prefix without
    following a symlink (cudatx.txn.beneath), never written in place: the snapshot may hold a
    hard link to the original's inode, which must keep the original bytes for rollback.
    """
    real_prefix = os.path.realpath(prefix)
    withheld: list[str] = []
    memo = Folders()
    for dist in dists:
        listing_path, base = listing(dist)
        try:
            rows = listing_rows(dist)
        except OSError as exc:
            raise StoreError(
                f"cannot read {listing_path}: {exc.strerror}", path=listing_path
            ) from None
        if rows is None:
            continue
        keep: list[list[str]] = []
        dropped: list[str] = []
        shared = (kept or {}).get(dist.name, frozenset())
        for row in rows:
            reason = withheld_row(base, row, real_prefix, memo)
            if reason is None and isinstance(row, list) and row and row[0] in shared:
                reason = "a distribution that stays lists the same bytes"
            if reason is None and isinstance(row, list):
                keep.append(row)
            else:
                entry = "" if isinstance(row, csv.Error) else row[0]
                dropped.append(f"{entry!r} ({reason})")
        if not dropped:
            continue
        out = io.StringIO(newline="")
        if dist.owner == "egg-info":
            out.writelines(row[0] + "\n" for row in keep)
        else:
            csv.writer(out, lineterminator="\n").writerows(keep)
        try:
            _replace(listing_path, prefix, out.getvalue().encode("utf-8", "surrogateescape"))
        except OSError as exc:
            raise StoreError(
                f"cannot rewrite {listing_path}: {exc.strerror}", path=listing_path
            ) from None
        withheld += [f"{dist.name}: {entry}" for entry in dropped]
    return withheld
