"""Before uv uninstalls: RECORD entries uv must not be given are taken out.

uninstalling deletes what the RECORD lists: uv 0.13 skips entries naming `../../x` or an
absolute path with a warning ("escapes the Python environment") but deletes one that leads
out through a symlink inside the environment, and older installers skip none. So before uv
runs, cudatx takes such entries (cudatx.discover.confinement) out of the RECORD of every
distribution uv will uninstall (or reinstall, which uninstalls first); the snapshot, taken
before, holds the original RECORD, which rollback puts back.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from cudatx.discover.confinement import listing, listing_rows, withheld_row
from cudatx.errors import StoreError
from cudatx.models import Distribution
from cudatx.txn.store import atomic_write


def withhold(
    dists: Iterable[Distribution], prefix: str, kept: Mapping[str, frozenset[str]] | None = None
) -> list[str]:
    """Rewrite each distribution's RECORD (installed-files.txt for an egg-info) without the
    entries uv must not be given (cudatx.discover.confinement.withheld_because: outside, a
    folder, empty, the prefix, the store), without the entries `kept` names for it (a path a
    staying distribution lists with the same bytes: cudatx.planning.simulate.kept_entries),
    and without rows csv cannot read (another reader may read them otherwise); returns the
    entries taken out, as `name: entry (why)`.

    The RECORD is read again here, under the transaction's lock, not taken from the scan. It
    is replaced by rename (atomic_write), never written in place: the snapshot may hold a hard
    link to the original's inode, which must keep the original bytes for rollback.
    """
    real_prefix = os.path.realpath(prefix)
    withheld: list[str] = []
    for dist in dists:
        listing_path, base = listing(dist)
        try:
            rows = listing_rows(dist)
        except OSError as exc:
            raise StoreError(
                f"cannot read {listing_path}: {exc.strerror}", path=listing_path
            ) from None
        if rows is None:
            continue
        keep: list[list[str]] = []
        dropped: list[str] = []
        shared = (kept or {}).get(dist.name, frozenset())
        for row in rows:
            reason = withheld_row(base, row, real_prefix)
            if reason is None and isinstance(row, list) and row and row[0] in shared:
                reason = "a distribution that stays lists the same bytes"
            if reason is None and isinstance(row, list):
                keep.append(row)
            else:
                entry = "" if isinstance(row, csv.Error) else row[0]
                dropped.append(f"{entry!r} ({reason})")
        if not dropped:
            continue
        out = io.StringIO(newline="")
        if dist.kind == "egg-info":
            out.writelines(row[0] + "\n" for row in keep)
        else:
            csv.writer(out, lineterminator="\n").writerows(keep)
        try:
            atomic_write(Path(listing_path), out.getvalue().encode("utf-8", "surrogateescape"))
        except OSError as exc:
            raise StoreError(
                f"cannot rewrite {listing_path}: {exc.strerror}", path=listing_path
            ) from None
        withheld += [f"{dist.name}: {entry}" for entry in dropped]
    return withheld
