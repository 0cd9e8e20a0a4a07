"""The fixtures of the transaction tests: the wheels of tests/support/txn_world.py and of
tests/support/pure_world.py, built once per module, and a fresh venv of them for each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.pure_world import World, build_pure_wheels, install_pure_world
from tests.support.txn_world import Venv, Wheels, build_wheels, install_venv


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    return build_wheels(tmp_path_factory.mktemp("txn-build"))


@pytest.fixture
def venv(wheels: Wheels, tmp_path: Path) -> Venv:
    return install_venv(wheels, tmp_path)


@pytest.fixture(scope="module")
def pure_wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return build_pure_wheels(tmp_path_factory.mktemp("pure-wheels"))


@pytest.fixture
def world(pure_wheels: list[Path], tmp_path: Path) -> World:
    return install_pure_world(pure_wheels, tmp_path)
