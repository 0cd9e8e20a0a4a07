"""Run the reliability tests and write docs/reliability.md's table from what they recorded.

    python3 -m tests.reliability_report [PYTEST ARGS...]

Runs every test marked `reliability` (pytest, in this process) and makes one Markdown row of
each: the cases it ran and their outcome, as the test recorded them with `record_property`
("cases", "outcome"), else one case and its docstring's first paragraph (or its name); and
pytest's verdict. The table replaces what lies between the markers in docs/reliability.md,
only when every test passed; it is printed either way. Exits with pytest's status, so a
failing run is never written as a good one.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest


class _Collector:
    def __init__(self) -> None:
        self.docs: dict[str, str] = {}
        self.rows: list[tuple[str, str, dict[str, Any]]] = []

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            doc = getattr(getattr(item, "obj", None), "__doc__", None) or ""
            # The docstring's first paragraph, else what the test's name says.
            name = item.name.split("[")[0].removeprefix("test_").replace("_", " ")
            self.docs[item.nodeid] = " ".join((doc.strip().split("\n\n")[0] or name).split())

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        failed_early = report.when == "setup" and report.outcome != "passed"
        if report.when == "call" or failed_early:
            self.rows.append((report.nodeid, report.outcome, dict(report.user_properties)))


def table(collector: _Collector) -> str:
    lines = ["| test | cases | outcome | result |", "| --- | ---: | --- | --- |"]
    total = 0
    verdicts: dict[str, int] = {}
    for nodeid, verdict, props in collector.rows:
        cases = int(props.get("cases", 1))
        total += cases
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        outcome = str(props.get("outcome") or collector.docs.get(nodeid, "")).replace("|", "/")
        name = nodeid.removeprefix("tests/")
        lines.append(f"| `{name}` | {cases} | {outcome} | {verdict} |")
    summary = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
    lines.append(f"| **all** | **{total}** | | {summary} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    collector = _Collector()
    started = time.monotonic()
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-m", "reliability", *argv], [collector])
    took = time.monotonic() - started
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    text = (
        f"Reliability run at {commit or 'an unknown commit'} ({len(collector.rows)} tests, "
        f"in {int(took // 60)} min {int(took % 60)} s):\n\n{table(collector)}"
    )
    print(f"\n{text}")
    if code == 0 and collector.rows:
        write(DOC, text)
        print(f"\nwritten into {DOC}")
    return int(code)


DOC = Path(__file__).resolve().parents[1] / "docs" / "reliability.md"
_MARKED = re.compile(
    r"(<!-- reliability-table:[^\n]*-->\n).*?(\n<!-- /reliability-table -->)", re.S
)


def write(doc: Path, text: str) -> None:
    """Put `text` between the table's markers in `doc`."""
    old = doc.read_text()
    new, found = _MARKED.subn(lambda m: m.group(1) + text + m.group(2), old)
    if found != 1:
        raise SystemExit(f"{doc}: no reliability-table markers")
    doc.write_text(new)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
