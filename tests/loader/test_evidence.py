"""Every kind of evidence cudatx records for an edge, on real fixtures judged by the real loader.

Each scenario is real compiled libraries in real wheels, installed by real uv into a real
venv, read with `cudatx.scan.scan` and then, where a real process can show it, checked against
glibc under LD_DEBUG:

- preload: a fake torch 2.14.1 whose `torch/__init__.py` has torch 2.14's preload code and
  really runs it (ctypes.CDLL by glob over sys.path), so that `libcusparse.so.12`'s need for
  `libnvJitLink.so.12`, which no search path reaches, is met by the preloaded object;
- dlopen (manifest): a fake cuDNN whose libcudnn.so.9 really dlopens, when it is loaded, the
  sub-libraries `cudatx/data/runtime.json` lists for it;
- dlopen (string): a library whose .rodata names three sonames it dlopens;
- the driver: `libcuda.so.1` is the host's, never an environment's;
- DT_NEEDED and import: the plain case.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudatx.analysis.commands import reinstall_command
from cudatx.analysis.doctor import DoctorReport, diagnose
from cudatx.analysis.why import explain
from cudatx.demo.build import torch_init_py
from cudatx.discover.catalog import load_catalog
from cudatx.discover.target import start_query
from cudatx.environment import Environment
from cudatx.loader.process import LoadResult
from cudatx.models import Evidence, How, Resolution, Status
from cudatx.scan import scan
from tests.support import (
    Observation,
    Request,
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    observe_dlopen,
    observe_import,
    site_packages,
    symbol_for,
    uv_install,
    venv_python,
)
from tests.support.cli import cudatx

EXT = ext_suffix()
CUDART = "nvidia/cuda_runtime/lib/libcudart.so.12"
NVJITLINK = "nvidia/nvjitlink/lib/libnvJitLink.so.12"
CUSPARSE = "nvidia/cusparse/lib/libcusparse.so.12"
CUDNN_DIR = "nvidia/cudnn/lib"
CUDNN_CU12 = "nvidia-cudnn-cu12"
REMOVED_SUBLIB = "libcudnn_ops.so.9"
GONE = "gone/lib/libgone.so.2"
STRINGS = "strs/lib/libstrings.so.1"
STRINGS_RP = "strs_rp/lib/libstrings_rp.so.1"


CUDA_LIBS_LIST = """\
    cuda_libs: list[tuple[str, str]] = [
        ("cuda_runtime", "libcudart.so.*[0-9]"),
        ("nvjitlink", "libnvJitLink.so.*[0-9]"),
        ("cusparse", "libcusparse.so.*[0-9]"),
    ]"""

# The same three after one nothing here provides: torch 2.10-2.13 end the normal path's list
# at a missing entry, torch 2.14 passes over it.
CUDA_LIBS_FIRST_MISSING = CUDA_LIBS_LIST.replace(
    "    cuda_libs: list[tuple[str, str]] = [\n",
    '    cuda_libs: list[tuple[str, str]] = [\n        ("cublas", "libcublasLt.so.*[0-9]"),\n',
)


def torch_2_13_init(cuda_libs: str, header: str) -> str:
    """torch_init_py in torch 2.10-2.13's shape: the normal path calls the list required,
    so the first missing entry raises, is swallowed, and ends it."""
    text = torch_init_py(cuda_libs, header)
    for old, new in (
        (
            "def _preload_cuda_deps(err: OSError | None = None, required: bool = True)",
            "def _preload_cuda_deps(err: OSError | None = None)",
        ),
        (
            "_preload_cuda_lib(lib_folder, lib_name, required=required)",
            "_preload_cuda_lib(lib_folder, lib_name)",
        ),
        ("_preload_cuda_deps(required=False)", "_preload_cuda_deps()"),
    ):
        assert old in text
        text = text.replace(old, new)
    return text


# The same three, built another way: a shape cudatx's reader does not know.
CUDA_LIBS_DICT = """\
    cuda_libs = list(
        {
            "cuda_runtime": "libcudart.so.*[0-9]",
            "nvjitlink": "libnvJitLink.so.*[0-9]",
            "cusparse": "libcusparse.so.*[0-9]",
        }.items()
    )"""

TORCH_VERSION = b"""\
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.14.1+cu128'
debug = False
cuda: Optional[str] = '12.8'
git_version = 'cudatx-test-fixture'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""


def _dlopening_source(file_name: str, names: Sequence[str]) -> str:
    """A library that dlopens each name when it is loaded (a failure is ignored, as cuDNN's
    lazy loads and optional plug-ins are); the names lie in its .rodata."""
    listed = ", ".join(f'"{name}"' for name in names)
    return (
        "#include <dlfcn.h>\n"
        f"static const char *const cudatx_loads[] = {{{listed}}};\n"
        "__attribute__((constructor)) static void cudatx_load_all(void) {\n"
        "    for (unsigned i = 0; i < sizeof cudatx_loads / sizeof cudatx_loads[0]; i++)\n"
        "        (void)dlopen(cudatx_loads[i], RTLD_NOW | RTLD_LOCAL);\n"
        "}\n"
        f"int {symbol_for(file_name)}(void) {{ return {len(names)}; }}\n"
    )


@dataclass(frozen=True)
class Venv:
    venv: Path
    site: Path
    env: Environment
    report: DoctorReport

    @property
    def python(self) -> Path:
        return venv_python(self.venv)

    def path(self, relative: str) -> str:
        return os.path.join(os.path.realpath(self.site), relative)

    def load(self, module_file: str) -> LoadResult:
        wanted = self.path(module_file)
        return next(ld for ld in self.env.loads if _real(ld.root) == wanted)


def _real(path: str | os.PathLike[str] | None) -> str:
    return os.path.realpath(path or "")


def _install(root: Path, wheels: Sequence[Path], remove: Sequence[str] = ()) -> Venv:
    venv = make_venv(root / "venv")
    uv_install(venv, wheels)
    site = site_packages(venv)
    for relative in remove:  # gone from disk, still listed by its RECORD
        os.remove(site / relative)
    env = scan(start_query(str(venv)), ld_library_path=None)
    return Venv(venv, site, env, diagnose(env))


# -- judging by the real loader -------------------------------------------------------------


def _request(seen: Observation, r: Resolution) -> Request | None:
    """glibc's request for the same edge: a dlopen of the path for an import or a preload
    (ctypes and Python's import call dlopen from their own code, not from __init__.py), the
    name asked by the same object otherwise."""
    for q in seen.requests:
        if r.evidence in (Evidence.IMPORT, Evidence.PRELOAD) or r.how is How.PATH:
            if q.kind == "dlopen" and _real(q.name) == _real(r.path or r.name):
                return q
        elif (
            q.name == r.name
            and q.needed_by is not None
            and _real(q.needed_by) == _real(r.needed_by)
        ):
            return q
    return None


def assert_agrees(fx: Venv, load: LoadResult, seen: Observation) -> None:
    """Every edge cudatx resolves for this root is the one glibc took; every edge it leaves
    unmet glibc could not meet either; both map the same files of the environment."""
    assert load.ok == seen.ok, (load.root, seen.error)
    for r in load.resolutions:
        if r.status is Status.SYSTEM:
            continue
        asked = _request(seen, r)
        if r.status is Status.RESOLVED and r.how is How.ALREADY_LOADED:
            assert asked is None, f"glibc searched for {r.name} that cudatx reuses: {asked}"
            assert seen.loaded(r.path or ""), r
        elif r.status is Status.RESOLVED:
            assert asked is not None and asked.found, (r, asked)
            assert asked.provider_realpath == _real(r.path), (r, asked)
            # glibc labels a folder with the first object that named it (judge.py): a
            # library's $ORIGIN is the very folder its loader's RPATH named, so the label of a
            # dlopen from it is not its own. DT_NEEDED searches here use folders of their own.
            if r.evidence is Evidence.DT_NEEDED and r.how is not None:
                assert asked.how == r.how.value, (r, asked)
        elif r.evidence in (Evidence.DLOPEN, Evidence.DLOPEN_STRING):
            assert asked is not None and not asked.found, (r, asked)
        elif r.evidence is Evidence.PRELOAD:
            # ctypes raised OSError (torch swallows it on its ordinary path): glibc unloaded
            # what that dlopen had mapped.
            assert r.path is None or not seen.loaded(r.path), (r, seen.maps)
        else:
            assert not seen.ok and os.path.basename(r.name) in (seen.error or ""), (r, seen)
    inside = _real(fx.site) + "/"
    closure = {_real(p) for p in load.loaded if _real(p).startswith(inside)}
    mapped = {p for p in seen.maps if p.startswith(inside)}
    if load.ok:
        assert mapped == closure
    else:  # glibc unmapped what the failed import's dlopen had mapped; cudatx keeps it
        assert mapped <= closure, mapped - closure


def _one(load: LoadResult, name: str, evidence: Evidence | None = None) -> Resolution:
    return next(
        r
        for r in load.resolutions
        if r.name == name and (evidence is None or r.evidence is evidence)
    )


# -- 1. preload ---------------------------------------------------------------------------------


# The same three and then cuFile, as torch 2.14's list ends (before nvtx).
CUDA_LIBS_WITH_CUFILE = CUDA_LIBS_LIST.replace(
    "    ]", '        ("cufile", "libcufile.so.*[0-9]"),\n    ]'
)
CUFILE = "nvidia/cufile/lib/libcufile.so.0"


@dataclass(frozen=True)
class TorchWheels:
    nvidia: tuple[Path, ...]
    torch_list: Path
    torch_dict: Path
    torch_cufile: Path
    broken_cufile: Path  # its libcufile.so.0 needs a library nothing provides
    torch_2_13_missing: Path  # the list starts with one nothing provides, torch 2.13's code
    torch_2_14_missing: Path  # the same list, torch 2.14's code
    users: tuple[Path, ...]  # packages whose extension needs cuSPARSE: one imports torch first


@pytest.fixture(scope="module")
def torch_wheels(tmp_path_factory: pytest.TempPathFactory) -> TorchWheels:
    root = tmp_path_factory.mktemp("preload")
    b, out = root / "build", root / "wheels"
    cudart = compile_lib(b / CUDART, soname="libcudart.so.12")
    nvjitlink = compile_lib(b / NVJITLINK, soname="libnvJitLink.so.12")
    # No RPATH, no RUNPATH: only the preload (or LD_LIBRARY_PATH) lets it find nvJitLink.
    cusparse = compile_lib(b / CUSPARSE, soname="libcusparse.so.12", needed=[nvjitlink])
    global_deps = compile_lib(
        b / "torch/lib/libtorch_global_deps.so",
        soname="libtorch_global_deps.so",
        needed=[cudart],
        rpath="$ORIGIN/../../nvidia/cuda_runtime/lib",
    )
    torch_cuda = compile_lib(
        b / "torch/lib/libtorch_cuda.so",
        soname="libtorch_cuda.so",
        needed=[cusparse],
        rpath="$ORIGIN/../../nvidia/cusparse/lib",
    )
    c_ext = compile_extension(b / "torch", "_C", needed=[torch_cuda], rpath="$ORIGIN/lib")
    torch_files: dict[str, bytes | Path] = {
        "torch/version.py": TORCH_VERSION,
        "torch/lib/libtorch_global_deps.so": global_deps,
        "torch/lib/libtorch_cuda.so": torch_cuda,
        f"torch/_C{EXT}": c_ext,
    }
    requires = [
        "nvidia-cuda-runtime-cu12==12.8.90",
        "nvidia-nvjitlink-cu12==12.8.93",
        "nvidia-cusparse-cu12==12.5.8.93",
    ]

    def torch(
        folder: str, cuda_libs: str, shape: Callable[[str, str], str] = torch_init_py
    ) -> Path:
        init = shape(cuda_libs, "A fake torch 2.14.1 for cudatx's tests.").encode()
        files = {**torch_files, "torch/__init__.py": init}
        return build_wheel(out / folder, "torch", "2.14.1", files, requires=requires)

    cufile = compile_lib(
        b / CUFILE, soname="libcufile.so.0", extra_needed_names=["libcudatx_absent.so.1"]
    )
    return TorchWheels(
        torch_cufile=torch("cufile", CUDA_LIBS_WITH_CUFILE),
        broken_cufile=build_wheel(out, "nvidia-cufile-cu12", "1.13.1.3", {CUFILE: cufile}),
        nvidia=(
            build_wheel(out, "nvidia-cuda-runtime-cu12", "12.8.90", {CUDART: cudart}),
            build_wheel(out, "nvidia-nvjitlink-cu12", "12.8.93", {NVJITLINK: nvjitlink}),
            build_wheel(out, "nvidia-cusparse-cu12", "12.5.8.93", {CUSPARSE: cusparse}),
        ),
        torch_list=torch("list", CUDA_LIBS_LIST),
        torch_dict=torch("dict", CUDA_LIBS_DICT),
        users=tuple(_cusparse_user(b, out, name, cusparse) for name in ("torchuser", "plainuser")),
        torch_2_13_missing=torch("missing-2.13", CUDA_LIBS_FIRST_MISSING, torch_2_13_init),
        torch_2_14_missing=torch("missing-2.14", CUDA_LIBS_FIRST_MISSING),
    )


def _cusparse_user(build: Path, out: Path, name: str, cusparse: Path) -> Path:
    """A package whose extension needs cuSPARSE (by RPATH), whose libnvJitLink.so.12 only
    torch's preload provides. `torchuser` imports torch in its __init__.py, `plainuser` not."""
    ext = compile_extension(
        build / name, "_ext", needed=[cusparse], rpath="$ORIGIN/../nvidia/cusparse/lib"
    )
    # The fake torch's __init__.py does not import torch._C (real torch's does): here the
    # package imports both, as `import torch` does.
    init = b"import torch\nimport torch._C  # noqa: F401\n" if name == "torchuser" else b""
    files: dict[str, bytes | Path] = {f"{name}/__init__.py": init, f"{name}/_ext{EXT}": ext}
    return build_wheel(out, name, "1.0", files, requires=["torch"])


@pytest.fixture(scope="module")
def preloaded(torch_wheels: TorchWheels, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("preloaded")
    return _install(root, [*torch_wheels.nvidia, torch_wheels.torch_list])


@pytest.fixture(scope="module")
def fallback(torch_wheels: TorchWheels, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("fallback")
    return _install(root, [*torch_wheels.nvidia, torch_wheels.torch_dict])


@pytest.fixture(scope="module")
def failing_preload(torch_wheels: TorchWheels, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("failing_preload")
    wheels = [*torch_wheels.nvidia, torch_wheels.broken_cufile, torch_wheels.torch_cufile]
    return _install(root, wheels)


def _torch_c(fx: Venv) -> LoadResult:
    return fx.load(f"torch/_C{EXT}")


def test_preload_list_is_read_from_the_installed_source(preloaded: Venv) -> None:
    (context,) = preloaded.env.contexts
    assert context.origin == f"read from {context.init_py}"
    assert _real(context.init_py) == preloaded.path("torch/__init__.py")
    found = {e.pattern: _real(path) if path else None for e, path in context.normal}
    assert [e.pattern for e, _ in context.failed] == list(found)  # the same list, required
    assert found == {
        "libcudart.so.*[0-9]": preloaded.path(CUDART),
        "libnvJitLink.so.*[0-9]": preloaded.path(NVJITLINK),
        "libcusparse.so.*[0-9]": preloaded.path(CUSPARSE),
        "libnvToolsExt.so.*[0-9]": None,  # the optional nvtx call, with nothing to find
    }


def _assert_nvjitlink_met_by_the_preload(fx: Venv) -> None:
    load = _torch_c(fx)
    assert load.ok
    root = _one(load, load.root)
    assert root.evidence is Evidence.IMPORT and root.status is Status.RESOLVED
    need = _one(load, "libnvJitLink.so.12")
    assert _real(need.needed_by) == fx.path(CUSPARSE)
    assert need.evidence is Evidence.DT_NEEDED
    assert need.status is Status.RESOLVED and need.how is How.ALREADY_LOADED
    assert need.detail == "no search would find it without the preload"
    # what the search alone tried: no folder of the chain holds nvJitLink
    assert need.attempts and all(a.outcome.value == "absent" for a in need.attempts)
    mapped = [
        r
        for r in load.resolutions
        if r.path == need.reused and r.how not in (None, How.ALREADY_LOADED)
    ]
    assert len(mapped) == 1
    first = mapped[0]
    assert first.evidence is Evidence.PRELOAD and first.how is How.PATH
    assert _real(first.needed_by) == fx.path("torch/__init__.py")
    assert _real(first.path) == fx.path(NVJITLINK)
    # libtorch_cuda.so's own RPATH reaches libcusparse: the preload only came first.
    cusparse = _one(load, "libcusparse.so.12")
    assert cusparse.how is How.ALREADY_LOADED
    assert cusparse.detail == "the search alone finds the same file"


def test_preload_meets_a_need_no_search_path_reaches(preloaded: Venv) -> None:
    _assert_nvjitlink_met_by_the_preload(preloaded)


def test_preload_agrees_with_the_real_loader(preloaded: Venv) -> None:
    load = _torch_c(preloaded)
    seen = observe_import(preloaded.python, "torch._C")
    assert seen.ok, seen.error
    assert_agrees(preloaded, load, seen)
    # torch/__init__.py mapped nvJitLink by dlopen of its path; libcusparse's need for it
    # then made glibc search nothing.
    by_path = [
        q
        for q in seen.requests
        if q.kind == "dlopen" and _real(q.name) == preloaded.path(NVJITLINK)
    ]
    assert len(by_path) == 1 and by_path[0].found and not by_path[0].reused
    assert seen.requests_for("libnvJitLink.so.12") == ()
    assert seen.loaded(preloaded.path(NVJITLINK))
    # ... and without the preload glibc finds no nvJitLink for libcusparse.so.12
    alone = observe_dlopen(preloaded.python, [preloaded.path(CUSPARSE)])
    assert not alone.ok and "libnvJitLink.so.12" in (alone.error or ""), alone.error
    (searched,) = alone.requests_for("libnvJitLink.so.12")
    assert not searched.found


def test_preload_why_names_the_preloading_file(preloaded: Venv, tmp_path: Path) -> None:
    done = cudatx("why", "libnvJitLink.so.12", "--python", preloaded.venv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "preloaded by torch/__init__.py" in done.stdout
    assert "no search would find it without the preload" in done.stdout
    assert "needed by  nvidia/cusparse/lib/libcusparse.so.12" in done.stdout


def test_preload_env_doctor_finds_nothing_wrong(preloaded: Venv) -> None:
    report = preloaded.report
    assert report.errors == 0, report.problems
    assert report.problems == ()
    assert report.torch_cuda == "12.8"
    assert any(n.startswith("torch preload list: read from ") for n in report.notes)


def test_unknown_preload_shape_falls_back_to_the_shipped_table(fallback: Venv) -> None:
    (context,) = fallback.env.contexts
    assert context.origin.startswith("shipped table for torch 2.14 (")
    assert "cuda_libs is looped over as it is not built" in context.origin
    shipped = load_catalog().load_list("torch")
    assert shipped is not None
    table = shipped.releases["2.14"]
    assert [e for e, _ in context.normal] == list(table.normal)
    assert [e for e, _ in context.failed] == list(table.entries)
    found = {e.pattern: _real(path) for e, path in context.normal if path}
    assert found == {
        "libcudart.so.*[0-9]": fallback.path(CUDART),
        "libnvJitLink.so.*[0-9]": fallback.path(NVJITLINK),
        "libcusparse.so.*[0-9]": fallback.path(CUSPARSE),
    }
    notes = [n for n in fallback.report.notes if n.startswith("torch preload list: ")]
    assert len(notes) == 1 and "shipped table for torch 2.14" in notes[0]
    assert fallback.report.errors == 0, fallback.report.problems


def test_fallback_table_gives_what_the_real_import_does(fallback: Venv) -> None:
    _assert_nvjitlink_met_by_the_preload(fallback)
    seen = observe_import(fallback.python, "torch._C")
    assert seen.ok, seen.error
    assert_agrees(fallback, _torch_c(fallback), seen)


@pytest.mark.parametrize("release", ["2.13", "2.14"])
def test_a_missing_preload_ends_the_list_before_2_14_and_is_passed_over_since(
    torch_wheels: TorchWheels, tmp_path: Path, release: str
) -> None:
    """The list's first entry (cuBLASLt) is nowhere. torch 2.13 raises for it, swallows the
    error and preloads nothing more, so libcusparse's libnvJitLink.so.12, which no search
    finds, is missing and torch._C does not import; torch 2.14 goes on to nvJitLink. The
    real loader judges both."""
    torch = (
        torch_wheels.torch_2_13_missing if release == "2.13" else torch_wheels.torch_2_14_missing
    )
    fx = _install(tmp_path, [*torch_wheels.nvidia, torch])
    (context,) = fx.env.contexts
    assert context.origin == f"read from {context.init_py}"
    assert [e.required for e, _ in context.normal][:4] == [release == "2.13"] * 4
    load = _torch_c(fx)
    seen = observe_import(fx.python, "torch._C")
    assert seen.ok == (release == "2.14"), seen.error
    assert load.ok == seen.ok
    assert_agrees(fx, load, seen)


@pytest.fixture(scope="module")
def torch_users(torch_wheels: TorchWheels, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("torch_users")
    return _install(root, [*torch_wheels.nvidia, torch_wheels.torch_list, *torch_wheels.users])


@pytest.mark.parametrize(("package", "loads"), [("torchuser", True), ("plainuser", False)])
def test_an_extension_loads_after_torch_where_its_package_imports_torch(
    torch_users: Venv, package: str, loads: bool
) -> None:
    """`import torchuser._ext` runs torchuser/__init__.py first, which imports torch, whose
    preloads put libnvJitLink.so.12 in the process: the extension's cuSPARSE then finds it.
    plainuser's extension loads in a process where torch never ran, and fails."""
    load = torch_users.load(f"{package}/_ext{EXT}")
    seen = observe_import(torch_users.python, f"{package}._ext")
    assert seen.ok == loads, seen.error
    assert_agrees(torch_users, load, seen)
    preloads = {r.needed_by for r in load.resolutions if r.evidence is Evidence.PRELOAD}
    assert bool(preloads) == loads  # torch/__init__.py's preloads are part of this import


def test_an_installed_library_no_search_reaches_is_said_so(torch_users: Venv) -> None:
    """plainuser's extension fails for libnvJitLink.so.12, which nvidia-nvjitlink-cu12
    installs: doctor says where it is and that no search reaches it, never that nothing
    here lists it (that sends a user to install what is there)."""
    (problem,) = [p for p in torch_users.report.problems if p.code == "missing-library"]
    assert problem.what == "libnvJitLink.so.12 is not found where it is looked for"
    assert problem.why == (
        "nvidia-nvjitlink-cu12 installs it at nvidia/nvjitlink/lib/libnvJitLink.so.12, but "
        "no search that asks for it reaches that folder"
    )
    assert problem.consequences == (
        f"importing plainuser/_ext{EXT} would fail: libnvJitLink.so.12 not found",
    )


def test_failing_preload_is_swallowed_by_torch(failing_preload: Venv) -> None:
    """The real loader: ctypes.CDLL of libcufile.so.0 raises, _load_global_deps swallows it
    (`except Exception: pass`), and torch._C, which does not need cuFile, imports."""
    seen = observe_import(failing_preload.python, "torch._C")
    assert seen.ok, seen.error
    assert not seen.loaded(failing_preload.path(CUFILE))  # glibc unmapped the failed dlopen
    (request,) = seen.requests_for("libcudatx_absent.so.1")
    assert not request.found


def test_failing_preload_does_not_make_the_root_unloadable(failing_preload: Venv) -> None:
    load = _torch_c(failing_preload)
    seen = observe_import(failing_preload.python, "torch._C")
    assert load.ok == seen.ok, [r for r in load.resolutions if r.status is Status.NOT_FOUND]
    # One error, its cause the library nothing provides; the failing preload is what it
    # breaks (README: a library torch preloads cannot load), and the import is not.
    (problem,) = failing_preload.report.problems
    assert (problem.code, problem.severity.value) == ("missing-library", "error")
    assert problem.what == "libcudatx_absent.so.1 is provided by nothing here"
    (consequence,) = problem.consequences
    assert consequence.startswith("torch/__init__.py preloads ") and "libcufile.so.0" in consequence
    assert_agrees(failing_preload, load, seen)


# -- 2-5. dlopen (manifest, string), driver, DT_NEEDED: one venv, and one broken copy ----------


@pytest.fixture(scope="module")
def plain_wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("evidence")
    b, out = root / "build", root / "wheels"
    wheels = []

    # 5. DT_NEEDED and import
    plain = compile_lib(b / "plainpkg/lib/libplain.so.1", soname="libplain.so.1")
    plain_ext = compile_extension(b / "plainpkg", "_ext", needed=[plain], rpath="$ORIGIN/lib")
    wheels.append(
        build_wheel(
            out,
            "plain-fixture",
            "1.0",
            {"plainpkg/lib/libplain.so.1": plain, f"plainpkg/_ext{EXT}": plain_ext},
        )
    )

    # 2. cuDNN and the sub-libraries runtime.json says it dlopens; one optional one is
    # shipped, the other not (only loads whose file exists are checked).
    loads, optional = load_catalog().known_loads("libcudnn.so.9", 12)
    assert "libcudnn_ext.so.9" in optional and "libcudnn_engines_tensor_ir.so.9" in optional
    cudnn_files: dict[str, bytes | Path] = {}
    for name in [*loads, "libcudnn_engines_tensor_ir.so.9"]:
        cudnn_files[f"{CUDNN_DIR}/{name}"] = compile_lib(
            b / CUDNN_DIR / name, soname=name, runpath="$ORIGIN"
        )
    cudnn = compile_lib(
        b / CUDNN_DIR / "libcudnn.so.9",
        soname="libcudnn.so.9",
        runpath="$ORIGIN",
        source=_dlopening_source("libcudnn.so.9", [*loads, *optional]),
    )
    cudnn_files[f"{CUDNN_DIR}/libcudnn.so.9"] = cudnn
    wheels.append(build_wheel(out, CUDNN_CU12, "9.10.2.21", cudnn_files))
    # What the sub-libraries load in turn (libcublasLt.so.12, libnvrtc.so.12): mapped by the
    # extension first, as torch does.
    cublaslt = compile_lib(b / "nvidia/cublas/lib/libcublasLt.so.12", soname="libcublasLt.so.12")
    nvrtc = compile_lib(b / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12", soname="libnvrtc.so.12")
    wheels.append(
        build_wheel(
            out, "nvidia-cublas-cu12", "12.8.4.1", {"nvidia/cublas/lib/libcublasLt.so.12": cublaslt}
        )
    )
    wheels.append(
        build_wheel(
            out,
            "nvidia-cuda-nvrtc-cu12",
            "12.8.93",
            {"nvidia/cuda_nvrtc/lib/libnvrtc.so.12": nvrtc},
        )
    )
    cudnn_ext = compile_extension(
        b / "cudnnuse",
        "_ext",
        needed=[cudnn, cublaslt, nvrtc],
        rpath="$ORIGIN/../nvidia/cudnn/lib:$ORIGIN/../nvidia/cublas/lib"
        ":$ORIGIN/../nvidia/cuda_nvrtc/lib",
    )
    wheels.append(build_wheel(out, "cudnn-user", "1.0", {f"cudnnuse/_ext{EXT}": cudnn_ext}))

    # 3. names in .rodata: one beside it, one nobody provides, one another wheel provides.
    plugin = compile_lib(b / "strs/lib/libplugin_a.so.1", soname="libplugin_a.so.1")
    strings = compile_lib(
        b / STRINGS,
        soname="libstrings.so.1",
        runpath="$ORIGIN:$ORIGIN/../../gone/lib",
        source=_dlopening_source(
            "libstrings.so.1", ["libplugin_a.so.1", "libnobody.so.7", "libgone.so.2"]
        ),
    )
    strings_ext = compile_extension(
        b / "strpkg", "_ext", needed=[strings], rpath="$ORIGIN/../strs/lib"
    )
    # A second module that loads the same library through a path spelled from its own folder.
    strings_ext2 = compile_extension(
        b / "strpkg2", "_ext", needed=[strings], rpath="$ORIGIN/../strs/lib"
    )
    wheels.append(
        build_wheel(
            out,
            "strings-fixture",
            "1.0",
            {
                STRINGS: strings,
                "strs/lib/libplugin_a.so.1": plugin,
                f"strpkg/_ext{EXT}": strings_ext,
                f"strpkg2/_ext{EXT}": strings_ext2,
            },
        )
    )
    # ... and one without RUNPATH: its dlopen searches the RPATH of the module that loaded it.
    plugin_b = compile_lib(b / "strs_rp/plugins/libplugin_b.so.1", soname="libplugin_b.so.1")
    strings_rp = compile_lib(
        b / STRINGS_RP,
        soname="libstrings_rp.so.1",
        source=_dlopening_source("libstrings_rp.so.1", ["libplugin_b.so.1"]),
    )
    strings_rp_ext = compile_extension(
        b / "strrppkg",
        "_ext",
        needed=[strings_rp],
        rpath="$ORIGIN/../strs_rp/lib:$ORIGIN/../strs_rp/plugins",
    )
    wheels.append(
        build_wheel(
            out,
            "strings-rpath-fixture",
            "1.0",
            {
                STRINGS_RP: strings_rp,
                "strs_rp/plugins/libplugin_b.so.1": plugin_b,
                f"strrppkg/_ext{EXT}": strings_rp_ext,
            },
        )
    )
    gone = compile_lib(b / GONE, soname="libgone.so.2")
    wheels.append(build_wheel(out, "gone-provider", "1.0", {GONE: gone}))

    # 4. the driver
    drv = compile_lib(
        b / "drvpkg/lib/libdrvuser.so", soname="libdrvuser.so", extra_needed_names=["libcuda.so.1"]
    )
    drv_ext = compile_extension(b / "drvpkg", "_ext", needed=[drv], rpath="$ORIGIN/lib")
    wheels.append(
        build_wheel(
            out,
            "driver-user",
            "1.0",
            {"drvpkg/lib/libdrvuser.so": drv, f"drvpkg/_ext{EXT}": drv_ext},
        )
    )
    return wheels


@pytest.fixture(scope="module")
def whole(plain_wheels: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return _install(tmp_path_factory.mktemp("whole"), plain_wheels)


@pytest.fixture(scope="module")
def broken(plain_wheels: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return _install(
        tmp_path_factory.mktemp("broken"),
        plain_wheels,
        remove=(f"{CUDNN_DIR}/{REMOVED_SUBLIB}", GONE),
    )


# 5. DT_NEEDED and import


def test_plain_import_and_dt_needed(whole: Venv) -> None:
    load = whole.load(f"plainpkg/_ext{EXT}")
    root = _one(load, load.root)
    assert root.evidence is Evidence.IMPORT and root.how is How.PATH
    dep = _one(load, "libplain.so.1")
    assert dep.evidence is Evidence.DT_NEEDED and dep.needed_by == load.root
    assert dep.how is How.RPATH and dep.source == load.root
    assert _real(dep.path) == whole.path("plainpkg/lib/libplain.so.1")
    seen = observe_import(whole.python, "plainpkg._ext")
    assert seen.ok, seen.error
    assert_agrees(whole, load, seen)
    needer = explain(whole.env, "libplain.so.1").routes[0].needed_by[0]
    assert needer.evidence == "DT_NEEDED"


# 2. dlopen (manifest)


def _cudnn(fx: Venv) -> LoadResult:
    return fx.load(f"cudnnuse/_ext{EXT}")


def test_cudnn_sub_libraries_resolve_by_runpath(whole: Venv) -> None:
    load = _cudnn(whole)
    assert load.ok
    cudnn = whole.path(f"{CUDNN_DIR}/libcudnn.so.9")
    loads, _ = load_catalog().known_loads("libcudnn.so.9", 12)
    for name in [*loads, "libcudnn_engines_tensor_ir.so.9"]:
        r = _one(load, name)
        assert r.evidence is Evidence.DLOPEN, r
        assert _real(r.needed_by) == cudnn
        assert r.status is Status.RESOLVED and r.how is How.RUNPATH
        assert _real(r.source) == cudnn
        assert _real(r.path) == whole.path(f"{CUDNN_DIR}/{name}")
    # an optional load whose file is not there is not an edge
    assert not [r for r in load.resolutions if r.name == "libcudnn_ext.so.9"]
    # the sub-libraries' own loads, of their CUDA major (12: owned by nvidia-cudnn-cu12)
    lt = [r for r in load.resolutions if r.name == "libcublasLt.so.12"]
    assert {_real(r.needed_by) for r in lt if r.evidence is Evidence.DLOPEN} == {
        whole.path(f"{CUDNN_DIR}/libcudnn_adv.so.9"),
        whole.path(f"{CUDNN_DIR}/libcudnn_engines_precompiled.so.9"),
    }
    nvrtc = [r for r in load.resolutions if r.name == "libnvrtc.so.12"]
    assert {_real(r.needed_by) for r in nvrtc if r.evidence is Evidence.DLOPEN} == {
        whole.path(f"{CUDNN_DIR}/libcudnn_engines_precompiled.so.9"),
        whole.path(f"{CUDNN_DIR}/libcudnn_engines_tensor_ir.so.9"),
    }
    assert all(r.how is How.ALREADY_LOADED for r in lt + nvrtc if r.evidence is Evidence.DLOPEN)
    # the names are in libcudnn.so.9's .rodata too, but the manifest already covers them
    assert not [r for r in load.resolutions if r.evidence is Evidence.DLOPEN_STRING]
    needers = explain(whole.env, "libcudnn_graph.so.9").routes[0].needed_by
    assert [n.evidence for n in needers] == ["dlopen"]


def test_cudnn_dlopens_agree_with_the_real_loader(whole: Venv) -> None:
    seen = observe_import(whole.python, "cudnnuse._ext")
    assert seen.ok, seen.error
    assert_agrees(whole, _cudnn(whole), seen)


def test_removed_sub_library_is_not_found_and_doctor_names_its_hollow_owner(
    broken: Venv,
) -> None:
    load = _cudnn(broken)
    assert load.ok  # a run-time load does not make the import fail
    r = _one(load, REMOVED_SUBLIB)
    assert r.evidence is Evidence.DLOPEN and r.status is Status.NOT_FOUND
    seen = observe_import(broken.python, "cudnnuse._ext")
    assert seen.ok, seen.error
    assert_agrees(broken, load, seen)

    # A known run-time load (runtime.json) is decisive: an error, whose cause is the
    # distribution that lists the file and lost it.
    (problem,) = [p for p in broken.report.problems if p.distributions == (CUDNN_CU12,)]
    assert problem.code == "hollow" and problem.severity.value == "error"
    consequence, lost = problem.consequences
    assert consequence.startswith(f"{CUDNN_DIR}/libcudnn.so.9 loads {REMOVED_SUBLIB} at run time")
    assert lost.startswith(f"it lost {CUDNN_DIR}/{REMOVED_SUBLIB}")
    dist = broken.env.distribution(CUDNN_CU12)
    assert dist is not None and problem.fix == reinstall_command(broken.env, dist)
    assert f"--reinstall-package {CUDNN_CU12}" in problem.fix


# 3. dlopen (string)


def _strings(fx: Venv) -> LoadResult:
    return fx.load(f"strpkg/_ext{EXT}")


def test_rodata_names_are_string_evidence(whole: Venv) -> None:
    load = _strings(whole)
    assert load.ok
    strings = whole.path(STRINGS)
    plugin = _one(load, "libplugin_a.so.1")
    assert plugin.evidence is Evidence.DLOPEN_STRING and _real(plugin.needed_by) == strings
    assert plugin.status is Status.RESOLVED and plugin.how is How.RUNPATH
    assert _real(plugin.source) == strings
    assert _real(plugin.path) == whole.path("strs/lib/libplugin_a.so.1")
    gone = _one(load, "libgone.so.2")
    assert gone.evidence is Evidence.DLOPEN_STRING and gone.status is Status.RESOLVED
    assert _real(gone.path) == whole.path(GONE)
    nobody = _one(load, "libnobody.so.7")
    assert nobody.evidence is Evidence.DLOPEN_STRING and nobody.status is Status.NOT_FOUND
    seen = observe_import(whole.python, "strpkg._ext")
    assert seen.ok, seen.error
    assert_agrees(whole, load, seen)
    needers = explain(whole.env, "libplugin_a.so.1").routes[0].needed_by
    assert [n.evidence for n in needers] == ["dlopen (string)"]


def test_string_dlopen_without_runpath_uses_the_loaders_rpath(whole: Venv) -> None:
    load = whole.load(f"strrppkg/_ext{EXT}")
    plugin = _one(load, "libplugin_b.so.1")
    assert plugin.evidence is Evidence.DLOPEN_STRING
    assert _real(plugin.needed_by) == whole.path(STRINGS_RP)
    assert plugin.status is Status.RESOLVED and plugin.how is How.RPATH
    assert plugin.source == load.root  # inherited: the module's RPATH, two levels up
    assert _real(plugin.path) == whole.path("strs_rp/plugins/libplugin_b.so.1")
    seen = observe_import(whole.python, "strrppkg._ext")
    assert seen.ok, seen.error
    assert_agrees(whole, load, seen)
    asked = seen.request("libplugin_b.so.1", plugin.needed_by)
    assert asked.kind == "dlopen" and asked.how == "rpath"


def test_unprovided_string_is_listed_not_warned(whole: Venv, broken: Venv) -> None:
    for fx in (whole, broken):
        unprovided = next(u for u in fx.report.unprovided if u.name == "libnobody.so.7")
        # named once, though two modules (strpkg, strpkg2) load the library that names it
        (named_by,) = unprovided.named_by
        assert _real(fx.site / named_by) == fx.path(STRINGS)
        assert not [p for p in fx.report.problems if "libnobody" in p.what]


def test_unprovided_names_each_file_once(whole: Venv) -> None:
    (unprovided,) = whole.report.unprovided
    assert unprovided.named_by == (STRINGS,)


def test_string_listed_in_a_record_but_gone_is_a_note_and_its_owner_an_error(
    broken: Venv,
) -> None:
    load = _strings(broken)
    assert load.ok
    gone = _one(load, "libgone.so.2")
    assert gone.status is Status.NOT_FOUND
    seen = observe_import(broken.python, "strpkg._ext")
    assert seen.ok, seen.error
    assert_agrees(broken, load, seen)
    # A string in .rodata is weak evidence: listed apart, never a warning on its own ...
    (named,) = [u for u in broken.report.unprovided if u.name == "libgone.so.2"]
    assert [_real(broken.site / n) for n in named.named_by] == [broken.path(STRINGS)]
    assert not [p for p in broken.report.problems if "libgone" in p.what]
    # ... while the distribution that lost the file is hollow: a package that lost a library
    # is broken whatever loads it (an error, with its fix).
    (problem,) = [p for p in broken.report.problems if p.distributions == ("gone-provider",)]
    assert (problem.code, problem.severity.value) == ("hollow", "error")
    dist = broken.env.distribution("gone-provider")
    assert dist is not None and problem.fix == reinstall_command(broken.env, dist)


def test_broken_env_problems_are_exactly_the_removed_files(broken: Venv) -> None:
    codes = sorted((p.code, p.severity.value, p.distributions) for p in broken.report.problems)
    assert codes == [
        ("hollow", "error", ("gone-provider",)),  # it lost a library, whoever loads it
        ("hollow", "error", (CUDNN_CU12,)),  # a run-time load of cuDNN misses its file
    ]


# 4. driver


def test_driver_library_is_system_and_the_root_loads(whole: Venv) -> None:
    load = whole.load(f"drvpkg/_ext{EXT}")
    cuda = _one(load, "libcuda.so.1")
    assert cuda.status is Status.SYSTEM and cuda.evidence is Evidence.DT_NEEDED
    assert _real(cuda.needed_by) == whole.path("drvpkg/lib/libdrvuser.so")
    assert cuda.path is None and cuda.attempts == ()
    assert load.ok
    routes = explain(whole.env, "libcuda.so.1").routes
    assert [r.status for r in routes] == [Status.SYSTEM]
    # The real loader: everything else resolves as cudatx says; libcuda.so.1 comes from the
    # host's driver, and this machine may have none.
    seen = observe_import(whole.python, "drvpkg._ext")
    assert seen.ok or "libcuda.so.1" in (seen.error or ""), seen.error
    dep = _one(load, "libdrvuser.so")
    asked = seen.request("libdrvuser.so", load.root)
    assert asked.provider_realpath == _real(dep.path)


def test_clean_env_doctor_reports_no_problem(whole: Venv) -> None:
    report = whole.report
    assert report.errors == 0 and report.warnings == 0, report.problems
    assert report.system_provided == ("libcuda.so.1",)
