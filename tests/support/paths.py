"""Where the checkout and the suite's data lie, whichever folder of tests/ a module is in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: tests/support/paths.py -> ../..
DATA = REPO / "tests" / "data"
