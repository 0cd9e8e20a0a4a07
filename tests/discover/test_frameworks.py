"""cudatx.discover.frameworks on the real sources of JAX's CUDA 13 plugin, onnxruntime-gpu,
cuda-pathfinder and CuPy.

The files under tests/data/frameworks/ were taken from the release wheels (each folder's
SOURCE names the wheel and its sha256). What each release loads was read off its source by
hand; these tests hold the readers to it, and the shipped tables to the readers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudatx.discover.catalog import HandLoad, framework_loads_to_json, load_catalog
from cudatx.discover.frameworks import (
    Shape,
    parse_cupy_uses_pathfinder,
    parse_jax_plugin,
    parse_onnxruntime,
    parse_pathfinder,
    read_framework,
)
from tests.support.paths import DATA

FW = DATA / "frameworks"
JAX = FW / "jax-cuda13-pjrt-0.10.2" / "__init__.py"
ORT = FW / "onnxruntime-gpu-1.31.1"
PATHFINDER = FW / "cuda-pathfinder-1.9.1" / "descriptor_catalog.py"
CUPY = FW / "cupy-cuda13x-14.2.0" / "__init__.py"


def _framework(name: str):  # type: ignore[no-untyped-def]
    return next(f for f in load_catalog().frameworks if f.name == name)


def test_jax_plugin_list_as_written() -> None:
    loads, plugin = parse_jax_plugin(JAX.read_text())
    assert plugin == "xla_cuda_plugin.so"
    cu13 = [(ld.folders[0], ld.names[0]) for ld in loads if ld.folders[0].startswith("nvidia/cu13")]
    assert cu13 == [
        ("nvidia/cu13/lib", "libcudart.so.13"),
        ("nvidia/cu13/lib", "libnvrtc.so.13"),
        ("nvidia/cu13/lib", "libcublas.so.13"),
        ("nvidia/cu13/lib", "libcublasLt.so.13"),
        ("nvidia/cu13/lib", "libcupti.so.13"),
        ("nvidia/cu13/lib", "libcusparse.so.12"),
        ("nvidia/cu13/lib", "libcusolver.so.12"),
        ("nvidia/cu13/lib", "libcufft.so.12"),
    ]
    others = {ld.names[0]: ld.folders[0] for ld in loads}
    assert others["libnccl.so.2"] == "nvidia/nccl/lib"
    assert others["libnvshmem_host.so.3"] == "nvidia/nvshmem/lib"
    assert others["libcudnn.so.9"] == "nvidia/cudnn/lib"
    assert others["libcudart.so.12"] == "nvidia/cuda_runtime/lib"  # CUDA 12 layout, tried too
    # _load swallows every failure, and looks only in the module's own folder.
    assert all(not ld.required and not ld.by_name and ld.search == "package" for ld in loads)
    assert len(loads) == 19


def test_onnxruntime_preload_dlls_for_its_cuda_13_build() -> None:
    read = parse_onnxruntime(
        (ORT / "__init__.py").read_text(), (ORT / "build_and_package_info.py").read_text()
    )
    assert read.build_major == 13
    (root,) = read.roots
    assert root.path == "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    assert [(ld.folders, ld.names) for ld in root.loads] == [
        (("nvidia/cu13/lib",), ("libcublasLt.so.13",)),
        (("nvidia/cu13/lib",), ("libcublas.so.13",)),
        (("nvidia/cu13/lib",), ("libnvrtc.so.13",)),
        (("nvidia/cu13/lib",), ("libcurand.so.10",)),
        (("nvidia/cu13/lib",), ("libcufft.so.12",)),
        (("nvidia/cu13/lib",), ("libcudart.so.13",)),
        (("nvidia/cudnn/lib",), ("libcudnn.so.9",)),
    ]
    # By path from `<package>/..` where the file is, else by bare name; never raised.
    assert all(ld.search == "beside" and ld.by_name and not ld.required for ld in root.loads)


def test_onnxruntime_cuda_12_build_takes_the_per_component_folders() -> None:
    """The same source, evaluated for a CUDA 12 build, gives the older layout: the branch
    is taken from the build's cuda_version, not assumed."""
    read = parse_onnxruntime((ORT / "__init__.py").read_text(), "cuda_version = '12.8'\n")
    folders = [ld.folders[0] for ld in read.roots[0].loads]
    assert read.build_major == 12
    assert folders[:3] == ["nvidia/cublas/lib", "nvidia/cublas/lib", "nvidia/cuda_nvrtc/lib"]
    assert read.roots[0].loads[0].names == ("libcublasLt.so.12",)
    assert read.roots[0].loads[4].names == ("libcufft.so.11",)


def test_onnxruntime_cpu_build_is_not_read() -> None:
    with pytest.raises(Shape, match="CPU build"):
        parse_onnxruntime((ORT / "__init__.py").read_text(), "package_name = 'onnxruntime'\n")


def test_pathfinder_table_with_dependencies_first() -> None:
    table = parse_pathfinder(PATHFINDER.read_text())
    cublas = table["libcublas.so.13"]
    assert [ld.names for ld in cublas] == [
        ("libcublasLt.so.13", "libcublasLt.so.12"),
        ("libcublas.so.13", "libcublas.so.12"),
    ]
    assert cublas[1].folders == ("nvidia/cu13/lib", "nvidia/cublas/lib")
    assert all(ld.required and ld.by_name and ld.reuse_loaded for ld in cublas)
    assert table["libnccl.so.2"][-1].folders == ("nvidia/nccl/lib",)
    assert "libcuda.so.1" not in table  # the driver's: system-provided


def test_cupy_loads_through_pathfinder() -> None:
    parse_cupy_uses_pathfinder(CUPY.read_text())
    with pytest.raises(Shape):
        parse_cupy_uses_pathfinder("def __getattr__(name):\n    return name\n")


def test_jax_reader_refuses_a_shape_it_does_not_know() -> None:
    text = JAX.read_text().replace('_load("nccl", ["libnccl.so.2"])', "load_nccl()")
    with pytest.raises(Shape, match="other than _load"):
        parse_jax_plugin(text)


@pytest.mark.parametrize(
    ("name", "release", "files"),
    [
        ("jax_plugins/xla_cuda13", "0.10", [JAX]),
        ("onnxruntime", "1.31", [ORT / "__init__.py", ORT / "build_and_package_info.py"]),
    ],
)
def test_shipped_table_is_what_the_reader_reads(
    name: str, release: str, files: list[Path], tmp_path: Path
) -> None:
    framework = _framework(name)
    for source, file in zip(framework.sources, files, strict=True):
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(file, tmp_path / source)
    read = read_framework(framework, str(tmp_path), f"{release}.1")
    assert read.origin.startswith("read from ")
    assert framework_loads_to_json(read) == framework_loads_to_json(framework.releases[release])


def test_cupy_shipped_table_agrees_with_pathfinder(tmp_path: Path) -> None:
    framework = _framework("cupy")
    for source, file in zip(framework.sources, [CUPY, PATHFINDER], strict=True):
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(file, tmp_path / source)
    read = read_framework(framework, str(tmp_path), "14.2.0")
    shipped = framework.releases["14.2"].by_soname or {}
    assert read.by_soname is not None
    assert {k: read.by_soname[k] for k in shipped} == shipped


def test_falls_back_to_the_shipped_table_saying_why(tmp_path: Path) -> None:
    framework = _framework("jax_plugins/xla_cuda13")
    source = tmp_path / framework.sources[0]
    source.parent.mkdir(parents=True)
    source.write_text("def initialize():\n    pass\n")
    read = read_framework(framework, str(tmp_path), "0.10.2")
    assert read.origin == (
        "shipped table for jax-cuda13-pjrt 0.10 (no _load_nvidia_libraries and _load)"
    )
    assert read.roots == framework.releases["0.10"].roots
    unknown = read_framework(framework, str(tmp_path), "0.99.0")
    assert unknown.roots == ()
    assert unknown.origin.startswith("no load list for jax-cuda13-pjrt 0.99")


def test_hand_load_is_hashable_for_chaining() -> None:
    one = HandLoad(("a.so",), ("x",), "site", True)
    assert len({one, HandLoad(("a.so",), ("x",), "site", True)}) == 1
