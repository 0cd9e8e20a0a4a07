"""The environment's files, reached from the prefix down through folder descriptors.

A path string is resolved by the kernel afresh at every system call: a folder on the way
that someone swaps for a symlink between two calls sends the second one elsewhere (the
attack OpenSSH's StrictModes and `rm -rf`'s fd walk guard against). So every walk, deletion
and write of a transaction's own goes through `Root`: the prefix is opened once, and each
folder below it is opened by name from its parent's descriptor with O_NOFOLLOW|O_DIRECTORY
(openat(2): a symlink there fails with ELOOP, a file with ENOTDIR), and the file itself is
named relative to its folder's descriptor (unlinkat, renameat, linkat, mkdirat,
symlinkat, readlinkat, fstatat without following: os functions given `dir_fd`). Once a
folder is open, its descriptor stays with that folder wherever it is moved; what is done
through it never lands in a folder put in its place.

Paths are named relative to the prefix, `rel`: components without `.`, `..` or empty
ones. Which `rel` a path string stands for is decided once, where cudatx sees it
(`canonical`: the folders resolved as they are at that moment, and refused if they lead
outside), and kept from then on; a later walk never resolves a symlink.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable
from types import TracebackType

from cudatx.discover.confinement import inside

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FOLDERS = 256  # descriptors kept open at once (the soft limit is often 1024)


def split(rel: str) -> list[str]:
    """The components of a path relative to the prefix; ValueError for one that climbs."""
    parts = [p for p in rel.split("/") if p]
    if any(p in (".", "..") or "\0" in p for p in parts):
        raise ValueError(f"{rel!r} is not a path below the prefix")
    return parts


def lexical(path: str, prefix: str) -> str | None:
    """`path` relative to `prefix` as written (normalized, never resolved); None when it is
    not below it."""
    rel = os.path.relpath(os.path.normpath(path), os.path.normpath(prefix))
    if rel == ".":
        return ""
    return None if rel == ".." or rel.startswith("../") or os.path.isabs(rel) else rel


def canonical(path: str, prefix: str) -> str | None:
    """Where `path` is, relative to the prefix, once the folders leading to it are resolved
    as they are now (the last component is not: a symlink there is what gets saved,
    deleted or restored); None when that is outside the prefix, or `path` is relative."""
    real_prefix = os.path.realpath(prefix)
    if not inside(path, real_prefix):
        return None
    head, tail = os.path.split(os.path.normpath(path))
    rel = os.path.relpath(os.path.join(os.path.realpath(head), tail), real_prefix)
    return "" if rel == "." else rel


def resolved(folder: str, prefix: str) -> str | None:
    """Where a folder is, relative to the prefix, every component resolved (its own name
    too); None when that is outside the prefix."""
    real_prefix = os.path.realpath(prefix)
    real = os.path.realpath(folder)
    if os.path.commonpath([real_prefix, real]) != real_prefix:
        return None
    rel = os.path.relpath(real, real_prefix)
    return "" if rel == "." else rel


def is_symlink_error(exc: OSError) -> bool:
    """What openat(O_NOFOLLOW|O_DIRECTORY) says of a symlink (ELOOP) or of a file (ENOTDIR)."""
    return exc.errno in (errno.ELOOP, errno.ENOTDIR)


class Root:
    """The prefix, open; folders below it opened from it without following a symlink.

    Descriptors of folders already opened are kept (up to _OPEN_FOLDERS) and reused: what
    is done in a folder goes on in the folder first opened, even if it is moved meanwhile.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.fd = os.open(prefix, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._open: dict[str, int] = {}

    def __enter__(self) -> Root:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.forget()
        os.close(self.fd)

    def forget(self) -> None:
        """Close the folders kept open: the next walk opens them afresh from the prefix."""
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()

    def identity(self) -> str:
        st = os.fstat(self.fd)
        return f"{st.st_dev}:{st.st_ino}"

    def folder(
        self,
        rel: str,
        *,
        make: Callable[[str], int | None] | None = None,
        replace_link: Callable[[str], bool] | None = None,
    ) -> int:
        """The descriptor of folder `rel` (kept by the Root: never close it).

        A missing component is created (mkdirat) when `make` is given, with the mode
        make(rel of it) returns (None: 0o777 less the umask, as mkdir(1)). A component that
        is a symlink is an OSError (ELOOP), unless replace_link(rel of it) says a folder
        stood there when cudatx saw it: then the symlink itself is removed (unlinkat,
        never what it points to) and the folder made in its place."""
        parts = split(rel)
        fd = self.fd
        done: list[str] = []
        for name in parts:
            done.append(name)
            here = "/".join(done)
            kept = self._open.get(here)
            if kept is not None:
                fd = kept
                continue
            fd = self._child(fd, name, here, make, replace_link)
        return fd

    def _child(
        self,
        parent: int,
        name: str,
        here: str,
        make: Callable[[str], int | None] | None,
        replace_link: Callable[[str], bool] | None,
    ) -> int:
        for _ in range(3):  # a folder made or removed meanwhile by someone else: try again
            try:
                fd = os.open(name, _DIR, dir_fd=parent)
            except FileNotFoundError:
                if make is None:
                    raise
                mode = make(here)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777 if mode is None else mode, dir_fd=parent)
                continue
            except OSError as exc:
                if not is_symlink_error(exc):
                    raise
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if not (stat.S_ISLNK(st.st_mode) and replace_link and replace_link(here)):
                    raise OSError(
                        exc.errno,
                        "a symlink stands where a folder was"
                        if stat.S_ISLNK(st.st_mode)
                        else "not a folder",
                        os.path.join(self.prefix, here),
                    ) from None
                os.unlink(name, dir_fd=parent)
                continue
            if len(self._open) >= _OPEN_FOLDERS:
                self.forget()
            self._open[here] = fd
            return fd
        raise OSError(errno.EAGAIN, "kept changing while cudatx opened it", here)

    def parent(
        self,
        rel: str,
        *,
        make: Callable[[str], int | None] | None = None,
        replace_link: Callable[[str], bool] | None = None,
    ) -> int:
        """The descriptor of the folder holding `rel` (see `folder`)."""
        return self.folder(os.path.dirname(rel), make=make, replace_link=replace_link)

    def entry(self, rel: str) -> tuple[int, str, os.stat_result] | None:
        """(its folder's descriptor, its name, its lstat) of `rel`, reached without following
        a symlink on the way; None when it or a folder on the way is missing, or a folder on
        the way is a symlink or a file (nothing is there to act on)."""
        try:
            parent = self.folder(os.path.dirname(rel))
            name = os.path.basename(rel)
            return parent, name, os.stat(name, dir_fd=parent, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if is_symlink_error(exc):
                return None
            raise

    def lstat(self, rel: str) -> os.stat_result | None:
        """lstat of `rel` (see `entry`)."""
        found = self.entry(rel)
        return None if found is None else found[2]


# -- the folders uv is given, before and after it runs -------------------------------------


# rel of each folder -> (st_dev, st_ino), or None for one not there yet (a change may make it)
Chain = dict[str, tuple[int, int] | None]


def fingerprint(root: Root, folders: Iterable[str]) -> Chain:
    """(device, inode) of every folder from the prefix down to each of `folders` (rels),
    reached without following a symlink, and None for each not there; OSError where one
    cannot be reached so (a symlink on the way)."""
    found: Chain = {}
    for rel in folders:
        parts = split(rel)
        missing = False
        for n in range(1, len(parts) + 1):
            here = "/".join(parts[:n])
            if here in found:
                missing = found[here] is None
                continue
            if not missing:
                try:
                    st = os.fstat(root.folder(here))
                    found[here] = (st.st_dev, st.st_ino)
                    continue
                except FileNotFoundError:
                    missing = True
            found[here] = None
    return found


def moved(prefix: str, before: Chain, may_go: set[str]) -> list[str]:
    """What changed in `before` since (each as one phrase), looked at afresh from a new
    descriptor of the prefix: a folder that is now a symlink or a file, or another folder
    than it was (by device and inode), or missing, unless it is in `may_go` (one the change
    itself removes, and may make again); one that was not there may be there now, as a
    folder. What lies below a folder so reported is not looked at."""
    said: list[str] = []
    seen_off: list[str] = []  # folders reported, or gone as the change says: not below them
    with Root(prefix) as root:
        for rel in sorted(before):
            if any(rel.startswith(off + "/") for off in seen_off):
                continue
            path = os.path.join(prefix, rel)
            st = root.lstat(rel)
            was = before[rel]
            if st is None:
                seen_off.append(rel)
                if rel not in may_go and was is not None:
                    said.append(f"{path} is gone")
            elif stat.S_ISLNK(st.st_mode):
                said.append(f"{path} is now a symlink to {_target(path)}")
                seen_off.append(rel)
            elif not stat.S_ISDIR(st.st_mode):
                said.append(f"{path} is now a file")
                seen_off.append(rel)
            elif was is not None and (st.st_dev, st.st_ino) != was and rel not in may_go:
                said.append(f"{path} is another folder than it was")
                seen_off.append(rel)
    return said


def _target(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
