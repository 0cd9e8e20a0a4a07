"""Which running processes map files that a transaction will delete or overwrite.

Files mapped by running processes block an apply unless forced: a training run that has
cuDNN mapped must be stopped before the cleanup that replaces cuDNN. Replacing a shared
library under a process that has it mapped is what turns a package change into a crash
minutes later.

Files are matched by identity, not by name: a path given here may reach its file through
symlinked folders (`lib64 -> lib`), `..`, or another hard link, and the kernel names a mapping
by one path only. The pathname is a second key, for filesystems whose mappings show another
device than stat does (overlayfs on older kernels showed the lower file's dev:inode under the
overlay's name; btrfs subvolumes). The name key errs towards blocking: a process in another
mount namespace mapping another file at the same name is reported too.

What this cannot see, by construction: processes in other PID namespaces, and, when /proc is
mounted with hidepid=, other users' processes (their /proc/<pid> is not even listed).
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterable

from cudatx.errors import UnreadableFile
from cudatx.models import Frozen
from cudatx.txn.reach import Reach

PROC = "/proc"
# proc(5): a mapping whose file was unlinked keeps its old pathname with this suffix.
DELETED = " (deleted)"


class Holder(Frozen):
    """A process that maps at least one of the files asked about."""

    pid: int
    user: str  # login name of the owner of /proc/<pid>, or the uid when it has no name
    command: str  # cmdline joined by spaces, or "[comm]" when the cmdline is empty
    files: tuple[str, ...]  # the paths asked about (as given) that it maps, sorted


class Unknown(Frozen):
    """A process whose mappings could not be read: it may hold a file, so it is never safe."""

    pid: int
    user: str | None
    command: str | None
    reason: str  # "permission denied", ...
    # Why it cannot open any of the files asked about either, where cudatx can tell from
    # what /proc shows without ptrace (cudatx.txn.reach); None where it may
    cannot_open: str | None = None


class InUseReport(Frozen):
    holders: tuple[Holder, ...] = ()
    unknown: tuple[Unknown, ...] = ()

    @property
    def clear(self) -> bool:
        """True when no process maps any of the files and none could hide one."""
        return not self.holders and not self.unknown


class _Targets:
    """The files asked about, keyed both ways a maps line can name them."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.by_identity: dict[tuple[int, int], set[str]] = {}
        self.by_name: dict[str, set[str]] = {}
        self.inode_texts: set[str] = set()
        for path in paths:
            try:
                st = os.lstat(path)
            except (FileNotFoundError, NotADirectoryError):
                # Nothing there, so nothing to delete or overwrite. A process may still map the
                # file that used to be there, but it keeps that (deleted) copy whatever we do.
                continue
            except OSError as e:
                raise UnreadableFile(
                    f"{path}: cannot check whether it is in use: {e.strerror}", path=path
                ) from e
            if stat.S_ISLNK(st.st_mode):
                # A symlink cannot be mapped, and removing or replacing the link leaves the file
                # it points to (and any process mapping it) alone. Symlinks in the folders above
                # are followed by lstat like by stat.
                continue
            self.by_identity.setdefault((st.st_dev, st.st_ino), set()).add(path)
            self.inode_texts.add(str(st.st_ino))
            # proc(5): maps escapes a newline in a pathname as "\012" (octal).
            name = os.path.realpath(path).replace("\n", "\\012")
            self.by_name.setdefault(name, set()).add(path)

    def __bool__(self) -> bool:
        return bool(self.by_identity)

    def matches(self, maps: str) -> set[str]:
        """The given paths whose files appear in the text of one /proc/<pid>/maps."""
        found: set[str] = set()
        for line in maps.splitlines():
            # proc(5): "address perms offset dev inode pathname"; pathname may hold spaces,
            # so split at most five times. Anonymous mappings have no sixth field.
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            # proc(5): inode is decimal (the kernel prints it with %lu, so the text of an
            # int compares exactly) and dev is "major:minor" in hex.
            if parts[4] in self.inode_texts:
                major, _, minor = parts[3].partition(":")
                identity = (os.makedev(int(major, 16), int(minor, 16)), int(parts[4]))
                hit = self.by_identity.get(identity)
                if hit:
                    found |= hit
            # The name key is only for a file still linked at that name: a deleted mapping's
            # old name may now hold another file (an upgrade that already happened), and
            # deleting that new file takes nothing away from this process.
            name = parts[5]
            if not name.endswith(DELETED):
                hit = self.by_name.get(name)
                if hit:
                    found |= hit
        return found


def _user(pid_dir: str) -> str | None:
    """Owner of /proc/<pid> (proc(5): the effective uid, or root for a non-dumpable process)."""
    try:
        uid = os.stat(pid_dir).st_uid
    except OSError:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _command(pid_dir: str) -> str | None:
    try:
        with open(os.path.join(pid_dir, "cmdline"), "rb") as f:
            raw = f.read()
    except OSError:
        raw = b""
    # proc(5): arguments are NUL-separated, with a NUL after the last one.
    args = [os.fsdecode(a) for a in raw.split(b"\0")]
    while args and not args[-1]:
        args.pop()
    if args:
        return " ".join(args)
    # Kernel threads and zombies have an empty cmdline; ps shows them as [comm].
    try:
        with open(os.path.join(pid_dir, "comm"), "rb") as f:
            comm = os.fsdecode(f.read().rstrip(b"\n"))
    except OSError:
        return None
    return f"[{comm}]"


def _read_maps(pid_dir: str) -> str:
    with open(os.path.join(pid_dir, "maps"), "rb") as f:
        return os.fsdecode(f.read())


def processes_using(paths: Iterable[str], *, exclude_pids: Iterable[int] = ()) -> InUseReport:
    """Every running process that maps one of `paths`, and every one that could not be checked.

    Paths that do not exist (or are symlinks) are skipped: nothing there can be taken away from
    a process. The calling process and `exclude_pids` are not looked at. Processes that exit
    during the scan are skipped; processes whose maps cannot be read are reported as Unknown,
    never assumed safe. Raises UnreadableFile when a given path cannot be stat'ed.
    """
    paths = list(paths)
    targets = _Targets(paths)
    if not targets:
        return InUseReport()
    excluded = {os.getpid(), *exclude_pids}
    holders: list[Holder] = []
    unknown: list[Unknown] = []
    reach: list[Reach] = []  # made at the first process that cannot be read
    try:
        entries = os.listdir(PROC)
    except OSError as e:
        raise UnreadableFile(f"{PROC}: cannot list processes: {e.strerror}", path=PROC) from e
    pids = sorted(int(name) for name in entries if name.isdigit())
    for pid in pids:
        if pid in excluded:
            continue
        pid_dir = f"{PROC}/{pid}"
        # Only maps is read. /proc/<pid>/map_files/ names the same mappings (as links named by
        # address range) but needs CAP_SYS_ADMIN to read (proc(5)), and it adds nothing here:
        # maps already gives device, inode and pathname of every file-backed mapping.
        try:
            maps = _read_maps(pid_dir)
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited between the listing and now: it holds nothing any more
        except PermissionError:
            # proc(5): reading maps needs ptrace read access (PTRACE_MODE_READ_FSCREDS).
            unknown.append(_unknown(pid, pid_dir, "permission denied", reach, paths))
            continue
        except OSError as e:
            reason = e.strerror or type(e).__name__
            unknown.append(_unknown(pid, pid_dir, reason, reach, paths))
            continue
        # Kernel threads and zombies have no address space: their maps is empty.
        found = targets.matches(maps) if maps else set()
        if not found:
            continue
        user = _user(pid_dir)
        if user is None:
            continue  # it exited after its maps were read: it holds nothing any more
        holders.append(
            Holder(
                pid=pid,
                user=user,
                command=_command(pid_dir) or "?",
                files=tuple(sorted(found)),
            )
        )
    return InUseReport(holders=tuple(holders), unknown=tuple(unknown))


def _unknown(
    pid: int, pid_dir: str, reason: str, reach: list[Reach], paths: Iterable[str]
) -> Unknown:
    if not reach:
        reach.append(Reach(paths))
    return Unknown(
        pid=pid,
        user=_user(pid_dir),
        command=_command(pid_dir),
        reason=reason,
        cannot_open=reach[0].cannot_open(pid_dir),
    )
