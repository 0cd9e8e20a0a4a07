"""torch's preload reader (cudatx.discover.frameworks.torch) and cudatx.discover.preloads on
the real torch/__init__.py of every release from 2.4 to 2.14.

The files under tests/data/torch_inits/ were taken from the release wheels (each folder's
SOURCE names the wheel and its sha256). What each release does was read off its source by
hand; these tests hold the reader to it, and the shipped tables to the reader.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cudatx.discover.catalog import PreloadEntry, load_catalog, preloads_to_json
from cudatx.discover.frameworks.torch import parse_torch_init
from cudatx.discover.preloads import read_preloads
from tests.support.paths import DATA

INITS = DATA / "torch_inits"
RELEASES = sorted(
    (p.name for p in INITS.iterdir()), key=lambda v: tuple(int(x) for x in v.split("."))
)

FOLDER = "{entry}/nvidia/{folder}/lib/{glob}"
CU_MAJOR = "{entry}/nvidia/cu{cuda_major}/lib/{glob}"
BARE = "{entry}/{folder}/lib/{glob}"

# torch 2.10 to 2.14's list, in order (cuBLASLt before cuBLAS on purpose, say its comments).
LIST_2_10 = [
    "libcublasLt.so.*[0-9]",
    "libcublas.so.*[0-9]",
    "libcudnn.so.*[0-9]",
    "libnvrtc.so.*[0-9]",
    "libnvrtc-builtins.so.*[0-9]",
    "libcudart.so.*[0-9]",
    "libcupti.so.*[0-9]",
    "libcufft.so.*[0-9]",
    "libcurand.so.*[0-9]",
    "libnvJitLink.so.*[0-9]",
    "libcusparse.so.*[0-9]",
    "libcusparseLt.so.*[0-9]",
    "libcusolver.so.*[0-9]",
    "libnccl.so.*[0-9]",
    "libnvshmem_host.so.*[0-9]",
    "libcufile.so.*[0-9]",
]
NVTX = "libnvToolsExt.so.*[0-9]"


def _read(release: str) -> tuple[list[str], list[bool], list[str], list[bool]]:
    pre = parse_torch_init((INITS / release / "__init__.py").read_text())
    return (
        [e.pattern for e in pre.normal],
        [e.required for e in pre.normal],
        [e.pattern for e in pre.entries],
        [e.required for e in pre.entries],
    )


def test_every_release_from_2_4_to_2_14_is_here() -> None:
    minors = [".".join(r.split(".")[:2]) for r in RELEASES]
    assert minors == [f"2.{n}" for n in range(4, 15)]


@pytest.mark.parametrize("release", ["2.4.1", "2.5.1"])
def test_before_2_6_nothing_is_preloaded_on_the_normal_path(release: str) -> None:
    normal, _, failed, required = _read(release)
    assert normal == []
    assert all(required)  # every entry of the dict, nvtx included
    assert failed[-1] == NVTX
    pre = parse_torch_init((INITS / release / "__init__.py").read_text())
    assert pre.search == (FOLDER,)
    assert pre.nvidia_folder_required  # `if not os.path.exists(nvidia_path): continue`
    assert not pre.fallback_only_if_empty
    assert ("libnvJitLink.so.*[0-9]" in failed) == (release != "2.4.1")


@pytest.mark.parametrize("release", ["2.6.0", "2.7.1", "2.8.0"])
def test_2_6_to_2_8_preload_nvrtc_and_nvjitlink_once_the_wheel_cudart_is_mapped(
    release: str,
) -> None:
    normal, required, failed, _ = _read(release)
    assert normal == ["libnvrtc.so.*[0-9]", "libnvJitLink.so.*[0-9]"]
    assert all(required)  # a missing nvrtc ends the list before nvJitLink
    pre = parse_torch_init((INITS / release / "__init__.py").read_text())
    assert pre.gate == "nvidia/cuda_runtime/lib/libcudart.so"
    assert pre.search == (FOLDER, BARE)
    assert pre.nvidia_folder_required == (release == "2.6.0")
    assert pre.fallback_only_if_empty == (release == "2.6.0")
    assert "libcusparseLt.so.*[0-9]" in failed
    assert (NVTX in failed) == (release != "2.8.0")  # 2.8 loads no nvtx at all


@pytest.mark.parametrize("release", ["2.7.1", "2.8.0"])
def test_2_7_and_2_8_add_cufile_to_the_list_for_cuda_12_and_later(release: str) -> None:
    pre = parse_torch_init((INITS / release / "__init__.py").read_text())
    (cufile,) = [e for e in pre.entries if e.folder == "cufile"]
    assert cufile == PreloadEntry("cufile", "libcufile.so.*[0-9]", True, 12)


def test_2_9_preloads_nvrtc_its_builtins_and_nvjitlink_once_any_cudart_is_mapped() -> None:
    normal, required, failed, failed_required = _read("2.9.1")
    assert normal == ["libnvrtc.so.*[0-9]", "libnvrtc-builtins.so.*[0-9]", "libnvJitLink.so.*[0-9]"]
    assert all(required)
    pre = parse_torch_init((INITS / "2.9.1" / "__init__.py").read_text())
    assert pre.gate == "libcudart.so"
    assert pre.search == (FOLDER, CU_MAJOR, BARE)
    assert not pre.nvidia_folder_required and not pre.fallback_only_if_empty
    assert len(failed) == 15 and failed[-1] == NVTX
    assert failed_required == [True] * 14 + [False]  # nvtx optional from 2.9
    assert {"libnvshmem_host.so.*[0-9]", "libcufile.so.*[0-9]"} <= set(failed)


@pytest.mark.parametrize("release", ["2.10.0", "2.11.0", "2.12.1", "2.13.0"])
def test_2_10_to_2_13_preload_the_whole_list_up_to_the_first_missing(release: str) -> None:
    normal, required, failed, failed_required = _read(release)
    assert normal == [*LIST_2_10, NVTX]
    assert required == [True] * 16 + [False]  # required: a missing one ends it (swallowed)
    assert failed == [*LIST_2_10, NVTX]
    assert failed_required == [True] * 16 + [False]


def test_2_14_preloads_the_whole_list_best_effort() -> None:
    normal, required, failed, failed_required = _read("2.14.1")
    assert normal == [*LIST_2_10, NVTX]
    assert required == [False] * 17  # `_preload_cuda_deps(required=False)`: missing ones skipped
    assert failed == [*LIST_2_10, NVTX]
    assert failed_required == [True] * 16 + [False]
    pre = parse_torch_init((INITS / "2.14.1" / "__init__.py").read_text())
    assert pre.gate == "libcudart.so"
    assert pre.error_stems == tuple(p.split(".", 1)[0] for p in LIST_2_10)


@pytest.mark.parametrize("release", RELEASES)
def test_the_shipped_table_of_each_release_is_what_its_source_says(release: str) -> None:
    (torch,) = load_catalog().load_lists
    minor = ".".join(release.split(".")[:2])
    read = parse_torch_init((INITS / release / "__init__.py").read_text())
    assert preloads_to_json(torch.releases[minor]) == preloads_to_json(read)


def _installed(tmp_path: Path, text: str) -> Path:
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(text)
    return package


def test_an_unknown_shape_falls_back_to_that_releases_table_and_says_why(tmp_path: Path) -> None:
    (torch,) = load_catalog().load_lists
    text = (INITS / "2.9.1" / "__init__.py").read_text().replace("_load_global_deps", "_deps")
    package = _installed(tmp_path, text)
    pre = read_preloads(torch, str(package), "2.9.1+cu128")
    assert pre.origin.startswith("shipped table for torch 2.9 (")
    assert "no function _load_global_deps" in pre.origin
    assert json.dumps(preloads_to_json(pre)) == json.dumps(preloads_to_json(torch.releases["2.9"]))


def test_a_release_without_a_table_and_an_unreadable_source_preloads_nothing(
    tmp_path: Path,
) -> None:
    (torch,) = load_catalog().load_lists
    package = _installed(tmp_path, "def f(:\n")
    pre = read_preloads(torch, str(package), "2.3.1")
    assert pre.normal == () and pre.entries == ()
    assert pre.origin.startswith("no load list for torch 2.3 (")


def test_the_installed_source_wins_over_the_table(tmp_path: Path) -> None:
    (torch,) = load_catalog().load_lists
    package = _installed(tmp_path, (INITS / "2.13.0" / "__init__.py").read_text())
    pre = read_preloads(torch, str(package), "2.9.1")  # metadata says 2.9, the source is 2.13's
    assert pre.origin == f"read from {package / '__init__.py'}"
    assert [e.required for e in pre.normal][:16] == [True] * 16


def test_the_cuda_version_constant_is_read_bounded_and_never_from_a_fifo(tmp_path: Path) -> None:
    """torch/version.py's `cuda` is read as the scan reads any metadata: a regular file of
    at most MAX_METADATA bytes. A FIFO in its place (nobody writes it) is no version, and
    the read returns at once instead of holding the scan."""
    import threading

    from cudatx.discover.frameworks.source import constant
    from cudatx.reading import MAX_METADATA

    good = tmp_path / "version.py"
    good.write_text("from typing import Optional\ncuda: Optional[str] = '12.8'\n")
    assert constant(str(good), "cuda") == "12.8"
    big = tmp_path / "big.py"
    big.write_bytes(b"cuda = '12.8'\n" + b"#" * MAX_METADATA)
    assert constant(str(big), "cuda") is None
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    said: list[str | None] = []
    reading = threading.Thread(target=lambda: said.append(constant(str(fifo), "cuda")), daemon=True)
    reading.start()
    reading.join(timeout=10)
    assert said == [None]
