"""Every exit code and message README.md and docs/ quote is the one the code gives.

The rules (what counts as a mention of an exit code or a quote of output, and when it
matches) live in tests/support/docsmatch.py and are said to writers in docs/development.md.
Each check returns its problems as `FILE:LINE: why`; the tests below hold the documents to
none, and the synthetic documents at the end to the problems they plant, so that no check
passes because it read nothing.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from cudatx.errors import ExitCode
from tests.support import docsmatch, make_venv
from tests.support.cli import cudatx
from tests.support.paths import REPO


def _documents() -> dict[str, str]:
    paths = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return {path.relative_to(REPO).as_posix(): path.read_text() for path in paths}


@pytest.fixture(scope="module")
def matcher() -> docsmatch.Matcher:
    return docsmatch.Matcher(docsmatch.templates(REPO / "cudatx"))


def _table_only() -> dict[str, str]:
    """The reference's table and nothing else, to plant a fault in the rest."""
    text = _documents()[docsmatch.TABLE]
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return {docsmatch.TABLE: "\n".join(rows) + "\n"}


def test_every_exit_code_the_docs_give_is_the_codes() -> None:
    problems = docsmatch.exit_problems(_documents())
    assert not problems, "\n".join(problems)


def test_every_message_the_docs_quote_is_the_codes(matcher: docsmatch.Matcher) -> None:
    problems = docsmatch.message_problems(_documents(), matcher)
    assert not problems, "\n".join(problems)


def test_the_documents_are_read(matcher: docsmatch.Matcher) -> None:
    """The extraction finds what it is meant to: the table's every row, the mentions and
    quotes this suite was written against, so the tests above cannot pass on nothing."""
    docs = {name: docsmatch.read(name, text) for name, text in _documents().items()}
    table = docs[docsmatch.TABLE].table
    assert set(table) == docsmatch.codes_the_code_gives()
    assert {int(code) for code in ExitCode} <= set(table) and {0, 129, 130, 143} <= set(table)
    mentions = [m for doc in docs.values() for m in doc.mentions]
    quotes = [q for doc in docs.values() for q in doc.quotes]
    assert len(mentions) >= 100 and len(quotes) >= 80
    assert any(m.code == 16 and "only a build could" in m.context for m in mentions)
    said = {q.text.strip() for q in quotes}
    assert "no such environment: .venv" in said  # a prose quote after `says so`
    assert "Would break:" in said  # a line of a report after `$ cudatx remove ...`
    # ... and a quote of output is matched to the string that raises it, with its class
    (built,) = {
        t.raised
        for t in matcher.matches(
            docsmatch.quoted(
                "NAME (FILE:LINE: TEXT) can only be checked by building it: pass --allow-build"
            )
        )
    } - {None}
    assert built is not None and built.exit_code == ExitCode.NEEDS_BUILD


_WRONG = """\
# A page written against another cudatx

A requirement only a build could give is refused (exit 2). The lock is held by another
transaction (exit 31). Rolling back with nothing recorded exits 14 (`nothing to roll back`);
doctor then says `the frobnicator declined to vouch for libcudnn.so.9` and a bad spec
refuses with `cudatx: error: no transaction ID 42: ask cudatx history` (exit 4).

    $ cudatx remove nvidia-cudnn-cu13 --dry-run
    Would break:
      libcudnn.so.9 was spirited away by the plan
"""


def test_a_wrong_page_is_caught(matcher: docsmatch.Matcher) -> None:
    """A page with wrong codes and made-up output fails, each fault named at its line."""
    docs = {"docs/wrong.md": _WRONG, **_table_only()}
    exits = docsmatch.exit_problems(docs)
    assert any(p.startswith("docs/wrong.md:3:") and "NeedsBuild: exit 16" in p for p in exits)
    assert any(p.startswith("docs/wrong.md:4:") and "exit 31: the code never" in p for p in exits)
    messages = docsmatch.message_problems(docs, matcher)
    assert any(p.startswith("docs/wrong.md:5:") and "frobnicator" in p for p in messages)
    assert any(p.startswith("docs/wrong.md:6:") and "UsageError (exit 2)" in p for p in messages)
    assert any(p.startswith("docs/wrong.md:10:") and "spirited" in p for p in messages)
    # What is right on the same page is not a problem: a check that flags all is no check.
    assert not any(p.startswith("docs/wrong.md:4:") for p in messages)
    assert not [p for p in exits if p.startswith("docs/wrong.md:4:") and "exit 14" in p]
    assert not any(p.startswith("docs/wrong.md:9:") for p in messages)


def test_a_wrong_table_is_caught() -> None:
    """A row missing, a row for a code the code never gives, two rows swapped."""
    (table,) = _table_only().values()
    rows = table.splitlines()
    nine = next(i for i, r in enumerate(rows) if r.startswith("| 9 |"))
    eleven = next(i for i, r in enumerate(rows) if r.startswith("| 11 |"))
    swapped = list(rows)
    swapped[nine] = "| 9 |" + rows[eleven].split("|", 2)[2]
    swapped[eleven] = "| 11 |" + rows[nine].split("|", 2)[2]
    without = [r for r in rows if not r.startswith("| 18 |")] + ["| 21 | a code of no one |"]
    problems = [
        *docsmatch.exit_problems({docsmatch.TABLE: "\n".join(swapped)}),
        *docsmatch.exit_problems({docsmatch.TABLE: "\n".join(without)}),
    ]
    assert any(p.endswith("exit 18 (the code gives it) has no row in the table") for p in problems)
    assert any("exit 21: the code never gives it" in p for p in problems)
    assert any("exit 9 reads as ExitCode 11" in p for p in problems)
    assert any("exit 11 reads as ExitCode 9" in p for p in problems)


@pytest.mark.parametrize(
    ("quote", "composed"),
    [
        ("nothing to roll back", False),
        ("no such environment: .venv", False),
        ("NAME (FILE:LINE: TEXT) can only be checked by building it: pass --allow-build", False),
        ("Uninstalled 1 package in 39ms", True),
    ],
)
def test_the_matcher_finds_the_codes_strings(
    matcher: docsmatch.Matcher, quote: str, composed: bool
) -> None:
    assert matcher.judge(quote, composed=composed) is None


@pytest.mark.parametrize(
    "quote",
    [
        "nothing to rollback",  # one word changed
        "no such environment here: .venv",  # one word added
        "NAME can only be checked by building it; cudatx never builds",  # an old message
        "the model missed everything",  # a value's place filled with prose
    ],
)
def test_the_matcher_refuses_what_the_code_never_says(
    matcher: docsmatch.Matcher, quote: str
) -> None:
    assert matcher.judge(quote) is not None


def test_the_rules_are_documented() -> None:
    """docs/development.md says how to quote output so that it is checked."""
    text = (REPO / "docs" / "development.md").read_text()
    assert "tests/support/docsmatch.py" in text and "`$ cudatx" in text


def test_templates_skip_docstrings(tmp_path: Path) -> None:
    """A docstring is no output: a quote of one is not a quote of what cudatx says."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        '"""The frobnicator vouches for nothing."""\n'
        "def f(x: str) -> str:\n"
        '    """Docs of f, never printed."""\n'
        '    return f"the frobnicator said {x} twice"\n'
    )
    found = docsmatch.Matcher(docsmatch.templates(package))
    assert found.judge("the frobnicator said libfoo.so.1 twice") is None
    assert found.judge("The frobnicator vouches for nothing.") is not None


# -- the stated refusals, run ----------------------------------------------------------------

_RUN = [
    # (document, its exit code, a fragment of its quote, the command that meets the situation)
    ("docs/commands.md", 14, "nothing to roll back", ["rollback", "--yes", "--python", "venv"]),
    (
        "docs/commands.md",
        2,
        "no transaction",
        ["history", "show", "20990101T000000Z-1", "-p", "venv"],
    ),
    ("docs/commands.md", 2, "Graphviz", ["graph", "--format", "svg", "--python", "venv"]),
    ("docs/commands.md", 3, "no such environment", ["doctor", "--python", ".venv"]),
    ("docs/check-requirements.md", 16, "by building it", ["check-requirements", "req.txt"]),
]


def _pattern(quote: str) -> re.Pattern[str]:
    """A quote as a regular expression over what cudatx printed: its placeholders any text."""
    parts = docsmatch.quoted(quote).split(docsmatch.WILD)
    return re.compile(".*?".join(re.escape(part) for part in parts))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty venv and a requirements file whose one line only a build could give."""
    here = tmp_path_factory.mktemp("run")
    make_venv(here / "venv")
    (here / "pkg").mkdir()
    (here / "pkg" / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "1"\n')
    (here / "req.txt").write_text("./pkg\n")
    return here


@pytest.mark.parametrize(("document", "code", "fragment", "args"), _RUN)
def test_a_stated_refusal_is_what_cudatx_does(
    world: Path, document: str, code: int, fragment: str, args: list[str]
) -> None:
    """Where a document pairs an exit code with the message, the command that meets the
    situation exits with that code and says that message."""
    doc = docsmatch.read(document, (REPO / document).read_text())
    stated = [(m, q) for m in doc.mentions if m.code == code for q in m.quotes if fragment in q]
    assert stated, f"{document} no longer quotes {fragment!r} with exit {code}"
    # Graphviz's absence: a PATH of this interpreter's folder alone (it has no `dot`)
    path = {"PATH": os.fspath(Path(sys.executable).parent)} if "Graphviz" in fragment else {}
    done = cudatx(*args, cwd=world, env=path, timeout=300)
    for mention, quote in stated:
        assert done.returncode == mention.code, f"{mention.where}: {done.stderr}"
        error = done.stderr.strip().splitlines()[-1]
        assert _pattern(quote).search(error), f"{mention.where}: {quote!r} is not {error!r}"
