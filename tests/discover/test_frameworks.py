"""cudatx.discover.frameworks on the real sources of JAX's CUDA plugins, onnxruntime-gpu, CuPy
and cuda-pathfinder, several releases of each (tests/data/frameworks/README.md says which
wheel each file came from).

Each test lays the released files out as a site folder and asks the registered readers what
is installed there and what it loads, as a scan does. What each release loads was read off
its source by hand; these tests hold the readers to it.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cudatx.discover.frameworks import (
    FrameworkStep,
    SiteFiles,
    find_installed,
    read_installed,
    readers,
)
from cudatx.discover.frameworks.model import FrameworkLoads, HandLoad, Installed, Open
from cudatx.discover.frameworks.source import Shape
from cudatx.loader.fileview import FileView
from cudatx.planning.models import BrokenRoot, Plan
from cudatx.trial.judge import Stepped
from cudatx.trial.run import Judged, TrialRun, _judged
from cudatx.trial.session import _judged_here
from cudatx.trial.shadow import Shadow
from cudatx.trial.verdict import compare
from tests.support.cbuild import compile_lib
from tests.support.paths import DATA
from tests.support.tsl_world import SYMBOL

FW = DATA / "frameworks"


def _site(tmp_path: Path, *releases: str) -> Path:
    """A site folder holding the files of these releases (folders of tests/data/frameworks),
    each owned by its distribution."""
    site = tmp_path / "site-packages"
    for release in releases:
        shutil.copytree(FW / release, site, dirs_exist_ok=True)
    return site


def _found(site: Path) -> tuple[Installed, ...]:
    return find_installed((str(site),), lambda p: "dist", FileView(None))


def _read(site: Path, reader: str) -> tuple[Installed, FrameworkLoads]:
    (found,) = [f for f in _found(site) if f.reader == reader]
    return found, read_installed(found, FileView(None))


def test_every_reader_is_registered_by_name() -> None:
    assert set(readers()) >= {"jax", "onnxruntime", "cupy", "tsl"}


# -- JAX ----------------------------------------------------------------------------------


def _plugin(tmp_path: Path, *releases: str, package: str = "xla_cuda12") -> FrameworkLoads:
    site = _site(tmp_path, *releases)
    found, loads = _read(site, "jax")
    assert found.name == f"jax_plugins/{package}"
    assert loads.read, loads.origin
    return loads


def test_jax_0_4_26_opens_nothing_by_hand_and_checks_nothing(tmp_path: Path) -> None:
    """No `_load_nvidia_libraries`, and no version check in the plugin or a jax here: the
    plugin's own stubs, by bare name through its RPATH, are all it has (optional)."""
    loads = _plugin(tmp_path, "jax-cuda12-pjrt-0.4.26")
    (root,) = loads.roots
    assert root.path == "jax_plugins/xla_cuda12/xla_cuda_plugin.so"
    assert root.loads == ()
    versions, extension = root.modules
    assert versions.modules == ("jax_cuda12_plugin._versions", "jaxlib._versions")
    assert versions.opens == ()
    assert extension.modules == (
        "jax_cuda12_plugin.cuda_plugin_extension",
        "jaxlib.cuda_plugin_extension",
    )
    assert Open(("libcudart.so.12",)) in root.optional_runtime
    assert loads.build_major == 12


def test_jax_0_4_31_reads_jax_s_own_version_check(tmp_path: Path) -> None:
    """Before 0.6 the check is jax's (jax/_src/xla_bridge.py), cuSOLVER included."""
    loads = _plugin(tmp_path, "jax-cuda12-pjrt-0.4.31", "jax-0.4.31")
    (root,) = loads.roots
    assert root.loads == ()
    assert [o.build[0] for o in root.modules[0].opens] == [
        "libcudart.so.12",
        "libcudnn.so.9",
        "libcufft.so.11",
        "libcusolver.so.11",
        "libcupti.so.12",
        "libcublas.so.12",
        "libcusparse.so.12",
    ]
    # cuDNN 8 or 9: the one a RECORD here lists (0.4.26 was built against 8.9); cuPTI falls
    # back to whatever `libcupti.so` the system has (TSL's GetCuptiDsoHandle).
    assert root.modules[0].opens[1] == Open(("libcudnn.so.9", "libcudnn.so.8"))
    assert root.modules[0].opens[4] == Open(("libcupti.so.12",), ("libcupti.so",))


def test_jax_0_6_2_loads_cuda_12_folders_and_checks_without_cusolver(tmp_path: Path) -> None:
    loads = _plugin(tmp_path, "jax-cuda12-pjrt-0.6.2")
    (root,) = loads.roots
    assert [(ld.folders[0], ld.names[0]) for ld in root.loads][:3] == [
        ("nvidia/cuda_runtime/lib", "libcudart.so.12"),
        ("nvidia/cuda_nvrtc/lib", "libnvrtc.so.12"),
        ("nvidia/cublas/lib", "libcublas.so.12"),
    ]
    assert len(root.loads) == 11
    assert all(not ld.required and ld.search == "package" for ld in root.loads)
    # The cuSOLVER check is commented out in the source: not made.
    assert [o.build[0] for o in root.modules[0].opens] == [
        "libcudart.so.12",
        "libcudnn.so.9",
        "libcufft.so.11",
        "libcupti.so.12",
        "libcublas.so.12",
        "libcusparse.so.12",
    ]
    assert root.modules[0].why == "JAX's version check"


def test_jax_0_10_2_tries_cuda_13_folders_too(tmp_path: Path) -> None:
    loads = _plugin(tmp_path, "jax-cuda12-pjrt-0.10.2")
    (root,) = loads.roots
    folders = [ld.folders[0] for ld in root.loads]
    assert "nvidia/cu13/lib" in folders and "nvidia/cuda_runtime/lib" in folders
    assert len(root.loads) == 19
    assert root.modules[0].modules[:2] == (
        "jax_cuda13_plugin._versions",
        "jax_cuda12_plugin._versions",
    )
    assert [c.name for c in loads.contexts] == ["jax alone", "after `import torch`"]


def test_jax_cuda_13_plugin_opens_cuda_13_names(tmp_path: Path) -> None:
    loads = _plugin(tmp_path, "jax-cuda13-pjrt-0.12.1", package="xla_cuda13")
    assert loads.build_major == 13
    (root,) = loads.roots
    assert [o.build[0] for o in root.modules[0].opens] == [
        "libcudart.so.13",
        "libcudnn.so.9",
        "libcufft.so.12",
        "libcupti.so.13",
        "libcublas.so.13",
        "libcusparse.so.12",
    ]


def test_a_jax_plugin_of_another_platform_is_not_a_cuda_framework(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "jax_plugins" / "xla_rocm7").mkdir(parents=True)
    (site / "jax_plugins" / "xla_rocm7" / "__init__.py").write_text(
        "def initialize():\n    xb.register_plugin('rocm', library_path='x.so')\n"
    )
    assert _found(site) == ()


def test_a_jax_plugin_for_a_cuda_major_without_names_is_not_modelled(tmp_path: Path) -> None:
    site = _site(tmp_path, "jax-cuda12-pjrt-0.10.2")
    (site / "jax_plugins" / "xla_cuda12").rename(site / "jax_plugins" / "xla_cuda99")
    _, loads = _read(site, "jax")
    assert not loads.read
    assert loads.origin == "no library names known for CUDA 99 (jax.json)"


def test_a_jax_source_of_a_shape_not_known_is_not_modelled(tmp_path: Path) -> None:
    site = _site(tmp_path, "jax-cuda12-pjrt-0.10.2")
    init = site / "jax_plugins" / "xla_cuda12" / "__init__.py"
    init.write_text(init.read_text().replace('_load("nccl", ["libnccl.so.2"])', "load_nccl()"))
    _, loads = _read(site, "jax")
    assert not loads.read and "other than _load" in loads.origin


# -- onnxruntime --------------------------------------------------------------------------


def _ort(tmp_path: Path, release: str) -> tuple[Installed, FrameworkLoads]:
    site = _site(tmp_path, release)
    provider = site / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"
    provider.parent.mkdir(parents=True, exist_ok=True)
    provider.write_bytes(b"")
    found, loads = _read(site, "onnxruntime")
    assert loads.read, loads.origin
    (root,) = loads.roots
    assert root.path == "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    assert root.first == ("onnxruntime/capi/libonnxruntime_providers_shared.so",)
    return found, loads


@pytest.mark.parametrize("release", ["onnxruntime-gpu-1.17.1", "onnxruntime-gpu-1.20.2"])
def test_onnxruntime_before_preload_dlls_loads_after_torch(tmp_path: Path, release: str) -> None:
    """No preload_dlls(), no build info: the provider's DT_NEEDED are met after `import
    torch` (or by LD_LIBRARY_PATH); its CUDA major is its DT_NEEDED's (build_major None)."""
    found, loads = _ort(tmp_path, release)
    assert found.sources == ("onnxruntime/__init__.py",)
    assert loads.roots[0].loads == ()
    assert loads.build_major is None
    assert [(c.name, c.primary, c.expected) for c in loads.contexts] == [
        ("after `import torch`", True, True),
        ("onnxruntime alone", False, False),
    ]


def test_onnxruntime_1_21_preloads_cuda_12(tmp_path: Path) -> None:
    _, loads = _ort(tmp_path, "onnxruntime-gpu-1.21.1")
    assert loads.build_major == 12
    assert [(ld.folders, ld.names) for ld in loads.roots[0].loads] == [
        (("nvidia/cublas/lib",), ("libcublasLt.so.12",)),
        (("nvidia/cublas/lib",), ("libcublas.so.12",)),
        (("nvidia/cuda_nvrtc/lib",), ("libnvrtc.so.12",)),
        (("nvidia/curand/lib",), ("libcurand.so.10",)),
        (("nvidia/cufft/lib",), ("libcufft.so.11",)),
        (("nvidia/cuda_runtime/lib",), ("libcudart.so.12",)),
        (("nvidia/cudnn/lib",), ("libcudnn.so.9",)),
    ]
    assert loads.contexts[0].name == "after `onnxruntime.preload_dlls()`"


def test_onnxruntime_1_21_preloads_nothing_for_another_cuda_major(tmp_path: Path) -> None:
    """1.21's preload_dlls returns early unless the build's cuda_version starts with 12."""
    site = _site(tmp_path, "onnxruntime-gpu-1.21.1")
    info = site / "onnxruntime" / "capi" / "build_and_package_info.py"
    info.write_text(info.read_text().replace("cuda_version = '12.2'", "cuda_version = '11.8'"))
    (site / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so").write_bytes(b"")
    _, loads = _read(site, "onnxruntime")
    assert loads.roots[0].loads == () and loads.build_major == 11


def test_onnxruntime_1_26_has_no_plugin_ep_function_and_is_read(tmp_path: Path) -> None:
    """The release that broke the reader before: no _get_cuda_plugin_ep_library_path."""
    _, loads = _ort(tmp_path, "onnxruntime-gpu-1.26.0")
    assert loads.build_major == 12
    names = [ld.names[0] for ld in loads.roots[0].loads]
    assert names == [
        "libcublasLt.so.12",
        "libcublas.so.12",
        "libnvrtc.so.12",
        "libcurand.so.10",
        "libcufft.so.11",
        "libcudart.so.12",
        "libcudnn.so.9",
    ]
    # By path from `<package>/..` where the file is, else by bare name; never raised.
    assert all(
        ld.search == "beside" and ld.by_name and not ld.required for ld in loads.roots[0].loads
    )


def test_onnxruntime_1_31_cuda_13(tmp_path: Path) -> None:
    _, loads = _ort(tmp_path, "onnxruntime-gpu-1.31.1")
    assert loads.build_major == 13
    assert [(ld.folders[0], ld.names[0]) for ld in loads.roots[0].loads][:2] == [
        ("nvidia/cu13/lib", "libcublasLt.so.13"),
        ("nvidia/cu13/lib", "libcublas.so.13"),
    ]


def test_onnxruntime_without_a_cuda_provider_is_no_framework(tmp_path: Path) -> None:
    site = _site(tmp_path, "onnxruntime-gpu-1.26.0")
    assert [f for f in _found(site) if f.reader == "onnxruntime"] == []


# -- CuPy ---------------------------------------------------------------------------------


def _cupy(tmp_path: Path, *releases: str) -> FrameworkLoads:
    _, loads = _read(_site(tmp_path, *releases), "cupy")
    assert loads.read, loads.origin
    assert loads.optional_roots
    assert [c.name for c in loads.contexts] == ["cupy alone", "after `import torch`"]
    return loads


def test_cupy_12_preloads_nothing_from_wheels(tmp_path: Path) -> None:
    assert _cupy(tmp_path, "cupy-cuda12x-12.3.0").by_soname == {}


def test_cupy_13_preloads_nccl_and_cutensor_from_their_wheels(tmp_path: Path) -> None:
    """_environment._preload_library: the wheel's file where it is, a failure warned."""
    table = _cupy(tmp_path, "cupy-cuda12x-13.6.0").by_soname
    assert table == {
        "libnccl.so.2": (HandLoad(("libnccl.so.2",), ("nvidia/nccl/lib",), "site", False),),
        "libcutensor.so.2": (HandLoad(("libcutensor.so.2",), ("cutensor/lib",), "site", False),),
    }


def test_cupy_14_0_through_pathfinder_1_3(tmp_path: Path) -> None:
    """supported_nvidia_libs.py: lib<name>.so, else lib<name>.so* in each folder; then the
    sonames bare, newest first; dependencies first."""
    table = _cupy(tmp_path, "cupy-cuda12x-14.0.0", "cuda-pathfinder-1.3.3").by_soname or {}
    cublas = table["libcublas.so.12"]
    assert [ld.names for ld in cublas] == [
        ("libcublasLt.so", "libcublasLt.so*"),
        ("libcublas.so", "libcublas.so*"),
    ]
    assert cublas[1].bare == ("libcublas.so.13", "libcublas.so.12", "libcublas.so")
    assert cublas[1].folders == ("nvidia/cu13/lib", "nvidia/cublas/lib")
    assert all(ld.required and ld.by_name and ld.reuse_loaded for ld in cublas)
    assert [ld.names[0] for ld in table["libcusolver.so.11"]] == [
        "libnvJitLink.so",
        "libcusparse.so",
        "libcublasLt.so",
        "libcublas.so",
        "libcusolver.so",
    ]


def test_cupy_14_2_through_pathfinder_1_9(tmp_path: Path) -> None:
    table = _cupy(tmp_path, "cupy-cuda12x-14.2.0", "cuda-pathfinder-1.9.1").by_soname or {}
    assert [ld.names for ld in table["libcublas.so.12"]] == [
        ("libcublasLt.so.13", "libcublasLt.so.12"),
        ("libcublas.so.13", "libcublas.so.12"),
    ]
    assert table["libnccl.so.2"][-1].folders == ("nvidia/nccl/lib",)
    assert table["libcutensor.so.2"][-1].folders == ("cutensor/lib",)
    assert "libcuda.so.1" not in table  # the driver's: system-provided


def test_cupy_14_without_pathfinder_beside_it_is_not_modelled(tmp_path: Path) -> None:
    _, loads = _read(_site(tmp_path, "cupy-cuda12x-14.2.0"), "cupy")
    assert not loads.read
    assert "cuda-pathfinder, which is not installed beside it" in loads.origin


def test_what_a_reader_read_is_kept_in_the_scan_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cudatx.cache
    from cudatx.cache import open_cache

    monkeypatch.setattr(cudatx.cache, "RACY_NS", 0)  # files written just now count as settled
    site = _site(tmp_path, "onnxruntime-gpu-1.26.0")
    (site / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so").write_bytes(b"")
    (found,) = _found(site)
    environ = {"CUDATX_CACHE_DIR": str(tmp_path / "cache")}
    cache = open_cache(environ)
    assert cache is not None
    first = read_installed(found, FileView(cache), cache)
    cache.close()
    cache = open_cache(environ)
    assert cache is not None
    hits = cache.hits
    from cudatx.discover import frameworks

    frameworks._PARSED.clear()
    assert read_installed(found, FileView(cache), cache) == first
    assert cache.hits == hits + 1
    cache.close()


def test_cupy_14_modules_imported_after_a_pathfinder_load(tmp_path: Path) -> None:
    """`__getattr__` asks cuda-pathfinder for each library before it imports the module:
    every submodule of `_submodules` (`cusparselt` asks for `cusparseLt`), and `cupy.cuda`'s
    cuFFT branch. The module is the root; what pathfinder loads comes first."""
    loads = _cupy(tmp_path, "cupy-cuda12x-14.2.0", "cuda-pathfinder-1.9.1")
    roots = {r.path: r for r in loads.roots}
    assert set(roots) == {
        "cupy_backends.cuda.libs.cublas",
        "cupy_backends.cuda.libs.cusolver",
        "cupy_backends.cuda.libs.cusparse",
        "cupy_backends.cuda.libs.curand",
        "cupy_backends.cuda.libs.nccl",
        "cupy_backends.cuda.libs.cutensor",
        "cupy_backends.cuda.libs.cusparselt",
        "cupy.cuda.cufft",
    }
    assert all(r.is_module for r in roots.values())
    assert roots["cupy_backends.cuda.libs.cusparselt"].loads[-1].names == ("libcusparseLt.so.0",)
    assert roots["cupy.cuda.cufft"].loads[-1].names == ("libcufft.so.12", "libcufft.so.11")
    assert [ld.names[0] for ld in roots["cupy_backends.cuda.libs.cusolver"].loads] == [
        "libnvJitLink.so.13",
        "libcusparse.so.12",
        "libcublasLt.so.13",
        "libcublas.so.13",
        "libcusolver.so.12",
    ]


# -- TensorFlow (TSL's DSO loader) --------------------------------------------------------

# The two libraries of a TF wheel, as built: each exports TSL's check or not, as `nm -D`
# showed for each release (2.16.1: both; 2.21.0: libtensorflow_framework.so.2 only), and
# libtensorflow_cc.so.2 DT_NEEDs libtensorflow_framework.so.2.
_EXPORTS = {
    "tensorflow-2.16.1": ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2"),
    "tensorflow-2.21.0": ("libtensorflow_framework.so.2",),
}
_CHECK = "libcudart.so.12 libcublas.so.12 libcublasLt.so.12 libcufft.so.11 libcusolver.so.11"


def _tensorflow(tmp_path: Path, release: str) -> Path:
    site = _site(tmp_path, release)
    folder = site / "tensorflow"
    exporting = f'int check(void) __asm__("{SYMBOL}");\nint check(void) {{ return 0; }}\n'
    framework = compile_lib(
        folder / "libtensorflow_framework.so.2",
        soname="libtensorflow_framework.so.2",
        source=exporting if "libtensorflow_framework.so.2" in _EXPORTS[release] else None,
    )
    compile_lib(
        folder / "libtensorflow_cc.so.2",
        soname="libtensorflow_cc.so.2",
        needed=[framework],
        source=exporting if "libtensorflow_cc.so.2" in _EXPORTS[release] else None,
    )
    return site


@pytest.mark.parametrize(
    ("release", "cudnn"),
    [("tensorflow-2.16.1", "libcudnn.so.8"), ("tensorflow-2.21.0", "libcudnn.so.9")],
)
def test_tensorflow_s_gpu_check_opens_what_its_build_config_names(
    tmp_path: Path, release: str, cudnn: str
) -> None:
    """The names come from the release's own cuda_config.h (cuDNN 8 in 2.16.1, 9 in 2.21.0);
    the caller is libtensorflow_framework.so.2, which 2.16.1's libtensorflow_cc.so.2 DT_NEEDs
    (both export the check there)."""
    found, loads = _read(_tensorflow(tmp_path, release), "tsl")
    assert loads.read, loads.origin
    assert found.name == "tensorflow"
    assert found.loader == "tensorflow/libtensorflow_framework.so.2"
    (root,) = loads.roots
    assert root.path == found.loader and root.loads == () and root.modules == ()
    assert [o.build for o in root.runtime] == [
        (n,) for n in (*_CHECK.split(), "libcusparse.so.12", cudnn)
    ]
    assert loads.build_major == 12
    assert [c.name for c in loads.contexts if c.primary] == ["alone"]


def test_tensorflow_without_an_exporter_is_no_compiled_loader(tmp_path: Path) -> None:
    site = _site(tmp_path, "tensorflow-2.21.0")
    compile_lib(site / "tensorflow" / "libtensorflow_framework.so.2")
    assert [f for f in _found(site) if f.reader == "tsl"] == []


def test_a_cpu_build_opens_nothing(tmp_path: Path) -> None:
    site = _tensorflow(tmp_path, "tensorflow-2.21.0")
    info = site / "tensorflow" / "python" / "platform" / "build_info.py"
    info.write_text(info.read_text().replace("('is_cuda_build', True)", "('is_cuda_build', False)"))
    _, loads = _read(site, "tsl")
    assert loads.read and loads.roots == ()


def test_a_config_without_a_version_the_check_needs_is_not_modelled(tmp_path: Path) -> None:
    site = _tensorflow(tmp_path, "tensorflow-2.21.0")
    config = site / "tensorflow" / "include" / "third_party" / "gpus" / "cuda" / "cuda_config.h"
    config.write_text(config.read_text().replace("TF_CUSOLVER_VERSION", "TF_OTHER_VERSION"))
    _, loads = _read(site, "tsl")
    assert not loads.read and "TF_CUSOLVER_VERSION" in loads.origin


# -- a framework added by one module: its trial step ----------------------------------------


class _ToyReader:
    """A framework whose own code loads a library before use: its reader declares that load
    as a trial step, as cudatx/discover/frameworks/NAME.py would."""

    name = "toyfw"
    markers: tuple[str, ...] = ()

    def __init__(self, site: Path) -> None:
        self.site = site

    def find(self, site: str, marker: str, owner: str, files: SiteFiles) -> Installed | None:
        return None

    def read(self, found: Installed, texts: dict[str, str]) -> FrameworkLoads:
        raise Shape("a toy")

    def steps(self, sites: Sequence[str], files: SiteFiles) -> Iterator[FrameworkStep]:
        code = f"import sys; sys.path.insert(0, {str(self.site)!r}); import toyfw; toyfw.load()"
        yield FrameworkStep("toyfw's own load step", "toyfw", code, "toyfw")


_TOY_STEP = "toyfw's own load step"


def _toy_judged(site: Path, cwd: Path) -> Judged:
    """The trial's judgement of a site folder, as its session makes it in the shadow."""
    spec = {
        "prefix": str(cwd),
        "ld_library_path": None,
        "python": sys.executable,
        "timeout": 60.0,
        "sites": [str(site)],
        "commands": [],
        "jobs": 1,
    }
    return _judged(_judged_here(spec, str(cwd)))


def _toy_plan(*broken_roots: BrokenRoot) -> Plan:
    return Plan(
        prefix="/env",
        safe=True,
        remove=(),
        reinstall=(),
        broken=(),
        broken_roots=broken_roots,
        rebound=(),
        requirements_broken=(),
        requirements_checked=True,
        left_hollow=(),
        preexisting=(),
        repair=None,
        notes=(),
    )


def test_a_readers_trial_step_is_run_by_the_trial_and_paired_by_its_framework(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site-packages"
    (site / "toyfw").mkdir(parents=True)
    package = site / "toyfw" / "__init__.py"
    package.write_text("def load():\n    pass\n")
    monkeypatch.setitem(readers(), "toyfw", _ToyReader(site))
    before = _toy_judged(site, tmp_path)
    assert before.outcomes[_TOY_STEP].ok, before.outcomes[_TOY_STEP]
    assert before.steps[_TOY_STEP] == Stepped("toyfw", False)
    package.write_text(
        "def load():\n    raise OSError('libtoy.so.1: cannot open shared object file')\n"
    )
    after = _toy_judged(site, tmp_path)
    assert after.outcomes[_TOY_STEP].error == "OSError: libtoy.so.1: cannot open shared object file"

    shade = Shadow("copy", str(tmp_path), str(tmp_path), str(tmp_path), 0.0, 0)
    run = TrialRun(shade, before, after, 0.0, None)
    # The model saw the framework's root break: the step's break is the one it expected.
    root = BrokenRoot(
        root=str(site / "toyfw" / "libtoyfw.so"),
        dist="toyfw",
        first_missing="libtoy.so.1",
        framework="toyfw's loader",
        context="alone",
    )
    judged = compare(_toy_plan(root), run, (str(site),)).trial
    assert judged is not None
    (row,) = [r for r in judged.roots if r.check == _TOY_STEP]
    assert (row.model, row.trial, row.disagreement) == ("breaks", "breaks", None)
    # A model that saw nothing break missed it.
    judged = compare(_toy_plan(), run, (str(site),)).trial
    assert judged is not None
    (row,) = [r for r in judged.roots if r.check == _TOY_STEP]
    assert (row.model, row.trial) == ("loads", "breaks")
    assert row.disagreement is not None and row.disagreement.startswith("the model missed")
