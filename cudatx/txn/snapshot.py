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

The environment's files are reached from the prefix down through folder descriptors, never
by a path string (cudatx.txn.beneath): where each path lies is decided once, when `take`
sees it, and a rollback walks that same way without following a symlink. A symlink found
since where the snapshot saw a folder (put there while uv ran, or before a rollback) is
removed and the folder made again: nothing is ever written through it.
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
from cudatx.documents import dump, load_json
from cudatx.errors import StoreError
from cudatx.models import Frozen
from cudatx.reading import open_regular
from cudatx.trust import read_private, refuse_foreign
from cudatx.txn.beneath import Root, canonical, is_symlink_error, lexical
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
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
    # Where a path (of `files`, `folders` or `folder_modes`) lies below the prefix when that
    # is not what its string says: a folder on its way was a symlink inside the environment
    # when it was saved (`lib64 -> lib`). Restore walks this way, never resolving again.
    rels: dict[str, str] = field(default_factory=dict)

    def rel(self, path: str) -> str:
        """Where `path` lies below the prefix, as the snapshot saw it."""
        found = self.rels.get(path)
        if found is None:
            found = lexical(path, self.prefix)
        if found is None:
            raise StoreError(
                f"snapshot entry {path} is not below {self.prefix}; nothing was restored",
                path=path,
            )
        return found


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


def _copy_in(parent: int, name: str, path: str, files: int, stored: str) -> None:
    """The copy fallback (what shutil.copy2 does, without following symlinks anywhere)."""
    src = os.open(name, _READ, dir_fd=parent)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{path} changed while it was being saved", path=path)
        dst = os.open(stored, _CREATE, 0o600, dir_fd=files)
        try:
            _copy_fd(src, dst)
            # Keep the times, as copy2 does: restore gives them back to the live file, and
            # Python's .pyc freshness check compares the source's mtime.
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _save_regular(
    parent: int, name: str, path: str, live: os.stat_result, files: int, stored: str
) -> tuple[str, int]:
    """Link (or copy) `name` in folder `parent` to `stored` in `files`; fsync it and return
    (sha256, size) of the saved bytes."""
    try:
        # follow_symlinks=False: linkat(2) without AT_SYMLINK_FOLLOW, so a file swapped for a
        # symlink since the lstat is linked as the symlink, caught by O_NOFOLLOW below.
        os.link(name, stored, src_dir_fd=parent, dst_dir_fd=files, follow_symlinks=False)
        linked = True
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        _copy_in(parent, name, path, files, stored)
        linked = False
    try:
        fd = os.open(stored, _READ, dir_fd=files)
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
        files = os.open(files_dir, _DIR)
        try:
            with Root(prefix) as root:
                return _fill(tmp, txn_dir, files, root, paths, folders, installed)
        finally:
            os.close(files)
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
    files: int,
    root: Root,
    paths: Iterable[str],
    folders: Iterable[str],
    installed: Iterable[Mapping[str, str | None]],
) -> tuple[Snapshot, list[str]]:
    """take's work once snapshot.tmp/ and its files/ exist (`files`: that folder, open)."""
    prefix = root.prefix
    saved: list[SavedFile] = []
    kept_folders: list[str] = []
    outside: list[str] = []
    seen: set[str] = set()
    rels: dict[str, str] = {}  # path -> where it lies, for every path saved or kept
    count = 0
    for path in (*paths, *folders):
        if path in seen:
            continue
        seen.add(path)
        # Where the path lies is decided here, once, as its folders are now: restore walks
        # the same way, never through a symlink.
        rel = canonical(path, prefix)
        if rel is None:
            outside.append(path)
            continue
        if not rel:
            continue  # the prefix itself: never saved, never restored
        try:
            parent = root.parent(rel)
            name = os.path.basename(rel)
            live = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            if is_symlink_error(exc):
                raise StoreError(f"{path} changed while it was being saved", path=path) from None
            raise StoreError(f"cannot save {path}: {exc.strerror}", path=path) from None
        mode = stat.S_IMODE(live.st_mode)
        rels[path] = rel
        try:
            if stat.S_ISREG(live.st_mode):
                stored = str(count)
                count += 1
                sha, size = _save_regular(parent, name, path, live, files, stored)
                saved.append(SavedFile(path=path, stored=stored, sha256=sha, mode=mode, size=size))
            elif stat.S_ISLNK(live.st_mode):
                link = os.readlink(name, dir_fd=parent)
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

    snapshot = Snapshot(
        files=tuple(saved),
        folders=tuple(kept_folders),
        folder_modes=_folder_modes(root, saved, kept_folders, rels),
        prefix_id=root.identity(),
        installed=tuple(dict(entry) for entry in installed),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds"),
        prefix=prefix,
        rels={p: r for p, r in rels.items() if lexical(p, prefix) != r},
    )
    _commit(tmp, txn_dir, files, snapshot)
    return snapshot, outside


def _folder_modes(
    root: Root, saved: list[SavedFile], kept_folders: list[str], rels: Mapping[str, str]
) -> dict[str, int]:
    """The mode of every folder above a path saved or kept (and of a kept folder itself),
    by its path under the prefix."""
    modes: dict[str, int] = {}
    for path in (*(f.path for f in saved), *kept_folders):
        rel = rels[path]
        folder = rel if path in kept_folders else os.path.dirname(rel)
        while folder:
            key = os.path.join(root.prefix, folder)
            if key in modes:
                break
            try:
                modes[key] = stat.S_IMODE(os.fstat(root.folder(folder)).st_mode)
            except OSError as exc:
                raise StoreError(f"cannot save {key}: {exc.strerror}", path=key) from None
            folder = os.path.dirname(folder)
    return modes


def _commit(tmp: Path, txn_dir: Path, files: int, snapshot: Snapshot) -> None:
    """Write the manifest of `snapshot` in snapshot.tmp/, make it durable, and rename the
    folder to snapshot/."""
    try:
        _write_new(tmp / MANIFEST, _manifest_bytes(snapshot))
        os.fsync(files)
        fsync_dir(tmp)
        # The commit point: rename(2) of the folder is atomic, and the fsync of txn_dir after
        # it makes the new name durable (a crash before it leaves snapshot.tmp, never a
        # half-filled snapshot/).
        os.rename(tmp, txn_dir / SNAPSHOT)
        fsync_dir(txn_dir)
    except OSError as exc:
        raise StoreError(
            f"cannot write the snapshot in {tmp}: {exc.strerror}", path=str(tmp)
        ) from None


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


def _stored_name(saved: SavedFile) -> str:
    name = saved.stored
    if name is None or not name or name in (".", "..") or "/" in name or "\0" in name:
        raise StoreError(f"snapshot entry for {saved.path} names no saved file", path=saved.path)
    return name


def _stored_path(txn_dir: Path, saved: SavedFile) -> Path:
    return txn_dir / SNAPSHOT / FILES / _stored_name(saved)


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


class _Restoring:
    """One restore's walk: the environment open at its prefix (cudatx.txn.beneath), the
    store's saved files open, and which folders the snapshot saw (made again where missing,
    and put back in place of a symlink found there since)."""

    def __init__(self, root: Root, files: int, snapshot: Snapshot) -> None:
        self.root = root
        self.files = files
        self.snapshot = snapshot
        self.folders = {snapshot.rel(f) for f in (*snapshot.folder_modes, *snapshot.folders)}
        self.replaced: list[str] = []  # symlinks removed where a folder was

    def _make(self, rel: str) -> int | None:
        # Private until write_back gives it its saved mode; a folder the snapshot has no mode
        # for gets the umask's, as makedirs gives.
        known = os.path.join(self.snapshot.prefix, rel) in self.snapshot.folder_modes
        return 0o700 if known else None

    def _replace(self, rel: str) -> bool:
        if rel in self.folders:
            self.replaced.append(os.path.join(self.snapshot.prefix, rel))
            return True
        return False

    def folder(self, rel: str) -> int:
        return self.root.folder(rel, make=self._make, replace_link=self._replace)

    def parent(self, rel: str) -> int:
        return self.folder(os.path.dirname(rel))


def _open_files(txn_dir: Path) -> int:
    """The snapshot's files/ folder, open (the store is trusted: cudatx.trust)."""
    return os.open(txn_dir / SNAPSHOT / FILES, _DIR)


def _precheck_targets(root: Root, snapshot: Snapshot) -> None:
    # Everything that would make restore stop half-way is looked for before anything is
    # touched: a file, or a symlink the snapshot did not see, standing where a folder must be
    # (a symlink where it saw one is put back as the folder), or a folder now standing where
    # a file or symlink must go back.
    folders = {snapshot.rel(f) for f in (*snapshot.folder_modes, *snapshot.folders)}
    for path in (*(f.path for f in snapshot.files), *snapshot.folders):
        rel = snapshot.rel(path)
        up = os.path.dirname(rel)
        try:
            root.folder(up)
        except FileNotFoundError:
            continue  # made by the restore, with nothing below it yet
        except OSError as exc:
            if not is_symlink_error(exc):
                raise StoreError(f"cannot restore {path}: {exc.strerror}", path=path) from None
            where = exc.filename if isinstance(exc.filename, str) else path
            blocker = lexical(where, snapshot.prefix)
            if exc.strerror == "not a folder" or blocker not in folders:
                raise StoreError(
                    f"cannot restore {path}: {where} is {exc.strerror or 'in the way'}",
                    path=path,
                ) from None
            continue  # a symlink where the snapshot saw a folder: replaced, never followed
    for saved in snapshot.files:
        st = root.lstat(snapshot.rel(saved.path))
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise StoreError(
                f"cannot restore {saved.path}: a folder stands there now", path=saved.path
            )
    for folder in snapshot.folders:
        st = root.lstat(snapshot.rel(folder))
        if st is not None and not (stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise StoreError(
                f"cannot restore folder {folder}: a file stands there now", path=folder
            )


def _temp_name(name: str) -> str:
    # A fixed name per target, short enough for NAME_MAX whatever the target's name: a
    # restore that crashed leaves it, and the next restore removes it before reusing it.
    return f".cudatx-{hashlib.sha256(name.encode()).hexdigest()[:16]}.tmp"


def _already_back(parent: int, name: str, saved: SavedFile, store_copy: os.stat_result) -> bool:
    """Whether the live file already holds the saved bytes and mode (uv stopped before it).

    Such a file is left alone: it may be one the kernel will not let anyone replace (an
    immutable file, a folder without write access), which is often why uv stopped. A live
    file that is the store's own inode (a hard link uv never broke) is copied out anyway."""
    try:
        fd = os.open(name, _READ, dir_fd=parent)
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


def _put_back_file(walk: _Restoring, saved: SavedFile) -> None:
    """Put one saved file back, through its folder's descriptor."""
    stored = _stored_name(saved)
    rel = walk.snapshot.rel(saved.path)
    parent = walk.parent(rel)
    name = os.path.basename(rel)
    store_copy = os.stat(stored, dir_fd=walk.files, follow_symlinks=False)
    if _already_back(parent, name, saved, store_copy):
        return
    temp = _temp_name(name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp, dir_fd=parent)  # unlinkat removes a symlink itself, never its target
    # Copy, never move and never link out of the store: the saved bytes must stay for a
    # second rollback, and a restored file must not share its inode with the store.
    src = os.open(stored, _READ, dir_fd=walk.files)
    try:
        st = os.fstat(src)
        dst = os.open(temp, _CREATE, 0o600, dir_fd=parent)
        try:
            _copy_fd(src, dst)
            os.fchmod(dst, saved.mode)  # before the rename: never visible with another mode
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    # renameat(2) in the one folder replaces the target name atomically: readers see the old
    # file or the saved one, and a symlink at the target is replaced rather than written
    # through.
    os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)


def _put_back_link(walk: _Restoring, saved: SavedFile) -> None:
    assert saved.link is not None
    rel = walk.snapshot.rel(saved.path)
    parent = walk.parent(rel)
    name = os.path.basename(rel)
    temp = _temp_name(name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp, dir_fd=parent)
    os.symlink(saved.link, temp, dir_fd=parent)
    os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)


def _verify_restored(snapshot: Snapshot) -> None:
    """Every restored path read back from a fresh walk of the prefix: what was put back
    through a folder swapped meanwhile is not where it must be, and is said so."""
    with Root(snapshot.prefix) as root:
        for saved in snapshot.files:
            _verify_one(root, snapshot, saved)
        for folder in snapshot.folders:
            st = root.lstat(snapshot.rel(folder))
            if st is None or not stat.S_ISDIR(st.st_mode):
                raise StoreError(f"restored folder {folder} is missing", path=folder)


def _verify_one(root: Root, snapshot: Snapshot, saved: SavedFile) -> None:
    rel = snapshot.rel(saved.path)
    name = os.path.basename(rel)
    try:
        parent = root.parent(rel)
        if saved.stored is None:
            ok = os.readlink(name, dir_fd=parent) == saved.link
            if not ok:
                raise StoreError(
                    f"restored {saved.path} is not the symlink to {saved.link} it was",
                    path=saved.path,
                )
            return
        fd = os.open(name, _READ, dir_fd=parent)
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


def check(txn_dir: Path, snapshot: Snapshot) -> None:
    """What must hold before anything is written back: every saved file's hash, and every
    target (all or nothing where it can be known beforehand)."""
    verify_saved(txn_dir, snapshot)
    try:
        with Root(snapshot.prefix) as root:
            _precheck_targets(root, snapshot)
    except OSError as exc:
        raise StoreError(
            f"cannot open {snapshot.prefix}: {exc.strerror}", path=snapshot.prefix
        ) from None


def restore(txn_dir: Path, snapshot: Snapshot) -> list[str]:
    """Check, then put every saved file, symlink and folder back; idempotent. Returns the
    symlinks removed where the snapshot saw a folder."""
    check(txn_dir, snapshot)
    return write_back(txn_dir, snapshot)


def write_back(txn_dir: Path, snapshot: Snapshot) -> list[str]:
    """Put every saved file, symlink and folder back, once `check` passed (callers that
    change the environment in between, removing what a transaction added, check first).
    Returns the symlinks it removed where the snapshot saw a folder (cudatx.txn.beneath).

    Afterwards every restored file is read back and compared with its record. The store
    keeps its copies, so a second restore gives the same tree.
    """
    try:
        files = _open_files(txn_dir)
    except OSError as exc:
        raise StoreError(
            f"cannot open the snapshot of {txn_dir.name}: {exc.strerror}", path=str(txn_dir)
        ) from None
    try:
        with Root(snapshot.prefix) as root:
            walk = _Restoring(root, files, snapshot)
            _write_all(walk)
    except OSError as exc:
        raise StoreError(
            f"cannot open {snapshot.prefix}: {exc.strerror}", path=snapshot.prefix
        ) from None
    finally:
        os.close(files)
    _verify_restored(snapshot)
    return walk.replaced


def _write_all(walk: _Restoring) -> None:
    snapshot = walk.snapshot
    touched: set[str] = set()  # the folders written in
    # Symlinks first, shortest path first: a saved symlink may be a folder name (lib64 ->
    # lib) that files below it go through, as they did when they were saved.
    links = sorted((f for f in snapshot.files if f.stored is None), key=lambda f: f.path)
    for saved in links:
        touched.add(os.path.dirname(snapshot.rel(saved.path)))
        try:
            _put_back_link(walk, saved)
        except OSError as exc:
            raise StoreError(
                f"cannot restore {saved.path}: {exc.strerror}", path=saved.path
            ) from None
    for folder in snapshot.folders:
        touched.add(os.path.dirname(snapshot.rel(folder)))
        try:
            walk.folder(snapshot.rel(folder))
        except OSError as exc:
            raise StoreError(
                f"cannot restore folder {folder}: {exc.strerror}", path=folder
            ) from None
    for saved in snapshot.files:
        if saved.stored is None:
            continue
        touched.add(os.path.dirname(snapshot.rel(saved.path)))
        try:
            _put_back_file(walk, saved)
        except OSError as exc:
            raise StoreError(
                f"cannot restore {saved.path}: {exc.strerror}", path=saved.path
            ) from None
    # The renames are durable only once their folders are fsync'ed (POSIX; see fsync_dir).
    for rel in sorted(touched):
        with contextlib.suppress(OSError):
            os.fsync(walk.root.folder(rel))
    # The modes last, deepest first: a folder saved read-only (0555) must still take the
    # files restored into it. Every saved folder, not only those made now: a rollback
    # killed after making a folder (0700 until here) left it for this one to finish.
    for folder in sorted(snapshot.folder_modes, key=lambda f: -f.count(os.sep)):
        mode = snapshot.folder_modes[folder]
        try:
            fd = walk.root.folder(snapshot.rel(folder))
            if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
                os.fchmod(fd, mode)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreError(
                f"cannot restore the mode of {folder}: {exc.strerror}", path=folder
            ) from None
