"""One replay names every failure of a load, where glibc names only the first (elf/dl-deps.c
stops at a name it cannot map; elf/dl-version.c at the first version missing).

An extension that needs a library nothing ships, a library lacking a version it was linked
against, and another lacking an unversioned symbol: three failures, of three kinds. The real
loader names one at a time; made good one by one (a copy of the missing library on
LD_LIBRARY_PATH, then the release that has the version), it names the next, and each is the
failure cudatx named, word for word, in its single pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cudatx.discover.target import start_query
from cudatx.models import Evidence, Status
from cudatx.scan import scan
from tests.loader.test_symbols_judge import _World, ext_source, functions
from tests.support import compile_extension, compile_lib, make_venv, observe_code, uv_install
from tests.support.venvs import venv_python

V12 = "V1 { global: f1; local: *; };\nV2 { global: f2; } V1;\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("onepass")
    w = _World(root / "build")
    gone = w.linkonly("libgone.so.1", functions("g1"))
    versioned = w.linkonly("libvn.so", functions("f1", "f2"), V12)
    plain = w.linkonly("libus.so", functions("h"))
    w.lib("fx-three", "three/lib/libvn.so", functions("f1"), "V1 { global: f1; local: *; };\n")
    w.lib("fx-three", "three/lib/libus.so", functions("k"))
    source = ext_source("_ext", calls=["g1", "f2", "h"])
    w.files.setdefault("fx-three", {})["three/__init__.py"] = b""
    ext = w.build / "site" / "three"
    path = compile_extension(
        ext, "_ext", source=source, needed=[gone, versioned, plain], runpath="$ORIGIN/lib"
    )
    w.files["fx-three"][f"three/{path.name}"] = path
    venv = make_venv(root / "venv")
    uv_install(venv, w.wheels(root / "wheels"))
    # What a user might put on LD_LIBRARY_PATH to make good each failure in turn.
    fixes = root / "fixes"
    compile_lib(fixes / "gone" / "libgone.so.1", soname="libgone.so.1", source=functions("g1"))
    compile_lib(fixes / "vn" / "libvn.so", soname="libvn.so", source=functions("f1", "f2"),
                version_script=V12)  # fmt: skip
    return venv, fixes


def test_every_failure_of_one_import_is_named_in_one_pass(world: tuple[Path, Path]) -> None:
    venv, fixes = world
    env = scan(start_query(str(venv)), ld_library_path=None)
    (load,) = [ld for ld in env.loads if "/three/" in ld.root]
    failed = [
        r
        for r in load.resolutions
        if r.status is not Status.RESOLVED and r.evidence in (Evidence.IMPORT, Evidence.DT_NEEDED)
    ]
    kinds = {r.name: (r.status, r.missing) for r in failed}
    assert kinds["libgone.so.1"] == (Status.NOT_FOUND, ())
    assert kinds["libvn.so"] == (Status.ERROR, ("`V2'",))
    # The symbol h: no version ties it to a file, and a name of the load is missing, so it
    # is not claimed (what libgone.so.1 would map could define it).
    assert set(kinds) == {"libgone.so.1", "libvn.so"}

    # glibc, one at a time.
    python = venv_python(venv)
    first = observe_code(python, "import three._ext\n")
    assert not first.ok and "libgone.so.1: cannot open shared object file" in (first.error or "")
    second = observe_code(python, "import three._ext\n", ld_library_path=str(fixes / "gone"))
    detail = next(r.detail for r in failed if r.name == "libvn.so")
    assert detail is not None and (second.error or "").endswith(detail)
    # With the name and the version made good, the symbol is the next failure, which a
    # pass with every name found names too.
    third = observe_code(
        python,
        "import three._ext\n",
        ld_library_path=f"{fixes / 'gone'}:{fixes / 'vn'}",
    )
    assert not third.ok and "undefined symbol: h" in (third.error or "")
    # With every name found (the missing one on LD_LIBRARY_PATH), one pass names the version
    # and the symbol; glibc names the version, then, that made good too, the symbol.
    again = scan(start_query(str(venv)), ld_library_path=str(fixes / "gone"))
    (load,) = [ld for ld in again.loads if "/three/" in ld.root]
    assert sorted(r.missing for r in load.resolutions if r.missing) == [("`V2'",), ("h",)]
