"""Loaders compiled into a library: TSL's DSO loader, as TensorFlow builds it (2.12 on).

TensorFlow's libraries DT_NEED no CUDA library. When TF starts its GPU devices
(tensorflow/core/common_runtime/gpu/gpu_device.cc), it calls TSL's GPU check,
`tsl::internal::DsoLoader::MaybeTryDlopenGPULibraries()` -> `TryDlopenCUDALibraries()`
(xla/tsl/platform/default/dlopen_checker.cc), which opens cudart, cuBLAS, cuBLASLt, cuFFT,
cuSOLVER, cuSPARSE and cuDNN with `dlopen` by bare name (dso_loader.cc `GetDsoHandle(name,
version)`: "lib<name>.so.<version>", the version compiled in from the build's
`cuda_config.h`, TF_CUDART_VERSION, TF_CUBLAS_VERSION ...). Where one fails, TF logs "Cannot
dlopen some GPU libraries" and registers no GPU: it runs on the CPU.

A bare-name dlopen searches the *calling object's* DT_RUNPATH (or DT_RPATH), then
LD_LIBRARY_PATH, the cache and the default folders (glibc elf/dl-load.c, _dl_map_object
with the caller's link map): here the object the loader is compiled into. So the check is
modelled as a root of its own, that object loaded by path, then each name opened from its
code (cudatx.loader.roots, `runtime`).

Found by what the build ships, never by a distribution's name:
- the marker is TSL's build configuration as the wheel installs it
  (`<package>/include/third_party/gpus/cuda/cuda_config.h`), whose TF_*_VERSION macros give
  the names; `<package>/python/platform/build_info.py`'s `is_cuda_build` False (a CPU
  build: the check is compiled out) is no framework here;
- the object is the shared library of the package folder that exports the check
  (`_ZN3tsl8internal9DsoLoader22TryDlopenCUDALibrariesEv`). Where several export it
  (TF 2.16: libtensorflow_framework.so.2 and libtensorflow_cc.so.2), the one the others
  DT_NEED is taken: it is mapped first, so a call by name binds to its copy (elf/dl-lookup.c,
  the first definition in the lookup scope); TF 2.16.1's users met exactly that copy's
  RUNPATH (tensorflow/tensorflow#63362).

A cuda_config.h without a macro the check needs raises Shape: reported as not modelled.
Every wheel from 2.12.1 to 2.21 exports the check under this name and ships cuda_config.h;
2.11 and older export `stream_executor::internal::DsoLoader`'s and ship none (not read).

The check is a feature TF does without (`FrameworkLoads.optional_feature`): a plain
`pip install tensorflow` is the same GPU build with no CUDA wheel, and TF calls the check
only where the driver reports a GPU (gpu_device.cc), so none of its libraries installed is
a CPU install, not a broken one.
"""

from __future__ import annotations

import ast
import glob as globbing
import os
import re
from collections.abc import Iterator, Sequence

from cudatx.discover.frameworks import FrameworkStep, SiteFiles, data, exists, register
from cudatx.discover.frameworks.model import (
    FrameworkLoads,
    Installed,
    Open,
    RuntimeRoot,
    contexts_from_json,
)
from cudatx.discover.frameworks.source import Shape
from cudatx.paths import is_library_name

_CONFIG = "include/third_party/gpus/cuda/cuda_config.h"
_BUILD_INFO = "python/platform/build_info.py"
_DEFINE = re.compile(r'^\s*#\s*define\s+TF_([A-Z0-9_]+)_VERSION\s+"([^"]*)"', re.MULTILINE)

WHAT = (
    "GPU check (TSL's DSO loader; where it fails it logs \"Cannot dlopen some GPU "
    'libraries" and runs on the CPU)'
)


# The trial's steps (cudatx.trial): the check itself, called with ctypes in the library
# `find` finds in the environment judged. It returns an absl::Status: non-trivially
# copyable, so returned through a hidden pointer, the first argument on x86-64 (System V
# ABI); one word, 1 for OK (an inlined code), else a pointer to the failure (0: an older
# tsl::Status's null state, OK too).
_CHECK = """\
import ctypes, sys
lib = ctypes.CDLL({path!r})
status = ctypes.create_string_buffer(64)
getattr(lib, {symbol!r})(status)
if int.from_bytes(status.raw[:8], sys.byteorder) > 1:
    raise SystemExit('Cannot dlopen some GPU libraries: ' + {what!r})
"""
_X86_64 = 62  # e_machine EM_X86_64: the ABI the call above assumes

# TensorFlow's GPU start, where the trial's probe found a device. TensorFlow takes most of a
# GPU's memory at start unless told not to; the GPU starts run beside each other.
_GPU_START = """\
import os
os.environ.setdefault('TF_FORCE_GPU_ALLOW_GROWTH', 'true')
import tensorflow as tf
if not tf.test.is_built_with_cuda():
    raise SystemExit(0)  # a CPU build has no GPU start to judge
if not tf.config.list_physical_devices('GPU'):
    raise SystemExit('Cannot dlopen some GPU libraries: tensorflow lists no GPU')
"""


def _exporters(site: str, package: str, files: SiteFiles, *symbols: str) -> list[str]:
    """The shared libraries of the package folder that export TSL's GPU check (by default
    its name; else any of `symbols`), relative to the site folder."""
    wanted = {s.encode() for s in symbols or (str(data("tsl")["exports"]),)}
    out = []
    for path in sorted(files.glob(os.path.join(globbing.escape(os.path.join(site, package)), "*"))):
        if not is_library_name(os.path.basename(path)):
            continue
        defined = files.exports(path)
        if defined is not None and defined.bind_plain(wanted):
            out.append(os.path.relpath(path, site))
    return out


def _first_mapped(site: str, exporters: list[str], files: SiteFiles) -> str:
    """Of several exporters, the one another of them DT_NEEDs (mapped before it)."""
    needed = {n for rel in exporters for n in files.needed(os.path.join(site, rel))}
    return next((r for r in exporters if os.path.basename(r) in needed), exporters[0])


class TslReader:
    name = "tsl"
    markers: tuple[str, ...] = (f"*/{_CONFIG}", f"*/{_BUILD_INFO}")

    def find(self, site: str, marker: str, owner: str, files: SiteFiles) -> Installed | None:
        package = os.path.relpath(marker, site).split(os.sep)[0]
        if marker.endswith(_BUILD_INFO):
            return self._unreadable(site, package, owner, files)
        exporters = _exporters(site, package, files)
        if not exporters:
            return None  # no object here runs TSL's check
        sources = [f"{package}/{_CONFIG}"]
        if exists(files, os.path.join(site, package, _BUILD_INFO)):
            sources.append(f"{package}/{_BUILD_INFO}")
        # (reader, name, distribution, site, package, sources): the package folder is its name
        loader = _first_mapped(site, exporters, files)
        return Installed(self.name, package, owner, site, package, tuple(sources), loader=loader)

    def _unreadable(
        self, site: str, package: str, owner: str, files: SiteFiles
    ) -> Installed | None:
        """A build whose DSO loader exports the check (TSL's name, or stream_executor's of TF
        2.11 and older) and that ships no cuda_config.h: the names it opens are compiled in
        and read from nothing, which `read` says (not modelled), rather than pass it over."""
        if exists(files, os.path.join(site, package, _CONFIG)):
            return None  # read through its cuda_config.h, the other marker
        tsl = data("tsl")
        exporters = _exporters(site, package, files, str(tsl["exports"]), *tsl["older_exports"])
        if not exporters:
            return None
        loader = _first_mapped(site, exporters, files)
        sources = (f"{package}/{_BUILD_INFO}",)
        return Installed(self.name, package, owner, site, package, sources, loader=loader)

    def read(self, found: Installed, texts: dict[str, str]) -> FrameworkLoads:
        info = texts.get(f"{found.package}/{_BUILD_INFO}")
        if info is not None and _build_info(info).get("is_cuda_build") is False:
            return FrameworkLoads(roots=(), build_major=None, origin="")
        if found.sources[0].endswith(_BUILD_INFO):
            raise Shape(
                f"{found.loader} opens CUDA libraries by names compiled into it, and this "
                "release ships no cuda_config.h to read them from"
            )
        versions = dict(_DEFINE.findall(texts[found.sources[0]]))
        opens = []
        for name, macro in data("tsl")["check"]:
            if macro not in versions:
                raise Shape(f"cuda_config.h defines no TF_{macro}_VERSION")
            version = versions[macro]
            opens.append(Open((f"lib{name}.so" + (f".{version}" if version else ""),)))
        head = versions.get("CUDA", "").split(".")[0]
        root = RuntimeRoot(path=found.loader, what=WHAT, loads=(), runtime=tuple(opens))
        return FrameworkLoads(
            roots=(root,),
            build_major=int(head) if head.isdigit() else None,
            origin="",
            contexts=contexts_from_json(data("tsl")["contexts"]),
            optional_feature=True,
        )

    def steps(self, sites: Sequence[str], files: SiteFiles) -> Iterator[FrameworkStep]:
        """One step per loader compiled into a library installed in `sites` (found as `find`
        finds it, in the environment judged), then TensorFlow's GPU start."""
        for site in sites:
            for marker in self.markers:
                for found_at in sorted(files.glob(os.path.join(globbing.escape(site), marker))):
                    found = self.find(site, found_at, "", files)
                    if found is None or not found.sources[0].endswith(_CONFIG):
                        continue  # none, or one whose check is not read (not modelled)
                    path = os.path.join(site, found.loader)
                    if files.machine(path) != _X86_64:
                        continue
                    what = f"TSL's GPU check in {found.loader} failed; it would run on the CPU"
                    yield FrameworkStep(
                        f"{found.name}'s GPU check (TSL's DSO loader in {found.loader})",
                        found.loader,
                        _CHECK.format(path=path, symbol=str(data("tsl")["exports"]), what=what),
                        found.name.lower(),
                    )
        yield FrameworkStep(
            "tensorflow's GPU start (its GPU device list)",
            "tensorflow",
            _GPU_START,
            "tensorflow",
            gpu=True,
        )


def _build_info(text: str) -> dict[str, object]:
    """`build_info = collections.OrderedDict([(key, value), ...])`, its constant pairs."""
    out: dict[str, object] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            key, value = node.elts
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                try:
                    out[key.value] = ast.literal_eval(value)
                except ValueError:
                    continue
    return out


register(TslReader())
