"""What cudatx trusts of the store it keeps inside an environment (`<prefix>/.cudatx/`).

The store holds the snapshots of transactions (cudatx.txn.store) and the records of traced
runs (cudatx.discover.traces). It lies inside the environment, where a wheel's data files
can write too, so an entry is trusted only if cudatx could have made it; and a record names
its environment by identity (device and inode), so that a copy of the environment, store
included, is told from the original. The stages that read the store and the one that writes
it share these rules.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from cudatx.errors import StoreError, UnsafePaths
from cudatx.reading import MAX_STORE, open_regular, read_fd

if TYPE_CHECKING:
    from cudatx.models import PythonTarget

PRIVATE = 0o700  # the store holds copies of every file a change touches: its owner's only
STORE_DIR = ".cudatx"  # the store's folder under the prefix (cudatx.txn.store)


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


# -- Whose environment ---------------------------------------------------------------------
#
# A user who can write an environment can swap one of its folders for a symlink between
# cudatx's checks and uv's deletions (uv deletes through it), or change what its interpreter
# runs (a pyvenv.cfg `home` pointing at their own standard library). So, as OpenSSH's
# StrictModes does for ~/.ssh (auth.c, safe_path: refused if owned by someone other than
# the user or root, or writable by group or others), cudatx changes an environment, and runs
# its interpreter for anything but asking it about itself, only where no one else can write
# it. Two deviations, each for a write no other user can make: group write where the group
# holds no one but the owner (Debian's "Allow harmless group-writability" patch to OpenSSH,
# for the per-user groups and umask 002 Debian sets up), and a folder with the sticky bit
# (/tmp: others cannot rename or remove what they do not own in it).


def _user(uid: int) -> str:
    import pwd

    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _private_group(gid: int, owner: int) -> bool:
    """Whether group `gid` holds no one but `owner` (as member or as primary group)."""
    import grp
    import pwd

    try:
        name = pwd.getpwuid(owner).pw_name
        if any(m != name for m in grp.getgrgid(gid).gr_mem):
            return False
        return all(p.pw_uid == owner for p in pwd.getpwall() if p.pw_gid == gid)
    except KeyError:
        return False


def other_writer(st: os.stat_result, uid: int, *, sticky_excuses: bool = True) -> str | None:
    """Who other than `uid` and root could change what `st` describes (a folder's names, a
    file's bytes), in words; None when no one. `sticky_excuses`: a sticky folder others can
    write counts as no one's to change (they cannot rename or remove what is not theirs in
    it), as for a folder above an environment; not for a folder whose every name matters
    (in it, others can still create one)."""
    if stat.S_ISLNK(st.st_mode):
        return None  # a symlink itself changes only by its folder's names
    if st.st_uid not in (0, uid):
        return f"owned by {_user(st.st_uid)}"
    sticky = sticky_excuses and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
    if st.st_mode & stat.S_IWOTH and not sticky:
        return "writable by every user"
    if st.st_mode & stat.S_IWGRP and not sticky and not _private_group(st.st_gid, st.st_uid):
        return f"writable by group {_group(st.st_gid)}"
    return None


def _group(gid: int) -> str:
    import grp

    try:
        return f"{gid} ({grp.getgrgid(gid).gr_name})"
    except KeyError:
        return str(gid)


def _ancestors(path: str) -> list[str]:
    """`path` and every folder above it, up to /."""
    out = []
    path = os.path.abspath(path)
    while True:
        out.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            return out
        path = parent


def interpreter_paths(interpreter: str) -> list[str]:
    """What decides what an interpreter runs: each name on its way to the binary (every
    symlink followed, with the folders holding each, up to /), the binary, and the
    environment's pyvenv.cfg (whose `home` says where the standard library is)."""
    paths: list[str] = []
    here = os.path.abspath(interpreter)
    for _ in range(40):  # MAXSYMLINKS
        paths += _ancestors(os.path.dirname(here))
        paths += _ancestors(os.path.realpath(os.path.dirname(here)))
        try:
            link = os.readlink(here)
        except OSError:
            break
        here = os.path.normpath(os.path.join(os.path.dirname(here), link))
    paths.append(os.path.realpath(here))
    folder = os.path.dirname(os.path.abspath(interpreter))
    for cfg in (
        os.path.join(folder, "pyvenv.cfg"),
        os.path.join(os.path.dirname(folder), "pyvenv.cfg"),
    ):
        if os.path.lexists(cfg):
            paths.append(cfg)
    return list(dict.fromkeys(paths))


def environment_paths(prefix: str, sites: tuple[str, ...] | list[str]) -> list[str]:
    """What a change acts through: the prefix and every folder above it, the folders from
    the prefix down to each of its site folders, each folder in those (the packages and
    their metadata), and its bin/."""
    paths = _ancestors(prefix)
    inner = os.path.join(os.path.abspath(prefix), "")
    for site in sites:
        site = os.path.abspath(site)
        if not site.startswith(inner):
            continue  # the system's site folders: a change never writes there
        paths += [p for p in _ancestors(site) if p.startswith(inner)]
        try:
            with os.scandir(site) as entries:
                paths += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            pass
    paths.append(os.path.join(prefix, "bin"))
    return list(dict.fromkeys(paths))


def environment_writers(
    prefix: str, sites: tuple[str, ...] | list[str], interpreter: str
) -> list[str]:
    """other_writers of an environment and of its interpreter."""
    return other_writers(
        list(dict.fromkeys([*interpreter_paths(interpreter), *environment_paths(prefix, sites)]))
    )


def target_writers(target: PythonTarget) -> list[str]:
    """environment_writers of the environment an interpreter answered for."""
    return environment_writers(target.prefix, target.site_packages, target.python)


def refuse_target_writers(target: PythonTarget, *, accepted: bool, what: str) -> None:
    """refuse_other_writers for the environment an interpreter answered for."""
    refuse_other_writers(target_writers(target), accepted=accepted, what=what)


# -- Whose code, all of it ------------------------------------------------------------------
#
# Root that runs an environment's code (a trial, `trace`, `--verify`) runs every module the
# interpreter imports, not only what lies at the top of site-packages: one module deep in a
# package (`site-packages/pkg/core.py`), a `__pycache__/*.pyc` its source's stamp still
# matches (PEP 3147: the interpreter runs it without reading the source), a `.pth` line, a
# folder a `.pth` adds, a script in bin/. So before root runs any of it, everything the
# interpreter could import or execute is walked whole, as OpenSSH's StrictModes walks every
# folder up to / (auth.c safe_path): each file and folder must be root's, and none writable by
# group (unless the group holds only root: Debian's harmless group-writability) or others.
# The sticky bit excuses a folder *above* what is walked (/tmp: others cannot rename or
# remove what root made in it, so they cannot swap the environment), never a folder inside
# (in a sticky folder others can still create a name: a new module, a new `.pth`). A symlink
# is followed: where it leads is walked the same way, with the folders above it. What is
# walked: the site folders, every other folder on sys.path outside the standard library (the
# ones `.pth` files add, editable installs), the standard library, and bin/. A sys.path entry
# that does not exist yet (python3XX.zip) must sit in a folder no one else can add it to.
# Not the working folder: `trace` and `--verify` run the user's command where the user ran
# cudatx, as any program they run there.
#
# Not the scan's walk (cudatx.discover.sitewalk): its cache keys each folder by the folder's
# own times, which a chown or chmod of a file in it leaves alone (they change the file's
# ctime only), so the cache cannot tell this; an lstat of every name is needed, each time.
# What it costs: docs/trial.md ("What it costs").


def _walk_code(top: str, uid: int, seen: set[tuple[int, int]], found: list[str]) -> None:
    """other_writer of `top` and everything below it, sticky folders included, symlinks
    followed (each target once: `seen` holds device and inode, and what is not to be walked
    is put there first); appended to `found` as `PATH (WHO)`, in sorted order."""
    try:
        st = os.stat(top)
    except OSError:
        return
    if (st.st_dev, st.st_ino) in seen:
        return
    seen.add((st.st_dev, st.st_ino))
    who = other_writer(st, uid, sticky_excuses=False)
    if who is not None:
        found.append(f"{top} ({who})")
    if not stat.S_ISDIR(st.st_mode):
        return
    try:
        with os.scandir(top) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError:
        return  # a folder root cannot list: the interpreter cannot import from it either
    for entry in entries:
        try:
            if entry.is_symlink():
                _followed(entry.path, uid, seen, found)
                continue
            est = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(est.st_mode):
            _walk_code(entry.path, uid, seen, found)
        elif (est.st_dev, est.st_ino) not in seen:
            if est.st_nlink > 1:
                seen.add((est.st_dev, est.st_ino))
            who = other_writer(est, uid, sticky_excuses=False)
            if who is not None:
                found.append(f"{entry.path} ({who})")


def _followed(link: str, uid: int, seen: set[tuple[int, int]], found: list[str]) -> None:
    """Where a symlink leads: the folders above its target (those of the way to it too, as
    interpreter_paths takes them) and the target, walked."""
    real = os.path.realpath(link)
    for path in _ancestors(os.path.dirname(real)):
        _above(path, uid, found)
    _walk_code(real, uid, seen, found)


def _above(path: str, uid: int, found: list[str]) -> None:
    """other_writer of a folder above what is walked (the sticky bit excuses it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    who = other_writer(st, uid)
    entry = f"{path} ({who})"
    if who is not None and entry not in found:
        found.append(entry)


def code_tops(target: PythonTarget) -> list[str]:
    """The folders whose every file the target's interpreter could import or execute: its
    site folders, sys.path beyond them (what `.pth` files add) and the standard library,
    and the environment's bin/ (what a `--trial-cmd` or `--verify` runs by name)."""
    tops = [*target.site_packages, *target.sys_path, *target.stdlib]
    tops.append(os.path.join(target.prefix, "bin"))
    return list(dict.fromkeys(os.path.abspath(t) for t in tops if t))


def code_writers(target: PythonTarget, uid: int | None = None) -> list[str]:
    """`PATH (WHO)` for everything another user than `uid` (default: cudatx's) or root could
    change of the code the target's interpreter runs (see above): what target_writers names,
    then each walked file and folder, then the folders above each walked folder."""
    me = os.geteuid() if uid is None else uid
    found = other_writers(
        list(dict.fromkeys([*interpreter_paths(target.python), *_ancestors(target.prefix)])),
        me,
    )
    seen: set[tuple[int, int]] = set()
    tops = code_tops(target)
    # The site folders of the standard library's Python where they are not on sys.path (a
    # venv's base): nothing in them is imported, and a base Python's may hold thousands.
    for folder in target.stdlib:
        for name in ("site-packages", "dist-packages"):
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                if path not in tops:
                    st = os.stat(path)
                    seen.add((st.st_dev, st.st_ino))
    above: set[str] = set()
    for top in tops:
        if os.path.lexists(top):
            for path in _ancestors(os.path.dirname(top)):
                if path not in above:
                    above.add(path)
                    _above(path, me, found)
            _walk_code(top, me, seen, found)
        else:
            # Not there yet (python3XX.zip): whoever can create it in its folder chooses
            # code the interpreter would import first.
            parent = next((p for p in _ancestors(top) if os.path.isdir(p)), "/")
            try:
                who = other_writer(os.stat(parent), me, sticky_excuses=False)
            except OSError:
                continue
            if who is not None:
                found.append(
                    f"{parent} ({who}; {os.path.basename(top)} on sys.path could be made there)"
                )
    return list(dict.fromkeys(found))


def refuse_root_running_code(target: PythonTarget, *, what: str, accepted: bool = False) -> None:
    """As root, raise UnsafePaths naming the first of code_writers, unless `accepted`
    (--allow-other-writers, where the command takes it; a trial does not): `what` is what
    would run the code, in words ("a trial", "--verify", "trace"). A user other than root
    runs nothing of another's as someone else: nothing to check."""
    if os.geteuid() != 0 or accepted:
        return
    found = code_writers(target)
    if not found:
        return
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    raise UnsafePaths(
        f"{found[0]}{more}: {what} runs the environment's code, and cudatx runs as root; "
        "another user can change code the interpreter would run, and so choose what root runs "
        "(run it as that user, or make every file root's and writable by root alone)",
        path=found[0].rsplit(" (", 1)[0],
    )


def other_writers(paths: list[str], uid: int | None = None) -> list[str]:
    """`PATH (WHO)` for each of `paths` that someone other than `uid` (default: the user
    cudatx runs as) or root can change; missing paths are skipped."""
    me = os.geteuid() if uid is None else uid
    found = []
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        who = other_writer(st, me)
        if who is not None:
            found.append(f"{path} ({who})")
    return found


def owner_to_run_as(paths: list[str]) -> tuple[int, int]:
    """(uid, gid) to run an interpreter others can write as, instead of root: the owner of
    the first of `paths` someone else owns, else nobody's."""
    import pwd

    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid != 0 and not stat.S_ISLNK(st.st_mode):
            try:
                return st.st_uid, pwd.getpwuid(st.st_uid).pw_gid
            except KeyError:
                return st.st_uid, st.st_gid
    try:
        nobody = pwd.getpwnam("nobody")
        return nobody.pw_uid, nobody.pw_gid
    except KeyError:
        return 65534, 65534


def refuse_other_writers(found: list[str], *, accepted: bool, what: str) -> None:
    """Raise UnsafePaths naming the first of `found` (other_writers), unless `accepted`
    (--allow-other-writers). `what`: what cudatx was about to do, in words."""
    if not found or accepted:
        return
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    raise UnsafePaths(
        f"{found[0]}{more}: another user can write this environment or its interpreter, and "
        f"could redirect what cudatx {what} (a folder swapped for a symlink); run cudatx as "
        "that user, or pass --allow-other-writers to accept it",
        path=found[0],
    )


# -- Transactions left unfinished ----------------------------------------------------------
#
# Read here, without pydantic and without taking the lock, by every command that scans: an
# environment a transaction left half changed must be rolled back before anything is said
# of it (a doctor that suggests a raw `uv pip install` there, a dry run that says "safe").

# The journal states that end a transaction (cudatx.txn.journal.State.done).
DONE_STATES = frozenset({"committed", "rolled back", "failed"})


def unfinished_transactions(prefix: str) -> list[tuple[str, str, str]]:
    """(id, state, command) of each transaction recorded in the environment's store that did
    not end,
    oldest first; none where there is no store. Raises StoreError for a store cudatx did not
    make or a journal it cannot read (refuse_foreign, read_private)."""
    import json

    root = Path(prefix) / STORE_DIR
    transactions = root / "transactions"
    try:
        for folder in (root, transactions):
            refuse_foreign(folder, os.lstat(folder), folder=True)
        names = sorted(e.name for e in os.scandir(transactions) if not e.name.startswith("."))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StoreError(
            f"cannot list {transactions}: {exc.strerror}", path=str(transactions)
        ) from None
    found = []
    for name in names:
        path = transactions / name / "journal.json"
        try:
            journal = json.loads(read_private(path))
            state, command = journal.get("state"), journal.get("command")
        except FileNotFoundError:
            continue  # a folder without a journal is no transaction (Store.ids)
        except (OSError, ValueError, AttributeError, RecursionError):
            raise StoreError(f"cannot read the journal {path}", path=str(path)) from None
        if state not in DONE_STATES:
            found.append((name, str(state), command if isinstance(command, str) else ""))
    return found


def lock_holder(prefix: str) -> str | None:
    """Who holds the environment's transaction lock now (an flock(2) of the store's lock
    file, cudatx.txn.store.Store.lock), as `pid N` (`unknown pid` where it wrote none), or
    None where no one does: tried shared and at once, and let go at once, writing nothing,
    so a reader never stands in a transaction's way for longer than the try."""
    import errno
    import fcntl

    path = Path(prefix) / STORE_DIR / "lock"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return holder_of(fd) if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
    finally:
        os.close(fd)  # drops the shared lock with it
    return None


def holder_of(fd: int) -> str:
    """The holder the lock file at `fd` names: its pid, written for a contender's message."""
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "unknown pid"
