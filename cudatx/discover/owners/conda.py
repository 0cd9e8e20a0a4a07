"""A conda environment's own records: each `conda-meta/*.json` read as the owner of its files.

A conda environment (`conda-meta/` in the prefix) keeps one PrefixRecord per package it
installed (conda's conda/models/records.py, `PrefixRecord`; written by conda, mamba and
rattler alike): `name`, `version`, `build`, `channel`, `depends`, `files` (paths relative
to the prefix) and `paths_data` (`paths_version` 1: per path `_path`, `path_type`, `sha256`,
`size_in_bytes`, and where conda rewrote the prefix inside the file at install time,
`prefix_placeholder` with `sha256_in_prefix`, the digest of the rewritten bytes).

Each record becomes a :class:`~cudatx.models.Distribution` of owner "conda" named
`conda:NAME`, its paths as RECORD rows relative to the prefix, so that the one ownership
graph holds wheels and conda packages: co-owned paths, hollow packages and what a removal
deletes are found the same way. A row carries what can be checked against the bytes on
disk and nothing more:

- a file (`hardlink`): its sha256 as RECORD writes digests, and its size; where conda
  rewrote a prefix into it, `sha256_in_prefix` only (the size of a text file changes);
- a `softlink`: nothing but that it exists (the digest and size recorded for a link differ
  between the tools that build packages);
- `directory` entries and the `pyc_file`s conda compiles at install time are left out.

cudatx never changes what conda installed (cudatx.planning.change refuses it): it names
the conda command a user runs instead. What a record's depends, build and version say of its
CUDA major is rule (f) of cudatx.analysis.cuda, answered here.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from typing import TYPE_CHECKING, Any

from cudatx.cache import file_key, settled
from cudatx.digest import record_encode
from cudatx.discover.dists import cached
from cudatx.discover.owners import Owns, register
from cudatx.models import Distribution, Finding, PackageRecord, PythonTarget, RecordEntry
from cudatx.reading import MAX_RECORD, read_bounded

if TYPE_CHECKING:
    from cudatx.cache import ScanCache

META = "conda-meta"
PREFIX = "conda:"  # the names of conda records: `conda:cudnn`, never a PEP 503 name
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
        name=PREFIX + name,
        display_name=name,
        version=version,
        metadata_dir=path,
        site=prefix,
        owner="conda",
        records=(),
        requires=(),
        installer="conda",
        package=PackageRecord(
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


class Conda(Owns):
    keys = ("conda",)
    name = "conda"
    packages = "conda package"
    prefix = PREFIX
    listing = "conda-meta record"
    hashes = "conda-meta record's"
    command_note = " (or the same with mamba)"

    def read(
        self, target: PythonTarget, cache: ScanCache | None
    ) -> tuple[tuple[Distribution, ...], list[Finding]]:
        return read_conda_records(target.prefix, cache)

    def state(self, target: PythonTarget) -> tuple[str, ...]:
        """Its `conda-meta` folder's identity and mtime: conda adds or removes a record there."""
        folder = conda_meta(target.prefix)
        if folder is None:
            return ()
        try:
            st = os.stat(folder)
        except OSError:
            return (f"{folder}: -",)
        return (f"{folder}: {st.st_dev}:{st.st_ino}:{st.st_mtime_ns}",)

    def library_folders(self, target: PythonTarget) -> tuple[str, ...]:
        """The prefix's `lib/`: its packages' libraries, where the interpreter's RPATH
        ($ORIGIN/../lib) leads; read when the loader or a report asks (hundreds there)."""
        return (os.path.join(target.prefix, "lib"),)

    # checked: every row; a conda record lists files and links only, each to be there (what
    # cannot be checked by bytes has no hash). listing_file: none, nothing of it is kept.

    def command(
        self, prefix: str, verb: str, records: Sequence[Distribution], *, exact: bool
    ) -> str:
        """`conda VERB -p PREFIX NAME...` (`exact`: the installed builds, as
        NAME=VERSION=BUILD, reinstalled); mamba takes the same words."""
        specs = []
        for record in records:
            assert record.package is not None
            specs.append(
                f"{record.package.name}={record.version}={record.package.build}"
                if exact
                else record.package.name
            )
        words = ["conda", verb, "-p", prefix]
        if verb == "install" and exact:
            words.append("--force-reinstall")
        return shlex.join([*words, *specs])

    def cuda_major(self, dist: Distribution) -> tuple[int, str] | None:
        return None if dist.package is None else cuda_major(dist.package, dist.version)


_BUILD = re.compile(r"(?:^|[^a-z])cuda([0-9]+)")


@functools.cache
def _tracking() -> frozenset[str]:
    """conda packages whose own version major is the CUDA major (cudatx/data/cuda_majors.json)."""
    text = (resources.files("cudatx") / "data" / "cuda_majors.json").read_text(encoding="utf-8")
    return frozenset(json.loads(text)["conda_tracking"])


def cuda_major(record: PackageRecord, version: str) -> tuple[int, str] | None:
    """Rule (f) for a conda record: its depends on `cuda-version` (how conda-forge and
    NVIDIA's channel tie a package to a CUDA release), its build string (`cuda12*`,
    `py3.11_cuda12.1_cudnn8.9.2_0`, conda-forge's `cuda120py311h...`), or its own version
    where it tracks CUDA (`cuda-cudart` 12.4.127, `cuda-version` 12.4)."""
    found: list[tuple[int, str]] = []
    for spec in record.depends:
        name, _, constraint = spec.strip().partition(" ")
        if name == "cuda-version":
            pinned = pinned_major(constraint)
            if pinned is not None:
                found.append((pinned, f"conda's {record.name} depends on {spec}"))
    match = _BUILD.search(record.build)
    if match:
        digits = match.group(1)  # `cuda120`: 12.0; `cuda12`: 12; `cuda118`: 11.8
        built = int(digits[:2]) if len(digits) >= 3 else int(digits)
        found.append((built, f"conda's {record.name} build {record.build}"))
    if found and len({major for major, _ in found}) == 1:
        return found[0]  # what they agree on, with the first words that say it
    if record.name in _tracking():
        major = _leading_int(version)
        if major is not None:
            return (major, f"conda's {record.name} {version} tracks the CUDA version")
    return None


def pinned_major(constraint: str) -> int | None:
    """The CUDA major a conda version constraint allows alone: `12.*`, `12.4`, `==12.4`,
    `>=12,<13.0a0`, `>=12.4,<12.5` (conda's MatchSpec versions); None for any other."""
    text = constraint.split(" ")[0]
    if not text or "|" in text:
        return None
    lower: int | None = None
    upper: int | None = None
    exact: int | None = None
    for part in text.split(","):
        operator = re.match(r"[<>=!~]*", part).group(0)  # type: ignore[union-attr]
        value = part[len(operator) :]
        major = _leading_int(value)
        if operator in ("", "=", "=="):
            exact = major
        elif operator in (">=", ">"):
            lower = major
        elif operator == "<" and major is not None:
            # `<13`, `<13.0a0`: below 13.0 (13's pre-releases included, as conda reads a0)
            bare = re.fullmatch(r"([0-9]+)(\.0)*(\.?a0|\.?dev0?)?", value) is not None
            upper = major - 1 if bare else major
    if exact is not None:
        return exact
    return lower if lower is not None and lower == upper else None


def _leading_int(text: str) -> int | None:
    match = re.match(r"\s*v?([0-9]+)", text)
    return int(match.group(1)) if match else None


register(Conda())
