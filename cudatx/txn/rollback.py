"""Put an environment back as it was before a transaction, from the bytes cudatx saved (no
network, no package index); and the store's other uses: interrupted transactions, history,
pruning."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import replace

from cudatx.digest import sha256_hex
from cudatx.discover.confinement import inside
from cudatx.discover.dists import scan_distributions
from cudatx.errors import Conflict, Interrupted, NothingToRollBack, StoreError, UsageError
from cudatx.names import canonical_name
from cudatx.trust import identity, refuse_foreign
from cudatx.txn import snapshot
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


def restore(store: Store, journal: Journal) -> None:
    """Put the environment back as it was before the journal's transaction."""
    txn = journal.id
    if journal.pruned:
        raise StoreError(f"the snapshot of {txn} was pruned ({journal.pruned}); cannot roll back")
    same_environment(store, journal)
    saved = snapshot.load(store.txn_dir(txn))
    if saved is None:
        if State.SNAPSHOTTED not in {s.state for s in journal.steps}:
            return  # no snapshot was ever complete: nothing changed (uv runs only after it)
        raise StoreError(
            f"the snapshot of {txn} is missing ({store.txn_dir(txn) / snapshot.SNAPSHOT}); "
            "nothing was restored"
        )
    if (saved.prefix, saved.prefix_id) != (journal.prefix, journal.prefix_id):
        raise StoreError(
            f"the snapshot of {txn} is for {saved.prefix} ({saved.prefix_id}), not for "
            f"{journal.prefix} ({journal.prefix_id}); nothing was restored"
        )
    real_prefix = os.path.realpath(store.prefix)
    for folder in journal.created_folders:
        if not inside(folder, real_prefix) or os.path.realpath(folder) == real_prefix:
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
    snapshot.write_back(store.txn_dir(txn), saved)
    for folder in journal.created_folders:
        # Deepest first; a folder something else has written into since stays.
        with contextlib.suppress(OSError):
            os.rmdir(folder)


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
    """Files a reinstall or install wrote that were not there before (not in the snapshot)."""
    names = journal.changed_names()
    dists, _ = scan_distributions(journal.sites)
    real_prefix = os.path.realpath(journal.prefix)
    for dist in dists:
        if canonical_name(dist.name) not in names:
            continue
        for path in files_of(dist):
            # Resolved, not compared as strings: `<prefix>/pkg/escape/x` may lead out through a
            # symlink, and `<prefix>2/x` starts with the prefix's string too.
            if path not in keep and os.path.lexists(path) and inside(path, real_prefix):
                os.unlink(path)
        if dist.metadata_dir not in keep and os.path.isdir(dist.metadata_dir):
            for folder, _, files in os.walk(dist.metadata_dir, topdown=False):
                for name in files:
                    os.unlink(os.path.join(folder, name))
                os.rmdir(folder)


def rollback(prefix: str, txn: str | None, *, force: bool) -> tuple[str, str]:
    """Roll back `txn` (default: the latest). Returns (id, what happened)."""
    store = Store(prefix)
    # A little patience: a uv of a killed transaction holds the lock until the kernel has
    # killed it too (it is tied to cudatx, cudatx.uv.run_uv).
    with store.lock(wait=_LEFTOVER_S):
        ids = store.ids()
        if not ids:
            raise NothingToRollBack(
                f"nothing to roll back: no cudatx transaction recorded in {prefix}"
            )
        if txn is None:
            # The latest transaction, rolled back or not: running rollback twice must not
            # reach for an older one (that takes its ID).
            txn = ids[-1]
        elif txn not in ids:
            # A mistyped ID: the command line's fault (exit 2, as `history show` says it),
            # not a corrupt store (12).
            raise UsageError(f"no transaction {txn} in {prefix}; `cudatx history` lists them")
        journal = store.read_journal(txn)
        if journal.state is State.ROLLED_BACK:
            return txn, "already rolled back"
        same_environment(store, journal)
        if journal.state is State.COMMITTED and not force:
            changed = [p for p, h in journal.after.items() if sha256_hex(p) != h]
            if changed:
                raise Conflict(
                    f"{len(changed)} file{'s' * (len(changed) != 1)} changed since transaction "
                    f"{txn} "
                    f"(e.g. {changed[0]}); --force to roll back anyway"
                )
        log = JournalWriter(store, journal)
        log.step(State.ROLLING_BACK)
        restore(store, log.journal)
        log.step(State.ROLLED_BACK)
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
