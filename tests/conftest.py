"""Suite-wide settings: each module's uv cache and scratch folders, and cudatx's scan cache."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
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


@pytest.fixture(scope="module", autouse=True)
def _module_scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What one test module builds dies with the module: its uv cache and every folder its
    module-scoped fixtures made with `tmp_path_factory.mktemp`.

    Every uv the module starts (the suite's own and cudatx's) uses a cache of its own: uv
    keys a wheel installed from a file by its path, so the wheels of each module, in fresh
    temporary folders, are new entries (the CUDA 12 cuDNN alone is 1.1 GB unpacked). Kept
    for the whole run, the caches and the torch worlds built over them reached 11 GB and
    more, and CI machines ran out of disk (os error 28) at 81% of the suite. What a failed
    test kept for its reader (its own tmp_path, named after the test, `test_...`) stays.
    """
    base = tmp_path_factory.getbasetemp()
    before = set(os.listdir(base))
    cache = tmp_path_factory.mktemp("uv-cache")
    with _variable("UV_CACHE_DIR", str(cache)):
        yield
    for name in set(os.listdir(base)) - before:
        path = base / name
        if path.is_symlink():  # pytest's NAMEcurrent, to the newest NAMEN
            path.unlink(missing_ok=True)
        elif not name.startswith("test"):
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def _prune_uv_cache(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each slow test, `uv cache prune`: every `--reinstall-package` (a repair, a
    doctor's fix, its staging) implies uv's refresh, which unpacks the wheel again into a
    new cache entry and leaves the old one unreachable. One module of real CUDA wheels left
    seven copies of each of eight of them, 28 GB. Prune removes only what nothing reaches;
    what an environment holds stays (its files are links of their own)."""
    yield
    if request.node.get_closest_marker("slow") is None:
        return
    from tests.support import uv_bin

    subprocess.run([uv_bin(), "cache", "prune"], capture_output=True, check=False)


@pytest.fixture(scope="session", autouse=True)
def _scan_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every cudatx the suite runs (in-process or not) keeps its scan cache in a folder that
    dies with the run, never in the user's ~/.cache/cudatx. Tests of the cache itself point
    CUDATX_CACHE_DIR at their own folders."""
    cache = tmp_path_factory.mktemp("cudatx-cache")
    with _variable("CUDATX_CACHE_DIR", str(cache)):
        yield
    shutil.rmtree(cache, ignore_errors=True)
