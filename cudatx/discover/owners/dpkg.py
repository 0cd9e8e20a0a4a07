"""dpkg's database: an owner of files outside the environment (Debian, Ubuntu).

When the loader finds a library outside the environment (`/etc/ld.so.cache`, the default
folders, `LD_LIBRARY_PATH`, an RPATH that leads out), no RECORD lists it; the system's
package manager does. cudatx never changes such a file: it names the package that would
have to change.

dpkg's database is read directly, as dpkg itself keeps it (dpkg's lib/dpkg/dbmodify.c and
src/main/filesdb.c: `<admindir>/info/<package>[:<arch>].list`, one absolute path a line;
`<admindir>/status`, one stanza per package with its `Version:`). The admin folder is
`CUDATX_DPKG_ADMINDIR`, else `/var/lib/dpkg` (dpkg's own `--admindir` default). A `.list`
names a path as the package's data.tar has it: on a merged-/usr system (Debian 12)
`/lib/x86_64-linux-gnu/libc.so.6` is listed while the loader opens
`/usr/lib/x86_64-linux-gnu/libc.so.6` (`/lib -> usr/lib`), so paths are compared by their
key, the folders resolved (cudatx.environment.PathKeys). dpkg's diversions and alternatives
are not read.

Everything here is read lazily: nothing until a report names a file outside the
environment, and then every `.list` once and the status file once (40 to 60 ms for 720
packages, 7 MB of lists, on a 2-CPU Debian 12 machine with a warm page cache; each further
file asked about, 2 to 6 ms).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cudatx.discover.owners import Keys, Lookup, Owns, register
from cudatx.models import SystemPackage
from cudatx.reading import MAX_METADATA, read_bounded

ADMINDIR_VARIABLE = "CUDATX_DPKG_ADMINDIR"
DEFAULT_ADMINDIR = "/var/lib/dpkg"
_MAX_STATUS = 256 * (1 << 20)  # dpkg's status of a large system is a few MiB


class Dpkg(Owns):
    keys = ("dpkg",)
    name = "dpkg"
    packages = "Debian package"
    listing = "dpkg .list"

    def lookup(self, keys: Keys, environ: Mapping[str, str]) -> Lookup | None:
        return _Database(environ.get(ADMINDIR_VARIABLE) or DEFAULT_ADMINDIR, keys)


class _Database:
    """dpkg's database at `admindir`, read once, when a file outside is first asked about."""

    def __init__(self, admindir: str, keys: Keys) -> None:
        self.admindir = admindir
        self._keys = keys
        self._lists: list[tuple[str, bytes]] | None = None  # (package[:arch], listing)
        self._versions: dict[tuple[str, str | None], tuple[str, str | None]] | None = None
        self.read = 0  # `.list` files read: none until a file outside is asked about

    def _listings(self) -> list[tuple[str, bytes]]:
        if self._lists is None:
            self._lists = []
            info = os.path.join(self.admindir, "info")
            try:
                names = sorted(e.name for e in os.scandir(info) if e.name.endswith(".list"))
            except OSError:
                names = []  # no dpkg here
            for name in names:
                try:
                    data = read_bounded(os.path.join(info, name), MAX_METADATA)
                except OSError:
                    continue
                self.read += 1
                self._lists.append((name.removesuffix(".list"), data + b"\n"))
        return self._lists

    def package(self, path: str) -> SystemPackage | None:
        key = self._keys(path)
        needle = b"/" + os.fsencode(os.path.basename(key)) + b"\n"
        for package, data in self._listings():
            at = data.find(needle)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                listed = os.fsdecode(data[start : at + len(needle) - 1])
                if listed.startswith("/") and self._keys(listed) == key:
                    return self._package(package)
                at = data.find(needle, at + 1)
        return None

    def _package(self, listed: str) -> SystemPackage:
        name, _, arch = listed.partition(":")
        version, architecture = self._status().get(
            (name, arch or None), self._status().get((name, None), ("", None))
        )
        return SystemPackage(
            manager="dpkg", name=name, version=version or "?", architecture=arch or architecture
        )

    def _status(self) -> dict[tuple[str, str | None], tuple[str, str | None]]:
        """(package, architecture) and (package, None) -> (version, architecture), for each
        stanza of dpkg's status file (deb-control(5) fields, dpkg's lib/dpkg/parse.c)."""
        if self._versions is None:
            self._versions = {}
            try:
                text = read_bounded(os.path.join(self.admindir, "status"), _MAX_STATUS)
            except OSError:
                text = b""
            for stanza in text.decode("utf-8", "replace").split("\n\n"):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if line[:1] in (" ", "\t"):
                        continue  # a continuation line of a multi-line field
                    field, sep, value = line.partition(":")
                    if sep:
                        fields[field.strip().lower()] = value.strip()
                name, version = fields.get("package"), fields.get("version")
                if not name or not version:
                    continue
                arch = fields.get("architecture")
                self._versions.setdefault((name, arch), (version, arch))
                self._versions.setdefault((name, None), (version, arch))
        return self._versions


register(Dpkg())
