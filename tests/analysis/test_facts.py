"""cudatx.analysis.ownership on real wheels, installed by real uv, holding real compiled libraries.

The wheels are named and laid out like the real ones: nvidia-cudnn-cu12 and nvidia-cudnn-cu13
both install nvidia/cudnn/lib/libcudnn.so.9 (with different bytes); nvidia-cufft 12.0.0.61 is
a CUDA 13 package whose library is nvidia/cu13/lib/libcufft.so.12; a fake torch 2.8.0+cu128
loads libcudnn.so.9 through the RPATH of its extension module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudatx.analysis import ownership
from cudatx.analysis.cuda import (
    Basis,
    build,
    cuda_major_of_dist,
    cuda_major_of_file,
    mixed_majors,
)
from cudatx.analysis.ownership import co_owned, hollow, losing_code
from cudatx.discover.target import start_query
from cudatx.elf.reader import read_elf
from cudatx.environment import Environment
from cudatx.scan import scan
from tests.support import (
    build_wheel,
    compile_extension,
    compile_lib,
    ext_suffix,
    make_venv,
    site_packages,
    uv_install,
    uv_uninstall,
)

CUDNN = "nvidia/cudnn/lib/libcudnn.so.9"
CUDNN_INIT = "nvidia/cudnn/__init__.py"
CUFFT = "nvidia/cu13/lib/libcufft.so.12"
CU12 = "nvidia-cudnn-cu12"
CU13 = "nvidia-cudnn-cu13"


@dataclass(frozen=True)
class Wheels:
    cudnn12: Path
    cudnn13: Path
    torch_cu128: Path
    torch_cpu: Path
    cufft: Path
    toolkit_user: Path
    build: Path


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path
    env: Environment


def _cudnn_source(tag: str) -> str:
    # Different text (and length) per build: the two wheels' files must differ in bytes.
    return (
        f'const char cudnn_build[] = "cuDNN 9 fixture built for {tag}";\n'
        "int cudnnGetVersion(void) { return 91000 + (int)sizeof(cudnn_build); }\n"
    )


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    root = tmp_path_factory.mktemp("facts")
    build, out = root / "build", root / "wheels"
    lib12 = compile_lib(
        build / "cu12" / "libcudnn.so.9", soname="libcudnn.so.9", source=_cudnn_source("CUDA 12")
    )
    lib13 = compile_lib(
        build / "cu13" / "libcudnn.so.9",
        soname="libcudnn.so.9",
        source=_cudnn_source("CUDA 13, a longer string"),
    )
    assert lib12.read_bytes() != lib13.read_bytes()
    ext = compile_extension(
        build / "torch", "_C", needed=[lib12], rpath="$ORIGIN/../nvidia/cudnn/lib"
    )
    cufft = compile_lib(build / "cufft" / "libcufft.so.12", soname="libcufft.so.12")
    plain = compile_lib(build / "toolkit_user" / "libtkuser.so", soname="libtkuser.so")
    cudnn_files = {CUDNN_INIT: b""}
    version_py = (
        "from typing import Optional\n\n"
        "__version__ = '{v}'\n"
        "debug = False\n"
        "{cuda}\n"
        "hip: Optional[str] = None\n"
    )
    return Wheels(
        cudnn12=build_wheel(out, "nvidia-cudnn-cu12", "9.10.2.21", {**cudnn_files, CUDNN: lib12}),
        cudnn13=build_wheel(out, "nvidia-cudnn-cu13", "9.24.0.43", {**cudnn_files, CUDNN: lib13}),
        torch_cu128=build_wheel(
            out,
            "torch",
            "2.8.0+cu128",
            {
                "torch/__init__.py": b"",
                "torch/version.py": version_py.format(
                    v="2.8.0+cu128", cuda="cuda: Optional[str] = '12.8'"
                ).encode(),
                f"torch/_C{ext_suffix()}": ext,
            },
            requires=[
                'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"',
                'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux"',
            ],
        ),
        torch_cpu=build_wheel(
            out,
            "torch",
            "2.8.0+cpu",
            {
                "torch/__init__.py": b"",
                "torch/version.py": version_py.format(v="2.8.0+cpu", cuda="cuda = None").encode(),
            },
        ),
        cufft=build_wheel(
            out, "nvidia-cufft", "12.0.0.61", {CUFFT: cufft}, requires=["nvidia-nvjitlink"]
        ),
        toolkit_user=build_wheel(
            out,
            "toolkit-user",
            "1.0",
            {"toolkit_user/libtkuser.so": plain},
            requires=[
                'nvidia-cuda-runtime-cu12; extra == "legacy"',  # an extra: not installed
                "cuda-toolkit[cublas,cudart]==13.0.3",
            ],
        ),
        build=build,
    )


def _venv(root: Path, *batches: list[Path], remove: tuple[str, ...] = ()) -> Installed:
    venv = make_venv(root / "venv")
    for batch in batches:  # one uv call each: a later batch overwrites an earlier one's files
        uv_install(venv, batch)
    if remove:
        uv_uninstall(venv, list(remove))
    return Installed(venv, site_packages(venv), scan(start_query(str(venv)), ld_library_path=None))


@pytest.fixture(scope="module")
def cu13_last(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    first = [wheels.cudnn12, wheels.torch_cu128, wheels.cufft, wheels.toolkit_user]
    return _venv(tmp_path_factory.mktemp("cu13_last"), first, [wheels.cudnn13])


@pytest.fixture(scope="module")
def cu12_last(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    first = [wheels.cudnn13, wheels.torch_cu128, wheels.cufft]
    return _venv(tmp_path_factory.mktemp("cu12_last"), first, [wheels.cudnn12])


@pytest.fixture(scope="module")
def cu12_removed(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return _venv(
        tmp_path_factory.mktemp("cu12_removed"),
        [wheels.cudnn12, wheels.torch_cpu],
        [wheels.cudnn13],
        remove=(CU12,),
    )


def _entry(installed: Installed, relative: str) -> str:
    return os.path.join(os.path.realpath(installed.site), relative)


# -- co-owned paths -------------------------------------------------------------------------


def test_co_owned_names_both_owners_and_the_last_installed_owns_the_bytes(
    cu13_last: Installed,
) -> None:
    found = {c.path: c for c in co_owned(cu13_last.env)}
    assert set(found) == {_entry(cu13_last, CUDNN), _entry(cu13_last, CUDNN_INIT)}
    lib = found[_entry(cu13_last, CUDNN)]
    assert sorted(lib.owners) == [(CU12, "9.10.2.21"), (CU13, "9.24.0.43")]
    assert lib.present
    assert lib.effective_owner == CU13
    assert lib.matching == (CU13,)
    assert not lib.same_record
    # Identical bytes (an empty __init__.py): both RECORDs name the same hash, so whose
    # bytes they are needs no reading (and none is done).
    init = found[_entry(cu13_last, CUDNN_INIT)]
    assert init.same_record and init.present
    assert init.effective_owner is None and init.matching == ()


def test_effective_owner_follows_install_order(cu12_last: Installed) -> None:
    found = {c.path: c for c in co_owned(cu12_last.env)}
    assert found[_entry(cu12_last, CUDNN)].effective_owner == CU12


# -- hollow distributions -------------------------------------------------------------------


def test_overwritten_owner_is_hollow_by_hash(cu13_last: Installed) -> None:
    found = {h.name: h for h in hollow(cu13_last.env)}
    assert set(found) == {CU12}  # cu13's bytes are on disk; everything else is intact
    cu12 = found[CU12]
    assert (cu12.missing, cu12.wrong) == (0, 1)
    assert cu12.examples == (CUDNN,)
    assert not cu12.emptied  # its (empty) __init__.py still matches
    assert cu12.total >= 2
    assert losing_code(cu13_last.env) == ()  # other bytes: nothing a load or import misses


def test_uninstalling_one_owner_empties_the_other(cu12_removed: Installed) -> None:
    env = cu12_removed.env
    assert env.distribution(CU12) is None
    assert env.distribution(CU13) is not None  # still "installed", as uv pip list says
    assert co_owned(env) == ()  # cu12's RECORD is gone with it
    (cu13,) = hollow(env)
    assert cu13.name == CU13
    assert cu13.version == "9.24.0.43"
    assert cu13.missing == 2  # both of its files: the library and __init__.py
    assert cu13.wrong == 0
    assert cu13.emptied
    assert CUDNN in cu13.examples
    assert not os.path.lexists(cu12_removed.site / CUDNN)
    # What a plan checks on every run: the same finding, from the code entries alone.
    assert losing_code(env) == (CU13,)
    assert cu13.lost == (CUDNN,)  # its __init__.py is empty: a namespace package imports


@pytest.mark.parametrize("sizes", [(100, 200), (100, 100)], ids=["sizes differ", "sizes tie"])
def test_a_co_owned_file_is_hashed_only_where_sizes_cannot_tell_whose_it_is(
    sizes: tuple[int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twins of other sizes: the file's size says whose bytes it holds, as it does for a
    file one RECORD lists, and nothing is read (cuDNN 12's and 13's gigabytes were a third
    of a cold doctor). Twins of one size: the hash decides. Either way the twin whose bytes
    are gone is hollow and the last installed is intact, as the bytes on disk say."""
    first, last = sizes
    out = tmp_path / "wheels"
    twin_a = build_wheel(out, "twin-a", "1.0", {"twin/libtwin.so": b"a" * first})
    twin_b = build_wheel(out, "twin-b", "1.0", {"twin/libtwin.so": b"b" * last})
    installed = _venv(tmp_path, [twin_a], [twin_b])
    on_disk = (installed.site / "twin/libtwin.so").read_bytes()
    assert on_disk == b"b" * last  # the judge: uv left the last installed twin's bytes

    read: list[str] = []
    real_digest = ownership.digest_file

    def digest_file(path: str, algorithm: str) -> bytes | None:
        read.append(os.path.basename(path))
        return real_digest(path, algorithm)

    monkeypatch.setattr(ownership, "digest_file", digest_file)
    found = {h.name: h for h in hollow(installed.env)}
    assert set(found) == {"twin-a"} and found["twin-a"].wrong == 1
    assert ("libtwin.so" in read) == (first == last)


# -- CUDA majors ----------------------------------------------------------------------------


def test_cufft_12_is_cuda_13_by_folder(cu13_last: Installed) -> None:
    path = str(cu13_last.site / CUFFT)
    found = cuda_major_of_file(cu13_last.env, path, read_elf(path))
    assert found is not None
    assert (found.major, found.by) == (13, Basis.FOLDER)
    dist = cu13_last.env.distribution("nvidia-cufft")
    assert dist is not None and dist.version == "12.0.0.61"
    by_dist = cuda_major_of_dist(cu13_last.env, dist)
    assert by_dist is not None
    assert (by_dist.major, by_dist.by) == (13, Basis.FILES)


def test_cudnn_file_classifies_by_its_effective_owner(
    cu12_last: Installed, cu13_last: Installed
) -> None:
    path = str(cu12_last.site / CUDNN)
    found = cuda_major_of_file(cu12_last.env, path, read_elf(path))
    assert found is not None
    assert (found.major, found.by) == (12, Basis.OWNER_NAME)
    assert CU12 in found.reason
    path = str(cu13_last.site / CUDNN)
    found = cuda_major_of_file(cu13_last.env, path, read_elf(path))
    assert found is not None
    assert (found.major, found.by) == (13, Basis.OWNER_NAME)


def test_cudnn_dists_classify_by_name(cu13_last: Installed) -> None:
    for name, major in ((CU12, 12), (CU13, 13)):
        dist = cu13_last.env.distribution(name)
        assert dist is not None
        found = cuda_major_of_dist(cu13_last.env, dist)
        assert found is not None
        assert (found.major, found.by) == (major, Basis.OWNER_NAME)


def test_soname_table_tracks_only_libraries_that_follow_cuda(cu13_last: Installed) -> None:
    # Paths outside any environment and no ElfInfo: only the file name can decide.
    env = cu13_last.env
    decided = {
        name: cuda_major_of_file(env, f"/nonexistent/lib/{name}", None)
        for name in (
            "libcudart.so.12",
            "libcublasLt.so.13",
            "libnvrtc-builtins.so.13.0",
            "libnvJitLink.so.12",
            "libcufft.so.12",
            "libcusparse.so.12",
            "libcurand.so.10",
            "libcusolver.so.12",
        )
    }
    assert {n: c.major if c else None for n, c in decided.items()} == {
        "libcudart.so.12": 12,
        "libcublasLt.so.13": 13,
        "libnvrtc-builtins.so.13.0": 13,
        "libnvJitLink.so.12": 12,
        "libcufft.so.12": None,
        "libcusparse.so.12": None,
        "libcurand.so.10": None,
        "libcusolver.so.12": None,
    }


def test_torch_files_fall_back_to_torch_version(cu13_last: Installed) -> None:
    path = str(cu13_last.site / "torch" / f"_C{ext_suffix()}")
    found = cuda_major_of_file(cu13_last.env, path, read_elf(path))
    assert found is not None
    assert (found.major, found.by) == (12, Basis.METADATA)
    assert "12.8" in found.reason


def test_requires_dist_pin_decides_and_extras_do_not(cu13_last: Installed) -> None:
    path = str(cu13_last.site / "toolkit_user" / "libtkuser.so")
    found = cuda_major_of_file(cu13_last.env, path, read_elf(path))
    assert found is not None
    assert (found.major, found.by) == (13, Basis.METADATA)
    assert "cuda-toolkit" in found.reason


def _stub_cudart_12(folder: Path) -> Path:
    """A real libcudart.so.12 whose symbols carry the version node `libcudart.so.12`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stub.c").write_text("int cudaRuntimeGetVersion(int *v) { *v = 12080; return 0; }\n")
    (folder / "stub.map").write_text(
        "libcudart.so.12 { global: cudaRuntimeGetVersion; local: *; };\n"
    )
    out = folder / "libcudart.so.12"
    cc = os.environ.get("CC", "cc")
    assert shutil.which(cc) is not None
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-o",
            str(out),
            str(folder / "stub.c"),
            "-Wl,-soname,libcudart.so.12",
            f"-Wl,--version-script,{folder / 'stub.map'}",
        ],
        check=True,
        capture_output=True,
    )
    return out


def test_version_needs_decide_before_dt_needed(wheels: Wheels, cu13_last: Installed) -> None:
    folder = wheels.build / "verneed"
    stub = _stub_cudart_12(folder / "stub")
    consumer = compile_lib(
        folder / "consumer" / "libconsumer.so",
        soname="libconsumer.so",
        needed=[stub],
        # An unversioned need of a CUDA 13 library: DT_NEEDED alone would be a tie.
        extra_needed_names=["libcublas.so.13"],
        source=(
            "extern int cudaRuntimeGetVersion(int *);\n"
            "int consumer(void) { int v = 0; cudaRuntimeGetVersion(&v); return v; }\n"
        ),
    )
    info = read_elf(str(consumer))
    assert [n.file for n in info.version_needs if "cudart" in n.file] == ["libcudart.so.12"]
    assert "libcublas.so.13" in info.needed
    found = cuda_major_of_file(cu13_last.env, str(consumer), info)
    assert found is not None
    assert (found.major, found.by) == (12, Basis.VERSION_NEEDS)
    assert "libcudart.so.12" in found.reason


def test_torch_cuda_is_read_without_importing_torch(
    cu13_last: Installed, cu12_removed: Installed
) -> None:
    built = build(cu13_last.env)
    assert built is not None and built.cuda == "12.8"  # `cuda: Optional[str] = '12.8'`
    assert (built.name, built.said_by) == ("torch", "torch.version.cuda")
    cpu = build(cu12_removed.env)
    assert cpu is not None and cpu.cuda is None  # a CPU build: `cuda = None`


# -- mixed majors ---------------------------------------------------------------------------


def test_cuda12_torch_resolving_cuda13_cudnn_is_mixed(cu13_last: Installed) -> None:
    (mixed,) = mixed_majors(cu13_last.env)
    assert mixed.soname == "libcudnn.so.9"
    assert mixed.needed_by.endswith(f"torch/_C{ext_suffix()}")
    assert os.path.realpath(mixed.path) == str(cu13_last.site.resolve() / CUDNN)
    assert mixed.major == 13
    assert mixed.torch_cuda == "12.8"
    assert mixed.package == "torch"
    assert CU13 in mixed.reason


def test_matching_majors_are_not_mixed(cu12_last: Installed, cu12_removed: Installed) -> None:
    assert mixed_majors(cu12_last.env) == ()
    assert mixed_majors(cu12_removed.env) == ()  # a CPU torch has no CUDA major to mix
