"""The journal of one transaction: what it set out to do, and every step it reached.

Written whole (atomically, cudatx.txn.store) before each next step, so a later run that
finds a journal short of `committed` or `rolled back` knows the transaction was interrupted
and what rolling it back means. Read back through the model below: a journal that does not
validate is a corrupt store (exit 12), never a crash.
"""

from __future__ import annotations

import datetime
import os
import signal
import time
from dataclasses import field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from cudatx.documents import dump, load
from cudatx.models import Distribution, Frozen
from cudatx.trust import DONE_STATES

if TYPE_CHECKING:
    from cudatx.txn.store import Store


class State(StrEnum):
    """The steps, in the order a transaction reaches them."""

    STARTED = "started"
    SNAPSHOTTED = "snapshotted"
    UNINSTALLING = "uninstalling"
    UNINSTALLED = "uninstalled"
    INSTALLING = "installing"
    INSTALLED = "installed"
    REINSTALLING = "reinstalling"
    REINSTALLED = "reinstalled"
    VERIFIED = "verified"
    COMMITTED = "committed"
    ROLLING_BACK = "rolling back"
    ROLLED_BACK = "rolled back"
    # Ended without being rolled back, because it never can be: its snapshot was pruned or
    # is missing (the journal's `error` says which). The environment is as uv left it.
    FAILED = "failed"

    @property
    def done(self) -> bool:
        """Whether the transaction ended (anything else means it was interrupted)."""
        return self.value in DONE_STATES


class _Model(Frozen):
    # extra="ignore": a journal written by a later cudatx with more fields still reads.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "ignore"}


class Step(_Model):
    state: State
    time: str


class Package(_Model):
    name: str
    version: str

    @classmethod
    def of(cls, dist: Distribution) -> Package:
        return cls(name=dist.name, version=dist.version)


class Journal(_Model):
    id: str
    command: str  # the cudatx command line, shell-quoted
    prefix: str  # the environment's sys.prefix
    prefix_id: str | None = None  # its device:inode (cudatx.trust.identity): a copy has another
    sites: tuple[str, ...]  # its site folders, where rollback looks for what was added
    created: str
    remove: tuple[Package, ...] = ()
    install: tuple[Package, ...] = ()
    reinstall: tuple[Package, ...] = ()
    created_folders: tuple[str, ...] = ()  # folders the change creates, deepest first
    plan: dict[str, Any] = field(default_factory=dict)  # the plan's JSON, as `--json` printed it
    state: State
    steps: tuple[Step, ...] = ()
    error: str | None = None
    outside: tuple[str, ...] = ()  # paths the snapshot left alone: they lead outside
    withheld: tuple[str, ...] = ()  # RECORD entries taken out before uv ran
    after: dict[str, str | None] = field(default_factory=dict)  # sha256 of each touched path
    pruned: str | None = None  # when `history prune` freed the snapshot

    @property
    def changes(self) -> int:
        """How many distributions it changes (history's count)."""
        return len(self.remove) + len(self.install) + len(self.reinstall)

    def changed_names(self) -> set[str]:
        return {p.name for p in (*self.remove, *self.install, *self.reinstall)}


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _crash_point(state: State) -> None:
    # Fault injection for the crash tests: die exactly as kill -9 would, after `state`
    # reached the journal; or wait there (`STATE:SECONDS`), for a signal sent at that
    # moment. Never set outside tests.
    if os.environ.get("CUDATX_TEST_CRASH_AT") == state.value:
        os.kill(os.getpid(), signal.SIGKILL)
    at, _, seconds = os.environ.get("CUDATX_TEST_PAUSE_AT", "").partition(":")
    if at == state.value:
        time.sleep(float(seconds or 0))


class JournalWriter:
    """One transaction's journal as it advances: each step is on disk before the next."""

    def __init__(self, store: Store, journal: Journal) -> None:
        self.store = store
        self.journal = journal

    def record(self, **fields: Any) -> None:
        """Fields to keep, written with the next step."""
        # Validated, not replace()d: what is written must read back.
        self.journal = load(Journal, {**dump(self.journal), **fields})

    def step(self, state: State, **fields: Any) -> None:
        steps = (*self.journal.steps, Step(state=state, time=now()))
        self.record(**fields, state=state, steps=steps)
        self.store.write_journal(self.journal)
        _crash_point(state)
