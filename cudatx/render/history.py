"""`cudatx history` and `history show`: the transactions recorded for an environment."""

from __future__ import annotations

import json

from cudatx.txn.journal import Journal


def to_text(journals: list[Journal]) -> str:
    lines = [
        f"{j.id}  {j.created}  {j.state.value:<12}  {j.changes} changes  {j.command}"
        for j in journals
    ]
    return "".join(line + "\n" for line in lines)


def show(journal: Journal) -> str:
    return json.dumps(journal.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
