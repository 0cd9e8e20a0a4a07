"""cudatx.names: PEP 503 names, and the one plural rule of every message; cudatx.paths.normal."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.utils import canonicalize_name

from cudatx.names import canonical_name, counted
from cudatx.paths import normal


@pytest.mark.parametrize("name", ["Foo_Bar.baz", "nvidia-cudnn-cu12", "A--B__C..D", "torch"])
def test_canonical_name_is_packagings(name: str) -> None:
    assert canonical_name(name) == canonicalize_name(name)


@pytest.mark.parametrize(
    ("n", "noun", "said"),
    [
        (1, "path", "1 path"),
        (0, "path", "0 paths"),
        (2, "change", "2 changes"),
        (1, "library", "1 library"),
        (3, "library", "3 libraries"),
        (2, "key", "2 keys"),
    ],
)
def test_counted(n: int, noun: str, said: str) -> None:
    assert counted(n, noun) == said


@given(st.lists(st.sampled_from(["a", "b.c", ".", "..", "", ".d"]), max_size=6))
def test_normal_is_normpath(parts: list[str]) -> None:
    """cudatx.paths.normal: normpath's answer on every path, its own test or not (paths
    of empty, `.`, `..` and dotted components, absolute or not, with a trailing `/`)."""
    path = "/".join(parts)
    assert normal(path) == os.path.normpath(path)
