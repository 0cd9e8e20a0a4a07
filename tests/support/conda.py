"""conda packages installed by hand into a real prefix, with real `conda-meta` records.

No conda channel is reachable from the machines the tests run on, so the tests install
conda packages the way conda's own link step leaves them (conda/core/link.py and
path_actions.py): every file written into the prefix (a text file with a prefix placeholder
rewritten to the prefix), every softlink made, and a PrefixRecord written to
`conda-meta/NAME-VERSION-BUILD.json` in the documented format: the package's index.json
fields, `files`, and `paths_data` (`paths_version` 1; per path `_path`, `path_type`,
`sha256`, `size_in_bytes`, and `sha256_in_prefix`, the digest of the bytes as linked). Each
digest and size is computed from the real file here; the archive's own fields (`md5`,
`sha256`, `size` of the .conda file) are left out, as there is no archive.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# conda-build's placeholder for the build prefix (conda_build/build.py, `prefix_placeholder`),
# split as conda splits it so no tool rewrites this file.
PLACEHOLDER = "/opt/anaconda1anaconda2" + "anaconda3"


@dataclass(frozen=True)
class CondaPackage:
    name: str
    version: str
    build: str
    files: Mapping[str, bytes | Path] = field(default_factory=dict)  # prefix-relative
    links: Mapping[str, str] = field(default_factory=dict)  # prefix-relative -> link target
    # prefix-relative text files holding PLACEHOLDER, which the install rewrites
    text_with_prefix: Mapping[str, str] = field(default_factory=dict)
    depends: Sequence[str] = ()
    channel: str = "https://conda.anaconda.org/conda-forge/linux-64"
    subdir: str = "linux-64"

    @property
    def record_name(self) -> str:
        return f"{self.name}-{self.version}-{self.build}.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install_conda_package(prefix: Path, package: CondaPackage) -> Path:
    """Link `package` into `prefix` as conda would and write its record; returns the record."""
    paths: list[dict[str, object]] = []
    for rel, content in package.files.items():
        target = prefix / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            shutil.copy2(content, target)
        data = target.read_bytes()
        paths.append(
            {
                "_path": rel,
                "path_type": "hardlink",
                "sha256": _sha256(data),
                "sha256_in_prefix": _sha256(data),
                "size_in_bytes": len(data),
            }
        )
    for rel, text in package.text_with_prefix.items():
        packaged = text.encode()
        linked = text.replace(PLACEHOLDER, os.fspath(prefix)).encode()
        target = prefix / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(linked)
        paths.append(
            {
                "_path": rel,
                "file_mode": "text",
                "path_type": "hardlink",
                "prefix_placeholder": PLACEHOLDER,
                "sha256": _sha256(packaged),  # the package's bytes, before the rewrite
                "sha256_in_prefix": _sha256(linked),
                "size_in_bytes": len(packaged),
            }
        )
    for rel, to in package.links.items():
        target = prefix / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(to, target)
        data = target.read_bytes()  # conda-build records a link by what it points to
        paths.append(
            {
                "_path": rel,
                "path_type": "softlink",
                "sha256": _sha256(data),
                "sha256_in_prefix": _sha256(data),
                "size_in_bytes": len(data),
            }
        )
    paths.sort(key=lambda p: str(p["_path"]))
    fn = f"{package.name}-{package.version}-{package.build}.conda"
    url = f"{package.channel}/{fn}"
    record = {
        "build": package.build,
        "build_number": 0,
        "channel": package.channel,
        "constrains": [],
        "depends": list(package.depends),
        "extracted_package_dir": f"/opt/conda/pkgs/{fn.removesuffix('.conda')}",
        "features": "",
        "files": [p["_path"] for p in paths],
        "fn": fn,
        "license": "LicenseRef-test",
        "link": {"source": f"/opt/conda/pkgs/{fn.removesuffix('.conda')}", "type": 1},
        "name": package.name,
        "package_tarball_full_path": f"/opt/conda/pkgs/{fn}",
        "paths_data": {"paths": paths, "paths_version": 1},
        "requested_spec": package.name,
        "subdir": package.subdir,
        "timestamp": 1700000000000,
        "track_features": "",
        "url": url,
        "version": package.version,
    }
    meta = prefix / "conda-meta"
    meta.mkdir(exist_ok=True)
    (meta / "history").touch()
    path = meta / package.record_name
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path
