"""cudatx.discover.imports: which packages an __init__.py imports as it runs."""

from __future__ import annotations

from pathlib import Path

from cudatx.discover.imports import imported_top_levels, imports_of


def test_module_level_imports_count_in_blocks_and_class_bodies_but_not_in_functions() -> None:
    source = b"""\
import os
from torch import nn as _nn
try:
    import numpy.linalg
except ImportError:
    from jax import numpy
if True:
    with open(__file__):
        import cupy
def later():
    import tensorflow
class Lazy:
    import onnxruntime
from . import _ext
"""
    # A class body runs when the class is defined; a function's only when it is called.
    assert imported_top_levels(source) == ("os", "torch", "numpy", "jax", "cupy", "onnxruntime")


def test_source_that_does_not_parse_imports_nothing() -> None:
    assert imported_top_levels(b"import torch\ndef f(:\n") == ()
    assert imported_top_levels(b"\xff\xfe not python") == ()
    assert imported_top_levels(b"") == ()


def test_a_missing_or_unreadable_file_imports_nothing(tmp_path: Path) -> None:
    assert imports_of(str(tmp_path / "missing" / "__init__.py"), None) == ()
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("import torch\n")
    assert imports_of(str(folder / "__init__.py"), None) == ("torch",)
