"""cudatx.discover.imports: which packages an __init__.py imports as it runs."""

from __future__ import annotations

from pathlib import Path

from cudatx.discover.imports import (
    Closure,
    companions,
    import_closure,
    imported_top_levels,
    imports_of,
    requires,
)


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


def test_import_closure_follows_module_level_imports_of_the_package(tmp_path: Path) -> None:
    """What `import pkg` runs: module-level imports, each package's __init__ on the way;
    `try ... except ImportError` is optional; a function's import, a module __getattr__'s
    and another top-level package's are not followed."""
    files = {
        "pkg/__init__.py": (
            "import os\n"
            "import numpy\n"
            "from . import core\n"
            "from .sub.deep import thing\n"
            "try:\n"
            "    from . import _gpu\n"
            "except ImportError:\n"
            "    _gpu = None\n"
            "def use_tbb():\n"
            "    from . import _tbb\n"
            "def __getattr__(name):\n"
            "    import importlib\n"
            "    return importlib.import_module(f'pkg.{name}')\n"
        ),
        "pkg/core.py": "from pkg import _fast\nimport pkg.sub\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/deep.py": "if True:\n    from ..helpers import _cext\n",
        "pkg/helpers/__init__.py": "",
    }
    closure = _write(tmp_path, files)
    assert {"pkg", "pkg.core", "pkg._fast", "pkg.sub", "pkg.sub.deep"} <= closure.required
    assert "pkg.helpers._cext" in closure.required
    assert closure.optional == {"pkg._gpu"}
    assert "pkg._tbb" not in closure.required | closure.optional
    assert "numpy" not in closure.required  # another package's own closure says
    assert sorted(Path(p).name for p, _ in closure.files) == [
        "__init__.py",
        "__init__.py",
        "__init__.py",
        "core.py",
        "deep.py",
    ]


def _write(folder: Path, files: dict[str, str]) -> Closure:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return import_closure("pkg", str(folder))


def test_requires_agrees_with_the_closure_and_stops_at_the_first_file_that_tells(
    tmp_path: Path,
) -> None:
    """requires() is the closure's required part, read lazily: a module the package's
    __init__ imports is told from that file alone (torch._C from torch/__init__.py, where
    torch's whole closure reads 1,551 files)."""
    files = {
        "pkg/__init__.py": "from pkg._C import *\nfrom . import a\n",
        "pkg/a.py": "from . import b\ntry:\n    from . import _opt\nexcept ImportError:\n"
        "    pass\ndef f():\n    from . import _lazy\n",
        "pkg/b.py": "import pkg.deep.c\nfrom pkg import _opt\n",
        "pkg/deep/__init__.py": "",
        "pkg/deep/c.py": "from .._ext import x\n",
    }
    closure = _write(tmp_path, files)
    entry = str(tmp_path)
    told, read = requires("pkg", "pkg._C", entry)
    assert told and [Path(p).relative_to(tmp_path).as_posix() for p, _ in read] == [
        "pkg/__init__.py"
    ]
    names = {"pkg", "pkg._C", "pkg.a", "pkg.b", "pkg.deep", "pkg.deep.c", "pkg._ext"}
    names |= {"pkg._opt", "pkg._lazy", "pkg.nothing"}
    for name in sorted(names):
        assert requires("pkg", name, entry)[0] == (name in closure.required), name
    # _opt is optional from a and required from b: required wins, as in the closure.
    assert "pkg._opt" in closure.required
    # Outside the required part, the whole of that part is read (what it rests on).
    told, read = requires("pkg", "pkg._lazy", entry)
    assert not told and len(read) == len(files)


def test_companions_are_packages_another_of_the_wheel_imports_and_peers_are_not(
    tmp_path: Path,
) -> None:
    """nvfuser in torch 2.0's wheel: torch imports it (under `try`, in a function), it never
    imports torch; functorch and torch import each other, so neither is the other's."""
    files = {
        "torch/__init__.py": "import os\n",
        "torch/_prims_common/__init__.py": "try:\n    from nvfuser._C import DataType\n"
        "except ImportError:\n    pass\n",
        "torch/_functorch/compilers.py": "def f():\n    from functorch.compile import x\n",
        "nvfuser/__init__.py": "from . import _C\n",
        "functorch/__init__.py": "import torch\n",
        "nvfuser/README.md": "import torch\n",  # no module: never read
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = companions(str(tmp_path), list(files))
    assert [(Path(c.package).name, Path(c.importer).name) for c in found] == [("nvfuser", "torch")]
    assert found[0].at == ((str(tmp_path / "torch/_prims_common/__init__.py"), 2),)


def test_a_companion_named_after_another_import_is_found_and_a_quoted_one_is_not(
    tmp_path: Path,
) -> None:
    """`import os, nvfuser` names it second on the line; a docstring's example line that
    looks like an import is text, not an import (ast decides)."""
    files = {
        "torch/__init__.py": '"""Use it like this:\n\n    from helper import x\n"""\n',
        "torch/fuse.py": "def f():\n    import os, nvfuser\n",
        "nvfuser/__init__.py": "",
        "helper/__init__.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = companions(str(tmp_path), list(files))
    assert [(Path(c.package).name, Path(c.importer).name) for c in found] == [("nvfuser", "torch")]
    assert found[0].at == ((str(tmp_path / "torch/fuse.py"), 2),)
