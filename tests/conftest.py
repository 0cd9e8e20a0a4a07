"""Session-wide settings for the suite's own uv runs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every uv the suite starts (its own and cudatx's) uses a cache that dies with the run.

    uv keys a wheel installed from a file by its path, so each run's wheels in fresh temporary
    folders add new entries to the user's cache that nothing ever reads again: the CUDA 12
    cuDNN alone is 1.1 GB unpacked per install, and CI machines ran out of disk (os error 28).
    """
    cache = tmp_path_factory.mktemp("uv-cache")
    before = os.environ.get("UV_CACHE_DIR")
    os.environ["UV_CACHE_DIR"] = str(cache)
    yield
    if before is None:
        del os.environ["UV_CACHE_DIR"]
    else:
        os.environ["UV_CACHE_DIR"] = before
    shutil.rmtree(cache, ignore_errors=True)
