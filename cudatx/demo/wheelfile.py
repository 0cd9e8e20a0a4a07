"""Write real wheels: a zip with a ``.dist-info`` holding METADATA, WHEEL and a hashed RECORD.

The one wheel writer of the project (the demo and the test fixtures both use it). It writes
what an installer needs and checks, nothing more:

- the file name ``{name}-{version}-{tag}.whl`` and the ``{name}-{version}.dist-info`` folder,
  with the name escaped as the wheel spec says (PEP 503-normalised, ``-`` -> ``_``) and the
  version normalised (PEP 440);
- METADATA 2.1 (``Name``, ``Version``, ``Summary``, ``Requires-Dist``), WHEEL 1.0 with
  ``Root-Is-Purelib: true`` and one ``Tag`` per expanded tag;
- RECORD with ``sha256=<urlsafe base64, no padding>`` and the size of every member, and
  ``<dist-info>/RECORD,,`` for itself, as the last member;
- unix modes in the zip: ``0o644``, and executable (``0o755``) for shared libraries
  (``*.so`` and ``*.so.N[.M...]``), as installers copy them.

Wheels are byte-reproducible: fixed timestamps, members in the order given.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import stat
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from packaging.utils import canonicalize_name
from packaging.version import Version

from cudatx.digest import record_encode

__all__ = [
    "dist_info_name",
    "escape_name",
    "record_hash",
    "wheel_file_name",
    "write_wheel",
]

# zip cannot store dates before 1980; a fixed one keeps wheels byte-reproducible.
_DATE_TIME = (2020, 1, 1, 0, 0, 0)
_SHARED_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")


def escape_name(name: str) -> str:
    """The distribution name as wheel file names and ``.dist-info`` folders spell it.

    ``Nvidia_CUDNN.cu12`` -> ``nvidia_cudnn_cu12`` (normalised, then ``-`` -> ``_``).
    """
    return str(canonicalize_name(name)).replace("-", "_")


def _escape_version(version: str) -> str:
    # A normalised PEP 440 version holds no '-'; local versions keep their '+'.
    return str(Version(version)).replace("-", "_")


def wheel_file_name(name: str, version: str, tag: str = "py3-none-any") -> str:
    return f"{escape_name(name)}-{_escape_version(version)}-{tag}.whl"


def dist_info_name(name: str, version: str) -> str:
    return f"{escape_name(name)}-{_escape_version(version)}.dist-info"


def record_hash(data: bytes) -> str:
    """``sha256=<urlsafe base64, no padding>``, as RECORD writes a hash."""
    return "sha256=" + record_encode(hashlib.sha256(data).digest())


def _member_path(path: str) -> str:
    pure = PurePosixPath(path)
    if not pure.parts or pure.is_absolute() or ".." in pure.parts or "\\" in path:
        raise ValueError(f"bad wheel member path {path!r}")
    return pure.as_posix()


def _expand_tag(tag: str) -> list[str]:
    """``py2.py3-none-any`` -> ``["py2-none-any", "py3-none-any"]`` (compressed tag sets)."""
    parts = tag.split("-")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"bad wheel tag {tag!r}: expected python-abi-platform")
    pythons, abis, platforms = parts
    return [
        f"{p}-{a}-{plat}"
        for p in pythons.split(".")
        for a in abis.split(".")
        for plat in platforms.split(".")
    ]


def _header_value(value: str, field: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError(f"{field} must be one line: {value!r}")
    return value


def write_wheel(
    out_dir: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes],
    *,
    requires: Sequence[str] = (),
    tag: str = "py3-none-any",
    summary: str | None = None,
    metadata_extra: Sequence[str] = (),
    modes: Mapping[str, int] | None = None,
    generator: str = "cudatx.demo.wheelfile (1.0)",
) -> Path:
    """Write ``<out_dir>/<name>-<version>-<tag>.whl`` (escaped) and return its path.

    ``files`` maps paths relative to the install root (``"nvidia/cudnn/lib/libcudnn.so.9"``)
    to their bytes. ``requires`` become ``Requires-Dist`` lines (markers allowed),
    ``summary`` the ``Summary`` line, ``metadata_extra`` further METADATA header lines.
    ``modes`` gives a member's unix mode (default ``0o644``); shared libraries are always
    made executable. Raises :class:`ValueError` for a bad member path, a duplicate member
    (after normalisation, or one that collides with the dist-info files) or a bad tag.
    """
    dist_info = dist_info_name(name, version)
    modes = modes or {}
    members: list[tuple[str, bytes, int]] = []  # (path, data, unix mode)
    for raw_path, data in files.items():
        path = _member_path(raw_path)
        mode = stat.S_IMODE(modes.get(raw_path, 0o644))
        if _SHARED_LIBRARY.search(path):
            mode |= 0o755
        members.append((path, bytes(data), mode))

    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {_header_value(name, 'name')}",
        f"Version: {_header_value(version, 'version')}",
    ]
    if summary is not None:
        metadata.append(f"Summary: {_header_value(summary, 'summary')}")
    metadata += [f"Requires-Dist: {_header_value(req, 'requirement')}" for req in requires]
    metadata += [_header_value(line, "metadata line") for line in metadata_extra]
    wheel = [
        "Wheel-Version: 1.0",
        f"Generator: {_header_value(generator, 'generator')}",
        "Root-Is-Purelib: true",
        *(f"Tag: {t}" for t in _expand_tag(tag)),
    ]
    for meta_name, lines in (("METADATA", metadata), ("WHEEL", wheel)):
        members.append((f"{dist_info}/{meta_name}", ("\n".join(lines) + "\n").encode(), 0o644))

    record_path = f"{dist_info}/RECORD"
    seen: set[str] = {record_path}
    for path, _, _ in members:
        if path in seen:
            raise ValueError(f"duplicate wheel member {path!r}")
        seen.add(path)

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
