"""Loads a traced run made (`cudatx trace`): which run a replayed root stands for, how the
reports name it, and what doctor notes of the records.

Each process of a fresh record is a load root of its own (cudatx.loader.roots.load_trace,
`Environment.observed`); a stale record is read, named, and never replayed.
"""

from __future__ import annotations

from cudatx.discover.traces import Trace
from cudatx.environment import Environment
from cudatx.loader.process import LoadResult


def run_of(env: Environment, load: LoadResult) -> Trace | None:
    """The record whose process `load` replays (None: not a traced run's)."""
    if load.trace is None:
        return None
    return next((t for t in env.traces if t.id == load.trace), None)


def by_root(env: Environment) -> dict[str, Trace]:
    """Each replayed process's root, keyed as the environment keys paths -> its record."""
    traces = {t.id: t for t in env.traces}
    return {
        env.keys(load.root): traces[load.trace]
        for load in env.observed
        if load.trace is not None and load.trace in traces
    }


def role(env: Environment, root: str | None) -> str | None:
    """What `why` says of a need met in a traced run: "seen in the traced run `...`"."""
    if root is None or not env.observed:
        return None
    found = by_root(env).get(env.keys(root))
    return f"seen in {found.record.label}" if found is not None else None


def notes(env: Environment) -> list[str]:
    """One note per record: what a fresh one counts, why a stale one does not."""
    out = []
    for trace in env.traces:
        record = trace.record
        if trace.stale is None:
            out.append(
                f"{record.label} (trace {record.id}): its {record.mapped()} loads count as observed"
            )
        else:
            out.append(
                f"{record.label} (trace {record.id}) is stale: {trace.stale}; its loads are "
                f"not counted (`cudatx trace --clear {record.id}` removes it)"
            )
    return out
