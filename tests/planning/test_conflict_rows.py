"""Conflict finding over RECORDs an index wrote: one pass over the rows, whatever repeats.

A wheel's RECORD from an index is a stranger's text (issue 31): one that lists a path many
times must cost a pass over its rows, and must not turn one shared path into as many
findings as it has rows.
"""

from __future__ import annotations

from cudatx.models import RecordEntry
from cudatx.planning.conflicts import Blamer, Conflict, Unhashed, find_conflicts
from cudatx.planning.resolve import FILE, Resolved, Wheel
from cudatx.planning.wheelrecords import Layout, WheelRead, WheelRecord

LAYOUT = Layout("/env/lib/python3.11/site-packages", "/env", "python3.11")


def _record(name: str, entries: list[RecordEntry]) -> WheelRecord:
    wheel = Wheel(
        name=name,
        version="1.0",
        filename=f"{name}-1.0-py3-none-any.whl",
        url=None,
        path=f"/w/{name}-1.0-py3-none-any.whl",
        size=None,
        sha256=None,
    )
    read = WheelRead(
        name=name,
        version="1.0",
        filename=wheel.filename,
        source="file",
        transferred=0,
        size=None,
    )
    return WheelRecord(wheel, tuple(entries), read)


def _find(records: list[WheelRecord]) -> tuple[tuple[Conflict, ...], tuple[Unhashed, ...]]:
    resolved = Resolved(
        wheels=tuple(r.wheel for r in records),
        parents=tuple((r.wheel.name, (FILE,)) for r in records),
    )
    return find_conflicts(records, LAYOUT, lambda: Blamer((), resolved, None), {})


def test_a_path_repeated_in_one_record_is_one_path_of_one_finding() -> None:
    rows = 20_000
    hollow = _record("hollow", [RecordEntry("pkg/_x.so", "sha256", "AAAA", 1)] * rows)
    honest = _record("honest", [RecordEntry("pkg/_x.so", "sha256", "BBBB", 1)])
    found, unhashed = _find([hollow, honest])
    assert unhashed == ()
    (conflict,) = found
    assert conflict.paths == ("pkg/_x.so",)  # not one per row


def test_repeats_with_the_same_bytes_are_no_finding_and_without_a_hash_are_said() -> None:
    same = [RecordEntry("shared/__init__.py", "sha256", "E3B0", 0)]
    a = _record("a", same * 5_000 + [RecordEntry("blob/x", None, None, None)])
    b = _record("b", [*same, RecordEntry("blob/x", "sha256", "CCCC", 3)])
    found, unhashed = _find([a, b])
    assert found == ()
    (said,) = unhashed
    assert said.paths == ("blob/x",)


def test_one_record_alone_is_never_a_finding_however_often_it_repeats() -> None:
    rows = [RecordEntry("pkg/_x.so", "sha256", h, 1) for h in ("AAAA", "BBBB")] * 10_000
    found, unhashed = _find([_record("only", rows)])
    assert found == () and unhashed == ()
