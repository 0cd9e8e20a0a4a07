"""Put an environment back as it was before a transaction, from the bytes cudatx saved (no
network, no package index); and the store's other uses: interrupted transactions, history,
pruning."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import replace

from cudatx.digest import file_state
from cudatx.discover.dists import scan_distributions
from cudatx.errors import (
    Busy,
    Conflict,
    Interrupted,
    NothingToRollBack,
    StoreError,
    UsageError,
)
from cudatx.models import Distribution
from cudatx.names import canonical_name, counted
from cudatx.trust import identity, refuse_foreign
from cudatx.txn import snapshot
from cudatx.txn.beneath import Root, canonical, lexical
from cudatx.txn.journal import Journal, JournalWriter, State, now
from cudatx.txn.store import Store
from cudatx.txn.touched import files_of

_LEFTOVER_S = 10.0


def interrupted(store: Store) -> Journal | None:
    """The journal of a transaction that stopped short of committed or rolled back."""
    for txn in reversed(store.ids()):
        journal = store.read_journal(txn)
        if not journal.state.done:
            return journal
    return None


def refuse_if_interrupted(store: Store) -> None:
    journal = interrupted(store)
    if journal is not None:
        raise Interrupted(
            f"transaction {journal.id} was interrupted ({journal.state.value}); run "
            "`cudatx rollback` to complete it before any other change"
        )


def refuse_if_interrupted_at(prefix: str) -> None:
    """Before a change is planned: an interrupted transaction must be rolled back first."""
    store = Store(prefix)
    if store.ids():  # none recorded: nothing to complete (and no store is created)
        with store.lock():  # Busy while another transaction runs: not interrupted
            refuse_if_interrupted(store)


class SnapshotGone(StoreError):
    """The transaction's snapshot was pruned or is missing: it can never be rolled back, so
    the rollback ends it as failed (State.FAILED, with this reason) rather than leave it
    interrupted for ever."""


def snapshot_of(store: Store, journal: Journal) -> snapshot.Snapshot | None:
    """The journal's snapshot, or None where none was ever complete (nothing changed: uv
    runs only after it); SnapshotGone where it was pruned or has gone missing since."""
    txn = journal.id
    if journal.pruned:
        raise SnapshotGone(
            f"the snapshot of {txn} was pruned ({journal.pruned}); it cannot be rolled back"
        )
    saved = snapshot.load(store.txn_dir(txn))
    if saved is None and State.SNAPSHOTTED in {s.state for s in journal.steps}:
        raise SnapshotGone(
            f"the snapshot of {txn} is missing ({store.txn_dir(txn) / snapshot.SNAPSHOT}); "
            "it cannot be rolled back, nothing was restored"
        )
    return saved


def roll_back(log: JournalWriter, error: str | None = None) -> list[str]:
    """Roll the journal's transaction back, each step on disk before the next: rolling
    back, then rolled back; or, where its snapshot is gone, failed with the reason (never
    left interrupted: no later rollback could end it). `error`: why it is rolled back."""
    try:
        snapshot_of(log.store, log.journal)
    except SnapshotGone as gone:
        log.step(State.FAILED, error=f"{error}; {gone.message}" if error else gone.message)
        raise
    log.step(State.ROLLING_BACK, **({"error": error} if error else {}))
    replaced = restore(log.store, log.journal)
    log.step(State.ROLLED_BACK)
    return replaced


def restore(store: Store, journal: Journal) -> list[str]:
    """Put the environment back as it was before the journal's transaction. Returns the
    symlinks it removed where the snapshot saw a folder (cudatx.txn.snapshot)."""
    txn = journal.id
    same_environment(store, journal)
    saved = snapshot_of(store, journal)
    if saved is None:
        return []
    if (saved.prefix, saved.prefix_id) != (journal.prefix, journal.prefix_id):
        raise StoreError(
            f"the snapshot of {txn} is for {saved.prefix} ({saved.prefix_id}), not for "
            f"{journal.prefix} ({journal.prefix_id}); nothing was restored"
        )
    for folder in journal.created_folders:
        if not lexical(folder, store.prefix):
            raise StoreError(
                f"the journal of {txn} names a folder outside {store.prefix} ({folder}); "
                "nothing was restored",
                path=folder,
            )
    keep = {f.path for f in saved.files} | set(saved.folders)
    snapshot.check(store.txn_dir(txn), saved)  # saved bytes and targets, before any change
    try:
        _remove_added(journal, keep)
    except OSError as exc:
        raise StoreError(
            f"cannot remove {exc.filename}: {exc.strerror}", path=exc.filename
        ) from None
    replaced = snapshot.write_back(store.txn_dir(txn), saved)
    with contextlib.suppress(OSError), Root(journal.prefix) as root:
        for folder in journal.created_folders:
            # Deepest first; a folder something else has written into since stays.
            _remove_at(root, lexical(folder, journal.prefix) or "", folder=True)
    return replaced


def same_environment(store: Store, journal: Journal) -> None:
    """Refuse a journal that is not this environment's: made at another path, or at this one
    by another folder (device and inode). A copied or moved environment's journal and
    snapshot name the old paths; restoring would write there."""
    here = identity(store.prefix)
    if journal.prefix != store.prefix or journal.prefix_id != here:
        raise StoreError(
            f"transaction {journal.id} was made in {journal.prefix} ({journal.prefix_id or '?'}),"
            f" not in {store.prefix} ({here}): a moved or copied environment cannot be rolled "
            "back (its journal and snapshot name the old paths); nothing was restored"
        )


def _remove_added(journal: Journal, keep: set[str]) -> None:
    """Files a reinstall or install wrote that were not there before (not in the snapshot),
    each removed through its folder's descriptor (cudatx.txn.beneath): a folder on the way
    that is a symlink is never followed, so nothing outside is ever removed."""
    names = journal.changed_names()
    dists, _ = scan_distributions(journal.sites)
    with Root(journal.prefix) as root:
        _remove_files_of(root, [d for d in dists if canonical_name(d.name) in names], journal, keep)


def _remove_files_of(
    root: Root, dists: list[Distribution], journal: Journal, keep: set[str]
) -> None:
    for dist in dists:
        site = _site_rel(dist.site, journal.prefix)
        if site is None:
            continue  # a site folder that leads outside: nothing of it is the environment's
        for path in files_of(dist):
            if path not in keep:
                rel = _below(site, os.path.relpath(path, dist.site))
                if rel:
                    _remove_at(root, rel)
        if dist.metadata_dir not in keep:
            rel = _below(site, os.path.relpath(dist.metadata_dir, dist.site))
            if rel:
                _remove_tree_at(root, rel)


def _site_rel(site: str, prefix: str) -> str | None:
    """Where a site folder lies below the prefix (resolved once, as beneath.canonical)."""
    return canonical(site, prefix)


def _below(site: str, entry: str) -> str | None:
    """`entry` (relative to the site folder, `../../../bin/x` too) relative to the prefix;
    None where it climbs above it."""
    rel = os.path.normpath(os.path.join(site, entry))
    return None if rel == "." or rel.startswith("../") or rel == ".." else rel


def _remove_at(root: Root, rel: str, *, folder: bool = False) -> None:
    """unlinkat (rmdir for `folder`) of `rel`, reached without following a symlink; what is
    not there, or not what was asked (a folder where a file was), is left alone."""
    found = root.entry(rel) if rel else None
    if found is None:
        return  # not there, or a folder on the way is a symlink: what it leads to is not ours
    parent, name, st = found
    if folder:
        if stat.S_ISDIR(st.st_mode):
            os.rmdir(name, dir_fd=parent)
    elif not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent)


def _remove_tree_at(root: Root, rel: str) -> None:
    """A metadata folder and all in it, through descriptors (shutil.rmtree with dir_fd walks
    with openat and never follows a symlink); a symlink standing there is left alone."""
    found = root.entry(rel)
    if found is not None and stat.S_ISDIR(found[2].st_mode):
        shutil.rmtree(found[1], dir_fd=found[0])


def chosen(store: Store, txn: str | None, *, nothing: str = "nothing to roll back") -> Journal:
    """The journal of the transaction `rollback` would roll back (and `history show`
    shows): `txn`, else the latest. `nothing`: what there is not to do, where none is
    recorded (NothingToRollBack, exit 14)."""
    ids = store.ids()
    if txn is not None and txn not in ids:
        # A mistyped ID: the command line's fault (exit 2, as `history show` says it), not a
        # corrupt store (12), nor "nothing to roll back" (14) where none is recorded: the ID
        # names one, and it is not there.
        raise UsageError(f"no transaction {txn} in {store.prefix}; `cudatx history` lists them")
    if not ids:
        raise NothingToRollBack(f"{nothing}: no cudatx transaction recorded in {store.prefix}")
    # The latest transaction, rolled back or not, where no ID is named: running rollback
    # twice must not reach for an older one (that takes its ID).
    return store.read_journal(txn if txn is not None else ids[-1])


def pending(prefix: str, txn: str | None) -> Journal:
    """What `rollback` would roll back, read without taking the lock (a prompt, a dry run).

    A transaction that has just started holds the lock before its journal is written: with
    nothing recorded yet, that is Busy (exit 7, naming the holder), not "nothing to roll
    back" (14), which would be false a moment later."""
    store = Store(prefix)
    try:
        return chosen(store, txn)
    except NothingToRollBack:
        holder = store.holder()
        if holder is not None:
            raise Busy(
                f"another cudatx transaction ({holder}) is changing {prefix} and has recorded "
                "nothing yet; wait for it or check that it is still running"
            ) from None
        raise


def rollback(prefix: str, txn: str | None, *, force: bool) -> tuple[str, str]:
    """Roll back `txn` (default: the latest). Returns (id, what happened)."""
    store = Store(prefix)
    # A little patience: a uv of a killed transaction holds the lock until the kernel has
    # killed it too (it is tied to cudatx, cudatx.uv.run_uv).
    with store.lock(wait=_LEFTOVER_S):
        journal = chosen(store, txn)
        txn = journal.id
        if journal.state is State.ROLLED_BACK:
            return txn, "already rolled back"
        if journal.state is State.FAILED:
            raise SnapshotGone(f"transaction {txn} cannot be rolled back: {journal.error}")
        same_environment(store, journal)
        if journal.state is State.COMMITTED and not force:
            changed = [p for p, h in journal.after.items() if file_state(p) != h]
            if changed:
                raise Conflict(
                    f"{counted(len(changed), 'file')} changed since transaction "
                    f"{txn} "
                    f"(e.g. {changed[0]}); --force to roll back anyway"
                )
        replaced = roll_back(JournalWriter(store, journal))
        if replaced:
            return txn, f"rolled back (the symlink at {replaced[0]}, put there since, was " + (
                "replaced by its folder)"
            )
        return txn, "rolled back"


def history(prefix: str) -> list[Journal]:
    store = Store(prefix)
    return [store.read_journal(t) for t in store.ids()]


def prune(prefix: str, keep: int) -> list[str]:
    """Free the snapshots of all but the `keep` newest transactions (never the latest, never
    an interrupted one); their journals stay, for history."""
    store = Store(prefix)
    with store.lock():
        ids = store.ids()
        pruned = []
        for txn in ids[: max(len(ids) - max(keep, 1), 0)]:
            journal = store.read_journal(txn)
            saved = store.txn_dir(txn) / snapshot.SNAPSHOT
            if not journal.state.done or not os.path.lexists(saved):
                continue
            try:
                refuse_foreign(saved, os.lstat(saved), folder=True)
                shutil.rmtree(saved)
            except OSError as exc:
                raise StoreError(f"cannot free {saved}: {exc.strerror}", path=str(saved)) from None
            store.write_journal(replace(journal, pruned=now()))
            pruned.append(txn)
        return pruned
