"""rpm's database: an owner of files outside the environment (Fedora, RHEL, SUSE).

rpm's database has no stable file format to read, so `rpm -qf` is asked, and only where an
`rpm` binary and a database folder exist; only for the files a report names, after dpkg's
database (cudatx.discover.owners.dpkg) said nothing of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from cudatx.discover.owners import Keys, Lookup, Owns, register
from cudatx.models import SystemPackage

_RPM_DATABASES = ("/var/lib/rpm", "/usr/lib/sysimage/rpm")
_RPM_TIMEOUT_S = 20
# rpm's query format (rpm(8), --queryformat): the epoch only where the package has one.
_RPM_FORMAT = "%{NAME}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\t%{ARCH}\\n"


class Rpm(Owns):
    keys = ("rpm",)
    name = "rpm"
    packages = "rpm package"
    listing = "rpm database"

    def lookup(self, keys: Keys, environ: Mapping[str, str]) -> Lookup | None:
        return _Query(keys)


class _Query:
    read = 0  # nothing is read here: rpm is asked

    def __init__(self, keys: Keys) -> None:
        self._keys = keys

    def package(self, path: str) -> SystemPackage | None:
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


register(Rpm())
