"""Distribution names as PEP 503 normalizes them, and counts of things as words.

packaging.utils.canonicalize_name does the same, but importing packaging.utils imports
packaging.tags, and with the requirement parser packaging is 40-60 ms of a 0.3 s warm plan
that parses no requirement (cudatx.analysis.requirements keeps their verdicts in the scan
cache). packaging stays the one parser of requirements, markers, specifiers and versions;
it is imported where one is parsed.
"""

from __future__ import annotations

import re

_RUNS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """`name` normalized: runs of `-`, `_` and `.` become one `-`, letters lower case
    (PEP 503, "Normalized Names"; packaging.utils.canonicalize_name without validate)."""
    return _RUNS.sub("-", name).lower()


def counted(n: int, noun: str) -> str:
    """`1 path`, `2 paths`, `0 paths`, `3 libraries`: the one plural rule of every message
    (a consonant and y become ies; a noun with another irregular plural is not counted here)."""
    if n == 1:
        return f"{n} {noun}"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
        return f"{n} {noun[:-1]}ies"
    return f"{n} {noun}s"
