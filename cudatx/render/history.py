"""`cudatx history` and `history show`: the transactions recorded for an environment, as
text for people and as JSON."""

from __future__ import annotations

import json
import shlex
from typing import Any, NamedTuple

from cudatx.documents import dump
from cudatx.names import counted
from cudatx.render import as_text
from cudatx.render.formats import Rendered
from cudatx.render.formats import render as written
from cudatx.txn.journal import Journal, Package, State

SCHEMA_VERSION = 1


class Report(NamedTuple):
    """The transactions recorded for the environment at `prefix`, oldest first."""

    journals: list[Journal]
    prefix: str


def render(report: Report, fmt: str) -> Rendered:
    """`cudatx history`'s list in format `fmt` (cudatx.render.formats)."""
    return written("history", report, fmt)


def render_journal(journal: Journal, fmt: str) -> Rendered:
    """`cudatx history show`'s transaction in format `fmt` (cudatx.render.formats)."""
    return written("journal", journal, fmt)


def to_text(journals: list[Journal], prefix: str | None = None) -> str:
    if not journals:
        return as_text([f"No transactions recorded for {prefix or 'this environment'}."])
    lines = [
        f"{j.id}  {j.created}  {j.state.value:<12}  {counted(j.changes, 'change')}  {j.command}"
        for j in journals
    ]
    return as_text(lines)


def _summary(journal: Journal) -> dict[str, Any]:
    return {
        "id": journal.id,
        "created": journal.created,
        "state": journal.state.value,
        "command": journal.command,
        "changes": journal.changes,
        "remove": [dump(p) for p in journal.remove],
        "install": [dump(p) for p in journal.install],
        "reinstall": [dump(p) for p in journal.reinstall],
        "error": journal.error,
        "pruned": journal.pruned,
    }


def to_json(journals: list[Journal], prefix: str) -> str:
    """The list `history` prints, one object per transaction (`history show ID --json` has
    each one's whole journal)."""
    document = {
        "schema_version": SCHEMA_VERSION,
        "prefix": prefix,
        "transactions": [_summary(j) for j in journals],
    }
    return json.dumps(document, indent=2) + "\n"


def show_json(journal: Journal) -> str:
    return json.dumps(dump(journal, mode="json"), indent=2, sort_keys=True) + "\n"


def _packages(verb: str, sign: str, packages: tuple[Package, ...]) -> list[str]:
    if not packages:
        return []
    noun = "package" if len(packages) == 1 else "packages"
    return [f"{verb} {len(packages)} {noun}", *(f" {sign} {p.name}=={p.version}" for p in packages)]


def show(journal: Journal) -> str:
    """One transaction for a person: what it changed, each step, how it ended, the command
    that undoes it."""
    lines = [
        f"Transaction {journal.id}: {journal.state.value}",
        f"  command      {journal.command}",
        f"  environment  {journal.prefix}",
        f"  started      {journal.created}",
    ]
    plan = journal.plan
    if plan:
        lines.append(
            f"  plan         {'safe' if plan.get('safe') else 'unsafe (applied with --force)'}"
        )
    if journal.error:
        lines.append(f"  error        {journal.error}")
    if journal.pruned:
        lines.append(f"  snapshot     freed by `cudatx history prune` ({journal.pruned})")
    lines += _packages("Uninstalled", "-", journal.remove)
    lines += _packages("Installed", "+", journal.install)
    lines += _packages("Reinstalled", "~", journal.reinstall)
    if journal.steps:
        lines.append("Steps:")
        lines += [f"  {step.time}  {step.state.value}" for step in journal.steps]
    if journal.state is State.COMMITTED and not journal.pruned:
        undo = shlex.join(["cudatx", "rollback", journal.id, "--python", journal.prefix])
        lines.append(f"Undo with: {undo}")
    lines.append("(--json prints the whole journal, the plan included)")
    return as_text(lines)


def would_roll_back(journal: Journal) -> str:
    """What `rollback` would do, for a prompt and for --dry-run: which transaction, and the
    packages it puts back (+ what the transaction removed, - what it installed, ~ what it
    reinstalled, back to the bytes before it)."""
    if journal.state is State.ROLLED_BACK:
        return as_text([f"Transaction {journal.id} is already rolled back: nothing to restore."])
    lines = [
        f"Would roll back transaction {journal.id} ({journal.state.value}, "
        f"{journal.created}): {journal.command}",
        *_packages("Would restore", "+", journal.remove),
        *_packages("Would remove", "-", journal.install),
        *_packages("Would put back the earlier bytes of", "~", journal.reinstall),
    ]
    return as_text(lines)
