"""Carry out a planned change: lock -> live-process check -> snapshot -> apply through uv ->
verify -> commit, or roll back.

Every step is written to the transaction's journal (cudatx.txn.journal) before the next
begins. The snapshot keeps the bytes of every file the change deletes or overwrites;
rollback (cudatx.txn.rollback) puts them back and needs no network.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NoReturn

from cudatx import interrupts
from cudatx.digest import file_state
from cudatx.discover.owners import installed_state
from cudatx.discover.target import refuse_externally_managed
from cudatx.documents import dump
from cudatx.environment import Environment
from cudatx.errors import (
    Busy,
    CudatxError,
    Interrupted,
    InUse,
    Refused,
    RolledBack,
    StoreError,
    VerificationFailed,
)
from cudatx.models import PythonTarget, SandboxUsed
from cudatx.names import counted
from cudatx.planning.change import Proposal, refuse_escaping, uv_steps
from cudatx.planning.models import Plan
from cudatx.planning.sections import making_safe, unsafe_sections
from cudatx.planning.simulate import arriving_files
from cudatx.sandbox import Confinement, probe
from cudatx.trust import identity, refuse_root_running_code, refuse_target_writers
from cudatx.txn import beneath, confine, running, snapshot
from cudatx.txn.journal import Journal, JournalWriter, Package, State, now
from cudatx.txn.rollback import refuse_if_interrupted, roll_back
from cudatx.txn.store import Store
from cudatx.txn.touched import PYCACHE, created_folders, uninstalled
from cudatx.txn.verify import run_verify, verify
from cudatx.uv import UvOptions, cache_dir, find_uv
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
    sandbox: SandboxUsed | None = None  # the confinement uv ran under (cudatx.sandbox)


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
    allow_other_writers: bool = False  # change it though another user can write it (trust)
    break_system_packages: bool = False  # change a Python its distributor manages (PEP 668)
    command: str = ""  # the cudatx command line, for the journal
    warn: Callable[[str], None] = field(default=lambda message: None)  # said, not refused
    note: Callable[[str], None] = field(default=lambda message: None)  # said under -v
    remark: Callable[[str], None] = field(default=lambda message: None)  # said, as a note
    # The confinement this machine gives uv (cudatx.sandbox), asked once by the apply: the
    # CLI's probe of the command (cudatx.cli.options.prober), shared with its trial
    sandbox: Callable[[], Confinement] = probe
    progress: Callable[[Phase], None] = _noop  # each phase as it starts and ends


def refuse_unsafe(plan: Plan, *, force: bool, as_json: bool = False) -> None:
    """An unsafe plan is refused unless forced, naming the sections of the plan that say
    why (their JSON keys where the plan was shown as JSON) and an option only where the
    plan itself says it makes the plan safe (cudatx.planning.sections, which the renderer
    reads too)."""
    if plan.safe or force:
        return
    names = dict.fromkeys(s.key if as_json else s.heading for s in unsafe_sections(plan))
    quoted = " and ".join(f'"{n}"' for n in names)  # double: a heading may hold a '
    why = f" (see {quoted} in the plan)" if names else ""
    fix = making_safe(plan)
    raise Refused(
        f"refusing to apply an unsafe plan{why}; "
        + (f"{fix}, or --force applies it anyway" if fix else "--force applies it anyway")
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
    # One that cannot open the files either (pid 1 of a container whose root is another
    # filesystem; another user's process below a folder it cannot search) is named once,
    # as a note: it cannot map them (cudatx.txn.reach).
    apart = tuple(u for u in report.unknown if u.cannot_open is not None)
    if apart:
        count = len(apart)
        options.remark(
            f"could not read {count} process{'es' * (count != 1)} ({_names(apart)}), which "
            f"cannot open the files this change takes away either: {apart[0].cannot_open}"
        )
    unknown = tuple(u for u in report.unknown if u.cannot_open is None)
    if not unknown:
        return
    count = len(unknown)
    unchecked = f"could not check {count} process{'es' * (count != 1)}: {_names(unknown)}"
    reason = unknown[0].reason
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
    # Before the store is made: a Python its distributor manages gets no `.cudatx/` folder
    # from a change uv would refuse (the CLI refused it already; a library caller too).
    refuse_externally_managed(env.target, allowed=options.break_system_packages)
    if options.verify:  # runs the environment's code: as root, only where all of it is root's
        refuse_root_running_code(env.target, what="--verify", accepted=options.allow_other_writers)
    store = Store(env.target.prefix)
    uv = find_uv(options.uv)
    with store.lock() as lock:
        refuse_if_interrupted(store)
        # The plan was made from a scan taken before the lock: if another change finished
        # since, it describes an environment that is gone (two applies launched together).
        if installed_state(env.target) != env.installed_state:
            raise Busy(
                f"{env.target.prefix} changed since this plan was made (another change "
                "finished meanwhile); plan it again"
            )
        arriving = {
            os.path.normpath(p) for p in arriving_files(env.target.install_site, change.staged)
        }
        leaving = (*change.removing, *change.reinstalling)
        refuse_escaping(leaving, env.target.prefix)  # again, under the lock
        accepted = options.allow_other_writers
        refuse_target_writers(env.target, accepted=accepted, what="deletes or writes")
        # Exactly what uv deletes (__pycache__ and emptied folders included), and what
        # arrives: the snapshot saves it all, with the modes of the folders.
        deleted, folders = uninstalled(leaving, env.target.prefix, change.kept)
        touched = sorted(set(deleted) | arriving)
        # Once, before the journal: every uv of the change runs under the same guarantee.
        confinement = options.sandbox()
        guard = _Guard(env.target.prefix, touched, folders, confinement)
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
        work = _Work(
            env,
            proposal,
            options,
            store,
            journal,
            lock,
            clock,
            uv,
            guard,
            touched,
            folders,
            confinement,
        )
        # SIGINT, SIGTERM or SIGHUP (the terminal closed): the transaction rolls back and
        # says which. uv, run by subprocess.run (or read line by line: cudatx.uv), is killed
        # and waited for as the exception passes, so its lock is gone before the rollback
        # takes the environment back.
        with interrupts.every_one_raised():
            try:
                return _carry_out(work, rescan)
            except interrupts.Terminated as sig:
                _interrupted(journal, clock, sig)


@dataclass(frozen=True)
class _Work:
    """A transaction once its journal is started: what _carry_out needs."""

    env: Environment
    proposal: Proposal
    options: ApplyOptions
    store: Store
    journal: JournalWriter
    lock: int
    clock: _Clock
    uv: str
    guard: _Guard
    touched: list[str]
    folders: list[str]
    confinement: Confinement  # the sandbox uv runs in (cudatx.sandbox)


def _writable(target: PythonTarget, uv: str) -> list[str]:
    """What a confined uv may write: the prefix, each site folder and the scripts folder
    beside it where they lie outside it (a system Python's /usr/local), and uv's cache
    (made first: it is bound as it is); each once, real paths, none below another."""
    folders = [target.prefix]
    for site in target.site_packages:
        folders += [site, *_scripts_of(os.path.realpath(site))]
    cache = cache_dir(uv)
    if cache:
        os.makedirs(cache, exist_ok=True)
        folders.append(cache)
    kept: list[str] = []
    for folder in sorted({os.path.realpath(f) for f in folders if os.path.isdir(f)}, key=len):
        if not any(folder == k or folder.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(folder)
    return kept


def _scripts_of(site: str) -> list[str]:
    """The scripts folder uv installs beside a site folder: sysconfig's posix schemes put
    purelib at {base}/lib/pythonX.Y/site-packages (Debian's at {base}/lib/python3/
    dist-packages) and scripts at {base}/bin. None for another layout: uv's write there
    then fails (EROFS), and the apply rolls back."""
    parts = site.split(os.sep)
    if len(parts) > 3 and parts[-3] in ("lib", "lib64") and parts[-2].startswith("python"):
        return [os.path.join(os.sep.join(parts[:-3]) or os.sep, "bin")]
    return []


def _carry_out(work: _Work, rescan: Callable[[], Environment]) -> Applied:
    """Snapshot, uv, verify, commit; or roll back on any failure."""
    env, journal, clock, options = work.env, work.journal, work.clock, work.options
    plan, change = work.proposal.plan, work.proposal.change
    txn, prefix, touched = journal.journal.id, env.target.prefix, work.touched
    installed = tuple(
        {"name": d.name, "version": d.version, "direct_url": d.direct_url}
        for d in env.distributions
    )
    try:
        with clock.phase("snapshot", counted(len(touched), "file")):
            saved, outside = snapshot.take(
                work.store.txn_dir(txn), touched, work.folders, installed, prefix=prefix
            )
            # Counted now, while the live files still hold their names: a saved file
            # with more than one name is a hard link.
            size = snapshot.size(work.store.txn_dir(txn), saved)
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
        leaving = (*change.removing, *change.reinstalling)
        withheld = confine.withhold(leaving, prefix, change.kept)
        journal.record(withheld=withheld)
        work.guard.take()
        writable = _run_uv(work)
        work.guard.check(after_uv=True)
        with clock.phase("verify", "rescan" + (" and --verify" if options.verify else "")):
            verify(plan, change, env, rescan())
            if options.verify:
                run_verify(options.verify, prefix)
    except CudatxError as exc:
        with clock.phase("rollback"):
            replaced = roll_back(journal, exc.message)
        raise RolledBack(
            f"{exc.message}; the environment was rolled back ({txn}){_said(replaced)}",
            output=exc.output,
        ) from None
    except Exception as exc:
        # A bug of cudatx's own: the environment still goes back, and the bug is reported
        # as one (exit 70), not as a failure of the change.
        roll_back(journal, f"internal error: {type(exc).__name__}: {exc}")
        raise
    journal.step(State.VERIFIED)
    # What lies outside is none of rollback's business; a .pyc that Python writes again
    # later is no change a rollback must refuse over (restoring it is harmless).
    kept = {p for p in set(touched) - set(outside) if PYCACHE not in p.split(os.sep)}
    with clock.phase("commit"):
        after = {p: file_state(p) for p in sorted(kept)}
        # Held back while the last step is written: once committed, an interrupt is the
        # shell's again (it arrives when the handlers are back).
        with interrupts.held():
            journal.step(State.COMMITTED, after=after)
    arriving_names = {d.name for d in change.staged}
    return Applied(
        id=txn,
        folder=str(work.store.txn_dir(txn)),
        removed=tuple(Package.of(d) for d in change.removing if d.name not in arriving_names),
        installed=tuple(map(Package.of, change.staged)),
        reinstalled=tuple(map(Package.of, change.reinstalling)),
        seconds=tuple(clock.seconds),
        snapshot=size,
        sandbox=work.confinement.used(writable),
    )


def _interrupted(journal: JournalWriter, clock: _Clock, sig: interrupts.Terminated) -> NoReturn:
    """SIGINT, SIGTERM or SIGHUP during a transaction: it is rolled back, and says so. A second one
    during that rollback leaves the journal for `cudatx rollback`, and says that."""
    txn = journal.journal.id
    reached = {step.state for step in journal.journal.steps}
    if State.SNAPSHOTTED not in reached:
        # uv runs only after the snapshot: nothing was changed.
        with contextlib.suppress(StoreError):
            journal.step(State.ROLLED_BACK, error=f"interrupted by {sig.name}")
        raise RolledBack(f"interrupted by {sig.name} before anything was changed ({txn})")
    try:
        with interrupts.every_one_raised(), clock.phase("rollback"):
            replaced = (
                []
                if journal.journal.state is State.ROLLED_BACK
                else roll_back(journal, f"interrupted by {sig.name}")
            )
    except interrupts.Terminated as again:
        raise Interrupted(
            f"interrupted by {sig.name}, then by {again.name} while rolling back: transaction "
            f"{txn} is left as it stood; run `cudatx rollback` to complete it"
        ) from None
    raise RolledBack(
        f"interrupted by {sig.name}; the environment was rolled back ({txn}){_said(replaced)}"
    )


def _said(replaced: list[str]) -> str:
    """What a rollback did besides putting files back: symlinks it removed where a folder
    was when the snapshot was taken (cudatx.txn.snapshot)."""
    if not replaced:
        return ""
    more = f" and {len(replaced) - 1} more" if len(replaced) > 1 else ""
    return f"; the symlink at {replaced[0]}{more}, put there since, was replaced by its folder"


class _Guard:
    """The folders uv is given, as cudatx saw them: their (device, inode) from the prefix
    down, checked again right before each uv and once uv is done (cudatx.txn.beneath). A
    folder swapped for a symlink meanwhile would have uv delete or write through it outside
    the environment; the apply then rolls back, and never says the change was verified."""

    def __init__(
        self, prefix: str, touched: list[str], folders: list[str], confinement: Confinement
    ) -> None:
        self.prefix = prefix
        self.confinement = confinement
        where = {os.path.dirname(p) for p in touched} | set(folders)
        # Resolved once, here, as beneath.canonical does; a folder leading outside is the
        # confinement's business (its entries are withheld from uv), not the guard's.
        rels = (beneath.resolved(f, prefix) for f in sorted(where))
        self.folders = sorted({r for r in rels if r})
        self.may_go = {r for r in (beneath.canonical(f, prefix) for f in folders) if r}
        self.chain: beneath.Chain = {}

    def take(self) -> None:
        try:
            with beneath.Root(self.prefix) as root:
                self.chain = beneath.fingerprint(root, self.folders)
        except OSError as exc:
            raise VerificationFailed(
                f"{exc.filename or self.prefix}: {exc.strerror}; uv was not run"
            ) from None

    def check(self, *, after_uv: bool) -> None:
        said = beneath.moved(self.prefix, self.chain, self.may_go if after_uv else set())
        if not said:
            return
        more = f" (and {len(said) - 1} more)" if len(said) > 1 else ""
        if after_uv:
            raise VerificationFailed(
                f"while uv ran, {said[0]}{more}: {self._through()}; not the folder cudatx "
                "checked, so the change is not verified"
            )
        raise VerificationFailed(f"{said[0]}{more} since cudatx checked it; uv was not run")

    def _through(self) -> str:
        """What a write or an unlink through the swapped folder could reach."""
        held = self.confinement
        if held.held:
            return (
                f"uv ran confined ({held.describe()}), so nothing it deleted or wrote through "
                "it could land outside the environment and uv's cache (EROFS)"
            )
        return (
            "uv may have deleted or written through it outside the environment (uv ran "
            f"unconfined, {held.describe()}: only cudatx's own checks held)"
        )


# The journal's states before and after each phase of uv's steps (cudatx.uv.UvStep.phase).
_JOURNALED = {
    "uninstall": (State.UNINSTALLING, State.UNINSTALLED),
    "install": (State.INSTALLING, State.INSTALLED),
    "reinstall": (State.REINSTALLING, State.REINSTALLED),
}


def _run_uv(work: _Work) -> tuple[str, ...]:
    """uv changes the environment: tied to cudatx (it dies with it) and holding the lock
    with it (a rollback waits until it is gone), confined where the probe allows (what it
    may write is returned). Right before each uv, the folders it is given are checked again
    (`guard`)."""
    journal, uv, clock, guard, lock = work.journal, work.uv, work.clock, work.guard, work.lock
    prefix, change, options = work.env.target.prefix, work.proposal.change, work.options.uv_options
    ran = False
    # Asked of uv here, after the snapshot: no uv of the change's runs before it is saved.
    writable = tuple(_writable(work.env.target, uv)) if work.confinement.held else ()
    work.options.note(work.confinement.said(writable))
    confined = (work.confinement, writable)

    def run_uv(argv: tuple[str, ...]) -> str:
        nonlocal ran
        guard.check(after_uv=ran)
        ran = True
        try:
            return run_tied(argv[0], argv[1:], tied=True, pass_fds=(lock,), confined=confined)
        except CudatxError:
            # uv may fail because a folder was swapped under it (it cannot remove a symlink
            # as the folder it emptied): that is the cause to say.
            guard.check(after_uv=True)
            raise

    # Exactly the steps the trial runs in its shadow (uv_steps): the uninstall; the install of
    # what the dry run chose and the plan simulated, pinned, --no-deps; each reinstall. Each
    # phase is journaled around its steps.
    steps = uv_steps(uv, prefix, change, options)
    for phase, grouped in itertools.groupby(steps, key=lambda step: step.phase):
        group = list(grouped)
        starting, done = _JOURNALED[phase]
        journal.step(starting)
        packages = counted(sum(step.packages for step in group), "package")
        with clock.phase(phase, packages) as said:
            for step in group:
                said.append(run_uv(step.argv))
        journal.step(done)
    return writable
