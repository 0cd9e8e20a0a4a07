"""Wheels' RECORDs: the *.dist-info and *.egg-info folders on sys.path (cudatx.discover.dists),
the owner of what uv and pip install, and the only one cudatx changes (through uv)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from cudatx.discover.dists import installed_state, scan_distributions
from cudatx.discover.owners import Owns, register
from cudatx.models import Distribution, Finding, PythonTarget, RecordEntry

if TYPE_CHECKING:
    from cudatx.cache import ScanCache


class Records(Owns):
    keys = ("dist-info", "egg-info")
    name = "uv or pip"
    packages = "distribution"
    listing = "RECORD"
    python = True
    changeable = True

    def read(
        self, target: PythonTarget, cache: ScanCache | None
    ) -> tuple[tuple[Distribution, ...], list[Finding]]:
        return scan_distributions(target.sys_path, cache)

    def state(self, target: PythonTarget) -> tuple[str, ...]:
        return installed_state(target.site_packages)

    def checked(self, dist: Distribution) -> Iterator[RecordEntry]:
        """Rows with a hash, and not RECORD itself."""
        record = os.path.normpath(os.path.join(dist.metadata_dir, "RECORD"))
        for entry in dist.records:
            if entry.hash_algorithm is None or entry.hash_digest is None:
                continue
            if entry.path.endswith("RECORD") and (
                os.path.normpath(os.path.join(dist.site, entry.path)) == record
            ):
                continue
            yield entry

    def listing_file(self, dist: Distribution) -> str | None:
        return os.path.join(dist.metadata_dir, "RECORD")


register(Records())
