"""cudatx.discover.handloads: what a package's code loads by path, read with `ast`.

On the real files of torchaudio, llvmlite and bitsandbytes (tests/data/handloads/README.md),
and on code written here for each shape of call the reader models. The real loader judges
the consequences in tests/loader/test_handloads_judge.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudatx.discover import handloads
from cudatx.discover.catalog import load_catalog
from cudatx.discover.handloads import LoadCalls, PackageLoads, read_hand_loads
from tests.support.paths import DATA

CATALOG = load_catalog()


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    site = tmp_path / "site-packages"
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    return site


def _read(site: Path) -> PackageLoads:
    py = sorted(str(p.relative_to(site)) for p in site.rglob("*.py"))

    def resolve(dotted: str) -> str | None:
        folder = site / dotted.replace(".", "/")
        return str(folder) if folder.is_dir() else None

    return read_hand_loads(str(site), py, (3, 11), resolve, LoadCalls(CATALOG.load_functions))


def _real(tmp_path: Path, release: str, inits: list[str]) -> Path:
    site = tmp_path / "site-packages"
    shutil.copytree(DATA / "handloads" / release, site)
    for init in inits:
        (site / init).touch()
    return site


def test_torchaudio_loads_its_libraries_through_its_wrapper(tmp_path: Path) -> None:
    """`_load_lib("libtorchaudio")` -> `torch.ops.load_library(_LIB_DIR / f"{lib}.so")`,
    `_LIB_DIR = Path(__file__).parent.parent / "lib"`: at import, not swallowed."""
    site = _real(
        tmp_path,
        "torchaudio-2.9.1",
        [
            "torchaudio/__init__.py",
            "torchaudio/models/__init__.py",
            "torchaudio/models/decoder/__init__.py",
        ],
    )
    found = _read(site)
    assert [
        (Path(ld.path).relative_to(site), Path(ld.by).relative_to(site)) for ld in found.loads
    ] == [
        (Path("torchaudio/lib/libtorchaudio.so"), Path("torchaudio/_extension/__init__.py")),
        (
            Path("torchaudio/lib/libctc_prefix_decoder.so"),
            Path("torchaudio/models/decoder/_cuda_ctc_decoder.py"),
        ),
    ]
    assert all(ld.at_import and not ld.swallowed and ld.after == "torch" for ld in found.loads)
    assert found.unread == ()


def test_llvmlite_loads_its_library_on_first_use(tmp_path: Path) -> None:
    """A method of `_lib_wrapper` loads it (`importlib.resources` path of
    `get_library_name()`), and raises again what it catches: not at import, not swallowed."""
    site = _real(
        tmp_path, "llvmlite-0.50.0", ["llvmlite/__init__.py", "llvmlite/binding/__init__.py"]
    )
    (ld,) = _read(site).loads
    assert Path(ld.path) == site / "llvmlite/binding/libllvmlite.so"
    assert not ld.at_import and not ld.swallowed and ld.after == ""


def test_bitsandbytes_picks_its_library_at_run_time_and_is_said_unread(tmp_path: Path) -> None:
    site = _real(tmp_path, "bitsandbytes-0.49.1", ["bitsandbytes/__init__.py"])
    for name in (
        "libbitsandbytes_cpu.so",
        "libbitsandbytes_cuda128.so",
        "libbitsandbytes_cuda130.so",
    ):
        (site / "bitsandbytes" / name).touch()
    found = _read(site)
    assert found.loads == ()
    (unread,) = found.unread
    assert unread.by.endswith("bitsandbytes/cextension.py")
    assert "ct.cdll.LoadLibrary(str(binary_path))" in unread.what
    assert "chosen at run time" in unread.what


def test_shapes_of_the_call(tmp_path: Path) -> None:
    site = _package(
        tmp_path,
        {
            "pkg/__init__.py": (
                "import ctypes, os, glob\n"
                "from ctypes import cdll as _cdll\n"
                "from pathlib import Path\n"
                "from ._util import load\n"
                "HERE = os.path.dirname(os.path.abspath(__file__))\n"
                "ctypes.CDLL(os.path.join(HERE, 'lib', 'liba.so'))\n"
                "_cdll.LoadLibrary(str(Path(__file__).resolve().parent / 'libb.so'))\n"
                "load('libc')\n"
                "for f in glob.glob(os.path.join(HERE, 'libd*.so')):\n"
                "    pass\n"
                "ctypes.CDLL(glob.glob(os.path.join(HERE, 'libe.so.*'))[0])\n"
                "try:\n"
                "    ctypes.CDLL(os.path.join(HERE, 'libf.so'))\n"
                "except OSError:\n"
                "    pass\n"
                "NAME = 'libg.so' if os.name == 'posix' else 'g.dll'\n"
                "ctypes.PyDLL(os.path.join(HERE, NAME))\n"
                "from . import _ext\n"
            ),
            "pkg/_util.py": (
                "import ctypes, os\n"
                "def load(name):\n"
                "    ctypes.CDLL(os.path.join(os.path.dirname(__file__), name + '.so'))\n"
            ),
        },
    )
    (site / "pkg" / "libe.so.1").touch()
    found = _read(site)
    loaded = {Path(ld.path).relative_to(site): ld for ld in found.loads}
    assert set(loaded) == {
        Path("pkg/lib/liba.so"),
        Path("pkg/libb.so"),
        Path("pkg/libc.so"),
        Path("pkg/libe.so.1"),
        Path("pkg/libf.so"),
        Path("pkg/libg.so"),
    }
    assert loaded[Path("pkg/libf.so")].swallowed
    assert not loaded[Path("pkg/lib/liba.so")].swallowed
    # The wrapper's load is said where it is called: pkg/__init__.py, line 8.
    assert loaded[Path("pkg/libc.so")].by.endswith("pkg/__init__.py")
    assert loaded[Path("pkg/libc.so")].line == 8
    assert all(ld.at_import for ld in found.loads)
    assert found.unread == ()


def test_a_path_from_outside_is_no_file_of_the_package(tmp_path: Path) -> None:
    """A library found by name (find_library, a bare soname) or a path from the user's
    settings is no file of the package: neither a load nor unread."""
    site = _package(
        tmp_path,
        {
            "pkg/__init__.py": (
                "import ctypes, ctypes.util, os\n"
                "ctypes.CDLL(os.environ['PKG_LIB'])\n"
                "ctypes.CDLL(ctypes.util.find_library('c'))\n"
                "ctypes.CDLL('libm.so.6')\n"
            )
        },
    )
    assert _read(site) == PackageLoads()


def test_one_of_several_files_of_its_own_is_unread(tmp_path: Path) -> None:
    site = _package(
        tmp_path,
        {
            "pkg/__init__.py": (
                "import ctypes, os, sys\n"
                "from pathlib import Path\n"
                "flavour = os.environ.get('PKG_FLAVOUR')\n"
                "ctypes.CDLL(str(Path(__file__).parent / f'libpkg_{flavour}.so'))\n"
            )
        },
    )
    for flavour in ("cpu", "cuda12"):
        (site / "pkg" / f"libpkg_{flavour}.so").touch()
    found = _read(site)
    assert found.loads == ()
    assert [(u.line, u.what.split(": ")[-1]) for u in found.unread] == [
        (4, "one of 2 files, chosen at run time")
    ]


def test_a_package_that_loads_nothing_costs_no_parse(tmp_path: Path) -> None:
    site = _package(tmp_path, {"pkg/__init__.py": "def f(:\n"})  # not even Python
    assert _read(site) == PackageLoads()


def test_a_loader_in_init_is_read_and_a_docstring_or_a_namesake_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loader in `__init__` (numba's CUDA driver) is read; a function that only shows
    `ctypes.CDLL` in its docstring (scipy's `quad`) loads nothing, nor does a module that
    calls `super().__init__()` or defines a function of a loader's name. (Where the class
    is made at import, the load is said where it is written, not made at import: the reader
    does not follow a class call into `__init__`.)"""
    site = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from . import driver, user, docs, other\n",
            "pkg/driver.py": (
                "import ctypes, os\n"
                "class Driver:\n"
                "    def __init__(self):\n"
                "        here = os.path.dirname(__file__)\n"
                "        self.lib = ctypes.CDLL(os.path.join(here, 'libdriver.so'))\n"
            ),
            "pkg/user.py": "from .driver import Driver\nDRIVER = Driver()\n",
            "pkg/docs.py": (
                "def quad(f):\n"
                "    '''Integrate f; f may be a ctypes.CDLL function.'''\n"
                "    return f\n"
            ),
            "pkg/other.py": (
                "class Base:\n"
                "    def __init__(self):\n"
                "        super().__init__()\n"
                "def quad(x):\n"
                "    return x\n"
                "Base()\n"
            ),
        },
    )
    parsed: list[str] = []
    parse = handloads._Source.parse

    def counted(path: str, name: str, text: bytes) -> handloads._Source:
        parsed.append(Path(path).name)
        return parse(path, name, text)

    monkeypatch.setattr(handloads._Source, "parse", counted)
    found = _read(site)
    assert [(Path(ld.path).relative_to(site), Path(ld.by).name) for ld in found.loads] == [
        (Path("pkg/libdriver.so"), "driver.py")
    ]
    assert found.unread == ()
    # What is read to tell: the modules that name a loader, and those that call what loads
    # (Driver); not other.py, whose `super().__init__()` is no call of Driver's __init__.
    assert sorted(set(parsed)) == ["docs.py", "driver.py", "user.py"]
