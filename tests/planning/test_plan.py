"""`cudatx remove SPEC... --dry-run` on small real environments, as a user runs it.

Four venvs, made by real uv from real wheels holding real compiled libraries and extension
modules (tests.support), each built once for the module:

- ``sel``: pure-Python distributions for selection (names in other spellings, globs, ``-r``)
  and Requires-Dist (a marker true on Linux, a marker false on Linux, an extra);
- ``cuda``: wheels laid out like the real NVIDIA ones, for ``cuda:N`` (``nvidia-cufft``
  12.0.0.61 is a CUDA 13 package whose library is ``nvidia/cu13/lib/libcufft.so.12``);
- ``trap``: ``nvidia-cudnn-cu13`` then ``nvidia-cudnn-cu12`` over it, both shipping
  ``nvidia/cudnn/lib/libcudnn.so.9`` (other bytes), and an extension that needs it by RPATH:
  the shared-path trap of design.md section 1;
- ``rebind``: ``libshared.so.1`` in two distributions' folders, both on an extension's
  RPATH, and an extension that could never load (a need nobody provides).

Every plan comes from ``python3 -m cudatx remove ... --dry-run`` in a subprocess (or from
plan_removal itself, to check that the CLI only renders it); reality is judged by real
``uv pip uninstall`` in a copy of the venv and a real import under the real loader.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zipfile import ZipFile

import pytest

from cudatx.discover.catalog import load_catalog
from cudatx.discover.target import start_query
from cudatx.documents import dump
from cudatx.planning.change import Planning, propose_removal
from cudatx.planning.models import name_version
from cudatx.planning.plan import PlanOptions, plan_change
from cudatx.planning.selection import select
from cudatx.scan import scan
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    observe_import,
    site_packages,
    symbol_for,
    uv_install,
    uv_uninstall,
    venv_python,
)
from tests.support.cli import cudatx

SUFFIX = ext_suffix()
CU12, CU13 = "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"
CU12_VERSION, CU13_VERSION = "9.10.2.21", "9.24.0.43"
CUDNN_DIR = "nvidia/cudnn/lib"
CUDNN = f"{CUDNN_DIR}/libcudnn.so.9"
CUDNN_EXT = f"cudnnuser/_ext{SUFFIX}"
RB_EXT = f"rbpkg/_ext{SUFFIX}"
DEAD_EXT = f"deadpkg/_ext{SUFFIX}"
SHARED_A = "vendor_a/lib/libshared.so.1"
SHARED_B = "nvidia/cu13/lib/libshared.so.1"
HOLLOW_REASON = (
    "deleted with {gone}; {stay}'s RECORD lists the same path (shared path), "
    "so {stay} would be left hollow"
)
LINUX_REQ = 'Needed_Lib>=1.0; sys_platform == "linux"'
# The plan's JSON contract (README, `cudatx remove SPEC... --dry-run`): exactly these keys.
PLAN_KEYS = {
    "schema_version",
    "contexts",
    "prefix",
    "safe",
    "trial",  # null unless --trial (issue 25)
    "remove",
    "reinstall",
    "install",
    "broken",
    "broken_roots",
    "rebound",
    "requirements_broken",
    "requirements_checked",
    "left_hollow",
    "overwritten",
    "losses",
    "mixed",
    "at_risk",
    "strict",
    "preexisting",
    "cures",
    "repair",
    "replacing",
    "notes",
    "traces",
}


# --------------------------------------------------------------------------------------
# Artifacts: libraries, extensions, wheels, venvs
# --------------------------------------------------------------------------------------


def _lib(out: Path, build: str, **kwargs: Any) -> Path:
    """A library whose bytes say which build it is (no soname-shaped strings in .rodata),
    defining the function an extension linked against it calls at import."""
    source = (
        f'const char build_tag[] = "fixture: {build}";\n'
        f"int {symbol_for(out.name)}(void) {{ return (int)sizeof(build_tag); }}\n"
    )
    return compile_lib(out, soname=out.name, source=source, **kwargs)


def _pure(out: Path, name: str, version: str, **kwargs: Any) -> Path:
    package = name.replace("-", "_")
    return build_wheel(out, name, version, {f"{package}/__init__.py": b""}, **kwargs)


@dataclass(frozen=True)
class Wheels:
    folder: Path
    by_name: dict[str, Path]

    def __getitem__(self, name: str) -> Path:
        return self.by_name[name]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    root = tmp_path_factory.mktemp("build")
    out = root / "wheels"
    w: dict[str, Path] = {}

    # sel: selection and Requires-Dist
    for name, version in (
        ("foo-bar", "1.0"),
        ("fx-one-cu12", "1.0"),
        ("fx-two-cu12", "2.0"),
        ("fx-one-cu13", "1.0"),
        ("fy-one-cu12", "1.0"),
        ("needed-lib", "1.0"),
        ("win-lib", "1.0"),
        ("gpu-lib", "1.0"),
        ("bystander", "1.0"),
        ("cuda-helpers", "12.4.0"),  # a version starting with 12 says nothing
    ):
        w[name] = _pure(out, name, version)
    w["user-app"] = _pure(
        out,
        "user-app",
        "1.0",
        requires=[LINUX_REQ, 'win-lib; sys_platform == "win32"', 'gpu-lib; extra == "gpu"'],
        metadata_extra=["Provides-Extra: gpu"],
    )

    # cuda: laid out like the real wheels
    def one_lib(name: str, version: str, member: str, build: str) -> Path:
        lib = _lib(root / name / os.path.basename(member), build)
        return build_wheel(out, name, version, {member: lib})

    w["nvidia-cufft"] = one_lib(
        "nvidia-cufft", "12.0.0.61", "nvidia/cu13/lib/libcufft.so.12", "cuFFT for CUDA 13"
    )
    w["nvidia-cublas"] = one_lib(
        "nvidia-cublas", "13.1.0.3", "nvidia/cu13/lib/libcublas.so.13", "cuBLAS 13"
    )
    w["nvidia-cufft-cu12"] = one_lib(
        "nvidia-cufft-cu12", "11.3.3.83", "nvidia/cufft/lib/libcufft.so.11", "cuFFT for CUDA 12"
    )
    w["nvidia-cuda-runtime-cu12"] = one_lib(
        "nvidia-cuda-runtime-cu12",
        "12.8.90",
        "nvidia/cuda_runtime/lib/libcudart.so.12",
        "cudart 12",
    )

    # trap: two cuDNN wheels, the same paths, other bytes; the sub-libraries cuDNN loads at
    # run time ship with both (as for real), so nothing is missing before the change.
    subs, _ = load_catalog().known_loads("libcudnn.so.9", None)
    cudnn: dict[str, Path] = {}
    for tag, name, version in (("cu12", CU12, CU12_VERSION), ("cu13", CU13, CU13_VERSION)):
        files: dict[str, bytes | Path] = {}
        for lib in ["libcudnn.so.9", *subs]:
            files[f"{CUDNN_DIR}/{lib}"] = _lib(
                root / tag / lib, f"{lib} built for CUDA {tag[2:]}", runpath="$ORIGIN"
            )
        w[name] = build_wheel(out, name, version, files)
        cudnn[tag] = root / tag / "libcudnn.so.9"
    assert cudnn["cu12"].read_bytes() != cudnn["cu13"].read_bytes()
    ext = compile_extension(
        root / "cudnnuser", "_ext", needed=[cudnn["cu13"]], rpath="$ORIGIN/../nvidia/cudnn/lib"
    )
    w["cudnnuser"] = build_wheel(
        out, "cudnnuser", "1.0", {"cudnnuser/__init__.py": b"", CUDNN_EXT: ext}
    )

    # rebind: libshared.so.1 first in vend-a's folder, then in vend-b's (a CUDA 13 folder)
    shared_a = _lib(root / "a" / "libshared.so.1", "vendor A")
    shared_b = _lib(root / "b" / "libshared.so.1", "vendor B, CUDA 13")
    w["vend-a"] = build_wheel(out, "vend-a", "1.0", {SHARED_A: shared_a})
    w["vend-b"] = build_wheel(out, "vend-b", "1.0", {SHARED_B: shared_b})
    ext = compile_extension(
        root / "rbpkg",
        "_ext",
        needed=[shared_a],
        rpath="$ORIGIN/../vendor_a/lib:$ORIGIN/../nvidia/cu13/lib",
    )
    w["rbpkg"] = build_wheel(out, "rbpkg", "1.0", {"rbpkg/__init__.py": b"", RB_EXT: ext})
    only = _lib(root / "only" / "libonly.so.1", "only the dead extension uses this")
    w["only-dist"] = build_wheel(out, "only-dist", "1.0", {"only/lib/libonly.so.1": only})
    ext = compile_extension(
        root / "deadpkg",
        "_ext",
        needed=[only],
        rpath="$ORIGIN/../only/lib",
        extra_needed_names=["libnobody.so.7"],  # provided by nothing, ever
    )
    w["deadpkg"] = build_wheel(out, "deadpkg", "1.0", {"deadpkg/__init__.py": b"", DEAD_EXT: ext})
    return Wheels(out, w)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


def _venv(tmp_path_factory: pytest.TempPathFactory, name: str, *groups: list[Path]) -> Path:
    venv = make_venv(tmp_path_factory.mktemp(name) / "venv")
    for group in groups:  # one `uv pip install` per group: later groups overwrite
        uv_install(venv, group)
    return venv


@pytest.fixture(scope="module")
def sel(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    names = ["foo-bar", "fx-one-cu12", "fx-two-cu12", "fx-one-cu13", "fy-one-cu12"]
    names += ["user-app", "needed-lib", "win-lib", "gpu-lib"]
    return _venv(tmp_path_factory, "sel", [wheels[n] for n in names])


@pytest.fixture(scope="module")
def cuda(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    names = ["nvidia-cufft", "nvidia-cublas", "nvidia-cufft-cu12", "nvidia-cuda-runtime-cu12"]
    names += [CU12, "cuda-helpers"]
    return _venv(tmp_path_factory, "cuda", [wheels[n] for n in names])


@pytest.fixture(scope="module")
def trap(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # cu13 with its user, then `uv pip install --no-deps nvidia-cudnn-cu12` over it
    first = [wheels[CU13], wheels["cudnnuser"], wheels["bystander"]]
    venv = _venv(tmp_path_factory, "trap", first, [wheels[CU12]])
    with ZipFile(wheels[CU12]) as wheel:  # the bytes on disk are cu12's now
        assert (site_packages(venv) / CUDNN).read_bytes() == wheel.read(CUDNN)
    return venv


@pytest.fixture(scope="module")
def rebind(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    names = ["vend-a", "vend-b", "rbpkg", "only-dist", "deadpkg", "bystander"]
    return _venv(tmp_path_factory, "rebind", [wheels[n] for n in names])


def _digest(root: Path) -> dict[str, str]:
    """Every file, folder and link under `root`, with content hash and mode."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = os.fspath(path.relative_to(root))
            st = path.lstat()
            if path.is_symlink():
                out[rel] = "link " + os.readlink(path)
            elif path.is_dir():
                out[rel] = f"dir {st.st_mode:o}"
            else:
                out[rel] = f"{hashlib.sha256(path.read_bytes()).hexdigest()} {st.st_mode:o}"
    return out


def _copy(venv: Path, where: Path) -> Path:
    """A copy of the venv (links kept) for a real uninstall."""
    copy = where / "venv"
    shutil.copytree(venv, copy, symlinks=True)
    return copy


# --------------------------------------------------------------------------------------
# Running cudatx as a user does
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def plan(self) -> dict[str, Any]:
        assert self.stdout.lstrip().startswith("{"), self.stdout + self.stderr
        data: dict[str, Any] = json.loads(self.stdout)  # nothing else on stdout
        return data

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def refusal(self) -> str:
        """The one `cudatx: error:` line; anything else on stderr is the environment line."""
        assert "Traceback" not in self.stderr, self.stderr
        assert self.stdout == "", self.stdout
        lines = self.stderr.splitlines()
        errors = [ln for ln in lines if ln.startswith("cudatx: error: ")]
        assert len(errors) == 1, self.stderr
        assert all(ln == errors[0] or ln.startswith("Using Python ") for ln in lines), self.stderr
        return errors[0]


def _execute(argv: tuple[str, ...], cwd: Path) -> Run:
    done = cudatx(*argv, cwd=cwd)
    return Run(argv, done.returncode, done.stdout, done.stderr)


# Dry runs never change a venv (a test checks it), so each command runs once; the
# module's usual ones start together, in the background, as soon as the venvs exist.
_WORKERS = ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2)))
_RUNS: dict[tuple[str, ...], Future[Run]] = {}


def _argv(venv: Path, args: tuple[str | os.PathLike[str], ...], dry_run: bool) -> tuple[str, ...]:
    dry = ("--dry-run",) if dry_run else ()
    return ("remove", *(os.fspath(a) for a in args), *dry, "--python", os.fspath(venv))


def _start(venv: Path, *args: str | os.PathLike[str], cwd: Path) -> Future[Run]:
    argv = _argv(venv, args, True)
    if argv not in _RUNS:
        _RUNS[argv] = _WORKERS.submit(_execute, argv, cwd)
    return _RUNS[argv]


def remove(venv: Path, *args: str | os.PathLike[str], cwd: Path, dry_run: bool = True) -> Run:
    """`python3 -m cudatx remove ARGS [--dry-run] --python VENV` in a subprocess."""
    if dry_run:
        run = _start(venv, *args, cwd=cwd).result()
    else:
        run = _execute(_argv(venv, args, False), cwd)
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    return run


def plan_of(venv: Path, *args: str | os.PathLike[str], cwd: Path, rc: int) -> dict[str, Any]:
    """The --json plan, checked against the contract every plan keeps."""
    run = remove(venv, *args, "--json", cwd=cwd)
    assert run.returncode == rc, (run.returncode, run.stdout, run.stderr)
    assert run.stderr.splitlines() == [f"Using Python {_version()} environment at: {venv}"]
    plan = run.plan
    assert set(plan) == PLAN_KEYS, sorted(PLAN_KEYS ^ set(plan))
    assert plan["schema_version"] == 1
    assert plan["prefix"] == os.fspath(venv)
    assert plan["safe"] == (
        not plan["broken"]
        and not plan["broken_roots"]
        and not plan["requirements_broken"]
        and not plan["mixed"]
        and not plan["contexts"]
        and not (plan["strict"] and plan["at_risk"])
    )
    assert rc == (0 if plan["safe"] else 1)
    names = [p["name"] for p in plan["remove"]]
    assert len(names) == len(set(names)), names
    return plan


def _version() -> str:
    return ".".join(map(str, sys.version_info[:3]))


def _names(plan: dict[str, Any], key: str = "remove") -> list[str]:
    return sorted(p["name"] for p in plan[key])


def _site(venv: Path, rel: str) -> str:
    return os.path.realpath(site_packages(venv) / rel)


def _real(path: str | None) -> str | None:
    return os.path.realpath(path) if path else None


# --------------------------------------------------------------------------------------
# 1. Selection
# --------------------------------------------------------------------------------------


SELECTIONS = [
    (("Foo_Bar",), ["foo-bar"]),
    (("FOO.bar",), ["foo-bar"]),
    (("foo-bar", "Foo_Bar"), ["foo-bar"]),  # one distribution, listed once
    (("fx-*-cu12",), ["fx-one-cu12", "fx-two-cu12"]),
    (("FX_*_CU12",), ["fx-one-cu12", "fx-two-cu12"]),
    (("fx-*-cu12", "fx-two-cu12"), ["fx-one-cu12", "fx-two-cu12"]),
    (("fx-one-cu1[23]",), ["fx-one-cu12", "fx-one-cu13"]),
]
CUDA_SELECTIONS = [
    ("cuda:13", ["nvidia-cublas", "nvidia-cufft"]),
    ("CUDA:13", ["nvidia-cublas", "nvidia-cufft"]),
    ("cuda:12", ["nvidia-cuda-runtime-cu12", CU12, "nvidia-cufft-cu12"]),
]
REFUSALS = [
    (("no-such-dist",), 4, "cudatx: error: no-such-dist matches no installed distribution"),
    (("foo-bar", "nope"), 4, "cudatx: error: nope matches no installed distribution"),
    (("zz-*",), 4, "cudatx: error: zz-* matches no installed distribution"),
    (("cuda:99",), 4, "cudatx: error: cuda:99 matches no installed distribution"),
    (("cuda:x",), 2, "cuda:x"),
    (("cuda:",), 2, "cuda:"),
    ((), 2, "nothing to remove"),
]
NOT_APPLYING = [("win-lib",), ("gpu-lib",), ("win-lib", "gpu-lib"), ("needed-lib", "user-app")]


@pytest.fixture(scope="module", autouse=True)
def _prefetch(
    request: pytest.FixtureRequest, sel: Path, cuda: Path, trap: Path, rebind: Path, work: Path
) -> Iterator[None]:
    """Start the module's usual dry runs at once (tests wait for the one they read); not
    worth it when only a few of this module's tests were selected."""
    mine = [item for item in request.session.items if item.path == request.path]
    if len(mine) < 10:
        yield
        _WORKERS.shutdown(wait=True, cancel_futures=True)
        return
    j = "--json"
    for specs, _ in SELECTIONS:
        _start(sel, *specs, j, cwd=work)
    for spec, _ in CUDA_SELECTIONS:
        _start(cuda, spec, j, cwd=work)
    for args, _, _ in REFUSALS:
        _start(sel, *args, cwd=work)
    _start(sel, *REFUSALS[0][0], j, cwd=work)
    for specs in [
        *NOT_APPLYING,
        ("foo-bar",),
        ("needed-lib",),
        ("needed-lib", "--no-requirements-check"),
    ]:
        _start(sel, *specs, j, cwd=work)
    for specs in [("foo-bar",), ("needed-lib",)]:
        _start(sel, *specs, cwd=work)
    for args in [
        (CU12,),
        (CU13,),
        (CU12, "--repair"),
        (CU13, "--repair"),
        ("bystander",),
        ("nvidia-cudnn-*",),
        ("nvidia-cudnn-*", "--repair"),
    ]:
        _start(trap, *args, j, cwd=work)
    for args in [(CU12,), ("nvidia-cudnn-*",), ("nvidia-cudnn-cu1[2]",)]:
        _start(trap, *args, cwd=work)
    _start(trap, "nvidia-cudnn-cu1[2]", "--repair", cwd=work)
    for args in [("vend-a",), ("vend-a", "vend-b"), ("bystander",), ("only-dist",)]:
        _start(rebind, *args, j, cwd=work)
    for args in [("vend-a",), ("bystander",)]:
        _start(rebind, *args, cwd=work)
    yield
    _WORKERS.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize(
    ("specs", "expected"),
    SELECTIONS,
    ids=["underscore", "dots-and-case", "twice", "glob", "glob-spelling", "glob-and-name", "class"],
)
def test_select_by_name_in_any_spelling_and_by_glob(
    sel: Path, work: Path, specs: tuple[str, ...], expected: list[str]
) -> None:
    plan = plan_of(sel, *specs, cwd=work, rc=0)
    assert _names(plan) == expected
    versions = {p["name"]: p["version"] for p in plan["remove"]}
    assert versions.get("fx-two-cu12", "2.0") == "2.0"


@pytest.mark.parametrize(("spec", "expected"), CUDA_SELECTIONS)
def test_select_by_cuda_major_on_real_layouts(
    cuda: Path, work: Path, spec: str, expected: list[str]
) -> None:
    # nvidia-cufft 12.0.0.61 ships nvidia/cu13/lib/libcufft.so.12: CUDA 13, whatever its
    # version and soname say; cuda-helpers 12.4.0 has no library: neither.
    plan = plan_of(cuda, spec, cwd=work, rc=0)
    assert _names(plan) == expected
    assert "cuda-helpers" not in _names(plan)


def test_cuda_majors_partition_the_library_distributions(cuda: Path) -> None:
    env = scan(start_query(os.fspath(cuda)), ld_library_path=None)
    twelve = {d.name for d in select(env, ("cuda:12",))}
    thirteen = {d.name for d in select(env, ("cuda:13",))}
    assert not twelve & thirteen
    assert {d.name for d in env.distributions} - twelve - thirteen == {"cuda-helpers"}


def test_requirement_file_with_comments_options_pins_and_markers(
    sel: Path, work: Path, tmp_path: Path
) -> None:
    reqs = tmp_path / "remove.txt"
    (tmp_path / "constraints.txt").write_text("foo-bar<2\n")  # read (uv reads it), no entries
    reqs.write_text(
        "# what the experiment pulled in\n"
        "--index-url https://example.invalid/simple\n"
        "-c constraints.txt\n"
        "--no-binary :all:\n"
        "-e ./somewhere#egg=Foo_Bar\n"  # an editable names its project (else an error)
        "\n"
        "   # an indented comment\n"
        "Foo_Bar==1.0  # pinned\n"
        'fx-two-cu12>=2.0 ; python_version >= "3.8"\n'
        "fy-one-cu12[extra] @ https://example.invalid/fy_one_cu12-1.0-py3-none-any.whl\n"
    )
    plan = plan_of(sel, "-r", reqs, cwd=work, rc=0)
    assert _names(plan) == ["foo-bar", "fx-two-cu12", "fy-one-cu12"]
    # with a SPEC too: the union, each once
    plan = plan_of(sel, "fx-one-cu13", "fx-two-cu12", "--requirement", reqs, cwd=work, rc=0)
    assert _names(plan) == ["foo-bar", "fx-one-cu13", "fx-two-cu12", "fy-one-cu12"]


def test_requirement_file_follows_includes_and_drops_other_platforms(
    sel: Path, work: Path, tmp_path: Path
) -> None:
    (tmp_path / "more.txt").write_text("fx-two-cu12\n")
    reqs = tmp_path / "remove.txt"
    reqs.write_text("-r more.txt\nfoo-bar\nnot-installed ; sys_platform == 'win32'\n")
    plan = plan_of(sel, "-r", reqs, cwd=work, rc=0)
    assert _names(plan) == ["foo-bar", "fx-two-cu12"]
    reqs.write_text("not-installed ; sys_platform == 'win32'\n")
    run = remove(sel, "-r", reqs, cwd=work)
    assert run.returncode == 2, run.stderr
    assert "lists nothing that applies to this target" in run.refusal()


def test_requirement_file_comment_after_a_tab(sel: Path, work: Path, tmp_path: Path) -> None:
    reqs = tmp_path / "tab.txt"
    reqs.write_text("foo-bar==1.0\t# pinned\n")
    plan = plan_of(sel, "-r", reqs, cwd=work, rc=0)
    assert _names(plan) == ["foo-bar"]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    REFUSALS,
    ids=["name", "second-of-two", "glob", "cuda-99", "cuda-x", "cuda-empty", "nothing"],
)
def test_refusals(sel: Path, work: Path, args: tuple[str, ...], code: int, says: str) -> None:
    run = remove(sel, *args, cwd=work)
    assert run.returncode == code, run.stderr
    line = run.refusal()
    assert line == says if code == 4 else says in line, line


def test_json_changes_nothing_about_a_refusal(sel: Path, work: Path) -> None:
    args, code, says = REFUSALS[0]
    run = remove(sel, *args, "--json", cwd=work)
    assert run.returncode == code
    assert run.refusal() == says  # stdout stays empty


def test_requirement_file_missing(sel: Path, work: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-requirements.txt"
    run = remove(sel, "-r", missing, cwd=work)
    assert run.returncode == 5, run.stderr
    assert os.fspath(missing) in run.refusal()


def test_requirement_file_bad_line_is_one_refusal_line(
    sel: Path, work: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("foo-bar\nthis is not a requirement!\n")
    run = remove(sel, "-r", bad, cwd=work)
    assert run.returncode == 2, run.stderr
    assert f"{bad}:2: not a requirement" in run.refusal()


def test_without_dry_run_refuses_and_touches_nothing(trap: Path, work: Path) -> None:
    before = _digest(trap)
    # the plan is shown, then an unsafe one is refused without --force, and a safe one
    # needs --yes off a terminal: one error line either way
    for args, code, words in (
        ((CU12,), 1, "refusing to apply an unsafe plan"),
        ((CU12, "--json"), 1, "refusing to apply an unsafe plan"),
        (("cuda:12", "--repair"), 2, "--yes"),
    ):
        run = remove(trap, *args, cwd=work, dry_run=False)
        assert run.returncode == code, run.stderr
        assert "Traceback" not in run.stderr and run.stdout
        errors = [ln for ln in run.stderr.splitlines() if ln.startswith("cudatx: error: ")]
        assert len(errors) == 1 and words in errors[0], run.stderr
    # nor do dry runs, whatever they plan
    for args in ((CU12, "--json"), (CU13, "--repair"), ("nvidia-*",)):
        assert remove(trap, *args, cwd=work).returncode in (0, 1)
    assert _digest(trap) == before


# --------------------------------------------------------------------------------------
# 2. No false alarms
# --------------------------------------------------------------------------------------


def _assert_clean(plan: dict[str, Any]) -> None:
    assert plan["safe"] is True
    assert plan["broken"] == [] and plan["broken_roots"] == []
    assert plan["requirements_broken"] == [] and plan["rebound"] == []
    assert plan["reinstall"] == [] and plan["repair"] is None


def test_removing_a_pure_python_dist_nothing_requires(sel: Path, work: Path) -> None:
    plan = plan_of(sel, "foo-bar", cwd=work, rc=0)
    _assert_clean(plan)
    assert plan["preexisting"] == [] and plan["requirements_checked"] is True
    assert plan["remove"] == [{"name": "foo-bar", "version": "1.0"}]
    run = remove(sel, "foo-bar", cwd=work)
    assert run.returncode == 0
    assert run.lines == [
        "Safe: nothing that loads now would stop loading.",
        "Would uninstall 1 package",
        " - foo-bar==1.0",
    ]


def _cudnn_run_time_gaps(plan: dict[str, Any]) -> list[dict[str, str]]:
    """What the trap venv lacks before any change: cuDNN's sub-libraries dlopen the CUDA 12
    cuBLASLt and NVRTC (runtime.json), which nothing here ships (torch's preload would)."""
    gaps = plan["preexisting"]
    assert gaps, plan
    for gap in gaps:
        assert gap["kind"] == "missing-library", gap
        lib = gap["what"].removesuffix(" is provided by nothing here")
        assert lib in {"libcublasLt.so.12", "libnvrtc.so.12"}, gap
    return list(gaps)


def test_what_a_plan_counts_as_broken_before_is_what_doctor_reports(
    trap: Path, rebind: Path, work: Path
) -> None:
    """One notion of "already broken": a plan's preexisting are doctor's errors, the same
    findings in the same number."""
    for venv, spec in ((trap, "bystander"), (rebind, "bystander")):
        plan = plan_of(venv, spec, cwd=work, rc=0)
        done = cudatx("doctor", "--python", venv, "--json", cwd=work)
        report = json.loads(done.stdout)
        errors = [p for p in report["problems"] if p["severity"] == "error"]
        assert report["errors"] == len(plan["preexisting"]) > 0
        assert [(p["code"], p["what"]) for p in errors] == [
            (gap["kind"], gap["what"]) for gap in plan["preexisting"]
        ]


def test_removing_a_bystander_among_extensions_and_shared_paths(trap: Path, work: Path) -> None:
    plan = plan_of(trap, "bystander", cwd=work, rc=0)
    _assert_clean(plan)
    _cudnn_run_time_gaps(plan)  # counted apart, never unsafe


def test_removing_a_required_dist_breaks_only_the_requirement(sel: Path, work: Path) -> None:
    plan = plan_of(sel, "needed-lib", cwd=work, rc=1)
    assert plan["requirements_broken"] == [{"dist": "user-app", "requirement": LINUX_REQ}]
    assert plan["broken"] == [] and plan["broken_roots"] == [] and plan["rebound"] == []
    assert plan["repair"] is None and plan["preexisting"] == []
    run = remove(sel, "needed-lib", cwd=work)
    assert run.returncode == 1
    assert run.lines == [
        "Unsafe: 1 requirement would be unmet.",
        "Would uninstall 1 package",
        " - needed-lib==1.0",
        "Would leave requirements unmet:",
        f"  user-app requires {LINUX_REQ}",
    ]


@pytest.mark.parametrize(
    "specs", NOT_APPLYING, ids=["false-marker", "extra", "both", "with-its-requirer"]
)
def test_requirements_that_do_not_apply(sel: Path, work: Path, specs: tuple[str, ...]) -> None:
    _assert_clean(plan_of(sel, *specs, cwd=work, rc=0))


def test_no_requirements_check(sel: Path, work: Path) -> None:
    plan = plan_of(sel, "needed-lib", "--no-requirements-check", cwd=work, rc=0)
    _assert_clean(plan)
    assert plan["requirements_checked"] is False


# --------------------------------------------------------------------------------------
# 3. The shared-path trap
# --------------------------------------------------------------------------------------

VERSIONS = {CU12: CU12_VERSION, CU13: CU13_VERSION}
OTHER = {CU12: CU13, CU13: CU12}


@pytest.mark.parametrize("gone", [CU12, CU13])
def test_removing_either_cudnn_breaks_the_extension(trap: Path, work: Path, gone: str) -> None:
    stay = OTHER[gone]
    plan = plan_of(trap, gone, cwd=work, rc=1)
    assert plan["remove"] == [{"name": gone, "version": VERSIONS[gone]}]
    assert plan["reinstall"] == []
    (broken,) = plan["broken"]
    assert broken["soname"] == "libcudnn.so.9"
    assert _real(broken["needed_by"]) == _site(trap, CUDNN_EXT)
    assert broken["needed_by_dist"] == "cudnnuser"
    assert broken["evidence"] == "DT_NEEDED"
    assert _real(broken["provider"]) == _site(trap, CUDNN)
    assert sorted(broken["provider_owners"]) == [CU12, CU13]
    assert broken["reason"] == HOLLOW_REASON.format(gone=gone, stay=stay)
    assert [_real(r) for r in broken["roots"]] == [_site(trap, CUDNN_EXT)]
    (root,) = plan["broken_roots"]
    assert _real(root["root"]) == _site(trap, CUDNN_EXT)
    assert (root["dist"], root["first_missing"]) == ("cudnnuser", "libcudnn.so.9")
    assert plan["requirements_broken"] == [] and plan["rebound"] == []
    bystander = plan_of(trap, "bystander", cwd=work, rc=0)
    assert _cudnn_run_time_gaps(plan) == _cudnn_run_time_gaps(bystander)
    # The suggestion is checked here only where the reinstall restores the bytes on disk
    # (cu12's, installed last); restoring cu13's needs its wheel: `--repair` checks that.
    assert plan["repair"] == {
        "reinstall": [{"name": stay, "version": VERSIONS[stay]}],
        "safe": True if stay == CU12 else None,
    }


@pytest.mark.parametrize("gone", [CU12, CU13])
def test_repair_reinstalls_the_co_owner(trap: Path, work: Path, gone: str) -> None:
    stay = OTHER[gone]
    plan = plan_of(trap, gone, "--repair", cwd=work, rc=0)
    assert plan["remove"] == [{"name": gone, "version": VERSIONS[gone]}]
    [entry] = plan["reinstall"]
    assert (entry["name"], entry["version"]) == (stay, VERSIONS[stay])
    assert entry["source"].endswith(".whl") and entry["source_note"] is None  # its own wheel
    assert plan["broken"] == [] and plan["broken_roots"] == [] and plan["repair"] is None
    assert plan["preexisting"] == plan_of(trap, "bystander", cwd=work, rc=0)["preexisting"]
    assert plan["notes"] == []
    # cu12 was installed last: the shared paths hold its bytes now, and the repair restores
    # cu13's, from its own wheel, staged: the extension rebinds to them.
    rebound = [r for r in plan["rebound"] if r["soname"] == "libcudnn.so.9"]
    if gone == CU12:
        assert [r["provider_after_owners"] for r in rebound] == [[CU13]]
    else:  # cu12's own bytes go back: nothing rebinds
        assert rebound == []


def test_removing_both_owners_has_nothing_to_repair(trap: Path, work: Path) -> None:
    plan = plan_of(trap, "nvidia-cudnn-*", cwd=work, rc=1)
    assert _names(plan) == [CU12, CU13]
    (broken,) = plan["broken"]
    assert broken["reason"].startswith("deleted with ")
    assert sorted(broken["reason"].removeprefix("deleted with ").split(", ")) == [CU12, CU13]
    assert plan["repair"] is None
    assert [r["first_missing"] for r in plan["broken_roots"]] == ["libcudnn.so.9"]
    run = remove(trap, "nvidia-cudnn-*", cwd=work)
    assert run.lines[0] == "Unsafe: 1 import would fail; 1 library would not load."
    assert run.lines[1] == "Would uninstall 2 packages"
    assert not any(ln.startswith("Suggested:") for ln in run.lines)
    # --repair with nothing to reinstall is the same verdict
    assert plan_of(trap, "nvidia-cudnn-*", "--repair", cwd=work, rc=1)["reinstall"] == []


@pytest.mark.parametrize("gone", [CU12, CU13])
def test_the_plan_matches_a_real_uninstall_and_the_repair_repairs(
    trap: Path, wheels: Wheels, work: Path, tmp_path: Path, gone: str
) -> None:
    stay = OTHER[gone]
    plan = plan_of(trap, gone, cwd=work, rc=1)
    copy = _copy(trap, tmp_path)
    assert observe_import(venv_python(copy), "cudnnuser._ext").ok
    uv_uninstall(copy, [gone])
    seen = observe_import(venv_python(copy), "cudnnuser._ext")
    assert not seen.ok
    assert plan["broken_roots"][0]["first_missing"] in (seen.error or ""), seen.error
    # the repair the plan suggests, as --repair would run it
    (fix,) = plan["repair"]["reinstall"]
    assert fix["name"] == stay
    uv_install(copy, [wheels[stay]], reinstall=True)
    seen = observe_import(venv_python(copy), "cudnnuser._ext")
    assert seen.ok, seen.error
    assert seen.loaded(site_packages(copy) / CUDNN)
    with ZipFile(wheels[stay]) as wheel:
        assert (site_packages(copy) / CUDNN).read_bytes() == wheel.read(CUDNN)


def test_plan_removal_is_what_the_cli_prints(trap: Path, work: Path) -> None:
    env = scan(start_query(os.fspath(trap)), ld_library_path=None)
    chosen = select(env, (CU12,))
    plain = plan_change(env, chosen, (), PlanOptions(repair=False))
    repaired = propose_removal(env, (CU12,), (), Planning(PlanOptions(repair=True))).plan
    assert dump(plain, mode="json") == plan_of(trap, CU12, cwd=work, rc=1)
    assert dump(repaired, mode="json") == plan_of(trap, CU12, "--repair", cwd=work, rc=0)
    assert plain.repair is not None
    # cu12's bytes are on disk: the suggestion restores cu13's, checked only with --repair
    # (the suggestion is not staged: it names what to reinstall, not where uv takes it from)
    assert plain.repair.reinstall == tuple(name_version(a) for a in repaired.reinstall)
    assert plain.repair.safe is None
    assert repaired.safe
    # the environment is a value: planning twice gives the same plan
    assert plan_change(env, chosen, (), PlanOptions(repair=False)) == plain


# --------------------------------------------------------------------------------------
# 4. Rebound
# --------------------------------------------------------------------------------------


def test_a_library_found_further_down_the_rpath_is_rebound(
    rebind: Path, work: Path, tmp_path: Path
) -> None:
    plan = plan_of(rebind, "vend-a", cwd=work, rc=0)
    assert plan["broken"] == [] and plan["broken_roots"] == []
    (rebound,) = plan["rebound"]
    assert rebound["soname"] == "libshared.so.1"
    assert _real(rebound["needed_by"]) == _site(rebind, RB_EXT)
    assert rebound["needed_by_dist"] == "rbpkg"
    assert rebound["evidence"] == "DT_NEEDED"
    assert _real(rebound["provider_before"]) == _site(rebind, SHARED_A)
    assert _real(rebound["provider_after"]) == _site(rebind, SHARED_B)
    assert rebound["provider_after_owners"] == ["vend-b"]
    assert rebound["cuda_major_after"] == 13  # nvidia/cu13/lib
    run = remove(rebind, "vend-a", cwd=work)
    assert run.returncode == 0
    assert "Would rebind (the loader would find another build):" in run.lines
    assert run.lines[0] == "Safe: nothing that loads now would stop loading."
    # reality agrees: the import still works, from vend-b's file
    copy = _copy(rebind, tmp_path)
    uv_uninstall(copy, ["vend-a"])
    seen = observe_import(venv_python(copy), "rbpkg._ext")
    assert seen.ok, seen.error
    assert seen.loaded(site_packages(copy) / SHARED_B)


def test_removing_every_provider_breaks_only_what_loaded(rebind: Path, work: Path) -> None:
    plan = plan_of(rebind, "vend-a", "vend-b", cwd=work, rc=1)
    assert [_real(r["root"]) for r in plan["broken_roots"]] == [_site(rebind, RB_EXT)]
    (broken,) = plan["broken"]
    assert (broken["soname"], broken["reason"]) == ("libshared.so.1", "deleted with vend-a")
    assert plan["repair"] is None


# --------------------------------------------------------------------------------------
# 5. Pre-existing problems
# --------------------------------------------------------------------------------------


def test_an_extension_broken_before_is_not_blamed(rebind: Path, work: Path) -> None:
    seen = observe_import(venv_python(rebind), "deadpkg._ext")
    assert not seen.ok and "libnobody.so.7" in (seen.error or "")
    for specs in (("bystander",), ("vend-a",)):
        plan = plan_of(rebind, *specs, cwd=work, rc=0)
        assert plan["broken_roots"] == [] and plan["broken"] == []
        # deadpkg's extension needs a library nothing provides: one cause, already there
        (gap,) = plan["preexisting"]
        assert gap == {
            "kind": "missing-library",
            "what": "libnobody.so.7 is provided by nothing here",
        }
    run = remove(rebind, "bystander", cwd=work)
    assert "Already broken before this change (not counted): 1 (see `cudatx doctor`)" in run.lines
    assert run.lines[0] == "Safe: nothing that loads now would stop loading."


def test_a_lost_need_of_an_extension_broken_before_is_not_unsafe(rebind: Path, work: Path) -> None:
    # deadpkg._ext needs libonly.so.1 (only-dist) and libnobody.so.7 (nobody): it never
    # imported, so removing only-dist stops nothing from importing.
    plan = plan_of(rebind, "only-dist", cwd=work, rc=0)
    assert plan["broken"] == [] and plan["broken_roots"] == []
    assert [p["kind"] for p in plan["preexisting"]] == ["missing-library"]  # libnobody


# --------------------------------------------------------------------------------------
# 6. Text output
# --------------------------------------------------------------------------------------


def test_text_shape_of_an_unsafe_plan_and_its_suggestion(trap: Path, work: Path) -> None:
    spec = "nvidia-cudnn-cu1[2]"  # a glob: the suggestion must quote it for the shell
    run = remove(trap, spec, cwd=work)
    assert run.returncode == 1, run.stderr
    lines = run.lines
    assert lines[:5] == [
        "Unsafe: 1 import would fail; 1 library would not load; 1 package that stays would "
        "lose files their RECORD lists.",
        "Would uninstall 1 package",
        f" - {CU12}=={CU12_VERSION}",
        "Would break:",
        "  libcudnn.so.9",
    ]
    assert lines[5] == f"    needed by {CUDNN_EXT} [cudnnuser] (DT_NEEDED)"
    assert lines[6].startswith("    was ") and lines[6].endswith(f"[{CU12}, {CU13}]")
    assert lines[7] == "    " + HOLLOW_REASON.format(gone=CU12, stay=CU13)
    assert lines[8:] == [
        f"  import of {CUDNN_EXT} [cudnnuser] would fail: libcudnn.so.9 not found",
        "Would leave hollow (installed, but missing files their RECORD lists):",
        f" ! {CU13}=={CU13_VERSION} would lose {CUDNN}, {CUDNN_DIR}/libcudnn_adv.so.9, "
        f"{CUDNN_DIR}/libcudnn_cnn.so.9 and 5 more",
        # cu12's cuDNN gone, nothing dlopens the CUDA 12 cuBLASLt and NVRTC it lacked: no
        # cure, since only taking cuDNN away ends it
        "Already broken before this change (not counted): 2 (see `cudatx doctor`)",
        f"Suggested: cudatx remove 'nvidia-cudnn-cu1[2]' --python {trap} --dry-run --repair  "
        f"(reinstalls {CU13} after the removal; that dry run checks it with the reinstalled "
        "wheels' bytes)",
    ]
    # the suggestion, as a user pastes it (it carries --dry-run while applying is not there)
    command = lines[-1].removeprefix("Suggested: ").split("  (")[0]
    argv = shlex.split(command)
    assert argv[:2] == ["cudatx", "remove"]
    assert argv[argv.index("--python") + 1] == os.fspath(trap)  # pastes into any shell
    argv.remove("--python")
    argv.remove(os.fspath(trap))
    after = remove(trap, *argv[2:], cwd=work)
    assert after.returncode == 0, after.stdout
    assert after.lines[:4] == [
        "Safe: nothing that loads now would stop loading.",
        "Would uninstall 1 package",
        f" - {CU12}=={CU12_VERSION}",
        "Would reinstall 1 package (--no-deps, restoring their own files)",
    ]
    # it stays: uv's mark of a reinstall, not a removal's; and the wheel it comes from
    assert after.lines[4].startswith(f" ~ {CU13}=={CU13_VERSION} (from "), after.lines
    assert after.lines[4].endswith(".whl)"), after.lines
    # cu13's own bytes go back over cu12's: the rebinds to them, one line for all eight
    # libraries of the shared folder (the extension's need and cuDNN's own loads)
    assert after.lines[5] == "Would rebind (the loader would find another build):"
    assert after.lines[6].endswith(f"to {CU13}'s, CUDA 13 (--json lists them)"), after.lines
    assert after.lines[7:] == [
        "Already broken before this change (not counted): 2 (see `cudatx doctor`)",
    ]


def test_text_names_providers_without_dot_dot(trap: Path, rebind: Path, work: Path) -> None:
    lines = remove(trap, CU12, cwd=work).lines
    assert f"    was {CUDNN} [{CU12}, {CU13}]" in lines
    lines = remove(rebind, "vend-a", cwd=work).lines
    assert f"  libshared.so.1 for {RB_EXT}: {SHARED_B} (vend-b's, CUDA 13)" in lines
