"""The project's own checks run with the test suite, so CI runs them too."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_lint() -> None:
    done = _run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format() -> None:
    done = _run("ruff", "format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_function_over_100_lines() -> None:
    """A page-long function hides its phases: each part of a plan or a replay gets a name,
    typed inputs and outputs, and a body a reader holds at once (issue 35)."""
    long = [
        f"{p.relative_to(ROOT).as_posix()}:{node.lineno} {node.name}: "
        f"{node.end_lineno - node.lineno + 1} lines"
        for p in sorted((ROOT / "cudatx").rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(), filename=str(p)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 100
    ]
    assert long == []


def test_pyelftools_stays_in_one_module() -> None:
    users = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "cudatx").rglob("*.py")
        if "elftools" in p.read_text()
    ]
    assert users == ["cudatx/elf/reader.py"]


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["remove", "--help"]])
def test_help_and_version_import_no_heavy_modules(argv: list[str]) -> None:
    heavy = ("networkx", "pydantic", "elftools", "sqlite3")
    code = (
        "import sys\n"
        "from cudatx.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
