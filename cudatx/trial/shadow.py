"""A shadow of an environment: a place where a planned change can be made for real without
one byte of the environment being written.

Three ways, tried in this order, each only where the one before it is not to be had:

- **overlay**: an overlay filesystem mounted over the environment's own path, inside a new
  user and mount namespace (`unshare -Urm`, user namespaces since Linux 3.8; overlayfs in
  one since 5.11). The environment is its read-only lower layer; every write (uv's
  uninstalls and installs, whatever an import or a `--trial-cmd` writes) goes to an upper
  folder in a temporary folder, copied up file by file (Documentation/filesystems/
  overlayfs.rst). The path stays the same, so scripts, `pyvenv.cfg` and every absolute
  path the environment names itself by still lead into the shadow. The mount lives only in
  the namespace, seen only by the processes the trial starts there, and dies with them.
- **reflink**: `cp -a --reflink=always`: a copy whose files share their blocks with the
  original until one is written (copy on write, FICLONE); only where the filesystem has it
  (Btrfs, XFS, not ext4), and only within it: the copy goes in the temporary folder where
  that is on the environment's filesystem, else in a hidden folder made beside the
  environment (removed afterwards). Found by trying.
- **copy**: `cp -a`, every byte.

Hard links alone are never enough: a write through one changes the original (uv installs
by writing new files, but an import or a user's command may open one in place).

A copy lives at another path. The interpreter finds its prefix from where its executable
is (`pyvenv.cfg` beside it, Modules/getpath.py), so imports in the copy are the copy's; but
the scripts in `bin/` name the original interpreter in their `#!` line, and would run the
original: each is rewritten to name the copy's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cudatx import interrupts
from cudatx.errors import CudatxError, ExitCode

METHODS = ("overlay", "reflink", "copy")


class ShadowFailed(CudatxError):
    """No shadow of the environment could be made: the trial cannot run."""

    exit_code = ExitCode.TRIAL


def _moved(path: str, old: str, new: str) -> str:
    """`path` under the folder `old`, under `new` instead; a path outside `old` is the same
    file for both."""
    if old == new:
        return path
    rel = os.path.relpath(path, old)
    if rel == os.curdir:
        return new
    if rel.startswith(os.pardir):
        return path
    return os.path.join(new, rel)


@dataclass(frozen=True)
class Shadow:
    method: str  # "overlay", "reflink" or "copy"
    prefix: str  # the environment's prefix as the trial's processes see it
    original: str  # the environment's own prefix
    folder: str  # the temporary folder holding the upper layer or the copy
    seconds: float  # what making it took
    # the bytes of the files copied to make it (0 for an overlay: it copies a file up only
    # when written; for a reflink copy, the bytes cloned, whose blocks stay shared)
    bytes_copied: int
    # the argv every process of the trial runs under (`unshare -Urm` for an overlay), and
    # the mount it makes first there
    wrap: tuple[str, ...] = ()
    mount: tuple[str, ...] = ()

    def relocate(self, path: str) -> str:
        """`path`, of the original environment, as the trial's processes see it."""
        return _moved(path, self.original, self.prefix)

    def original_path(self, path: str) -> str:
        """`path`, as the trial's processes saw it, of the original environment (relocate's
        inverse)."""
        return _moved(path, self.prefix, self.original)

    def describe(self) -> str:
        what = {
            "overlay": "an overlay mounted over the environment in a user namespace",
            "reflink": "a reflink copy (copy on write)",
            "copy": "a full copy",
        }[self.method]
        cost = f"{self.seconds:.2f} s"
        if self.method == "reflink":  # the blocks are shared until written: none copied
            cost += f", {_size(self.bytes_copied)} cloned"
        elif self.method == "copy":
            cost += f", {_size(self.bytes_copied)} copied"
        return f"{what} ({cost})"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )


def _overlay(prefix: str, folder: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The namespace and the mount of an overlay over `prefix`, if this kernel lets this
    user make one (tried: an unprivileged overlay needs Linux 5.11 and user namespaces
    allowed, which some distributions turn off); None otherwise. overlayfs separates its
    options with commas and colons (fs/overlayfs/params.c): a path holding one is not
    offered."""
    unshare = shutil.which("unshare")
    if unshare is None or any(c in prefix + folder for c in ",:\\"):
        return None
    upper, work = os.path.join(folder, "upper"), os.path.join(folder, "work")
    os.mkdir(upper, 0o700)
    os.mkdir(work, 0o700)
    # userxattr: overlayfs keeps its whiteouts and opaque folders in "user.overlay.*"
    # xattrs, the only ones a user namespace may set (without it, deleting a lower
    # folder fails with EIO; Documentation/filesystems/overlayfs.rst, "Permission model").
    options = f"lowerdir={prefix},upperdir={upper},workdir={work},userxattr"
    mount = ("mount", "-t", "overlay", "cudatx-trial", "-o", options, prefix)
    # --map-root-user: the mount needs CAP_SYS_ADMIN in the namespace that owns the mount
    # namespace; --mount: a mount namespace of its own, its propagation private.
    wrap = (unshare, "--user", "--map-root-user", "--mount")
    done = _run([*wrap, *mount])
    return (wrap, mount) if done.returncode == 0 else None


def _copy(prefix: str, dest: str, reflink: bool) -> int | None:
    """Copy `prefix` to `dest` (cp -a keeps modes, links and times); the bytes copied, or
    None where a reflink copy is asked and the filesystem has none."""
    argv = ["cp", "-a", "--reflink=always" if reflink else "--reflink=never", prefix, dest]
    done = _run(argv)
    if done.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        if reflink:
            return None
        said = (done.stderr.strip().splitlines() or ["cp failed"])[-1]
        raise ShadowFailed(f"cannot copy {prefix} for a trial: {said}", path=prefix)
    return _tree_bytes(dest)


def _tree_bytes(root: str) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(folder, name))
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
    return total


def _rewrite_scripts(original: str, copy: str) -> None:
    """The copy's scripts run the copy's interpreter, not the original's: a `#!` line naming
    the original prefix is made to name the copy (pip's and uv's launchers write such a
    line, with the interpreter's absolute path)."""
    bin_dir = os.path.join(copy, "bin")
    old = os.fsencode(original.rstrip("/") + "/")
    new = os.fsencode(copy.rstrip("/") + "/")
    with contextlib.suppress(OSError), os.scandir(bin_dir) as entries:
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                continue
            with open(entry.path, "rb") as handle:
                head = handle.read(2 + len(old))
                if head != b"#!" + old:
                    continue
                rest = handle.read()
            with open(entry.path, "wb") as handle:  # the copy's own file: cp -a made it
                handle.write(b"#!" + new + rest)


def _rewrite_links(original: str, copy: str) -> None:
    """The copy's symlinks lead into the copy, never back into the original: `cp -a` copies
    a link as its target's words, so an absolute link naming a folder of the environment
    (`/env/lib/.../pkg/data -> /env/share/data`), or a relative one that climbs out of the
    environment and back in by its name, would lead a write in the shadow (a `--trial-cmd`
    appending to a file through it) into the original. Each such link is made to name the
    same place in the copy (absolute). Where a link leads is read as the kernel reads its
    words (path_resolution(7)), against the original's own path and its realpath; a link
    that leads outside the environment is left as it is: outside, both see the same file,
    as for any write a trial makes outside the environment (docs/trial.md)."""
    roots = [os.path.abspath(original)]
    real = os.path.realpath(original)
    if real not in roots:
        roots.append(real)
    for folder, dirs, files in os.walk(copy):
        rel_folder = os.path.relpath(folder, copy)
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            try:
                if not os.path.islink(path):
                    continue
                words = os.readlink(path)
            except OSError:
                continue
            inside = _inside_original(words, rel_folder, roots)
            if inside is None:
                continue
            # Relative words that stay inside lead to the same place in the copy already.
            here = os.path.normpath(os.path.join(folder, words))
            there = os.path.normpath(os.path.join(copy, inside))
            if not os.path.isabs(words) and here == there:
                continue
            os.unlink(path)  # the copy's own link: cp -a made it
            os.symlink(there, path)


def _inside_original(words: str, rel_folder: str, roots: list[str]) -> str | None:
    """Where a link of the original's folder `rel_folder` (relative to the prefix) with
    target `words` leads, relative to the prefix, if inside the environment; else None."""
    for root in roots:
        start = os.path.normpath(os.path.join(root, rel_folder))
        target = os.path.normpath(os.path.join(start, words))  # absolute words win
        if target == root:
            return os.curdir
        if target.startswith(os.path.join(root, "")):
            return os.path.relpath(target, root)
    return None


@contextlib.contextmanager
def shadow(prefix: str, methods: Sequence[str] = METHODS) -> Iterator[Shadow]:
    """A shadow of the environment at `prefix`, by the first of `methods` this machine
    allows; removed when the block ends."""
    folder = tempfile.mkdtemp(prefix="cudatx-trial-")
    beside: list[str] = []  # a folder made beside the environment, for a reflink copy
    try:
        yield _make(prefix, folder, methods, beside)
    finally:
        # Not cut short by a second signal (cudatx.interrupts.held): a half-removed copy
        # would stay in $TMPDIR; the signal is raised once the shadow is gone.
        with interrupts.held():
            for made in (folder, *beside):
                _remove(made)


def _reflink_folder(prefix: str, folder: str, beside: list[str]) -> str | None:
    """Where a reflink copy can go: a clone shares blocks only within one filesystem
    (FICLONE fails with EXDEV across two), so the temporary folder where it is on the
    environment's, else a new hidden folder beside the environment (its parent folder must
    let us write); None where neither."""
    try:
        if os.stat(folder).st_dev == os.stat(prefix).st_dev:
            return folder
        made = tempfile.mkdtemp(prefix=".cudatx-trial-", dir=os.path.dirname(prefix))
    except OSError:
        return None
    beside.append(made)
    return made


def _make(prefix: str, folder: str, methods: Sequence[str], beside: list[str]) -> Shadow:
    prefix = os.path.abspath(prefix)
    tried = []
    for method in methods:
        start = time.monotonic()
        if method == "overlay":
            found = _overlay(prefix, folder)
            if found is not None:
                wrap, mount = found
                seconds = time.monotonic() - start
                return Shadow("overlay", prefix, prefix, folder, seconds, 0, wrap, mount)
        elif method in ("reflink", "copy"):
            into = folder if method == "copy" else _reflink_folder(prefix, folder, beside)
            dest = os.path.join(into, "env") if into is not None else None
            copied = _copy(prefix, dest, reflink=method == "reflink") if dest else None
            if dest is not None and copied is not None:
                _rewrite_scripts(prefix, dest)
                _rewrite_links(prefix, dest)
                seconds = time.monotonic() - start
                return Shadow(method, dest, prefix, into or folder, seconds, copied)
        else:
            raise ValueError(f"no shadow method {method!r}")
        tried.append(method)
    raise ShadowFailed(
        f"no shadow of {prefix} could be made ({', '.join(tried)} tried)", path=prefix
    )


def _remove(folder: str) -> None:
    """The shadow goes. An overlay's work folder holds a folder of mode 0 the kernel made
    (work/work), which rmtree cannot enter until it is given a mode."""
    for root, dirs, _ in os.walk(folder):
        for name in dirs:
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                if not os.path.islink(path):  # Linux has no lchmod; a link is never followed
                    os.chmod(path, 0o700)
    shutil.rmtree(folder, ignore_errors=True)
