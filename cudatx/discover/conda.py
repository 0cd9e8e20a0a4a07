"""A conda environment's own records: each `conda-meta/*.json` read as the owner of its files.

A conda environment (`conda-meta/` in the prefix) keeps one PrefixRecord per package it
installed (conda's conda/models/records.py, `PrefixRecord`; written by conda, mamba and
rattler alike): `name`, `version`, `build`, `channel`, `depends`, `files` (paths relative
to the prefix) and `paths_data` (`paths_version` 1: per path `_path`, `path_type`, `sha256`,
`size_in_bytes`, and where conda rewrote the prefix inside the file at install time,
`prefix_placeholder` with `sha256_in_prefix`, the digest of the rewritten bytes).

Each record becomes a :class:`~cudatx.models.Distribution` of kind "conda" named
`conda:NAME`, its paths as RECORD rows relative to the prefix, so that the one ownership
graph holds wheels and conda packages: co-owned paths, hollow packages and what a removal
deletes are found the same way. A row carries what can be checked against the bytes on
disk and nothing more:

- a file (`hardlink`): its sha256 as RECORD writes digests, and its size; where conda
  rewrote a prefix into it, `sha256_in_prefix` only (the size of a text file changes);
- a `softlink`: nothing but that it exists (the digest and size recorded for a link differ
  between the tools that build packages);
- `directory` entries and the `pyc_file`s conda compiles at install time are left out.

cudatx never changes what conda installed (cudatx.planning.change refuses it).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cudatx.cache import file_key, settled
from cudatx.digest import record_encode
from cudatx.discover.dists import cached
from cudatx.models import CONDA_PREFIX, CondaRecord, Distribution, Finding, RecordEntry
from cudatx.reading import MAX_RECORD, read_bounded

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

META = "conda-meta"
_LEFT_OUT = frozenset({"directory", "pyc_file"})


def conda_meta(prefix: str) -> str | None:
    """The prefix's `conda-meta` folder, or None when the prefix is no conda environment."""
    folder = os.path.join(prefix, META)
    return folder if os.path.isdir(folder) else None


def read_conda_records(
    prefix: str, cache: ScanCache | None = None
) -> tuple[tuple[Distribution, ...], list[Finding]]:
    """Every package record of the conda environment at `prefix` (none if it is not one);
    a record cudatx cannot read is a finding, never an error. `cache` keeps what each
    record says while its file keeps its state: a large environment lists 50,000 paths,
    and turning them into rows costs 300 ms of every run."""
    findings: list[Finding] = []
    folder = conda_meta(prefix)
    if folder is None:
        return (), findings
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError as exc:
        findings.append(Finding(kind="unreadable", path=folder, message=exc.strerror or str(exc)))
        return (), findings
    out: dict[str, Distribution] = {}
    for name in names:
        path = os.path.join(folder, name)
        dist = _read_record(path, prefix, findings) if cache is None else None
        if cache is not None:
            dist = _cached_record(cache, path, prefix, findings)
        if dist is not None and dist.name not in out:
            out[dist.name] = dist
    return tuple(out.values()), findings


def _cached_record(
    cache: ScanCache, path: str, prefix: str, findings: list[Finding]
) -> Distribution | None:
    try:
        st = os.stat(path)
    except OSError:
        return _read_record(path, prefix, findings)  # reported as it is read
    where = ("conda", f"{prefix}\0{path}", ":".join(file_key(st)))
    return cached(cache, where, settled(st), lambda own: _read_record(path, prefix, own), findings)


def _bad(findings: list[Finding], path: str, message: str) -> None:
    findings.append(Finding(kind="malformed conda record", path=path, message=message))


def _read_record(path: str, prefix: str, findings: list[Finding]) -> Distribution | None:
    try:
        data = json.loads(read_bounded(path, MAX_RECORD))
    except OSError as exc:
        findings.append(Finding(kind="unreadable", path=path, message=exc.strerror or str(exc)))
        return None
    except (ValueError, RecursionError) as exc:  # json nests recursively
        _bad(findings, path, f"not JSON: {exc}")
        return None
    if not isinstance(data, dict):
        _bad(findings, path, "not a JSON object")
        return None
    name, version, build = data.get("name"), data.get("version"), data.get("build", "")
    if not all(isinstance(v, str) and v.isprintable() for v in (name, version, build)):
        _bad(findings, path, "no printable name, version and build")
        return None
    assert isinstance(name, str) and isinstance(version, str) and isinstance(build, str)
    if not name:
        _bad(findings, path, "no name")
        return None
    channel = data.get("channel")
    depends = data.get("depends")
    dist = Distribution(
        name=CONDA_PREFIX + name,
        display_name=name,
        version=version,
        metadata_dir=path,
        site=prefix,
        kind="conda",
        records=(),
        requires=(),
        installer="conda",
        conda=CondaRecord(
            name=name,
            build=build,
            channel=channel if isinstance(channel, str) and channel.isprintable() else None,
            depends=tuple(d for d in depends if isinstance(d, str))
            if isinstance(depends, list)
            else (),
        ),
    )
    return replace(dist, records=_records(data, path, findings))


def _records(data: dict[str, Any], path: str, findings: list[Finding]) -> tuple[RecordEntry, ...]:
    """The record's paths as RECORD rows: from `paths_data` where it has one, else `files`."""
    paths_data = data.get("paths_data")
    entries = paths_data.get("paths") if isinstance(paths_data, dict) else None
    if not isinstance(entries, list):
        files = data.get("files")
        if not isinstance(files, list):
            return ()
        return tuple(RecordEntry(path=p) for p in files if _usable(p))
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not _usable(entry.get("_path")):
            _bad(findings, path, f"a paths_data entry without a usable _path: {entry!r:.80}")
            continue
        kind = entry.get("path_type", "hardlink")
        if kind in _LEFT_OUT:
            continue
        relative: str = entry["_path"]
        if kind == "softlink":
            out.append(RecordEntry(path=relative))
            continue
        placeholder = entry.get("prefix_placeholder")
        digest = entry.get("sha256_in_prefix") or (None if placeholder else entry.get("sha256"))
        size = None if placeholder else entry.get("size_in_bytes")
        encoded = _encoded(digest)
        out.append(
            RecordEntry(
                relative,
                "sha256" if encoded else None,
                encoded,
                size if type(size) is int and size >= 0 else None,  # not a bool
            )
        )
    return tuple(out)


def _encoded(value: object) -> str | None:
    """A hex sha256 as RECORD writes digests (urlsafe base64), or None if it is none."""
    if type(value) is not str or len(value) != 64:
        return None
    try:
        return record_encode(bytes.fromhex(value))
    except ValueError:
        return None


def _usable(value: object) -> bool:
    """A path relative to the prefix that names something: text, not absolute, no NUL."""
    if not isinstance(value, str):
        return False
    return bool(value) and not value.startswith("/") and "\0" not in value
