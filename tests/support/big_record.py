"""A RECORD of a million lines (about 40 MB, under cudatx.reading.MAX_RECORD): the pure
world of tests/support/pure_world.py, with `pure`'s RECORD grown by `lines` entries for
files that are not there (a RECORD lists what was installed; nothing checks it still is).
Used by tests/txn/test_bounded.py and benchmarks/bench_record.py."""

from __future__ import annotations

from pathlib import Path

LINE_BYTES = 40  # each added entry, newline included


def entry(i: int) -> str:
    """`pure/generated/mod_NNNNNNN_....py,,` (no hash, no size), LINE_BYTES long."""
    stem = f"pure/generated/mod_{i:07d}_"
    return stem + "x" * (LINE_BYTES - len(stem) - len(".py,,\n")) + ".py,,\n"


def grow_record(record: Path, lines: int) -> int:
    """Append `lines` entries to `record`; returns its size in bytes."""
    with record.open("a", encoding="utf-8") as out:
        chunk = 10_000
        for start in range(0, lines, chunk):
            out.write("".join(entry(i) for i in range(start, min(lines, start + chunk))))
    return record.stat().st_size
