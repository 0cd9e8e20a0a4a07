"""cudatx's loader model against the real one.

Each scenario is a real extension module with real libraries, packed in a real wheel,
installed by real uv into a real venv. For every need cudatx resolves, the file it names
must be the file glibc maps (LD_DEBUG=libs,files of a subprocess that imports the module),
found the same way; a need cudatx calls unmet must make the real import fail on that name;
and the set of fixture files mapped by the real process must be exactly cudatx's closure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudatx.discover.target import start_query
from cudatx.environment import Environment
from cudatx.loader.process import LoadResult
from cudatx.models import How, Outcome, Resolution, Status
from cudatx.scan import scan
from tests.support import (
    Observation,
    build_wheel,
    compile_extension,
    compile_lib,
    make_venv,
    observe_import,
    site_packages,
    uv_install,
)


@dataclass
class Fixture:
    venv: Path
    site: Path
    env: Environment


class _Builder:
    """Compiles into a build folder laid out like site-packages, one wheel per scenario."""

    def __init__(self, build: Path) -> None:
        self.build = build
        self.files: dict[str, dict[str, Path]] = {}

    def lib(self, dist: str, rel: str, **options: object) -> Path:
        path = self.build / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        options.setdefault("soname", path.name)
        compile_lib(path, **options)  # type: ignore[arg-type]
        self.files.setdefault(dist, {})[rel] = path
        return path

    def ext(self, dist: str, package: str, **options: object) -> Path:
        folder = self.build / package
        folder.mkdir(parents=True, exist_ok=True)
        path = compile_extension(folder, "_ext", **options)  # type: ignore[arg-type]
        self.files.setdefault(dist, {})[f"{package}/{path.name}"] = path
        return path

    def text(self, dist: str, rel: str, content: bytes) -> None:
        path = self.build / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        self.files.setdefault(dist, {})[rel] = path


def _scenarios(b: _Builder) -> None:
    # RPATH inherited through three levels: C is found through the extension's RPATH while
    # B (which has none) loads it, B while A loads it.
    c = b.lib("fx-rpath3", "rp3/c/librp3c.so")
    bb = b.lib("fx-rpath3", "rp3/b/librp3b.so", needed=[c])
    a = b.lib("fx-rpath3", "rp3/a/librp3a.so", needed=[bb])
    b.ext(
        "fx-rpath3",
        "rp3pkg",
        needed=[a],
        rpath="$ORIGIN/../rp3/a:$ORIGIN/../rp3/b:$ORIGIN/../rp3/c",
    )

    # RUNPATH is not inherited: E finds its F nowhere, although the extension's RUNPATH
    # names F's folder.
    f = b.lib("fx-runpath", "rn/f/librnf.so")
    e = b.lib("fx-runpath", "rn/e/librne.so", needed=[f])
    b.ext("fx-runpath", "rnpkg", needed=[e], runpath="$ORIGIN/../rn/e:$ORIGIN/../rn/f")

    # A loader's own RUNPATH disables its RPATH: G's H comes from RUNPATH (good), not from
    # its RPATH (bad), though RPATH is searched first when it counts.
    good = b.lib("fx-rr", "rr/good/librrh.so")
    b.lib("fx-rr", "rr/bad/librrh.so")
    g = b.lib(
        "fx-rr", "rr/g/librrg.so", needed=[good], rpath="$ORIGIN/../bad", runpath="$ORIGIN/../good"
    )
    # The extension's RPATH names the bad folder too: G's RUNPATH must also keep the
    # inherited RPATH chain out of G's own searches.
    b.ext("fx-rr", "rrpkg", needed=[g], rpath="$ORIGIN/../rr/g:$ORIGIN/../rr/bad")
    # An object with RUNPATH has its RPATH ignored for its descendants too: I2, needed by
    # H2 (no paths), lies only in G2's RPATH folder and is found nowhere.
    b.lib("fx-rr", "rr/bad2/librri2.so")
    i2_stub = b.build / "stub" / "librri2.so"
    i2_stub.parent.mkdir(parents=True, exist_ok=True)
    compile_lib(i2_stub, soname="librri2.so")
    h2 = b.lib("fx-rr", "rr/good2/librrh2.so", needed=[i2_stub])
    g2 = b.lib(
        "fx-rr",
        "rr/g2/librrg2.so",
        needed=[h2],
        rpath="$ORIGIN/../bad2",
        runpath="$ORIGIN/../good2",
    )
    b.ext("fx-rr", "rr2pkg", needed=[g2], rpath="$ORIGIN/../rr/g2")

    # LD_LIBRARY_PATH comes before RUNPATH and after RPATH.
    j = b.lib("fx-llp", "llp/run/libllpj.so")
    b.lib("fx-llp", "llp/env/libllpj.so")
    b.ext("fx-llp", "llppkg", needed=[j], runpath="$ORIGIN/../llp/run")
    k = b.lib("fx-llp", "llp/rp/libllpk.so")
    b.lib("fx-llp", "llp/env/libllpk.so")
    b.ext("fx-llp", "llprpkg", needed=[k], rpath="$ORIGIN/../llp/rp")

    # $ORIGIN through a symlinked folder (sym/link -> real/sub, made after install): the
    # loader opens sym/link/libsyml.so, and its RUNPATH `$ORIGIN/../lx` goes up from where
    # `link` points (real/lx), not lexically (sym/lx, a decoy).
    m = b.lib("fx-sym", "sym/real/lx/libsymm.so")
    b.lib("fx-sym", "sym/lx/libsymm.so")
    sym_l = b.lib("fx-sym", "sym/real/sub/libsyml.so", needed=[m], runpath="$ORIGIN/../lx")
    b.ext("fx-sym", "sympkg", needed=[sym_l], rpath="$ORIGIN/../sym/link")
    # ... and through a symlinked file (fl/a/libfla.so -> ../b/libfla.so): `$ORIGIN/deps`
    # is fl/a/deps, the folder of the path as opened, not fl/b/deps (a decoy).
    n = b.lib("fx-sym", "fl/a/deps/libfln.so")
    b.lib("fx-sym", "fl/b/deps/libfln.so")
    fla = b.lib("fx-sym", "fl/b/libfla.so", needed=[n], runpath="$ORIGIN/deps")
    b.ext("fx-sym", "flpkg", needed=[fla], rpath="$ORIGIN/../fl/a")

    # A wrong-class library earlier in the search path is passed over.
    b.lib("fx-class", "wc/w32/libwcn.so", m32=True)
    w64 = b.lib("fx-class", "wc/w64/libwcn.so")
    b.ext("fx-class", "wcpkg", needed=[w64], rpath="$ORIGIN/../wc/w32:$ORIGIN/../wc/w64")

    # Reuse by DT_SONAME: the extension opens R by path; S needs R's soname and its own
    # RUNPATH leads nowhere, so only the already-loaded object can satisfy it.
    r = b.lib("fx-reuse", "ru/r1/libRfile.so", soname="libru.so.1")
    s = b.lib("fx-reuse", "ru/s/librus.so", needed=[r], runpath="$ORIGIN/../nowhere")
    b.ext(
        "fx-reuse",
        "rupkg",
        needed=[s],
        rpath="$ORIGIN/../ru/s",
        extra_needed_names=["$ORIGIN/../ru/r1/libRfile.so"],
    )

    # DF_1_NODEFLIB: the ld.so.cache answer for libz.so.1 lies in a system folder and is
    # refused, and the system folders are not searched; without the flag the cache serves.
    t = b.lib("fx-nodeflib", "nd/t/libndt.so", nodeflib=True, extra_needed_names=["libz.so.1"])
    b.ext("fx-nodeflib", "ndpkg", needed=[t], rpath="$ORIGIN/../nd/t")
    t2 = b.lib("fx-nodeflib", "nd/t2/libndt2.so", extra_needed_names=["libz.so.1"])
    b.ext("fx-nodeflib", "nd2pkg", needed=[t2], rpath="$ORIGIN/../nd/t2")

    # A file that is not ELF, earlier in the search path, stops the search with an error.
    b.text("fx-invalid", "iv/first/libivx.so", b"INPUT(-lfoo)\n")
    ivx = b.lib("fx-invalid", "iv/second/libivx.so")
    b.ext("fx-invalid", "ivpkg", needed=[ivx], rpath="$ORIGIN/../iv/first:$ORIGIN/../iv/second")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("judge")
    builder = _Builder(root / "build")
    _scenarios(builder)
    wheels = [
        build_wheel(root / "wheels", dist, "1.0", files) for dist, files in builder.files.items()
    ]
    venv = make_venv(root / "venv")
    uv_install(venv, wheels)
    site = site_packages(venv)
    os.symlink("real/sub", site / "sym" / "link")
    (site / "fl" / "a" / "libfla.so").symlink_to("../b/libfla.so")
    return venv, site


@pytest.fixture(scope="module")
def plain(installed: tuple[Path, Path]) -> Fixture:
    venv, site = installed
    return Fixture(venv, site, scan(start_query(str(venv)), ld_library_path=None))


@pytest.fixture(scope="module")
def with_llp(installed: tuple[Path, Path]) -> Fixture:
    venv, site = installed
    llp = str(site / "llp" / "env")
    return Fixture(venv, site, scan(start_query(str(venv)), ld_library_path=llp))


def _load(env: Environment, package: str) -> LoadResult:
    return next(ld for ld in env.loads if f"/{package}/_ext." in ld.root)


def _judge(fx: Fixture, package: str, ld_library_path: str | None = None) -> Observation:
    python = fx.venv / "bin" / "python"
    return observe_import(python, f"{package}._ext", ld_library_path=ld_library_path)


def _real(path: str | None) -> str:
    return os.path.realpath(path or "")


def assert_agrees(fx: Fixture, load: LoadResult, seen: Observation) -> None:
    """Every edge cudatx resolves for this root is the one glibc took."""
    assert load.ok == seen.ok, (load, seen.error)
    for r in load.resolutions:
        if r.name == load.root:
            continue  # the dlopen of the module itself
        if r.status is not Status.RESOLVED:
            assert not seen.ok and r.name.rsplit("/", 1)[-1] in (seen.error or ""), (r, seen.error)
            continue
        asked = seen.find_request(r.name if r.how is not How.PATH else _expanded(r), r.needed_by)
        if r.how is How.ALREADY_LOADED:
            assert asked is None, f"glibc searched for {r.name} that cudatx reuses: {asked}"
            assert r.path is not None and seen.loaded(r.path)
            continue
        assert asked is not None, f"glibc made no request for {r.name} by {r.needed_by}"
        assert asked.provider_realpath == _real(r.path or ""), (r, asked)
        assert asked.how == r.how.value, (r, asked)
        if r.how in (How.RPATH, How.RUNPATH):
            assert asked.how_source is not None and r.source is not None
            assert _real(asked.how_source) == _real(r.source), (r, asked)
    if seen.ok:
        inside = _real(str(fx.site)) + "/"
        closure = {_real(p) for p in load.loaded if _real(p).startswith(inside)}
        mapped = {p for p in seen.maps if p.startswith(inside)}
        assert mapped == closure


def _expanded(r: Resolution) -> str:
    # glibc prints a DT_NEEDED with $ORIGIN already expanded; cudatx keeps the path as opened.
    return r.path or ""


def _one(load: LoadResult, name: str) -> Resolution:
    return next(r for r in load.resolutions if r.name == name)


def _check(fx: Fixture, package: str, ld_library_path: str | None = None) -> LoadResult:
    load = _load(fx.env, package)
    assert_agrees(fx, load, _judge(fx, package, ld_library_path))
    return load


def test_rpath_inherited_through_three_levels(plain: Fixture) -> None:
    load = _check(plain, "rp3pkg")
    for name in ("librp3a.so", "librp3b.so", "librp3c.so"):
        r = _one(load, name)
        assert r.how is How.RPATH and r.source == load.root


def test_runpath_is_not_inherited(plain: Fixture) -> None:
    load = _check(plain, "rnpkg")
    assert not load.ok
    assert _one(load, "librnf.so").status is Status.NOT_FOUND


def test_runpath_of_loader_disables_its_rpath(plain: Fixture) -> None:
    load = _check(plain, "rrpkg")
    h = _one(load, "librrh.so")
    assert h.how is How.RUNPATH and "/rr/good/" in _real(h.path)


def test_runpath_disables_rpath_for_descendants(plain: Fixture) -> None:
    load = _check(plain, "rr2pkg")
    assert _one(load, "librri2.so").status is Status.NOT_FOUND


def test_rpath_before_ld_library_path_before_runpath(with_llp: Fixture) -> None:
    llp = str(with_llp.site / "llp" / "env")
    j = _one(_check(with_llp, "llppkg", llp), "libllpj.so")
    assert j.how is How.LD_LIBRARY_PATH
    k = _one(_check(with_llp, "llprpkg", llp), "libllpk.so")
    assert k.how is How.RPATH


def test_without_ld_library_path_runpath_serves(plain: Fixture) -> None:
    j = _one(_check(plain, "llppkg"), "libllpj.so")
    assert j.how is How.RUNPATH


def test_origin_through_symlinked_folder_and_file(plain: Fixture) -> None:
    m = _one(_check(plain, "sympkg"), "libsymm.so")
    assert _real(m.path) == _real(str(plain.site / "sym/real/lx/libsymm.so"))
    n = _one(_check(plain, "flpkg"), "libfln.so")
    assert _real(n.path) == _real(str(plain.site / "fl/a/deps/libfln.so"))


def test_wrong_class_earlier_in_path_is_passed_over(plain: Fixture) -> None:
    n = _one(_check(plain, "wcpkg"), "libwcn.so")
    outcomes = [a.outcome for a in n.attempts]
    assert Outcome.WRONG_CLASS in outcomes and outcomes[-1] is Outcome.FOUND


def test_reuse_of_loaded_soname_the_search_would_not_find(plain: Fixture) -> None:
    r = _one(_check(plain, "rupkg"), "libru.so.1")
    assert r.how is How.ALREADY_LOADED


def test_nodeflib_refuses_system_folders(plain: Fixture) -> None:
    load = _check(plain, "ndpkg")
    z = _one(load, "libz.so.1")
    assert z.status is Status.NOT_FOUND
    assert Outcome.SKIPPED_NODEFLIB in [a.outcome for a in z.attempts]
    z2 = _one(_check(plain, "nd2pkg"), "libz.so.1")
    assert z2.how is How.LD_SO_CACHE


def test_non_elf_file_in_search_path_stops_the_search(plain: Fixture) -> None:
    load = _check(plain, "ivpkg")
    assert _one(load, "libivx.so").status is Status.ERROR


def test_every_root_agrees_with_the_loader(plain: Fixture) -> None:
    """No scenario left out: each extension in the venv is judged."""
    packages = sorted({Path(ld.root).parent.name for ld in plain.env.loads})
    assert len(packages) >= 11
    for package in packages:
        if package == "llppkg" or package == "llprpkg":
            continue  # judged with and without LD_LIBRARY_PATH above
        _check(plain, package)
