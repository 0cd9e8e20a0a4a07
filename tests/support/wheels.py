"""Write real wheels for test fixtures: a thin wrapper over :mod:`cudatx.demo.wheelfile`.

The project has one wheel writer (``cudatx.wheelfile.write_wheel``); this module only adds
what fixtures like: members given as files to copy (their mode kept) as well as bytes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from cudatx.demo.wheelfile import dist_info_name, record_hash, wheel_file_name, write_wheel

__all__ = [
    "build_wheel",
    "dist_info_name",
    "normalize_name",
    "record_hash",
    "wheel_file_name",
]


def normalize_name(name: str) -> str:
    """PEP 503 normalisation (``Nvidia_CUDNN.cu12`` -> ``nvidia-cudnn-cu12``)."""
    return str(canonicalize_name(name))


def build_wheel(
    out_dir: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes | Path],
    *,
    requires: Sequence[str] = (),
    tag: str = "py3-none-any",
    metadata_extra: Sequence[str] = (),
) -> Path:
    """Write ``<out_dir>/<name>-<version>-<tag>.whl`` and return its path.

    ``files`` maps paths relative to site-packages (``"nvidia/cudnn/lib/libcudnn.so.9"``)
    to their bytes or to a file to copy (its mode is kept). ``.so`` members (``*.so`` and
    ``*.so.N``) are stored executable. ``requires`` become ``Requires-Dist`` lines;
    ``metadata_extra`` are further METADATA header lines. RECORD lists every member with
    its sha256 and size, and ``RECORD,,`` for itself.
    """
    data: dict[str, bytes] = {}
    modes: dict[str, int] = {}
    for path, content in files.items():
        if isinstance(content, bytes):
            data[path] = content
        else:
            data[path] = Path(content).read_bytes()
            modes[path] = stat.S_IMODE(os.stat(content).st_mode)
    return write_wheel(
        out_dir,
        name,
        version,
        data,
        requires=requires,
        tag=tag,
        metadata_extra=metadata_extra,
        modes=modes,
        generator="cudatx-tests (1.0)",
    )
