"""The fixtures of the transaction tests: the wheels of tests/support/txn_world.py, built once
per module, and a fresh venv of them for each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.txn_world import Venv, Wheels, build_wheels, install_venv


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    return build_wheels(tmp_path_factory.mktemp("txn-build"))


@pytest.fixture
def venv(wheels: Wheels, tmp_path: Path) -> Venv:
    return install_venv(wheels, tmp_path)
