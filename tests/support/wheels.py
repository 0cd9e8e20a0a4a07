"""Write real wheels (zip + dist-info with METADATA, WHEEL and a hashed RECORD)."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import stat
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from packaging.version import Version

__all__ = [
    "build_wheel",
    "dist_info_name",
    "normalize_name",
    "record_hash",
    "wheel_file_name",
]

# A fixed timestamp keeps wheels byte-reproducible (zip cannot store dates before 1980).
_DATE_TIME = (2020, 1, 1, 0, 0, 0)


def normalize_name(name: str) -> str:
    """PEP 503 normalisation (``Nvidia_CUDNN.cu12`` -> ``nvidia-cudnn-cu12``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _escaped(name: str) -> str:
    # Wheel file names and .dist-info folders: the normalised name with '-' -> '_'.
    return normalize_name(name).replace("-", "_")


def wheel_file_name(name: str, version: str, tag: str = "py3-none-any") -> str:
    return f"{_escaped(name)}-{Version(version)}-{tag}.whl"


def dist_info_name(name: str, version: str) -> str:
    return f"{_escaped(name)}-{Version(version)}.dist-info"


def record_hash(data: bytes) -> str:
    """``sha256=<urlsafe base64, no padding>`` as RECORD writes it."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _check_member(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or "\\" in path:
        raise ValueError(f"bad wheel member path {path!r}")
    return pure.as_posix()


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
    dist_info = dist_info_name(name, version)
    members: list[tuple[str, bytes, int]] = []  # (path, data, unix mode)
    for raw_path, content in files.items():
        path = _check_member(raw_path)
        if isinstance(content, bytes):
            data, mode = content, 0o644
        else:
            data, mode = Path(content).read_bytes(), stat.S_IMODE(os.stat(content).st_mode)
        if re.search(r"\.so(\.[0-9]+)*$", path):
            mode |= 0o755
        members.append((path, data, mode))

    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        *(f"Requires-Dist: {req}" for req in requires),
        *metadata_extra,
    ]
    wheel = [
        "Wheel-Version: 1.0",
        "Generator: cudatx-tests (1.0)",
        "Root-Is-Purelib: true",
        *(f"Tag: {t}" for t in _expand_tag(tag)),
    ]
    for meta_name, lines in (("METADATA", metadata), ("WHEEL", wheel)):
        members.append((f"{dist_info}/{meta_name}", ("\n".join(lines) + "\n").encode(), 0o644))

    seen: set[str] = set()
    for path, _, _ in members:
        if path in seen:
            raise ValueError(f"duplicate wheel member {path!r}")
        seen.add(path)

    record_path = f"{dist_info}/RECORD"
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for path, data, _ in members:
        writer.writerow([path, record_hash(data), str(len(data))])
    writer.writerow([record_path, "", ""])
    members.append((record_path, buf.getvalue().encode(), 0o644))

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / wheel_file_name(name, version, tag)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data, mode in members:
            info = zipfile.ZipInfo(path, date_time=_DATE_TIME)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return target


def _expand_tag(tag: str) -> list[str]:
    """``py2.py3-none-any`` -> ``["py2-none-any", "py3-none-any"]`` (compressed tag sets)."""
    pythons, abis, platforms = tag.split("-")
    return [
        f"{p}-{a}-{plat}"
        for p in pythons.split(".")
        for a in abis.split(".")
        for plat in platforms.split(".")
    ]
