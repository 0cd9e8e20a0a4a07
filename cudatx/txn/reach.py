"""Whether a process whose maps cudatx cannot read could open the environment's files at
all, judged from what /proc shows without ptrace access (proc(5)).

A process maps a file only after opening it. Two facts readable by anyone say it cannot:
- its mounts (`/proc/PID/mountinfo`: fs/proc_namespace.c, mounts_open_common, checks no
  ptrace access; it lists the mounts reachable from the process's root): none holds the
  file's filesystem at or above the file (a container's init, whose root is another
  filesystem);
- its credentials (`/proc/PID/status`: fsuid, fsgid, groups, CapEff): every way through
  its mounts passes a folder whose mode bits let it not search, or ends at a file they let
  it not read (fs/namei.c, acl_permission_check: the owner's bits for the owner, else the
  group's for a member, else the others'), and it holds neither CAP_DAC_OVERRIDE nor
  CAP_DAC_READ_SEARCH.

Where either cannot be told it may open them: mountinfo unreadable, a root that is no
mount's root (a chroot into a folder: mountinfo then leaves out the filesystem it stands
in), a process that is not dumpable (`/proc/PID` is then root's, not its effective uid's:
its credentials changed since it started, as a daemon's that drops root after loading, or
it asked so), a folder with a POSIX ACL. The folders above a mount's point in the other
process's namespace are not read (fewer gates: never a false "cannot"). What this cannot
see: a file opened before the process changed its root, and files reached through another
hard link outside the environment.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from typing import NamedTuple

from cudatx.sandbox import under, unescape

CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2  # include/uapi/linux/capability.h
_SEARCH, _READ = 1, 4


class Mount(NamedTuple):
    device: str  # "major:minor"
    root: str  # the folder of its filesystem that is mounted
    point: str  # where, from the process's root


def mounts(pid_dir: str) -> list[Mount] | None:
    """The mounts of /proc/PID/mountinfo, in its order; None where it cannot be read."""
    try:
        with open(os.path.join(pid_dir, "mountinfo"), "rb") as handle:
            text = os.fsdecode(handle.read())
    except OSError:
        return None
    found = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 5:
            found.append(Mount(words[2], unescape(words[3]), unescape(words[4])))
    return found


class _Creds(NamedTuple):
    fsuid: int
    fsgid: int
    groups: frozenset[int]


def _creds(pid_dir: str) -> _Creds | None:
    """Its file-system credentials, where they can be trusted to be the ones it opened files
    with; None where it holds a capability that passes mode bits, or cannot be told."""
    fields: dict[str, list[str]] = {}
    try:
        with open(os.path.join(pid_dir, "status"), "rb") as handle:
            for line in os.fsdecode(handle.read()).splitlines():
                key, _, value = line.partition(":")
                fields[key] = value.split()
        uid, gid = [int(x) for x in fields["Uid"]], [int(x) for x in fields["Gid"]]
        caps = int(fields["CapEff"][0], 16)
        groups = frozenset(int(x) for x in fields.get("Groups", []))
        owner = os.stat(pid_dir)
    except (OSError, KeyError, IndexError, ValueError):
        return None
    if caps & (1 << CAP_DAC_OVERRIDE | 1 << CAP_DAC_READ_SEARCH):
        return None
    # proc(5): /proc/PID is owned by the effective uid and gid of a dumpable process only.
    if (owner.st_uid, owner.st_gid) != (uid[1], gid[1]):
        return None
    return _Creds(uid[3], gid[3], groups)


def _allows(path: str, need: int, creds: _Creds, seen: dict[tuple[str, int], bool]) -> bool:
    """Whether `creds` pass `path` (search a folder, read a file) by its mode bits; True
    where that cannot be told (a POSIX ACL, a path cudatx cannot stat)."""
    key = (path, need)
    if key not in seen:
        try:
            st = os.stat(path)
        except OSError:
            seen[key] = True
            return True
        if st.st_uid == creds.fsuid:
            bits = st.st_mode >> 6
        elif st.st_gid == creds.fsgid or st.st_gid in creds.groups:
            bits = st.st_mode >> 3
        else:
            bits = st.st_mode
        allowed = bool(bits & need)
        if not allowed:
            try:
                os.getxattr(path, "system.posix_acl_access")
                allowed = True  # an ACL may grant what the bits do not
            except OSError as exc:
                allowed = exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP)
        seen[key] = allowed
    return seen[key]


class _Place(NamedTuple):
    device: str
    inside: str  # the file's path in its filesystem
    ours: Mount  # the mount cudatx sees it through


def _place(path: str, ours: list[Mount]) -> _Place | None:
    real = os.path.realpath(path)
    best: Mount | None = None
    for mount in ours:  # the last of the longest: a mount stacked on another hides it
        if under(real, mount.point) and (best is None or len(mount.point) >= len(best.point)):
            best = mount
    if best is None:
        return None
    rest = os.path.relpath(real, best.point)
    return _Place(best.device, os.path.normpath(os.path.join(best.root, rest)), best)


def _ours(inside: str, mount: Mount) -> str | None:
    """Where cudatx reaches the folder `inside` of the mount's filesystem, if it does."""
    if not under(inside, mount.root):
        return None
    return os.path.normpath(os.path.join(mount.point, os.path.relpath(inside, mount.root)))


class Reach:
    """The files of one change, placed once; asked for each process cudatx cannot read."""

    def __init__(self, paths: Iterable[str]) -> None:
        ours = mounts("/proc/self") or []
        placed = [_place(p, ours) for p in paths if os.path.lexists(p)]
        # A file cudatx cannot place in its mounts: nothing can be said of it.
        self.places = [p for p in placed if p is not None] if None not in placed else []
        self.seen: dict[tuple[str, int], bool] = {}

    def cannot_open(self, pid_dir: str) -> str | None:
        """Why the process cannot open any of the files, where that is certain; None where
        it may open one of them."""
        theirs = mounts(pid_dir)
        if not theirs or not any(m.point == "/" for m in theirs) or not self.places:
            return None
        creds = _creds(pid_dir)
        said: str | None = None
        for place in self.places:
            routes = [m for m in theirs if m.device == place.device and under(place.inside, m.root)]
            for route in routes:
                closed = self._closed(place, route, creds)
                if closed is None:
                    return None
                said = said or closed
        return said or "its mounts do not hold these files"

    def _closed(self, place: _Place, route: Mount, creds: _Creds | None) -> str | None:
        """The folder or file that stops the process on this way to the file; None where
        nothing does (or it cannot be told)."""
        if creds is None:
            return None
        folders = [route.root]
        parent = os.path.dirname(place.inside)
        for part in os.path.relpath(parent, route.root).split(os.sep):
            if part != ".":
                folders.append(os.path.join(folders[-1], part))
        gates = [(f, _SEARCH) for f in folders] + [(place.inside, _READ)]
        for inside, need in gates:
            path = _ours(inside, place.ours)
            if path is not None and not _allows(path, need, creds, self.seen):
                verb = "search" if need == _SEARCH else "read"
                try:
                    mode = f" (mode {stat.S_IMODE(os.stat(path).st_mode):04o})"
                except OSError:
                    mode = ""
                return f"uid {creds.fsuid} cannot {verb} {path}{mode}"
        return None
