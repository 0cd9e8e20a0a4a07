"""Projects whose build runs code, and says so: to show that nothing builds behind a user's back.

:func:`tattling_project` writes a project folder with an in-tree PEP 517 build backend
(``backend-path = ["."]``, no build requirements, so it builds offline anywhere) that appends
one line to a marker file every time any of its hooks runs, then builds a real wheel. Its
version is dynamic: as with a ``setup.py`` project, a resolver learns it only by running the
backend. :func:`sdist_of` packs it as an sdist, as an index serves one.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

# Runs in uv's build environment (any Python >= 3.8), standard library only.
_BACKEND = r"""
import base64, hashlib, os, zipfile

NAME, VERSION, MARKER = {name!r}, {version!r}, {marker!r}
DIST = NAME.replace("-", "_") + "-" + VERSION


def _ran(hook):
    with open(MARKER, "a") as f:
        f.write(hook + "\n")


def _metadata():
    return "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (NAME, VERSION)


def get_requires_for_build_wheel(config_settings=None):
    _ran("get_requires_for_build_wheel")
    return []


def get_requires_for_build_editable(config_settings=None):
    _ran("get_requires_for_build_editable")
    return []


def get_requires_for_build_sdist(config_settings=None):
    _ran("get_requires_for_build_sdist")
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _ran("prepare_metadata_for_build_wheel")
    folder = os.path.join(metadata_directory, DIST + ".dist-info")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "METADATA"), "w") as f:
        f.write(_metadata())
    return DIST + ".dist-info"


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def _wheel(wheel_directory, hook):
    _ran(hook)
    name = DIST + "-py3-none-any.whl"
    members = {{
        NAME.replace("-", "_") + ".py": b"BUILT = True\n",
        DIST + ".dist-info/METADATA": _metadata().encode(),
        DIST + ".dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: tattle\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }}
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, data in members.items():
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append("%s,sha256=%s,%d" % (path, digest.decode(), len(data)))
        record.append(DIST + ".dist-info/RECORD,,")
        z.writestr(DIST + ".dist-info/RECORD", "\n".join(record) + "\n")
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, "build_wheel")


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, "build_editable")


def build_sdist(sdist_directory, config_settings=None):
    _ran("build_sdist")
    raise RuntimeError("not needed by these tests")
"""

_PYPROJECT = """[build-system]
requires = []
build-backend = "tattle_backend"
backend-path = ["."]

[project]
name = "{name}"
dynamic = ["version"]
"""


def tattling_project(folder: Path, name: str, version: str, marker: Path) -> Path:
    """A project folder whose every build hook appends its name to `marker`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(_PYPROJECT.format(name=name))
    source = _BACKEND.format(name=name, version=version, marker=str(marker))
    (folder / "tattle_backend.py").write_text(source)
    return folder


def sdist_of(project: Path, out: Path, name: str, version: str) -> Path:
    """`project` packed as `<out>/<name>-<version>.tar.gz`, as an index serves an sdist."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{name.replace('-', '_')}-{version}"
    archive = out / f"{stem}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(project.iterdir()):
            tar.add(path, arcname=f"{stem}/{path.name}")
        info = tarfile.TarInfo(f"{stem}/PKG-INFO")
        data = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return archive


def runs(marker: Path) -> list[str]:
    """The hooks that ran, in order (none when the marker was never written)."""
    return marker.read_text().split() if marker.exists() else []
