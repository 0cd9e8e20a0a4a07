"""Owners of files outside the environment: the system's package databases (dpkg, rpm).

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

rpm's database has no stable file format to read, so `rpm -qf` is asked, and only where an
`rpm` binary and a database folder exist.

Everything here is read lazily: nothing until a report names a file outside the
environment, and then every `.list` once and the status file once (40 to 60 ms for 720
packages, 7 MB of lists, on a 2-CPU Debian 12 machine with a warm page cache; each further
file asked about, 2 to 6 ms).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping

from cudatx.models import SystemPackage
from cudatx.reading import MAX_METADATA, read_bounded

ADMINDIR_VARIABLE = "CUDATX_DPKG_ADMINDIR"
DEFAULT_ADMINDIR = "/var/lib/dpkg"
_RPM_DATABASES = ("/var/lib/rpm", "/usr/lib/sysimage/rpm")
_RPM_TIMEOUT_S = 20
# rpm's query format (rpm(8), --queryformat): the epoch only where the package has one.
_RPM_FORMAT = "%{NAME}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\t%{ARCH}\\n"
_MAX_STATUS = 256 * (1 << 20)  # dpkg's status of a large system is a few MiB

Keys = Callable[[str], str]
"""A path's key, its folders resolved (cudatx.environment.PathKeys)."""


class SystemPackages:
    """The system packages that own files, asked path by path and read once."""

    def __init__(self, keys: Keys, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.admindir = environ.get(ADMINDIR_VARIABLE) or DEFAULT_ADMINDIR
        self._keys = keys
        self._lists: list[tuple[str, bytes]] | None = None  # (package[:arch], listing)
        self._versions: dict[tuple[str, str | None], tuple[str, str | None]] | None = None
        self._found: dict[str, SystemPackage | None] = {}
        self.lists_read = 0  # `.list` files read: none until a file outside is asked about

    def owner(self, path: str) -> SystemPackage | None:
        """The package that installed `path` (or, for a symlink no package lists, the file it
        points to); None when no database here lists it."""
        if path not in self._found:
            found = self._dpkg(path) or self._rpm(path)
            real = os.path.realpath(path)
            if found is None and real != self._keys(path):
                found = self._dpkg(real) or self._rpm(real)
            self._found[path] = found
        return self._found[path]

    def owners(self, paths: Iterable[str]) -> dict[str, SystemPackage]:
        """The owner of each of `paths` that has one."""
        out = {}
        for path in paths:
            found = self.owner(path)
            if found is not None:
                out[path] = found
        return out

    # -- dpkg --------------------------------------------------------------------------------

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
                self.lists_read += 1
                self._lists.append((name.removesuffix(".list"), data + b"\n"))
        return self._lists

    def _dpkg(self, path: str) -> SystemPackage | None:
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

    # -- rpm ---------------------------------------------------------------------------------

    def _rpm(self, path: str) -> SystemPackage | None:
        rpm = shutil.which("rpm")
        if rpm is None or not any(os.path.isdir(d) for d in _RPM_DATABASES):
            return None
        try:
            done = subprocess.run(
                [rpm, "-qf", "--queryformat", _RPM_FORMAT, "--", self._keys(path)],
                capture_output=True,
                text=True,
                timeout=_RPM_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode != 0:
            return None  # "file ... is not owned by any package"
        fields = done.stdout.splitlines()[0].split("\t") if done.stdout else []
        if len(fields) != 3:
            return None
        return SystemPackage(
            manager="rpm", name=fields[0], version=fields[1], architecture=fields[2] or None
        )
