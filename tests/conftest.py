"""Session-wide settings: the suite's own uv runs, and cudatx's scan cache."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def _variable(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


@pytest.fixture(scope="session", autouse=True)
def _uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every uv the suite starts (its own and cudatx's) uses a cache that dies with the run.

    uv keys a wheel installed from a file by its path, so each run's wheels in fresh temporary
    folders add new entries to the user's cache that nothing ever reads again: the CUDA 12
    cuDNN alone is 1.1 GB unpacked per install, and CI machines ran out of disk (os error 28).
    """
    cache = tmp_path_factory.mktemp("uv-cache")
    with _variable("UV_CACHE_DIR", str(cache)):
        yield
    shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _scan_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every cudatx the suite runs (in-process or not) keeps its scan cache in a folder that
    dies with the run, never in the user's ~/.cache/cudatx. Tests of the cache itself point
    CUDATX_CACHE_DIR at their own folders."""
    cache = tmp_path_factory.mktemp("cudatx-cache")
    with _variable("CUDATX_CACHE_DIR", str(cache)):
        yield
    shutil.rmtree(cache, ignore_errors=True)
