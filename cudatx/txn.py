"""Transactions: plan -> lock -> live-process check -> snapshot -> apply through uv -> verify
-> commit, or roll back (design.md section 4).

Every step is written to the transaction's journal (atomically) before the next begins, so
a later run that finds a journal short of `committed` or `rolled back` knows the
transaction was interrupted and what rolling it back means. The snapshot keeps the bytes of
every file the change deletes or overwrites; rollback puts them back and needs no network.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudatx import confine, running, snapshot
from cudatx.dists import reinstall_spec
from cudatx.errors import Conflict, Interrupted, InUse, RolledBack, StoreError
from cudatx.models import Distribution
from cudatx.plan import Plan
from cudatx.scan import Environment
from cudatx.store import Store
from cudatx.uvrun import UvFailed, find_uv, run_uv

DONE = ("committed", "rolled back")


@dataclass(frozen=True)
class Options:
    uv: str | None = None
    offline: bool = False
    find_links: tuple[str, ...] = ()
    verify: str | None = None
    ignore_running: bool = False
    command: str = ""
    uv_args: tuple[str, ...] = ()  # index options for the installs (--index-url URL, ...)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _crash_point(state: str) -> None:
    # Fault injection for the crash tests: die exactly as kill -9 would, after `state`
    # reached the journal. Never set outside tests.
    if os.environ.get("CUDATX_TEST_CRASH_AT") == state:
        os.kill(os.getpid(), signal.SIGKILL)


class _Journal:
    def __init__(self, store: Store, txn: str, data: dict[str, Any]) -> None:
        self.store, self.id, self.data = store, txn, data

    def step(self, state: str, **fields: Any) -> None:
        self.data.update(fields)
        self.data["state"] = state
        self.data.setdefault("steps", []).append({"state": state, "time": _now()})
        self.store.write_journal(self.id, self.data)
        _crash_point(state)


def interrupted(store: Store) -> str | None:
    """The id of a transaction that stopped short of committed or rolled back."""
    for txn in reversed(store.ids()):
        if store.read_journal(txn).get("state") not in DONE:
            return txn
    return None


def refuse_if_interrupted(store: Store) -> None:
    txn = interrupted(store)
    if txn is not None:
        state = store.read_journal(txn).get("state")
        raise Interrupted(
            f"transaction {txn} was interrupted ({state}); run `cudatx rollback` to complete "
            "it before any other change"
        )


def _files_of(dist: Distribution) -> list[str]:
    paths = [os.path.normpath(os.path.join(dist.site, e.path)) for e in dist.records]
    for folder, _, names in os.walk(dist.metadata_dir):
        paths += [os.path.join(folder, n) for n in names]
    return sorted(set(paths))


def _sha256(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _check_running(paths: list[str], options: Options) -> None:
    if options.ignore_running:
        return  # not even a scan: /proc may be unreadable where the user knows better
    report = running.processes_using(paths)
    if report.clear:
        return
    parts = []
    for h in report.holders:
        files = ", ".join(os.path.basename(f) for f in h.files[:3])
        parts.append(f"pid {h.pid} ({h.user}: {h.command[:60]}) maps {files}")
    parts += [f"pid {u.pid} ({u.user or '?'}): maps unreadable, {u.reason}" for u in report.unknown]
    raise InUse(
        "running processes use files this change would delete or overwrite: "
        + "; ".join(parts)
        + " (stop them, or pass --ignore-running)"
    )


def _arriving_paths(prefix_site: str, installing: tuple[Distribution, ...]) -> list[str]:
    """Where the staged distributions' files will be written (RECORD paths, placed)."""
    return sorted(
        {os.path.normpath(os.path.join(prefix_site, e.path)) for d in installing for e in d.records}
    )


def _created_folders(paths: list[str], prefix: str) -> list[str]:
    """Folders that writing `paths` would create, deepest first (a rollback removes them)."""
    created: set[str] = set()
    for path in paths:
        folder = os.path.dirname(path)
        while folder.startswith(os.path.join(prefix, "")) and not os.path.lexists(folder):
            created.add(folder)
            folder = os.path.dirname(folder)
    return sorted(created, key=lambda f: (-f.count("/"), f))


def apply_removal(
    env: Environment,
    plan: Plan,
    removing: tuple[Distribution, ...],
    reinstalling: tuple[Distribution, ...],
    options: Options,
    rescan: Callable[[], Environment],
    installing: tuple[tuple[Distribution, str], ...] = (),
) -> str:
    """Carry out a planned change (uninstall `removing`, install `installing` as (staged
    distribution, uv spec), reinstall `reinstalling`); returns the transaction id. Rolls
    back on any failure."""
    store = Store(env.target.prefix)
    uv = find_uv(options.uv)
    staged = tuple(d for d, _ in installing)
    with store.lock():
        refuse_if_interrupted(store)
        arriving = _arriving_paths(env.target.site_packages[0], staged)
        touched = sorted(
            {p for d in (*removing, *reinstalling) for p in _files_of(d)} | set(arriving)
        )
        created = _created_folders(arriving, env.target.prefix)
        _check_running(touched, options)
        txn = store.new_id()
        journal = _Journal(
            store,
            txn,
            {
                "id": txn,
                "command": options.command,
                "prefix": env.target.prefix,
                "created": _now(),
                "remove": [{"name": d.name, "version": d.version} for d in removing],
                "install": [{"name": d.name, "version": d.version} for d in staged],
                "reinstall": [{"name": d.name, "version": d.version} for d in reinstalling],
                "created_folders": created,
                "plan": plan.model_dump(mode="json"),
            },
        )
        journal.step("started")
        installed = tuple(
            {"name": d.name, "version": d.version, "direct_url": d.direct_url}
            for d in env.distributions
        )
        folders = [d.metadata_dir for d in (*removing, *reinstalling)]
        try:
            _, outside = snapshot.take(
                store.txn_dir(txn), touched, folders, installed, prefix=env.target.prefix
            )
        except Exception:
            # Nothing was changed yet (uv runs only after the snapshot): not interrupted. On a
            # full disk even this may fail; the snapshot's own error is the one to report
            # (and a later run finds no snapshot to restore: rollback completes at once).
            with contextlib.suppress(StoreError):
                journal.step("rolled back", error="the snapshot could not be written")
            raise
        journal.step("snapshotted", outside=sorted(outside))
        try:
            # uv deletes what a RECORD lists, through symlinks too: entries that lead out of
            # the environment go from the RECORDs first (the snapshot holds the originals).
            journal.data["withheld"] = confine.withhold(
                (*removing, *reinstalling), env.target.prefix
            )
            _apply(journal, uv, env, removing, reinstalling, installing, options)
            after = rescan()
            _verify(plan, env, after, removing, reinstalling, staged, options)
        except Exception as exc:
            message = exc.message if isinstance(exc, UvFailed) else str(exc)
            journal.step("rolling back", error=message)
            _restore(store, txn, journal.data)
            journal.step("rolled back")
            raise RolledBack(f"{message}; the environment was rolled back ({txn})") from None
        journal.step("verified")
        kept = set(touched) - set(outside)  # what lies outside is none of rollback's business
        journal.step("committed", after={p: _sha256(p) for p in sorted(kept)})
        return txn


def _apply(
    journal: _Journal,
    uv: str,
    env: Environment,
    removing: tuple[Distribution, ...],
    reinstalling: tuple[Distribution, ...],
    installing: tuple[tuple[Distribution, str], ...],
    options: Options,
) -> None:
    offline = ["--offline"] if options.offline else []
    offline += [arg for link in options.find_links for arg in ("--find-links", link)]
    offline += list(options.uv_args)
    if removing:
        journal.step("uninstalling")
        names = [d.name for d in removing]
        run_uv(uv, ["pip", "uninstall", "--python", env.target.prefix, *names])
        journal.step("uninstalled")
    if installing:
        # Exactly what the dry run chose and the plan simulated: pinned, --no-deps.
        journal.step("installing")
        specs = [spec for _, spec in installing]
        run_uv(uv, ["pip", "install", "--python", env.target.prefix, "--no-deps", *offline, *specs])
        journal.step("installed")
    if not reinstalling:
        return
    journal.step("reinstalling")
    for dist in reinstalling:
        run_uv(
            uv,
            [
                "pip",
                "install",
                "--python",
                env.target.prefix,
                "--no-deps",
                "--reinstall-package",
                dist.name,
                *offline,
                reinstall_spec(dist),
            ],
        )
    journal.step("reinstalled")


def _verify(
    plan: Plan,
    before: Environment,
    after: Environment,
    removing: tuple[Distribution, ...],
    reinstalling: tuple[Distribution, ...],
    installing: tuple[Distribution, ...],
    options: Options,
) -> None:
    from cudatx.facts import hollow
    from cudatx.plan import diff

    actual = diff(before, after, removing, reinstalling, plan.requirements_checked, installing)
    predicted = {(b.needed_by, b.soname) for b in plan.broken}
    surprises = [b for b in actual.broken if (b.needed_by, b.soname) not in predicted]
    if surprises:
        first = surprises[0]
        raise RuntimeError(
            f"{first.soname} needed by {first.needed_by} broke, which the plan did not predict"
        )
    predicted_roots = {r.root for r in plan.broken_roots}
    new_roots = [r for r in actual.broken_roots if r.root not in predicted_roots]
    if new_roots:
        raise RuntimeError(f"import of {new_roots[0].root} broke, which the plan did not predict")
    # Whatever stays must match its RECORD, except what the plan said the removal would
    # leave hollow (shared paths it deletes and nothing reinstalls) and what already was.
    reinstalled = {d.name for d in (*reinstalling, *installing)}
    expected = {p.name for p in (*plan.left_hollow, *plan.overwritten)}
    already = {h.name for h in hollow(before)}
    damaged = [
        h
        for h in hollow(after)
        if h.name in reinstalled or (h.name not in expected and h.name not in already)
    ]
    if damaged:
        h = damaged[0]
        raise RuntimeError(
            f"{h.name} {h.version} does not match its RECORD after the change "
            f"({h.missing} missing, {h.wrong} with other bytes, e.g. {h.examples[:1]})"
        )
    if options.verify:
        _run_verify(options.verify, before.target.prefix)


def _run_verify(command: str, prefix: str) -> None:
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = prefix
    env["PATH"] = os.path.join(prefix, "bin") + os.pathsep + env.get("PATH", "")
    done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        raise RuntimeError(f"--verify {command!r} failed: {last}")


def _restore(store: Store, txn: str, journal: dict[str, Any]) -> None:
    """Put the environment back as it was before `txn`."""
    if journal.get("pruned"):
        raise StoreError(
            f"the snapshot of {txn} was pruned ({journal['pruned']}); cannot roll back"
        )
    saved = snapshot.load(store.txn_dir(txn))
    if saved is None:
        return  # no complete snapshot: the change had not begun (uv runs only after it)
    prefix = journal["prefix"]
    keep = {f.path for f in saved.files} | set(saved.folders)
    changed = journal.get("remove", []) + journal.get("install", []) + journal.get("reinstall", [])
    names = {d["name"] for d in changed}
    snapshot.check(store.txn_dir(txn), saved)  # saved bytes and targets, before any change
    try:
        _remove_added(prefix, names, keep)
    except OSError as exc:
        raise StoreError(
            f"cannot remove {exc.filename}: {exc.strerror}", path=exc.filename
        ) from None
    snapshot.restore(store.txn_dir(txn), saved)
    for folder in journal.get("created_folders", []):
        # Deepest first; a folder something else has written into since stays.
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _remove_added(prefix: str, names: set[str], keep: set[str]) -> None:
    """Files a reinstall wrote that were not there before (not in the snapshot) go."""
    from packaging.utils import canonicalize_name

    from cudatx.dists import scan_distributions

    site_dirs = _site_dirs(prefix)
    dists, _ = scan_distributions(tuple(site_dirs))
    real_prefix = os.path.realpath(prefix)
    for dist in dists:
        if canonicalize_name(dist.name) not in names:
            continue
        for path in _files_of(dist):
            # Resolved, not compared as strings: `<prefix>/pkg/escape/x` may lead out through a
            # symlink, and `<prefix>2/x` starts with the prefix's string too.
            if path not in keep and os.path.lexists(path) and confine.inside(path, real_prefix):
                os.unlink(path)
        if dist.metadata_dir not in keep and os.path.isdir(dist.metadata_dir):
            for folder, _, files in os.walk(dist.metadata_dir, topdown=False):
                for name in files:
                    os.unlink(os.path.join(folder, name))
                os.rmdir(folder)


def _site_dirs(prefix: str) -> list[str]:
    lib = Path(prefix, "lib")
    return sorted(str(p) for p in lib.glob("python*/site-packages") if p.is_dir())


def rollback(prefix: str, txn: str | None, *, force: bool) -> tuple[str, str]:
    """Roll back `txn` (default: the latest). Returns (id, what happened)."""
    store = Store(prefix)
    with store.lock():
        ids = store.ids()
        if not ids:
            raise StoreError(f"no cudatx transaction recorded in {prefix}")
        if txn is None:
            # The latest transaction, rolled back or not: running rollback twice must not
            # reach for an older one (that takes its ID).
            txn = ids[-1]
        elif txn not in ids:
            raise StoreError(f"no transaction {txn} in {prefix}; `cudatx history` lists them")
        journal = store.read_journal(txn)
        if journal.get("state") == "rolled back":
            return txn, "already rolled back"
        if journal.get("state") == "committed" and not force:
            changed = [p for p, h in journal.get("after", {}).items() if _sha256(p) != h]
            if changed:
                raise Conflict(
                    f"{len(changed)} files changed since transaction {txn} "
                    f"(e.g. {changed[0]}); --force to roll back anyway"
                )
        log = _Journal(store, txn, journal)
        log.step("rolling back")
        _restore(store, txn, journal)
        log.step("rolled back")
        return txn, "rolled back"


def history(prefix: str) -> list[dict[str, Any]]:
    store = Store(prefix)
    return [store.read_journal(t) for t in store.ids()]


def prune(prefix: str, keep: int) -> list[str]:
    """Free the snapshots of all but the `keep` newest transactions (never the latest, never
    an interrupted one); their journals stay, for history."""
    import shutil

    store = Store(prefix)
    with store.lock():
        ids = store.ids()
        pruned = []
        for txn in ids[: max(len(ids) - max(keep, 1), 0)]:
            journal = store.read_journal(txn)
            saved = store.txn_dir(txn) / "snapshot"
            if journal.get("state") not in DONE or not saved.exists():
                continue
            shutil.rmtree(saved)
            journal["pruned"] = _now()
            store.write_journal(txn, journal)
            pruned.append(txn)
        return pruned
