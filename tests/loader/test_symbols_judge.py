"""glibc's checks after a name is found (versions, then symbols), judged by the real loader.

One fixture per rule: C libraries built with `cc` and GNU version scripts, an extension
linked against one build of a library and installed with another (the way an extension
built for another release meets its library), packed into real wheels, installed by real
uv, imported in a subprocess. cudatx's verdict for each import (loads or not) and, when it
does not, its message must be glibc's, as Python's ImportError carries it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudatx.analysis.doctor import diagnose
from cudatx.analysis.problems import Problem
from cudatx.analysis.why import explain
from cudatx.demo.build import torch_init_py
from cudatx.discover.target import start_query
from cudatx.elf import reader
from cudatx.elf.exports import Hashed, Table
from cudatx.environment import Environment
from cudatx.loader.process import LoadResult
from cudatx.models import Evidence, Status
from cudatx.scan import scan
from tests.loader.test_evidence import CUDA_LIBS_LIST, CUDART, CUSPARSE, NVJITLINK
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    observe_code,
    site_packages,
    uv_install,
    venv_python,
)
from tests.support.cli import cudatx

EXT = ext_suffix()
GLOBAL_SYM = "cudatx_cudart_probe"


def ext_source(module: str, calls: Sequence[str] = (), weak: Sequence[str] = ()) -> str:
    """An extension module whose init calls `calls` (strong references) and `weak` (weak
    references, called only where bound)."""
    decls = "".join(f"extern int {c}(void);\n" for c in calls)
    decls += "".join(f"extern int {w}(void) __attribute__((weak));\n" for w in weak)
    terms = [f"{c}()" for c in calls] + [f"({w} ? {w}() : 0)" for w in weak]
    return f"""#include <Python.h>
{decls}
static struct PyModuleDef moduledef = {{PyModuleDef_HEAD_INIT, "{module}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{module}(void) {{
    PyObject *m = PyModule_Create(&moduledef);
    if (m != NULL) PyModule_AddIntConstant(m, "value", {" + ".join(terms) or "0"});
    return m;
}}
"""


def functions(*names: str) -> str:
    return "".join(f"int {n}(void) {{ return {len(n)}; }}\n" for n in names)


class _World:
    """Builds every scenario into one site-like build folder: a wheel per distribution."""

    def __init__(self, build: Path) -> None:
        self.build = build
        self.files: dict[str, dict[str, bytes | Path]] = {}

    def linkonly(self, name: str, source: str, script: str | None = None) -> Path:
        """The build of a library an extension is linked against, never installed."""
        out = self.build / "linkonly" / name
        return compile_lib(out, soname=name, source=source, version_script=script)

    def lib(
        self, dist: str, rel: str, source: str, script: str | None = None, **kw: object
    ) -> Path:
        out = self.build / "site" / rel
        path = compile_lib(
            out,
            soname=out.name,
            source=source,
            version_script=script,
            **kw,  # type: ignore[arg-type]
        )
        self.files.setdefault(dist, {})[rel] = path
        return path

    def ext(
        self, dist: str, package: str, source_calls: dict[str, Sequence[str]], **kw: object
    ) -> None:
        folder = self.build / "site" / package
        source = ext_source("_ext", **source_calls)
        path = compile_extension(folder, "_ext", source=source, **kw)  # type: ignore[arg-type]
        self.files.setdefault(dist, {})[f"{package}/__init__.py"] = b""
        self.files.setdefault(dist, {})[f"{package}/{path.name}"] = path

    def wheels(self, out: Path) -> list[Path]:
        return [build_wheel(out, dist, "1.0", files) for dist, files in self.files.items()]


V12 = "V1 { global: f1; local: *; };\nV2 { global: f2; } V1;\n"


def _scenarios(w: _World) -> None:
    # A missing version node: linked where libvn has V1 and V2, installed with V1 alone.
    link = w.linkonly("libvn.so", functions("f1", "f2"), V12)
    w.lib("fx-vnode", "vnode/lib/libvn.so", functions("f1"), "V1 { global: f1; local: *; };\n")
    w.ext("fx-vnode", "vnode", {"calls": ["f2"]}, needed=[link], runpath="$ORIGIN/lib")

    # A missing versioned symbol: V2 is there, g@V2 is not.
    link = w.linkonly(
        "libvs.so", functions("f1", "g"), "V1 { global: f1; };\nV2 { global: g; } V1;\n"
    )
    w.lib(
        "fx-vsym",
        "vsym/lib/libvs.so",
        functions("f1", "other"),
        "V1 { global: f1; local: *; };\nV2 { global: other; } V1;\n",
    )
    w.ext("fx-vsym", "vsym", {"calls": ["g"]}, needed=[link], runpath="$ORIGIN/lib")

    # A missing unversioned symbol.
    link = w.linkonly("libus.so", functions("h"))
    w.lib("fx-usym", "usym/lib/libus.so", functions("k"))
    w.ext("fx-usym", "usym", {"calls": ["k"], "weak": []}, needed=[link], runpath="$ORIGIN/lib")
    w.ext("fx-usym", "usym2", {"calls": ["h"]}, needed=[link], runpath="$ORIGIN/../usym/lib")

    # A weak undefined symbol the installed library lacks: the import goes on.
    link = w.linkonly("libwu.so", functions("w", "k"))
    w.lib("fx-weaku", "weaku/lib/libwu.so", functions("k"))
    w.ext(
        "fx-weaku", "weaku", {"calls": ["k"], "weak": ["w"]}, needed=[link], runpath="$ORIGIN/lib"
    )

    # A weak reference into a version node the library lacks: ld records the version need
    # as non-weak, so the version check fails.
    link = w.linkonly(
        "libwv.so", functions("f1", "x"), "V1 { global: f1; };\nV3 { global: x; } V1;\n"
    )
    w.lib("fx-weakv", "weakv/lib/libwv.so", functions("f1"), "V1 { global: f1; local: *; };\n")
    w.ext(
        "fx-weakv", "weakv", {"calls": ["f1"], "weak": ["x"]}, needed=[link], runpath="$ORIGIN/lib"
    )

    # A compat alias: linked when s was s@@V1; installed with s@V1 kept beside s@@V2. And
    # the same library without the alias: s@@V2 does not answer a reference to V1.
    link = w.linkonly("libca.so", functions("s"), "V1 { global: s; local: *; };\n")
    alias = (
        "int s_v1(void) { return 1; }\nint s_v2(void) { return 2; }\n"
        '__asm__(".symver s_v1,s@V1");\n__asm__(".symver s_v2,s@@V2");\n'
    )
    w.lib("fx-compat", "compat/lib/libca.so", alias, "V1 { local: s_v1; s_v2; };\nV2 { } V1;\n")
    w.ext("fx-compat", "compat", {"calls": ["s"]}, needed=[link], runpath="$ORIGIN/lib")
    w.lib(
        "fx-compat",
        "compat_gone/lib/libca.so",
        'int s_v2(void) { return 2; }\nint t(void) { return 3; }\n__asm__(".symver s_v2,s@@V2");\n',
        "V1 { global: t; local: *; };\nV2 { } V1;\n",
    )
    w.ext("fx-compat", "compat_gone", {"calls": ["s"]}, needed=[link], runpath="$ORIGIN/lib")

    # A provider without version information: the need for V1 passes (glibc would only
    # warn, and only when verbose, which a dlopen is not).
    link = w.linkonly("libnv.so", functions("f1"), "V1 { global: f1; local: *; };\n")
    w.lib("fx-nover", "nover/lib/libnv.so", functions("f1"))
    w.ext("fx-nover", "nover", {"calls": ["f1"]}, needed=[link], runpath="$ORIGIN/lib")

    # Two roots whose RTLD_LOCAL scopes do not see each other: locb's extension uses q,
    # which only loca's library defines, and has no DT_NEEDED for it.
    qlib = w.lib("fx-local", "loca/lib/libq.so", functions("q"))
    w.ext("fx-local", "loca", {"calls": ["q"]}, needed=[qlib], runpath="$ORIGIN/lib")
    w.ext("fx-local", "locb", {"calls": ["q"]})

    # An LD_LIBRARY_PATH copy lacking a version the environment's own copy has.
    link = w.linkonly("libllv.so", functions("f1", "f2"), V12)
    w.lib("fx-llp", "llv/lib/libllv.so", functions("f1", "f2"), V12)
    w.lib("fx-llp", "llv_old/lib/libllv.so", functions("f1"), "V1 { global: f1; local: *; };\n")
    w.ext("fx-llp", "llv", {"calls": ["f2"]}, needed=[link], runpath="$ORIGIN/lib")


def padding(count: int) -> str:
    """`count` exported data symbols (pad_0 ...), written as assembly: a C file of that many
    functions takes cc ten times longer."""
    lines = [".data"] + [
        f".globl pad_{i}\\n.type pad_{i},@object\\npad_{i}: .long {i}" for i in range(count)
    ]
    return '__asm__("' + "\\n".join(lines) + '\\n");\n'


# Objects that hash this many symbols are asked through their DT_GNU_HASH table, not read
# whole (cudatx.elf.reader.HASHED_FROM); these fixtures are that large.
BIG = reader.HASHED_FROM + 100


def _big(w: _World) -> None:
    # The lookups of a library too large to read whole (libtorch_cpu's size, cut down): a
    # symbol it has, one it lost, and a versioned one whose node is there but not it.
    link = w.linkonly("libbig.so", functions("hb_present", "hb_gone"))
    w.lib("fx-big", "big/lib/libbig.so", functions("hb_present") + padding(BIG))
    w.ext("fx-big", "bigok", {"calls": ["hb_present"]}, needed=[link], runpath="$ORIGIN/../big/lib")
    w.ext("fx-big", "bigmiss", {"calls": ["hb_gone"]}, needed=[link], runpath="$ORIGIN/../big/lib")
    script = "V1 { global: hv1; pad_*; local: *; };\nV2 { global: hv2; } V1;\n"
    link = w.linkonly("libbigv.so", functions("hv1", "hv2"), script)
    w.lib(
        "fx-big",
        "bigv/lib/libbigv.so",
        functions("hv1", "hv3") + padding(BIG),
        "V1 { global: hv1; pad_*; local: *; };\nV2 { global: hv3; } V1;\n",
    )
    w.ext("fx-big", "bigv1", {"calls": ["hv1"]}, needed=[link], runpath="$ORIGIN/../bigv/lib")
    w.ext("fx-big", "bigv2", {"calls": ["hv2"]}, needed=[link], runpath="$ORIGIN/../bigv/lib")


def _pinned(w: _World, out: Path) -> list[Path]:
    """An extension built for release 1.0 of its provider, installed beside 2.0, which lost
    a symbol it uses: its Requires-Dist pins 1.0 (as torchvision 0.28.0 pins torch 2.13.0).
    And a full copy of usym's library that another distribution installs where usym2's
    search does not look."""
    b = w.build / "pinned"
    link = w.linkonly("libcore.so", functions("core_old", "core_kept"))
    core = compile_lib(
        b / "core/lib/libcore.so", soname="libcore.so", source=functions("core_kept")
    )
    source = ext_source("_ext", calls=["core_old"])
    ext = compile_extension(
        b / "coreext", "_ext", source=source, needed=[link], runpath="$ORIGIN/../core/lib"
    )
    full = compile_lib(b / "usfull/lib/libus.so", soname="libus.so", source=functions("h", "k"))
    return [
        build_wheel(out, "fx-core", "2.0", {"core/__init__.py": b"", "core/lib/libcore.so": core}),
        build_wheel(
            out,
            "fx-coreext",
            "1.0",
            {"coreext/__init__.py": b"", f"coreext/_ext{EXT}": ext},
            requires=["fx-core==1.0"],
        ),
        build_wheel(out, "fx-usfull", "1.0", {"usfull/lib/libus.so": full}),
    ]


def _torch(w: _World, out: Path) -> list[Path]:
    """A fake torch whose libcudart (loaded with RTLD_GLOBAL by its preloads) defines a
    symbol torch._C uses without any DT_NEEDED path to it; `gluser` uses it without torch."""
    b = w.build / "torch"
    cudart = compile_lib(b / CUDART, soname="libcudart.so.12", source=functions(GLOBAL_SYM))
    nvjitlink = compile_lib(b / NVJITLINK, soname="libnvJitLink.so.12")
    cusparse = compile_lib(b / CUSPARSE, soname="libcusparse.so.12", needed=[nvjitlink])
    global_deps = compile_lib(
        b / "torch/lib/libtorch_global_deps.so",
        soname="libtorch_global_deps.so",
        needed=[cudart],
        rpath="$ORIGIN/../../nvidia/cuda_runtime/lib",
    )
    c_ext = compile_extension(
        b / "torch", "_C", source=ext_source("_C", calls=[GLOBAL_SYM]), rpath="$ORIGIN/lib"
    )
    init = torch_init_py(CUDA_LIBS_LIST, "A fake torch 2.14.1 for cudatx's tests.").encode()
    files: dict[str, bytes | Path] = {
        "torch/__init__.py": init,
        "torch/version.py": b"__version__ = '2.14.1'\ncuda = '12.8'\n",
        "torch/lib/libtorch_global_deps.so": global_deps,
        f"torch/_C{EXT}": c_ext,
    }
    user = compile_extension(b / "gluser", "_ext", source=ext_source("_ext", calls=[GLOBAL_SYM]))
    # torch operator libraries (as torchvision/_C.so): no PyInit_*, they link torch's core and
    # are loaded with torch.ops.load_library; one built against a libc10 with c10_new.
    c10 = compile_lib(b / "torch/lib/libc10.so", soname="libc10.so", source=functions("c10_old"))
    files["torch/lib/libc10.so"] = c10
    newer = w.linkonly("libc10.so", functions("c10_old", "c10_new"))
    ops = []
    for package, calls in (("opsok", "c10_old"), ("opsnew", "c10_new")):
        source = (
            f"extern int {calls}(void);\nint {package}_register(void) {{ return {calls}(); }}\n"
        )
        lib = compile_lib(
            b / package / "_C.so", source=source, needed=[newer], rpath="$ORIGIN/../torch/lib"
        )
        init = b"import torch\n"
        ops.append(
            build_wheel(
                out, package, "1.0", {f"{package}/__init__.py": init, f"{package}/_C.so": lib}
            )
        )
    return [
        *ops,
        build_wheel(out, "torch", "2.14.1", files),
        build_wheel(out, "nvidia-cuda-runtime-cu12", "12.8.90", {CUDART: cudart}),
        build_wheel(out, "nvidia-nvjitlink-cu12", "12.8.93", {NVJITLINK: nvjitlink}),
        build_wheel(out, "nvidia-cusparse-cu12", "12.5.8.93", {CUSPARSE: cusparse}),
        build_wheel(out, "gluser", "1.0", {"gluser/__init__.py": b"", f"gluser/_ext{EXT}": user}),
    ]


@dataclass(frozen=True)
class World:
    venv: Path
    site: Path
    env: Environment


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("symbols")
    w = _World(root / "build")
    _scenarios(w)
    _big(w)
    wheels = w.wheels(root / "wheels") + _torch(w, root / "wheels") + _pinned(w, root / "wheels")
    venv = make_venv(root / "venv")
    uv_install(venv, wheels)
    return World(venv, site_packages(venv), scan(start_query(str(venv)), ld_library_path=None))


def _load(env: Environment, package: str, module: str = "_ext") -> LoadResult:
    return next(ld for ld in env.loads if ld.root.endswith(f"/{package}/{module}{EXT}"))


def predicted(load: LoadResult) -> str | None:
    """cudatx's verdict on an import: None when it loads, else the message of the first
    need that fails (glibc's own for a version or a symbol)."""
    if load.ok:
        return None
    failed = next(
        r
        for r in load.resolutions
        if r.status is Status.ERROR and r.evidence in (Evidence.IMPORT, Evidence.DT_NEEDED)
    )
    return failed.detail


def observed(world: World, code: str, ld_library_path: str | None = None) -> str | None:
    seen = observe_code(venv_python(world.venv), code, ld_library_path=ld_library_path)
    if seen.ok:
        return None
    assert seen.error is not None and seen.error.startswith("ImportError: "), seen.error
    return seen.error.removeprefix("ImportError: ")


CASES = {
    # package: (what glibc says, None for a load that succeeds)
    "vnode": "version `V2' not found",
    "vsym": "undefined symbol: g, version V2",
    "usym": None,
    "usym2": "undefined symbol: h",
    "weaku": None,
    "weakv": "version `V3' not found",
    "compat": None,
    "compat_gone": "undefined symbol: s, version V1",
    "nover": None,
    "loca": None,
    "llv": None,
    "bigok": None,
    "bigmiss": "undefined symbol: hb_gone",
    "bigv1": None,
    "bigv2": "undefined symbol: hv2, version V2",
    "coreext": "undefined symbol: core_old",
}


@pytest.mark.parametrize("package", list(CASES))
def test_import_verdict_and_message_are_glibcs(world: World, package: str) -> None:
    real = observed(world, f"import {package}._ext\n")
    expected = CASES[package]
    assert (real is None) == (expected is None), real
    if expected is not None:
        assert real is not None and expected in real
    assert predicted(_load(world.env, package)) == real


def test_the_large_providers_are_asked_through_their_hash_tables(world: World) -> None:
    for rel in ("big/lib/libbig.so", "bigv/lib/libbigv.so"):
        assert isinstance(world.env.view.exports(str(world.site / rel)), Hashed)
    assert isinstance(world.env.view.exports(str(world.site / "vsym/lib/libvs.so")), Table)


def test_rtld_local_roots_do_not_see_each_other(world: World) -> None:
    # Even with loca's library mapped in the process, locb's q does not bind.
    real = observed(world, "import loca._ext\nimport locb._ext\n")
    assert real is not None and real.endswith("undefined symbol: q")
    assert predicted(_load(world.env, "locb")) == real
    assert observed(world, "import loca._ext\n") is None


def test_symbol_only_reachable_through_rtld_global_preload(world: World) -> None:
    assert observed(world, "import torch._C\n") is None
    assert predicted(_load(world.env, "torch", "_C")) is None
    # LD_DEBUG=bindings: glibc binds it in libcudart, which only the preload mapped.
    bindings = subprocess.run(
        [venv_python(world.venv), "-c", "import torch._C"],
        env={**os.environ, "LD_DEBUG": "bindings"},
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    bound = [line for line in bindings.splitlines() if f"`{GLOBAL_SYM}'" in line]
    assert bound and all("libcudart.so.12 [0]: normal symbol" in line for line in bound), bound
    assert any(f"/torch/_C{EXT} [0] to " in line for line in bound), bound
    # Without torch's preload nothing defines it.
    real = observed(world, "import gluser._ext\n")
    assert real is not None and real.endswith(f"undefined symbol: {GLOBAL_SYM}")
    assert predicted(_load(world.env, "gluser")) == real


def test_ld_library_path_copy_lacking_a_version(world: World) -> None:
    old = str(world.site / "llv_old" / "lib")
    real = observed(world, "import llv._ext\n", ld_library_path=old)
    assert real is not None and "version `V2' not found" in real
    env = scan(start_query(str(world.venv)), ld_library_path=old)
    assert predicted(_load(env, "llv")) == real


def test_missing_lists_every_symbol_and_version(world: World) -> None:
    failed = next(r for r in _load(world.env, "vnode").resolutions if r.status is Status.ERROR)
    assert failed.missing == ("`V2'",)
    assert failed.name == "libvn.so"
    failed = next(r for r in _load(world.env, "vsym").resolutions if r.status is Status.ERROR)
    assert failed.missing == ("g@V2",)


def _problems(env: Environment) -> dict[str, Problem]:
    """doctor's errors by the package whose import they name."""
    out: dict[str, Problem] = {}
    for p in diagnose(env).problems:
        for line in p.consequences:
            if line.startswith("importing "):
                out[line.split()[1].split("/")[0]] = p
    return out


def test_doctor_reports_each_failure_with_glibcs_message(world: World) -> None:
    found = _problems(world.env)
    failing = {p for p, expected in CASES.items() if expected} | {"locb", "gluser", "opsnew"}
    assert set(found) == failing
    codes = {p: found[p].code for p in failing}
    assert codes == {
        "vnode": "missing-version",
        "weakv": "missing-version",
        "vsym": "missing-symbol",
        "usym2": "missing-symbol",
        "compat_gone": "missing-symbol",
        "locb": "missing-symbol",
        "gluser": "missing-symbol",
        "opsnew": "missing-symbol",
        "bigmiss": "missing-symbol",
        "bigv2": "missing-symbol",
        "coreext": "missing-symbol",
    }
    for package in failing - {"opsnew"}:
        message = predicted(_load(world.env, package))
        assert f"importing {package}/_ext{EXT} would fail: {message}" in found[package].consequences
    assert found[
        "vnode"
    ].what == "vnode/lib/libvn.so (fx-vnode 1.0) lacks version `V2', needed by " + (
        f"vnode/_ext{EXT}"
    )


def test_doctor_fixes_an_extension_built_for_another_release(world: World) -> None:
    # Its Requires-Dist names the release that has the symbol: the fix installs it.
    problem = _problems(world.env)["coreext"]
    assert "fx-coreext 1.0 requires fx-core==1.0" in problem.why
    assert problem.fix is not None and "install fx-core==1.0" in problem.fix
    # Without such a pin, no fix is made up; a copy elsewhere that has it is named.
    usym2 = _problems(world.env)["usym2"]
    assert usym2.fix is None
    assert "usfull/lib/libus.so (fx-usfull 1.0) has it" in usym2.why


def test_doctor_names_both_files_of_an_ld_library_path_shadow(world: World) -> None:
    old = world.site / "llv_old" / "lib"
    outside = old.parent.parent.parent / "outside"  # a folder no distribution lists
    shutil.copytree(old, outside, dirs_exist_ok=True)
    env = scan(start_query(str(world.venv)), ld_library_path=str(outside))
    problem = _problems(env)["llv"]
    assert problem.code == "missing-version"
    assert f"{outside}/libllv.so, outside the environment" in problem.why
    assert "the environment's own copy llv/lib/libllv.so (fx-llp 1.0) has it" in problem.why
    assert f"take {outside} out of LD_LIBRARY_PATH" in problem.why
    # Without the shadow nothing is wrong with llv.
    assert "llv" not in _problems(world.env)


def test_why_shows_what_needers_want_and_whether_the_file_has_it(world: World) -> None:
    (route,) = explain(world.env, "libvn.so").routes
    (want,) = route.wanted
    assert want.object.endswith(f"vnode/_ext{EXT}")
    assert (want.versions, want.symbols, want.missing) == (("V2",), 1, ("`V2'", "f2@V2"))
    assert want.has_all is False and want.elsewhere == ()
    (route,) = explain(world.env, "libca.so").routes[:1]
    assert all(w.missing == () and w.has_all for w in route.wanted if "compat/" in w.object)
    text = cudatx("why", "libvn.so", "--python", world.venv)
    assert (
        f"vnode/_ext{EXT} wants versions V2 and 1 symbol of them: this file lacks `V2', f2@V2"
        in (text.stdout)
    )


def test_why_names_the_file_that_has_it_under_an_ld_library_path_shadow(world: World) -> None:
    outside = world.site.parent / "outside-why"
    shutil.copytree(world.site / "llv_old" / "lib", outside, dirs_exist_ok=True)
    env = scan(start_query(str(world.venv)), ld_library_path=str(outside))
    (route,) = explain(env, "libllv.so").routes
    (want,) = route.wanted
    assert route.path == f"{outside}/libllv.so" and want.missing == ("`V2'", "f2@V2")
    assert [os.path.relpath(p, world.site) for p in want.elsewhere] == ["llv/lib/libllv.so"]


def test_torch_operator_library_is_a_root_loaded_as_torch_loads_it(world: World) -> None:
    for package, fails in (("opsok", False), ("opsnew", True)):
        code = f"import torch, ctypes\nctypes.CDLL({str(world.site / package / '_C.so')!r})\n"
        seen = observe_code(venv_python(world.venv), code)
        real = None if seen.ok else (seen.error or "").removeprefix("OSError: ")
        assert (real is not None) == fails, real
        root = str(world.site / package / "_C.so")
        load = next(ld for ld in world.env.loads if ld.root == root)
        assert predicted(load) == real
    assert real is not None and real.endswith("_C.so: undefined symbol: c10_new")
