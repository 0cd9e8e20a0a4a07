"""Carry out a planned change: lock -> live-process check -> snapshot -> apply through uv ->
verify -> commit, or roll back.

Every step is written to the transaction's journal (cudatx.txn.journal) before the next
begins. The snapshot keeps the bytes of every file the change deletes or overwrites;
rollback (cudatx.txn.rollback) puts them back and needs no network.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from cudatx.digest import sha256_hex
from cudatx.discover.conda import conda_meta
from cudatx.discover.dists import installed_state, reinstall_spec
from cudatx.documents import dump
from cudatx.environment import Environment
from cudatx.errors import Busy, CudatxError, InUse, Refused, RolledBack, StoreError
from cudatx.planning.change import Change, Proposal
from cudatx.planning.models import Plan
from cudatx.planning.simulate import arriving_files
from cudatx.trust import identity
from cudatx.txn import confine, running, snapshot
from cudatx.txn.journal import Journal, JournalWriter, Package, State, now
from cudatx.txn.rollback import refuse_if_interrupted, restore
from cudatx.txn.store import Store
from cudatx.txn.touched import PYCACHE, created_folders, uninstalled
from cudatx.txn.verify import run_verify, verify
from cudatx.uv import UvOptions, find_uv, pip_argv
from cudatx.uv import run_uv as run_tied


@dataclass(frozen=True)
class Phase:
    """One step of an apply as it starts (`done` false) and as it ends: what the CLI shows a
    person who waits. Names: snapshot, uninstall, install, reinstall, verify, commit."""

    name: str
    done: bool
    detail: str = ""  # "3 packages", "12 files"
    seconds: float = 0.0  # once done
    output: str = ""  # uv's own output, once a uv step is done
    failed: bool = False  # done by an error: what follows is the rollback, or the error


@dataclass(frozen=True)
class Applied:
    """A committed transaction: what it changed, how long each phase took, and what its
    snapshot holds."""

    id: str
    folder: str  # the transaction's folder in the store
    removed: tuple[Package, ...]  # uninstalled and not installed again
    installed: tuple[Package, ...]  # installed (new, upgraded or downgraded)
    reinstalled: tuple[Package, ...]  # the same version again (--repair)
    seconds: tuple[tuple[str, float], ...]  # (phase, seconds), in order
    snapshot: snapshot.Size


def _noop(phase: Phase) -> None:
    """No one watching (a test, a library caller)."""


@dataclass(frozen=True)
class ApplyOptions:
    uv: str | None = None  # the uv binary; None: the uv package's
    uv_options: UvOptions = field(default_factory=UvOptions)
    verify: str | None = None  # a command run in the environment after the change
    ignore_running: bool = False
    strict_running: bool = False  # a process whose maps cannot be read blocks too
    force: bool = False  # apply even an unsafe plan
    command: str = ""  # the cudatx command line, for the journal
    warn: Callable[[str], None] = field(default=lambda message: None)  # said, not refused
    progress: Callable[[Phase], None] = _noop  # each phase as it starts and ends


def refuse_unsafe(plan: Plan, *, force: bool) -> None:
    if not plan.safe and not force:
        raise Refused(
            "refusing to apply an unsafe plan (see 'Would break' above); --force to apply it "
            "anyway, --repair to restore what co-owners lose"
        )


def _names(unknown: tuple[running.Unknown, ...], limit: int = 5) -> str:
    names = [f"pid {u.pid} ({u.user or '?'})" for u in unknown[:limit]]
    if len(unknown) > limit:
        names.append(f"and {len(unknown) - limit} more")
    return ", ".join(names)


def _check_running(paths: list[str], options: ApplyOptions) -> None:
    """A process seen mapping a file the change takes away blocks it. One whose maps cannot
    be read (pid 1 in many containers, other users' processes without CAP_SYS_PTRACE) is
    counted and named, and blocks only with --strict-running: needrestart and lsof, which
    cannot read them either, report them and go on."""
    if options.ignore_running:
        return  # not even a scan: /proc may be unreadable where the user knows better
    report = running.processes_using(paths)
    if report.holders:
        parts = []
        for h in report.holders:
            files = ", ".join(os.path.basename(f) for f in h.files[:3])
            parts.append(f"pid {h.pid} ({h.user}: {h.command[:60]}) maps {files}")
        raise InUse(
            "running processes use files this change would delete or overwrite: "
            + "; ".join(parts)
            + " (stop them, or pass --ignore-running)"
        )
    if not report.unknown:
        return
    count = len(report.unknown)
    unchecked = f"could not check {count} process{'es' * (count != 1)}: {_names(report.unknown)}"
    reason = report.unknown[0].reason
    if options.strict_running:
        raise InUse(
            f"{unchecked} ({reason}); --strict-running refuses while any process cannot be "
            "checked (run as a user who can read their /proc/PID/maps, or drop --strict-running)"
        )
    options.warn(f"{unchecked} ({reason}); they may map files this change takes away")


class _Clock:
    """Each phase told to `progress` as it starts and ends, and its time kept."""

    def __init__(self, progress: Callable[[Phase], None]) -> None:
        self.progress = progress
        self.seconds: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def phase(self, name: str, detail: str = "") -> Iterator[list[str]]:
        """The phase `name`; what the block appends to the list it gets is told as the
        phase's output when it ends (uv's own words)."""
        said: list[str] = []
        self.progress(Phase(name, done=False, detail=detail))
        started = time.monotonic()
        failed = True
        try:
            yield said
            failed = False
        finally:
            # A phase ended by an error is told too: its line would stay open, and the next
            # phase's (the rollback's) would write over it.
            took = time.monotonic() - started
            if not failed:
                self.seconds.append((name, took))
            self.progress(
                Phase(name, True, detail, seconds=took, output="".join(said), failed=failed)
            )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def apply_change(
    env: Environment,
    proposal: Proposal,
    options: ApplyOptions,
    rescan: Callable[[], Environment],
) -> Applied:
    """Carry out a planned change. Rolls back on any failure."""
    plan, change = proposal.plan, proposal.change
    clock = _Clock(options.progress)
    refuse_unsafe(plan, force=options.force)
    store = Store(env.target.prefix)
    uv = find_uv(options.uv)
    with store.lock() as lock:
        refuse_if_interrupted(store)
        # The plan was made from a scan taken before the lock: if another change finished
        # since, it describes an environment that is gone (two applies launched together).
        if installed_state(env.target.site_packages, conda_meta(env.target.prefix)) != (
            env.installed_state
        ):
            raise Busy(
                f"{env.target.prefix} changed since this plan was made (another change "
                "finished meanwhile); plan it again"
            )
        arriving = {
            os.path.normpath(p) for p in arriving_files(env.target.install_site, change.staged)
        }
        leaving = (*change.removing, *change.reinstalling)
        # Exactly what uv deletes (__pycache__ and emptied folders included), and what
        # arrives: the snapshot saves it all, with the modes of the folders.
        deleted, folders = uninstalled(leaving, env.target.prefix, change.kept)
        touched = sorted(set(deleted) | arriving)
        _check_running(touched, options)
        txn = store.new_id()
        journal = JournalWriter(
            store,
            Journal(
                id=txn,
                command=options.command,
                prefix=env.target.prefix,
                prefix_id=identity(env.target.prefix),
                sites=env.target.site_packages,
                created=now(),
                remove=tuple(map(Package.of, change.removing)),
                install=tuple(map(Package.of, change.staged)),
                reinstall=tuple(map(Package.of, change.reinstalling)),
                created_folders=tuple(created_folders(arriving, env.target.prefix)),
                plan=dump(plan, mode="json"),
                state=State.STARTED,
            ),
        )
        journal.step(State.STARTED)
        installed = tuple(
            {"name": d.name, "version": d.version, "direct_url": d.direct_url}
            for d in env.distributions
        )
        try:
            with clock.phase("snapshot", _count(len(touched), "file")):
                saved, outside = snapshot.take(
                    store.txn_dir(txn), touched, folders, installed, prefix=env.target.prefix
                )
                # Counted now, while the live files still hold their names: a saved file
                # with more than one name is a hard link.
                size = snapshot.size(store.txn_dir(txn), saved)
        except Exception:
            # Nothing was changed yet (uv runs only after the snapshot): not interrupted. On a
            # full disk even this may fail; the snapshot's own error is the one to report
            # (and a later run finds no snapshot to restore: rollback completes at once).
            with contextlib.suppress(StoreError):
                journal.step(State.ROLLED_BACK, error="the snapshot could not be written")
            raise
        journal.step(State.SNAPSHOTTED, outside=sorted(outside))
        try:
            # uv deletes what a RECORD lists, through symlinks too: entries that lead out of
            # the environment go from the RECORDs first (the snapshot holds the originals).
            withheld = confine.withhold(leaving, env.target.prefix, change.kept)
            journal.record(withheld=withheld)
            _run_uv(journal, uv, env.target.prefix, change, options.uv_options, lock, clock)
            with clock.phase("verify", "rescan" + (" and --verify" if options.verify else "")):
                verify(plan, change, env, rescan())
                if options.verify:
                    run_verify(options.verify, env.target.prefix)
        except CudatxError as exc:
            with clock.phase("rollback"):
                _roll_back(journal, exc.message)
            raise RolledBack(
                f"{exc.message}; the environment was rolled back ({txn})", output=exc.output
            ) from None
        except Exception as exc:
            # A bug of cudatx's own: the environment still goes back, and the bug is reported
            # as one (exit 70), not as a failure of the change.
            _roll_back(journal, f"internal error: {type(exc).__name__}: {exc}")
            raise
        journal.step(State.VERIFIED)
        # What lies outside is none of rollback's business; a .pyc that Python writes again
        # later is no change a rollback must refuse over (restoring it is harmless).
        kept = {p for p in set(touched) - set(outside) if PYCACHE not in p.split(os.sep)}
        with clock.phase("commit"):
            journal.step(State.COMMITTED, after={p: sha256_hex(p) for p in sorted(kept)})
        arriving_names = {d.name for d in change.staged}
        return Applied(
            id=txn,
            folder=str(store.txn_dir(txn)),
            removed=tuple(Package.of(d) for d in change.removing if d.name not in arriving_names),
            installed=tuple(map(Package.of, change.staged)),
            reinstalled=tuple(map(Package.of, change.reinstalling)),
            seconds=tuple(clock.seconds),
            snapshot=size,
        )


def _roll_back(journal: JournalWriter, error: str) -> None:
    journal.step(State.ROLLING_BACK, error=error)
    restore(journal.store, journal.journal)
    journal.step(State.ROLLED_BACK)


def _run_uv(
    journal: JournalWriter,
    uv: str,
    prefix: str,
    change: Change,
    options: UvOptions,
    lock: int,
    clock: _Clock,
) -> None:
    """uv changes the environment: tied to cudatx (it dies with it) and holding the lock
    with it (a rollback waits until it is gone)."""

    def run_uv(uv: str, args: list[str]) -> str:
        return run_tied(uv, args, tied=True, pass_fds=(lock,))

    if change.removing:
        journal.step(State.UNINSTALLING)
        with clock.phase("uninstall", _count(len(change.removing), "package")) as said:
            argv = [*pip_argv("uninstall", prefix), *(d.name for d in change.removing)]
            said.append(run_uv(uv, argv))
        journal.step(State.UNINSTALLED)
    if change.installing:
        # Exactly what the dry run chose and the plan simulated: pinned, --no-deps.
        journal.step(State.INSTALLING)
        specs = [spec for _, spec in change.installing]
        with clock.phase("install", _count(len(specs), "package")) as said:
            argv = [*pip_argv("install", prefix, "--no-deps", options=options), *specs]
            said.append(run_uv(uv, argv))
        journal.step(State.INSTALLED)
    if not change.reinstalling:
        return
    journal.step(State.REINSTALLING)
    with clock.phase("reinstall", _count(len(change.reinstalling), "package")) as said:
        for dist in change.reinstalling:
            argv = pip_argv(
                "install", prefix, "--no-deps", "--reinstall-package", dist.name, options=options
            )
            said.append(run_uv(uv, [*argv, reinstall_spec(dist)]))
    journal.step(State.REINSTALLED)
