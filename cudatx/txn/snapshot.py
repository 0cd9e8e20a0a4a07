"""The bytes a transaction may need to put back.

A snapshot lives in `<txn_dir>/snapshot/`:

    manifest.json      the Snapshot below (sorted keys)
    files/<n>          the saved bytes of the n-th regular file, numbered: no path games

`take` builds it in `snapshot.tmp/` and renames that to `snapshot/` only when every file,
the manifest and the folders are fsync'ed. rename(2) of a folder is atomic, so after a crash
there is either no `snapshot/` or a complete one; a leftover `snapshot.tmp/` is deleted by the
next `take`.

Regular files are saved as hard links when the filesystem allows (the store is inside the
environment, so it usually does): instant and free of space. A hard link shares the inode
with the live file, so an installer that wrote INTO the live file would change the saved
bytes too. uv and pip unlink (or rename over) before writing, which leaves the saved inode
alone, but nothing is assumed: `restore` checks every saved file against the sha256 taken at
snapshot time before it touches anything.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from cudatx.digest import digest_fd
from cudatx.discover.confinement import inside
from cudatx.documents import dump, load_json
from cudatx.errors import StoreError
from cudatx.models import Frozen
from cudatx.reading import open_regular
from cudatx.trust import identity, read_private, refuse_foreign
from cudatx.txn.store import fsync_dir, make_private_dir, write_and_sync

SNAPSHOT = "snapshot"
SNAPSHOT_TMP = "snapshot.tmp"
FILES = "files"
MANIFEST = "manifest.json"

# link(2) failures that mean "this filesystem or this file cannot be hard-linked here", where
# a copy still works: another filesystem (EXDEV), fs.protected_hardlinks or a filesystem
# without links (EPERM, EOPNOTSUPP), the inode's link count at its maximum (EMLINK).
_NO_LINK = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOTSUP})

# O_NONBLOCK: a FIFO planted where a file should be opens at once instead of hanging
# (open(2)); reads of regular files are unaffected.
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# O_EXCL with O_CREAT never follows a symlink at the last component (it fails with EEXIST);
# O_NOFOLLOW says the same for the reader of this code.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class SavedFile(Frozen):
    path: str  # absolute, as the environment names it (and as the caller passed it)
    stored: str | None  # name under the snapshot's files/ folder; None for a symlink
    sha256: str | None  # hex digest of the saved bytes; None for a symlink
    mode: int  # permission bits (S_IMODE) of the live file when it was saved
    size: int
    link: str | None = None  # symlink target, as readlink(2) gave it


class Snapshot(Frozen):
    files: tuple[SavedFile, ...]
    folders: tuple[str, ...]  # folders that existed (dist-info...), restored even if empty
    # Permission bits of each folder above a saved path (up to the prefix) and of each
    # folder it keeps: one a rollback recreates gets its mode back, not the umask's.
    folder_modes: dict[str, int] = field(default_factory=dict)
    installed: tuple[dict[str, str | None], ...]  # name, version, direct_url (from the caller)
    created: str
    prefix: str  # the environment; restore refuses to write anywhere that resolves outside it
    prefix_id: str | None = None  # its device:inode when the snapshot was taken


def _digest_fd(fd: int) -> str:
    """Hex sha256 of the whole file behind `fd`, read from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    return digest_fd(fd).hex()


def _copy_fd(src: int, dst: int) -> None:
    # sendfile(2) copies file to file inside the kernel (Linux >= 2.6.33); read/write where
    # it is refused.
    offset = 0
    try:
        while sent := os.sendfile(dst, src, offset, 1 << 30):
            offset += sent
        return
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP) or offset:
            raise
    os.lseek(src, 0, os.SEEK_SET)
    while chunk := os.read(src, 1 << 20):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view) :]


def _copy_in(source: str, target: Path) -> None:
    """The copy fallback (what shutil.copy2 does, without following symlinks anywhere)."""
    src = os.open(source, _READ)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{source} changed while it was being saved", path=source)
        dst = os.open(target, _CREATE, 0o600)
        try:
            _copy_fd(src, dst)
            # Keep the times, as copy2 does: restore gives them back to the live file, and
            # Python's .pyc freshness check compares the source's mtime.
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _save_regular(path: str, live: os.stat_result, target: Path) -> tuple[str, int]:
    """Link (or copy) `path` to `target`; fsync it and return (sha256, size) of the saved bytes."""
    try:
        # follow_symlinks=False: linkat(2) without AT_SYMLINK_FOLLOW, so a file swapped for a
        # symlink since the lstat is linked as the symlink, caught by O_NOFOLLOW below.
        os.link(path, target, follow_symlinks=False)
        linked = True
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        _copy_in(path, target)
        linked = False
    try:
        fd = os.open(target, _READ)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{path} changed while it was being saved", path=path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (
            linked and (st.st_dev, st.st_ino) != (live.st_dev, live.st_ino)
        ):
            raise StoreError(f"{path} changed while it was being saved", path=path)
        sha = _digest_fd(fd)
        # For a link this flushes the live inode's data, which may still sit in the page cache
        # if the file was written moments ago: the snapshot must outlive a power loss.
        os.fsync(fd)
        return sha, st.st_size
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes) -> None:
    write_and_sync(os.open(path, _CREATE, 0o600), data)


def _remove_stale(path: Path) -> None:
    """Delete a leftover snapshot.tmp (a take that crashed).

    rmtree removes the entries themselves and never follows symlinks inside; unlinking a
    saved hard link only drops one name of the inode, so the live files are untouched.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _manifest_bytes(snapshot: Snapshot) -> bytes:
    return (json.dumps(dump(snapshot, mode="json"), sort_keys=True, indent=2) + "\n").encode()


def take(
    txn_dir: Path,
    paths: Iterable[str],
    folders: Iterable[str],
    installed: Iterable[Mapping[str, str | None]],
    *,
    prefix: str,
) -> tuple[Snapshot, list[str]]:
    """Save what exists of `paths` and `folders` into `txn_dir/snapshot/`.

    Each path is taken as lstat(2) finds it: a regular file is saved (hard link, else copy),
    a symlink is recorded with its target, a folder is recorded to be recreated; a missing
    path is skipped. A path whose folders resolve outside `prefix` is not saved and comes
    back in the second value (`outside`), as does a relative path. Returns (snapshot,
    outside). `txn_dir` is created (0700) if missing; its parent must exist (the store's
    transactions/ folder, which Store.write_journal creates with the journal).
    """
    real_prefix = os.path.realpath(prefix)
    make_private_dir(txn_dir)
    final = txn_dir / SNAPSHOT
    if os.path.lexists(final):
        raise StoreError(f"{txn_dir.name} already has a snapshot ({final})", path=str(final))
    tmp = txn_dir / SNAPSHOT_TMP
    files_dir = tmp / FILES
    try:
        _remove_stale(tmp)
        make_private_dir(tmp)
        make_private_dir(files_dir)
    except OSError as exc:
        raise StoreError(f"cannot prepare {tmp}: {exc.strerror}", path=str(tmp)) from None
    try:
        return _fill(tmp, txn_dir, paths, folders, installed, prefix, real_prefix)
    except BaseException:
        # Give the space back at once: a full disk is the likeliest reason to get here, and
        # the journal must still be written to say that the transaction ended. Removing the
        # saved hard links drops names only; the live files keep their bytes.
        with contextlib.suppress(OSError):
            _remove_stale(tmp)
        raise


def _fill(
    tmp: Path,
    txn_dir: Path,
    paths: Iterable[str],
    folders: Iterable[str],
    installed: Iterable[Mapping[str, str | None]],
    prefix: str,
    real_prefix: str,
) -> tuple[Snapshot, list[str]]:
    """take's work once snapshot.tmp/ and its files/ exist."""
    files_dir = tmp / FILES
    final = txn_dir / SNAPSHOT
    saved: list[SavedFile] = []
    kept_folders: list[str] = []
    outside: list[str] = []
    seen: set[str] = set()
    count = 0
    for path in (*paths, *folders):
        if path in seen:
            continue
        seen.add(path)
        if not inside(path, real_prefix):
            outside.append(path)
            continue
        try:
            live = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise StoreError(f"cannot save {path}: {exc.strerror}", path=path) from None
        mode = stat.S_IMODE(live.st_mode)
        try:
            if stat.S_ISREG(live.st_mode):
                stored = str(count)
                count += 1
                sha, size = _save_regular(path, live, files_dir / stored)
                saved.append(SavedFile(path=path, stored=stored, sha256=sha, mode=mode, size=size))
            elif stat.S_ISLNK(live.st_mode):
                link = os.readlink(path)
                saved.append(
                    SavedFile(
                        path=path, stored=None, sha256=None, mode=mode, size=live.st_size, link=link
                    )
                )
            elif stat.S_ISDIR(live.st_mode):
                kept_folders.append(path)
            else:
                raise StoreError(
                    f"cannot save {path}: not a regular file, symlink or folder", path=path
                )
        except OSError as exc:
            raise StoreError(f"cannot save {path}: {exc.strerror}", path=path) from None

    modes: dict[str, int] = {}
    inner = os.path.join(prefix, "")
    for path in (*(f.path for f in saved), *kept_folders):
        folder = path if path in kept_folders else os.path.dirname(path)
        while folder.startswith(inner) and folder not in modes:
            try:
                modes[folder] = stat.S_IMODE(os.lstat(folder).st_mode)
            except OSError as exc:
                raise StoreError(f"cannot save {folder}: {exc.strerror}", path=folder) from None
            folder = os.path.dirname(folder)
    snapshot = Snapshot(
        files=tuple(saved),
        folders=tuple(kept_folders),
        folder_modes=modes,
        prefix_id=identity(prefix),
        installed=tuple(dict(entry) for entry in installed),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds"),
        prefix=prefix,
    )
    try:
        _write_new(tmp / MANIFEST, _manifest_bytes(snapshot))
        fsync_dir(files_dir)
        fsync_dir(tmp)
        # The commit point: rename(2) of the folder is atomic, and the fsync of txn_dir after
        # it makes the new name durable (a crash before it leaves snapshot.tmp, never a
        # half-filled snapshot/).
        os.rename(tmp, final)
        fsync_dir(txn_dir)
    except OSError as exc:
        raise StoreError(
            f"cannot write the snapshot in {tmp}: {exc.strerror}", path=str(tmp)
        ) from None
    return snapshot, outside


class Size(NamedTuple):
    """What a snapshot holds: files saved, their bytes, and how many of those bytes are hard
    links to the live files (no space of their own until the live names go)."""

    files: int
    bytes: int
    linked: int


def size(txn_dir: Path, snapshot: Snapshot) -> Size:
    """The size of a snapshot just taken, while the files it saved still have their live
    names: a saved file with more than one name is a hard link (take saves nothing else
    with a second name)."""
    total = linked = count = 0
    for saved in snapshot.files:
        if saved.stored is None:
            continue
        count += 1
        total += saved.size
        try:
            if os.lstat(_stored_path(txn_dir, saved)).st_nlink > 1:
                linked += saved.size
        except OSError:
            pass  # counted as copied: the size is what the summary is for
    return Size(count, total, linked)


def load(txn_dir: Path) -> Snapshot | None:
    """The complete snapshot of a transaction, or None when it has none.

    A `snapshot/` folder only ever appears complete (take renames it into place last), so one
    without a readable manifest has been damaged since: that is a StoreError, not None.
    """
    final = txn_dir / SNAPSHOT
    if not os.path.lexists(final):
        return None
    path = final / MANIFEST
    try:
        refuse_foreign(final, os.lstat(final), folder=True)
        return load_json(Snapshot, read_private(path))
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}", path=str(path)) from None
    except ValidationError as exc:
        raise StoreError(
            f"snapshot manifest {path} is corrupt ({exc.error_count()} errors)", path=str(path)
        ) from None


def _stored_path(txn_dir: Path, saved: SavedFile) -> Path:
    name = saved.stored
    if name is None or not name or name in (".", "..") or "/" in name or "\0" in name:
        raise StoreError(f"snapshot entry for {saved.path} names no saved file", path=saved.path)
    return txn_dir / SNAPSHOT / FILES / name


def verify_saved(txn_dir: Path, snapshot: Snapshot) -> None:
    """Check every saved file's bytes against the sha256 recorded when it was saved."""
    for saved in snapshot.files:
        if saved.stored is None:
            continue
        source = _stored_path(txn_dir, saved)
        try:
            fd, _ = open_regular(source, follow=False)
            try:
                actual = _digest_fd(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreError(
                f"saved bytes of {saved.path} cannot be read ({source}: {exc.strerror})",
                path=saved.path,
            ) from None
        if actual != saved.sha256:
            raise StoreError(
                f"saved bytes of {saved.path} no longer match their recorded hash "
                f"(something wrote into the file in place; {source})",
                path=saved.path,
            )


def _precheck_targets(snapshot: Snapshot) -> None:
    # Everything that would make restore stop half-way is looked for before anything is
    # touched: a target that resolves outside the environment (a folder replaced by a symlink
    # since the snapshot), or a folder now standing where a file or symlink must go back.
    real_prefix = os.path.realpath(snapshot.prefix)
    for path in (*(f.path for f in snapshot.files), *snapshot.folders):
        if not inside(path, real_prefix):
            raise StoreError(
                f"cannot restore {path}: it now resolves outside {snapshot.prefix}", path=path
            )
    for saved in snapshot.files:
        try:
            st = os.lstat(saved.path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat.S_ISDIR(st.st_mode):
            raise StoreError(
                f"cannot restore {saved.path}: a folder stands there now", path=saved.path
            )
    for folder in snapshot.folders:
        if os.path.lexists(folder) and not os.path.isdir(folder):
            raise StoreError(
                f"cannot restore folder {folder}: a file stands there now", path=folder
            )


def _temp_beside(path: str) -> str:
    # A fixed name per target, short enough for NAME_MAX whatever the target's name: a
    # restore that crashed leaves it, and the next restore removes it before reusing it.
    head, tail = os.path.split(path)
    return os.path.join(head, f".cudatx-{hashlib.sha256(tail.encode()).hexdigest()[:16]}.tmp")


def _already_back(saved: SavedFile, store_copy: os.stat_result) -> bool:
    """Whether the live file already holds the saved bytes and mode (uv stopped before it).

    Such a file is left alone: it may be one the kernel will not let anyone replace (an
    immutable file, a folder without write access), which is often why uv stopped. A live
    file that is the store's own inode (a hard link uv never broke) is copied out anyway."""
    try:
        fd = os.open(saved.path, _READ)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        return (
            stat.S_ISREG(st.st_mode)
            and (st.st_dev, st.st_ino) != (store_copy.st_dev, store_copy.st_ino)
            and stat.S_IMODE(st.st_mode) == saved.mode
            and st.st_size == saved.size
            and _digest_fd(fd) == saved.sha256
        )
    finally:
        os.close(fd)


def _put_back_file(txn_dir: Path, saved: SavedFile) -> None:
    source = _stored_path(txn_dir, saved)
    if _already_back(saved, os.stat(source, follow_symlinks=False)):
        return
    temp = _temp_beside(saved.path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)  # unlink(2) removes a symlink itself, never what it points to
    # Copy, never move and never link out of the store: the saved bytes must stay for a
    # second rollback, and a restored file must not share its inode with the store.
    src = os.open(source, _READ)
    try:
        st = os.fstat(src)
        dst = os.open(temp, _CREATE, 0o600)
        try:
            _copy_fd(src, dst)
            os.fchmod(dst, saved.mode)  # before the rename: never visible with another mode
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    # rename(2) replaces the target name atomically: readers see the old file or the saved
    # one, and a symlink at the target is replaced rather than written through.
    os.replace(temp, saved.path)


def _put_back_link(saved: SavedFile) -> None:
    assert saved.link is not None
    temp = _temp_beside(saved.path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)
    os.symlink(saved.link, temp)
    os.replace(temp, saved.path)


def _make_folders(folder: str, snapshot: Snapshot) -> None:
    """os.makedirs(folder), each folder it creates private (0700) until write_back gives it
    its saved mode. A folder the snapshot has no mode for gets the umask's, as makedirs
    gives."""
    missing = []
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(missing):
        if path in snapshot.folder_modes:
            os.mkdir(path, 0o700)
        else:
            os.mkdir(path)


def _verify_restored(snapshot: Snapshot) -> None:
    for saved in snapshot.files:
        if saved.stored is None:
            try:
                ok = os.readlink(saved.path) == saved.link
            except OSError:
                ok = False
            if not ok:
                raise StoreError(
                    f"restored {saved.path} is not the symlink to {saved.link} it was",
                    path=saved.path,
                )
            continue
        try:
            fd = os.open(saved.path, _READ)
            try:
                mode = stat.S_IMODE(os.fstat(fd).st_mode)
                actual = _digest_fd(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreError(
                f"restored {saved.path} cannot be read back: {exc.strerror}", path=saved.path
            ) from None
        if actual != saved.sha256 or mode != saved.mode:
            raise StoreError(
                f"restored {saved.path} does not match its snapshot record", path=saved.path
            )
    for folder in snapshot.folders:
        if not os.path.isdir(folder):
            raise StoreError(f"restored folder {folder} is missing", path=folder)


def check(txn_dir: Path, snapshot: Snapshot) -> None:
    """What must hold before anything is written back: every saved file's hash, and every
    target (all or nothing where it can be known beforehand)."""
    verify_saved(txn_dir, snapshot)
    _precheck_targets(snapshot)


def restore(txn_dir: Path, snapshot: Snapshot) -> None:
    """Check, then put every saved file, symlink and folder back; idempotent."""
    check(txn_dir, snapshot)
    write_back(txn_dir, snapshot)


def write_back(txn_dir: Path, snapshot: Snapshot) -> None:
    """Put every saved file, symlink and folder back, once `check` passed (callers that
    change the environment in between, removing what a transaction added, check first).

    Afterwards every restored file is read back and compared with its record. The store
    keeps its copies, so a second restore gives the same tree.
    """
    touched: set[str] = set()
    # Symlinks first, shortest path first: a saved symlink may be a folder name (lib64 ->
    # lib) that files below it go through, as they did when they were saved.
    links = sorted((f for f in snapshot.files if f.stored is None), key=lambda f: f.path)
    files = [f for f in snapshot.files if f.stored is not None]
    for saved in links:
        try:
            _make_folders(os.path.dirname(saved.path), snapshot)
            _put_back_link(saved)
        except OSError as exc:
            raise StoreError(
                f"cannot restore {saved.path}: {exc.strerror}", path=saved.path
            ) from None
        touched.add(os.path.dirname(saved.path))
    for folder in snapshot.folders:
        try:
            _make_folders(folder, snapshot)
        except OSError as exc:
            raise StoreError(
                f"cannot restore folder {folder}: {exc.strerror}", path=folder
            ) from None
        touched.add(os.path.dirname(folder))
    for saved in files:
        try:
            _make_folders(os.path.dirname(saved.path), snapshot)
            _put_back_file(txn_dir, saved)
        except OSError as exc:
            raise StoreError(
                f"cannot restore {saved.path}: {exc.strerror}", path=saved.path
            ) from None
        touched.add(os.path.dirname(saved.path))
    # The modes last, deepest first: a folder saved read-only (0555) must still take the
    # files restored into it. Every saved folder, not only those made now: a rollback
    # killed after making a folder (0700 until here) left it for this one to finish.
    for folder in sorted(snapshot.folder_modes, key=lambda f: -f.count(os.sep)):
        mode = snapshot.folder_modes[folder]
        try:
            st = os.lstat(folder)
            if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) != mode:
                os.chmod(folder, mode, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreError(
                f"cannot restore the mode of {folder}: {exc.strerror}", path=folder
            ) from None
    # The renames are durable only once their folders are fsync'ed (POSIX; see fsync_dir).
    for folder in sorted(touched):
        with contextlib.suppress(OSError):
            fsync_dir(folder)
    _verify_restored(snapshot)
