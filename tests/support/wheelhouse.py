"""Wheels of what this interpreter has installed, for a pip that must work offline.

pre-commit installs a `language: python` hook with pip, from the hook's repository, into an
environment of its own; pip then wants cudatx's dependencies and its build backend from an
index. The tests give it none (`PIP_NO_INDEX`) and this folder instead (`PIP_FIND_LINKS`):
each dependency repacked from the files its RECORD lists here (a file installed outside
site-packages, uv's binary, goes back under `.data/scripts/`; the console scripts pip
writes itself are left out), and setuptools as virtualenv ships it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudatx.demo.wheelfile import dist_info_name, wheel_file_name

# Written by the installer, not part of a wheel.
_INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")


def _closure(root: str) -> list[metadata.Distribution]:
    """`root` and what it requires (no extras), as installed here."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [root]
    while todo:
        name = str(canonicalize_name(todo.pop()))
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = dist
        for line in dist.requires or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def _repack(dist: metadata.Distribution, folder: Path) -> Path:
    name, version = dist.metadata["Name"], dist.version
    info = dist_info_name(name, version)
    wheel_meta = dist.read_text("WHEEL") or ""
    tags = [ln.split(":", 1)[1].strip() for ln in wheel_meta.splitlines() if ln.startswith("Tag:")]
    scripts = {ep.name for ep in dist.entry_points if ep.group == "console_scripts"}
    members: dict[str, bytes] = {}
    for file in dist.files or ():
        posix = file.as_posix()
        if "__pycache__" in file.parts or posix.endswith(".pyc"):
            continue
        if file.parts[0].endswith(".dist-info"):
            if file.name in _INSTALLER_FILES:
                continue
            posix = f"{info}/{file.name}" if len(file.parts) == 2 else posix
        elif file.parts[0] == "..":
            if file.name in scripts:
                continue  # pip writes its own launcher
            posix = f"{info.removesuffix('.dist-info')}.data/scripts/{file.name}"
        members[posix] = Path(str(dist.locate_file(file))).read_bytes()
    rows = []
    for path, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}")
    rows.append(f"{info}/RECORD,,")
    out = folder / wheel_file_name(name, version, tags[0] if tags else "py3-none-any")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in members.items():
            entry = zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0))
            # pip makes a script executable only where the mode says a regular file (S_IFREG).
            entry.external_attr = (0o100755 if "/scripts/" in path else 0o100644) << 16
            zf.writestr(entry, data, zipfile.ZIP_DEFLATED)
        zf.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return out


def wheelhouse(folder: Path, root: str = "cudatx") -> Path:
    """`folder` holding a wheel of each distribution `root` requires, installed here, and a
    setuptools to build `root` from its source; `root` itself is left to be built."""
    folder.mkdir(parents=True, exist_ok=True)
    for dist in _closure(root):
        if canonicalize_name(dist.metadata["Name"]) != canonicalize_name(root):
            _repack(dist, folder)
    import virtualenv.seed.wheels.embed as embedded

    setuptools = sorted(Path(embedded.__file__).parent.glob("setuptools-*.whl"))
    (folder / setuptools[-1].name).write_bytes(setuptools[-1].read_bytes())
    return folder
