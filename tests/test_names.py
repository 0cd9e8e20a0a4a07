"""cudatx.names: PEP 503 names, and the one plural rule of every message."""

from __future__ import annotations

import pytest
from packaging.utils import canonicalize_name

from cudatx.names import canonical_name, counted


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
