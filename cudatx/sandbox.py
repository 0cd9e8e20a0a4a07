"""Confinement the kernel enforces: a command (uv changing an environment, a trial's code)
run where the whole file system is read-only but the folders it is given.

cudatx checks every path it hands uv, but between its last check and uv's own unlink or
write there is a window: a package folder swapped for a symlink to an outside folder then
has uv delete outside files (issue 32). Checks cannot close that window; a private mount
namespace can, as bubblewrap and Nix's build sandbox do. In it every mount is read-only
except bind mounts of the writable folders, so a write or unlink that a symlink leads
anywhere else fails with EROFS, whatever the path, however late the swap.

How, in a fresh interpreter (`python -I -S -c BOOT SPEC -- ARGV`, see `confine`), which
then execs the command:

1. unshare(2): `CLONE_NEWNS|CLONE_NEWPID` as root (a plain mount namespace needs
   CAP_SYS_ADMIN), else `CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID` with the caller's own uid
   and gid mapped to themselves (`setgroups` denied first, as an unprivileged writer of
   `gid_map` must: user_namespaces(7)).
2. mount(2) `MS_REC|MS_PRIVATE` on `/`: nothing done here propagates back to the host
   (mount_namespaces(7), "Shared subtrees").
3. Each writable folder bind-mounted onto itself (`MS_BIND|MS_REC`), then checked to be the
   folder cudatx stat'ed (device and inode), so a folder swapped for a symlink before the
   sandbox was made is never the one made writable.
4. Every mount read-only: mount_setattr(2) `MOUNT_ATTR_RDONLY` with `AT_RECURSIVE` on `/`
   (Linux 5.12+; older kernels: each mount of /proc/self/mountinfo remounted
   `MS_BIND|MS_REMOUNT|MS_RDONLY` keeping its flags, as bubblewrap's bind-mount.c
   `bind_mount` does), then the writable folders' binds (and the mounts below them that
   were writable) made writable again. A private tmpfs on `/dev/shm`.
5. A child forked into the new PID namespace mounts a fresh `/proc`: the host's would let a
   symlink to `/proc/PID/root/...` or `/proc/PID/fd/N` of a process outside lead back into
   the host's writable mounts (bubblewrap mounts its own /proc for this reason). Its
   `/proc/sys` is read-only.
6. That child moves into one more user and mount namespace (the whole uid range of the
   namespace above mapped to itself): copied into a namespace owned by a less privileged
   user namespace, every mount's read-only flag is locked (mount_namespaces(7),
   "Restrictions on mount namespaces"), so not even a root command can remount it
   writable; and it has no capability outside.
7. It forks the command and stays as the namespace's init (reaping, passing on signals);
   when the command ends, the kernel kills whatever it left in the namespace. Each process
   dies with the one that made it (prctl(2) PR_SET_PDEATHSIG), so nothing outlives cudatx.

Why a fresh interpreter and not a `preexec_fn` or `os.unshare`: `os.unshare` is Python
3.12+ (cudatx supports 3.11); unshare(2) refuses `CLONE_NEWUSER` to a multi-threaded
process, and cudatx has threads (uv's stderr reader, pools), so it must run in a process
that has only one; a `preexec_fn` runs Python between fork and exec, which the subprocess
docs warn can deadlock in a threaded parent; and a PID namespace takes effect only for a
child forked after the unshare. No setuid helper, no bubblewrap (not everywhere, a setuid
build on some distributions), no PyPI package (none well kept does this): ctypes and
libc's unshare, mount and syscall.

Where no namespace can be made (user namespaces off: kernel.unprivileged_userns_clone,
user.max_user_namespaces, kernel.apparmor_restrict_unprivileged_userns; a seccomp filter;
a container without CAP_SYS_ADMIN), `probe` says "none" and why, and the caller runs the
command as before, with only its own checks. Nothing here prints or exits in cudatx's
process.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from cudatx.errors import CudatxError, ExitCode
from cudatx.models import SandboxUsed

Mode = Literal["user namespace", "mount namespace as root", "none"]
USER: Final = "user namespace"
ROOT: Final = "mount namespace as root"
NONE: Final = "none"

# The helper's own failure, before the command ran: the code env(1), chroot(1) and
# timeout(1) use for "the wrapper itself failed", and a line that starts with _SAID.
SETUP_FAILED = 125
_SAID = "cudatx-sandbox: "


class SandboxFailed(CudatxError):
    """The sandbox the probe said this machine makes could not be made for this run (a
    writable folder moved, a mount refused): the command did not run. Inside a transaction
    the caller turns it into RolledBack, as a uv failure."""

    exit_code = ExitCode.UV


@dataclass(frozen=True)
class Confinement:
    """Which guarantee holds: `mode` is USER, ROOT or NONE; `reason` says why NONE, or what
    is weaker than the rest (the read-only flags not locked)."""

    mode: Mode
    reason: str = ""
    locked: bool = False  # the read-only flags cannot be undone by the command itself

    @property
    def held(self) -> bool:
        return self.mode != NONE

    def describe(self) -> str:
        """One line for -v, the JSON and the apply's summary: "user namespace", "mount
        namespace as root", "none: <why>"."""
        if not self.held:
            return f"none: {self.reason}"
        return self.mode if self.locked else f"{self.mode} (not locked: {self.reason})"

    def said(self, writable: Sequence[str], what: str = "sandbox") -> str:
        """The -v line: the guarantee and what could be written, or that none held."""
        if not self.held:
            return f"{what}: {self.describe()}; only cudatx's own checks held"
        return f"{what}: {self.describe()} (writable: {', '.join(writable)})"

    def used(self, writable: Sequence[str]) -> SandboxUsed:
        """As the JSON and the summaries report it: no folder where none was confined."""
        return SandboxUsed(
            mode=self.mode,
            locked=self.locked,
            reason=self.reason,
            writable=tuple(writable) if self.held else (),
        )

    def inside_namespace(self) -> Confinement:
        """The guarantee as a process that is uid 0 of a user namespace (the trial's session
        under the overlay's `unshare -Urm`) makes it: there it holds CAP_SYS_ADMIN over its
        mounts, so the plain mount namespace mode applies, the lock (step 6) as before."""
        if self.held and os.geteuid() == 0:
            return Confinement(ROOT, self.reason, self.locked)
        return self


@dataclass(frozen=True)
class Confined:
    """How to run a command confined: `argv` in place of its own, `env` as its environment
    (pass both to subprocess; the caller's preexec_fn, pass_fds and process group work
    as before: the helper execs nothing until the sandbox is made, and passes its
    descriptors on). `confinement`: the guarantee, NONE where `argv` is the command's own."""

    argv: tuple[str, ...]
    env: dict[str, str] | None
    confinement: Confinement
    writable: tuple[str, ...] = field(default=())

    def failure(self, returncode: int, stderr: str) -> str | None:
        """The helper's own error, where it, not the command, failed (SETUP_FAILED and its
        line): the command never ran. None otherwise."""
        if not self.confinement.held or returncode != SETUP_FAILED:
            return None
        said = [ln for ln in stderr.splitlines() if ln.startswith(_SAID)]
        return said[-1][len(_SAID) :] if said else None

    def check(self, returncode: int, stderr: str) -> None:
        """Raise SandboxFailed where the helper failed (see `failure`)."""
        why = self.failure(returncode, stderr)
        if why is not None:
            raise SandboxFailed(f"the sandbox could not be made: {why}; nothing was run")


def _package_parent() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The helper: this module, from this very cudatx (wherever it was imported from), in an
# interpreter that reads no PYTHON* variable and no site folder (-I -S): the standard
# library alone, nothing of the environment's code.
_BOOT = (
    f"import sys; sys.path.insert(0, {_package_parent()!r}); "
    "from cudatx.sandbox import main; sys.exit(main(sys.argv[1:]))"
)


def helper_argv(spec: Mapping[str, Any], argv: Sequence[str]) -> list[str]:
    return [sys.executable, "-I", "-S", "-c", _BOOT, json.dumps(dict(spec)), "--", *argv]


def _identity(path: str) -> list[Any]:
    """[path, st_dev, st_ino] of a writable folder, its real path: the helper binds that
    folder only if it is still this one (not swapped since)."""
    if not os.path.isabs(path):
        raise SandboxFailed(f"a writable folder must be absolute: {path}")
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        raise SandboxFailed(f"{path}: {exc.strerror}; nothing was run") from None
    if real == "/":
        raise SandboxFailed("/ cannot be the writable folder of a sandbox")
    return [real, st.st_dev, st.st_ino]


def confine(
    argv: Sequence[str],
    writable: Iterable[str],
    *,
    probed: Confinement,
    env: Mapping[str, str] | None = None,
    tmp: str | None = None,
) -> Confined:
    """`argv` run where only `writable` (folders; each must exist) and `tmp` may be
    written, as `probed` (this process's `probe()`, kept by the caller) says this machine
    allows. `tmp`, where given, is made writable and is the command's TMPDIR. Where
    `probed` is NONE, the command's own argv and env: the caller's checks are all that
    holds, and `probed.describe()` says so."""
    environ = dict(env) if env is not None else None
    folders = [*writable, *([tmp] if tmp else [])]
    if tmp:
        environ = {**(environ if environ is not None else os.environ), "TMPDIR": tmp}
    if not probed.held:
        return Confined(tuple(argv), environ, probed)
    ids = [_identity(f) for f in folders]
    spec = {"writable": ids, "modes": [probed.mode]}
    wrapped = helper_argv(spec, argv)
    return Confined(tuple(wrapped), environ, probed, tuple(i[0] for i in ids))


def probe(modes: Sequence[Mode] = (ROOT, USER), timeout: float = 30.0) -> Confinement:
    """Whether this machine confines here, and how: the helper makes a sandbox around a
    temporary folder and checks in it that the folder can be written and that its parent
    cannot (EROFS). A run of one small interpreter; not cached here: the caller keeps the
    answer for its process. `modes`: which to try, in order (root tries the plain mount
    namespace first; everyone else can only make a user namespace)."""
    try:
        top = tempfile.mkdtemp(prefix="cudatx-sandbox-probe-")
    except OSError as exc:  # no place for the probe's own folder
        return Confinement(NONE, f"cannot probe: {exc.strerror or exc}")
    try:
        inside = os.path.join(top, "writable")
        os.mkdir(inside, 0o700)
        spec = {"writable": [_identity(inside)], "modes": list(modes), "probe": top}
        try:
            done = subprocess.run(
                helper_argv(spec, ["probe"]),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Confinement(NONE, f"the sandbox helper could not run: {exc}")
        said = done.stdout.strip().splitlines()
        if done.returncode != 0 or not said:
            why = [ln[len(_SAID) :] for ln in done.stderr.splitlines() if ln.startswith(_SAID)]
            last = why[-1] if why else (done.stderr.strip().splitlines() or ["no answer"])[-1]
            return Confinement(NONE, last)
        answer = json.loads(said[-1])
        mode: Mode = USER if answer["mode"] == USER else ROOT
        return Confinement(mode, str(answer["reason"]), bool(answer["locked"]))
    finally:
        shutil.rmtree(top, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# The helper: everything below runs in the fresh, single-threaded interpreter only.

# <sched.h>, <sys/mount.h>, <linux/mount.h>, <fcntl.h>
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_BIND = 4096
_MS_REC = 16384
_MS_SILENT = 32768
_MS_PRIVATE = 1 << 18
_MS_RELATIME = 1 << 21
_MS_STRICTATIME = 1 << 24
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_AT_SYMLINK_NOFOLLOW = 0x100
_MOUNT_ATTR_RDONLY = 0x1
# mount_setattr(2) has one number on every architecture (the syscall table unified at 403)
_SYS_MOUNT_SETATTR = 442
_PR_SET_PDEATHSIG = 1

# Mount options mountinfo shows, as mount(2) flags: a remount in a user namespace must keep
# every flag the mount has that was locked when the namespace copied it (mount(2), EPERM).
_OPTION_FLAGS = {
    "nosuid": _MS_NOSUID,
    "nodev": _MS_NODEV,
    "noexec": _MS_NOEXEC,
    "noatime": _MS_NOATIME,
    "nodiratime": _MS_NODIRATIME,
    "relatime": _MS_RELATIME,
    "strictatime": _MS_STRICTATIME,
}


class _Refused(Exception):
    """The sandbox cannot be made: said as one line, exit SETUP_FAILED."""


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class _Libc:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL(None, use_errno=True)
        self.lib.syscall.restype = ctypes.c_long

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"{what}: {os.strerror(code)}")

    def unshare(self, flags: int) -> None:
        self._check(self.lib.unshare(ctypes.c_int(flags)), "unshare")

    def mount(
        self, source: str | None, target: str, fstype: str | None, flags: int, data: str | None
    ) -> None:
        def b(s: str | None) -> bytes | None:
            return os.fsencode(s) if s is not None else None

        result = self.lib.mount(b(source), b(target), b(fstype), ctypes.c_ulong(flags), b(data))
        self._check(result, f"mount {target}")

    def setattr(self, path: str, *, recursive: bool, rdonly: bool) -> None:
        attr = _MountAttr(_MOUNT_ATTR_RDONLY if rdonly else 0, 0 if rdonly else _MOUNT_ATTR_RDONLY)
        flags = _AT_SYMLINK_NOFOLLOW | (_AT_RECURSIVE if recursive else 0)
        result = self.lib.syscall(
            ctypes.c_long(_SYS_MOUNT_SETATTR),
            ctypes.c_int(_AT_FDCWD),
            os.fsencode(path),
            ctypes.c_uint(flags),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        )
        self._check(int(result), f"mount_setattr {path}")

    def die_with_parent(self) -> None:
        self.lib.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass(frozen=True)
class _Mount:
    point: str
    options: frozenset[str]


def unescape(field_: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo (fs/proc_namespace.c)."""
    out, at = bytearray(), 0
    raw = os.fsencode(field_)
    while at < len(raw):
        if raw[at : at + 1] == b"\\" and raw[at + 1 : at + 4].isdigit():
            out.append(int(raw[at + 1 : at + 4], 8))
            at += 4
        else:
            out.append(raw[at])
            at += 1
    return os.fsdecode(bytes(out))


def _mounts() -> list[_Mount]:
    """This namespace's mounts, in mountinfo's order (parents before children)."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        lines = handle.read().splitlines()
    return [_Mount(unescape(w[4]), frozenset(w[5].split(","))) for w in map(str.split, lines)]


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _write(path: str, text: str, dir_fd: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _userns_off() -> str:
    """What on this machine turns user namespaces off, where a file says so."""
    said = []
    for path, off in (
        ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
        ("/proc/sys/user/max_user_namespaces", "0"),
        ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"),
    ):
        with contextlib.suppress(OSError), open(path, encoding="ascii") as handle:
            if handle.read().strip() == off:
                said.append(f"{path[len('/proc/sys/') :].replace('/', '.')}={off}")
    return f" ({', '.join(said)})" if said else ""


def _enter(libc: _Libc, modes: Sequence[str]) -> str:
    """The namespaces (step 1): the first of `modes` the kernel allows."""
    tried = []
    for mode in modes:
        if mode == ROOT:
            if os.geteuid() != 0:
                continue
            try:
                libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID)
                return ROOT
            except OSError as exc:
                tried.append(f"a mount namespace: {exc.strerror}")
        elif mode == USER:
            uid, gid = os.geteuid(), os.getegid()
            try:
                libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID)
            except OSError as exc:
                tried.append(f"a user namespace: {exc.strerror}{_userns_off()}")
                continue
            # user_namespaces(7): an unprivileged writer may map only its own ids, and must
            # deny setgroups(2) before it writes gid_map.
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
            _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
            return USER
    raise _Refused("not available: " + ("; ".join(tried) or "no namespace mode to try"))


def _read_only(libc: _Libc, writable: Sequence[str], by_remount: bool) -> None:
    """Steps 3 and 4: the writable folders bound onto themselves, every mount read-only
    but those binds and the mounts below them that were writable. `by_remount`: the
    fallback for kernels before 5.12 even where mount_setattr(2) exists (its tests)."""
    for folder in writable:
        libc.mount(folder, folder, None, _MS_BIND | _MS_REC, None)
    before = _mounts()
    try:
        if by_remount:
            raise OSError(errno.ENOSYS, "mount_setattr: not used")
        libc.setattr("/", recursive=True, rdonly=True)
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EINVAL):
            raise
        _read_only_by_remount(libc, before, writable)
        return
    for mount in before:
        if "rw" in mount.options and any(under(mount.point, f) for f in writable):
            libc.setattr(mount.point, recursive=False, rdonly=False)


def _read_only_by_remount(libc: _Libc, mounts: Sequence[_Mount], writable: Sequence[str]) -> None:
    """Before Linux 5.12: each visible mount remounted read-only, keeping the flags a
    user namespace may not drop (bubblewrap's bind-mount.c, bind_mount). A mount point
    this user cannot reach is skipped, as bubblewrap skips it (EACCES): nothing reaches
    it by a path. A mount covered by another at the same point is left as it is."""
    for mount in mounts:
        if any(under(mount.point, f) for f in writable) or "ro" in mount.options:
            continue
        flags = _MS_SILENT | _MS_BIND | _MS_REMOUNT | _MS_RDONLY
        flags |= sum(v for k, v in _OPTION_FLAGS.items() if k in mount.options)
        try:
            libc.mount(None, mount.point, None, flags, None)
        except OSError as exc:
            if exc.errno != errno.EACCES:
                raise


def _private_dev_shm(libc: _Libc) -> None:
    """/dev/shm, where Python's multiprocessing and torch put shared memory: a tmpfs of
    the sandbox's own, so nothing written there reaches the host's."""
    if os.path.isdir("/dev/shm") and not os.path.islink("/dev/shm"):
        libc.mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777")


def _proc(libc: _Libc) -> None:
    """Step 5, in the PID namespace's first process: its own /proc (only the sandbox's
    processes in it), /proc/sys read-only. In a mount namespace of its own (its mounts
    private, copied from the helper's): the helper's /proc must stay the one it names its
    child by."""
    libc.unshare(_CLONE_NEWNS)
    libc.mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)
    libc.mount("/proc/sys", "/proc/sys", None, _MS_BIND | _MS_REC, None)
    try:
        libc.setattr("/proc/sys", recursive=True, rdonly=True)
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EINVAL):
            raise
        flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        libc.mount(None, "/proc/sys", None, flags, None)


def _identity_map(kind: str) -> str:
    """The ids this namespace has, each mapped to itself: what the lock's namespace maps."""
    with open(f"/proc/self/{kind}_map", encoding="ascii") as handle:
        rows = [line.split() for line in handle if line.strip()]
    return "".join(f"{inside} {inside} {count}\n" for inside, _, count in rows)


def _pipe_line(fd: int) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").strip()


def _say(fd: int, line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, (line.replace("\n", " ") + "\n").encode())


def _forward(to: int, signals: Iterable[int]) -> None:
    def handler(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(to, signum)

    for sig in signals:
        signal.signal(sig, handler)


_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)


def _as_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"


def _init(
    libc: _Libc, mode: str, spec: dict[str, Any], argv: list[str], up: int, down: int
) -> None:
    """The PID namespace's first process (steps 5 to 7). Tells the helper above each
    step on `up`, hears it on `down`; never returns."""
    try:
        libc.die_with_parent()
        _proc(libc)
        try:
            uid, gid = os.geteuid(), os.getegid()
            libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS)
            if mode == USER:
                # The one id the namespace above has, mapped as an unprivileged writer may
                # (user_namespaces(7)); setgroups is already denied above, and stays so.
                _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
                _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
            _say(up, "unshared")
        except OSError as exc:
            _say(up, f"unlocked {exc.strerror}{_userns_off()}")
        if _pipe_line(down) != "go":  # the helper died or could not map the namespace
            os._exit(SETUP_FAILED)
        if spec.get("probe"):
            _say(up, _probe_inside(spec))
            os._exit(0)
    except (OSError, _Refused) as exc:
        _say(up, f"error {exc}")
        os._exit(SETUP_FAILED)
    child = os.fork()
    if child == 0:
        for sig in _FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"{_SAID}cannot run {argv[0]}: {exc.strerror}\n".encode())
            os._exit(127 if exc.errno == errno.ENOENT else 126)
    _forward(child, _FORWARDED)
    while True:  # init: reap every orphan until the command itself ends
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        if pid == child:
            _say(up, _as_status(status))
            os._exit(0)


def _probe_inside(spec: dict[str, Any]) -> str:
    """The probe's checks, run where the command would run: the writable folder takes a
    file, its parent refuses one with EROFS."""
    inside = spec["writable"][0][0]
    fd = os.open(os.path.join(inside, "written"), os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    try:
        fd = os.open(os.path.join(spec["probe"], "escaped"), os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise _Refused(f"a write outside failed with {exc.strerror}, not EROFS") from None
    else:
        os.close(fd)
        raise _Refused("a write outside the writable folder landed")
    return "probed"


def _helper(spec: dict[str, Any], argv: list[str]) -> int:
    libc = _Libc()
    # The host's /proc, opened before anything is unshared: as root the lock's namespace
    # is mapped through it (the sandbox's own /proc is read-only here, and shows other
    # pids). Close-on-exec, and closed in the child at once: a folder of the host's mounts.
    host_proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    mode = _enter(libc, spec["modes"])
    # mount_namespaces(7): private first, or the binds below would reach the host's mounts
    # through a shared peer group.
    libc.mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
    writable = [path for path, _, _ in spec["writable"]]
    _read_only(libc, writable, bool(spec.get("by_remount")))
    for path, dev, ino in spec["writable"]:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) != (dev, ino):
            raise _Refused(f"{path} is no longer the folder cudatx checked")
    _private_dev_shm(libc)
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(host_proc)
        os.close(up_r)
        os.close(down_w)
        _init(libc, mode, spec, argv, up_w, down_r)
    os.close(up_w)
    os.close(down_r)
    _forward(child, _FORWARDED)
    said = _pipe_line(up_r)
    locked, reason = said == "unshared", ""
    try:
        if locked:
            if mode == ROOT:
                # Step 6 as root: the lock's namespace maps every id this one has (root acts on
                # files of other owners too), written from here: a process may write a child
                # namespace's maps where it holds CAP_SETUID in its parent (user_namespaces(7)).
                _write(f"{child}/uid_map", _identity_map("uid"), host_proc)
                _write(f"{child}/gid_map", _identity_map("gid"), host_proc)
        elif said.startswith("unlocked "):
            reason = "read-only flags not locked: a user namespace " + said[len("unlocked ") :]
        else:
            raise _Refused(said.removeprefix("error ") or "the sandbox's init died")
    except OSError as exc:
        raise _Refused(f"cannot map the lock's user namespace: {exc.strerror}") from None
    os.close(host_proc)
    _say(down_w, "go")
    status = _pipe_line(up_r)
    _, waited = os.waitpid(child, 0)
    if status.startswith("error "):
        raise _Refused(status[len("error ") :])
    if status == "probed":
        print(json.dumps({"mode": mode, "locked": locked, "reason": reason}))
        return 0
    word, _, number = status.partition(" ")
    if word == "exit":
        return int(number)
    # the command's signal, else the init's own (killed: its parent's death, the OOM killer)
    killed = os.WTERMSIG(waited) if os.WIFSIGNALED(waited) else 0
    sig = int(number) if word == "signal" else killed
    if sig:
        # SIGKILL and SIGSTOP take no disposition (EINVAL), and need none: theirs is the default
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)  # ended as the command ended: the caller sees -SIG
        return 128 + sig
    raise _Refused("the sandbox's init died")


def main(args: Sequence[str]) -> int:
    """`python -I -S -c BOOT SPEC -- ARGV`: the helper's entry point."""
    spec = json.loads(args[0])
    argv = list(args[2:])
    try:
        return _helper(spec, argv)
    except _Refused as exc:
        sys.stderr.write(f"{_SAID}{exc}\n")
    except OSError as exc:
        sys.stderr.write(f"{_SAID}{exc.strerror if exc.strerror else exc}\n")
    return SETUP_FAILED
