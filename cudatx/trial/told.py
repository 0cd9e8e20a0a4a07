"""Where a trial is, told by its session to the command that waits on it: a small JSON file
in the shadow's scratch folder, replaced whole (rename) at each step, and polled.

A file, not a pipe: the session's stdout carries its answer and its stderr its error, and
the confined judge can write nothing but the shadow and that folder (cudatx.sandbox), which
the command sees at the same path."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import NamedTuple

POLL_S = 0.2


class TrialStep(NamedTuple):
    """`judging` the environment `before` or `after` the change (`stage`: shadow, uv,
    checks): `done` of `total` finished, `what` the oldest still running (an import, a uv
    command)."""

    judging: str  # "before" or "after" the change, or "as is" (doctor's: no change)
    stage: str
    done: int = 0
    total: int = 0
    what: str = ""


def tell(path: str | None, stage: str, done: int, total: int, what: str) -> None:
    """Said by the session (or its confined judge); nothing where no one listens."""
    if not path:
        return
    with contextlib.suppress(OSError):  # progress is never worth failing a trial over
        temporary = f"{path}.{os.getpid()}.{threading.get_ident()}"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump({"stage": stage, "done": done, "total": total, "what": what}, handle)
        os.replace(temporary, path)


def _read(path: str) -> dict[str, object] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def heard(path: str, judging: str, progress: Callable[[TrialStep], None]) -> Iterator[None]:
    """While the block runs, what the session tells at `path`, passed to `progress` as it
    changes (from a thread of its own)."""
    stopped = threading.Event()

    def poll() -> None:
        last: dict[str, object] | None = None
        while not stopped.wait(POLL_S):
            data = _read(path)
            if data is None or data == last:
                continue
            last = data
            progress(
                TrialStep(
                    judging,
                    str(data.get("stage", "")),
                    int(str(data.get("done", 0))),
                    int(str(data.get("total", 0))),
                    str(data.get("what", "")),
                )
            )

    thread = threading.Thread(target=poll, name="cudatx-trial-told", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        thread.join()
