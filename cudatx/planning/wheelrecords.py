"""The RECORD of every wheel a resolution installs, read the cheapest way there is.

In this order, for each wheel:

1. a local file (a `--find-links` folder, a `file:` URL, a path in the requirements): read
   from the zip on disk;
2. uv's cache, where uv already has the wheel unpacked: `wheels-vN/<index>/<name>/` holds a
   pointer file per wheel (`<version>-<tags>.http` from an index or URL, `.rev` from a local
   file) naming its unpacked copy in `archive-v0/<id>`, and a symbolic link of the same stem
   to that copy (uv's crates/uv-distribution/src/distribution_database.rs, `stream_wheel`
   and `HttpArchivePointer`; crates/uv-cache/src/lib.rs, `persist` and `create_link`). The
   pointer is MessagePack whose layout changes between uv releases, so it is not decoded:
   the wheel is the one whose pointer holds its sha256 (uv records the hashes it checked)
   and the archive id the link names; its RECORD is `<name>-<version>.dist-info/RECORD`
   in the archive;
3. cudatx's own cache (the scan cache, `CUDATX_CACHE_DIR`), where an earlier check read the
   RECORD over the network, under what it was verified as (see below);
4. the index: HTTP range requests for the zip's directory and its RECORD
   (cudatx.planning.lazyzip), several wheels at once; a server that ignores ranges sends the
   whole wheel, which is read (a download);
5. uv itself, where cudatx's own request failed (credentials or a proxy only uv knows, an
   index that refuses the request, or stalls, or lies: every failure of 4.): the wheel is
   staged with uv (`--no-deps`, into a temporary prefix), which downloads it into uv's
   cache, and read as in 2, else from the staged copy's installed RECORD. Once, for all the
   wheels that failed; where uv fails too, one line names each wheel, its index host and
   why (UvFailed, exit 13).

Every path is put as the wheel installs it, relative to the site folder: a wheel's
`NAME-VERSION.data/<scheme>/` members go where uv puts them (purelib and platlib into the
site folder, scripts into bin/, data into the prefix, headers into include/site/...).
The index may be hostile (the hook runs on changes from strangers): every request has a
byte budget and a deadline (cudatx.planning.lazyzip), and all of one check's requests one
deadline together (`Deadlines`, resolved by the CLI and passed down). Only what was
verified is believed beyond the answer it came in: a RECORD read by range requests cannot
be checked against the wheel's sha256 (that needs the whole wheel), so it is cached under
the URL it came from (its index's origin) and the hash that index claimed, never as "the
RECORD of that sha256", which any index can claim; an entry under the bare sha256 is
written only where the whole wheel was downloaded and hashed to it. A RECORD from anywhere
gets an installed RECORD's limits (cudatx.reading.MAX_RECORD, MAX_RECORD_ROWS).
"""

from __future__ import annotations

import os
import posixpath
import re
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from cudatx.cache import ScanCache
from cudatx.discover.dists import parse_record, refuse_rows
from cudatx.errors import UnreadableFile
from cudatx.models import Frozen, PythonTarget, RecordEntry
from cudatx.names import canonical_name
from cudatx.paths import normal
from cudatx.planning.lazyzip import Deadlines, RemoteError, read_member
from cudatx.planning.resolve import Wheel
from cudatx.planning.stage import Arrival, stage
from cudatx.reading import MAX_RECORD, MIB, read_bounded
from cudatx.uv import UvFailed

WORKERS = 8  # range requests in flight at once
_POINTER_LIMIT = 1 * MIB
# Not "wheel-record", the kind cudatx <= 0.x kept range reads under by sha256 alone: those
# entries are never read again.
_BY_HASH = "wheel-record-hashed"  # key: the sha256 the whole wheel's bytes hashed to
_BY_URL = "wheel-record-url"  # key: the URL it was read from; state: the sha256 claimed there
_DIST_INFO = re.compile(r"^([^/]+)-[^/-]+\.dist-info$")
_SCHEMES = ("purelib", "platlib", "scripts", "data", "headers")


class Source:
    """Where a RECORD was read from (`WheelRead.source`)."""

    FILE = "file"  # a local wheel file
    UV_CACHE = "uv cache"
    CUDATX_CACHE = "cudatx cache"
    RANGE = "range requests"
    DOWNLOAD = "download"  # the server sent the whole wheel
    UV = "uv download"  # staged with uv, then read from its cache or the staged copy


class WheelRead(Frozen):
    """How one wheel's RECORD was had: for the JSON and the benchmark."""

    name: str
    version: str
    filename: str
    source: str
    transferred: int  # bytes cudatx read over the network for it
    size: int | None  # the wheel's size, as the index gave it
    why: str | None = None  # for Source.UV and DOWNLOAD: why not by range requests


class WheelRecord(NamedTuple):
    wheel: Wheel
    entries: tuple[RecordEntry, ...]  # paths as installed, relative to the site folder
    read: WheelRead


class Layout(NamedTuple):
    """Where a wheel's `.data/<scheme>/` members go, relative to the site folder."""

    site: str
    prefix: str
    python: str  # "python3.11"

    def scheme(self, scheme: str, name: str) -> str | None:
        if scheme in ("purelib", "platlib"):
            return ""
        if scheme == "scripts":
            return os.path.relpath(os.path.join(self.prefix, "bin"), self.site)
        if scheme == "data":
            return os.path.relpath(self.prefix, self.site)
        if scheme == "headers":
            folder = os.path.join(self.prefix, "include", "site", self.python, name)
            return os.path.relpath(folder, self.site)
        return None

    def display(self, key: str) -> str:
        """A path as a user reads it: relative to the site folder, or to the prefix when it
        lies outside the site folder (bin/x)."""
        if key.startswith("../"):
            return os.path.relpath(os.path.join(self.site, key), self.prefix)
        return key


def layout_of(target: PythonTarget) -> Layout:
    major_minor = ".".join(target.version.split(".")[:2])
    return Layout(target.install_site, target.prefix, f"python{major_minor}")


def installed_entries(
    entries: Sequence[RecordEntry], wheel: Wheel, layout: Layout
) -> tuple[RecordEntry, ...]:
    """A wheel's RECORD rows with each path where uv installs it (see the module docstring)."""
    out = []
    for entry in entries:
        path = entry.path
        head, _, rest = path.partition("/")
        if head.endswith(".data") and rest:
            scheme, _, inner = rest.partition("/")
            folder = layout.scheme(scheme, wheel.name) if scheme in _SCHEMES else None
            if folder is not None and inner:
                path = posixpath.join(folder, inner) if folder else inner
        path = normal(path)
        # the row itself where its path stays (nearly every one): _replace builds anew
        out.append(entry if path == entry.path else entry._replace(path=path))
    return tuple(out)


def _record_member(name: str) -> Callable[[Sequence[str]], str | None]:
    """Picks `<name>-<version>.dist-info/RECORD` among a zip's member names."""

    def pick(names: Sequence[str]) -> str | None:
        found = [
            n
            for n in names
            if n.count("/") == 1
            and n.endswith("/RECORD")
            and (m := _DIST_INFO.match(n.split("/")[0])) is not None
            and canonical_name(m.group(1)) == name
        ]
        return found[0] if len(found) == 1 else None

    return pick


def _parse(text: str, where: str) -> tuple[RecordEntry, ...]:
    return parse_record(text, where, [])


def _decode(data: bytes, where: str) -> str:
    """RECORD's text, refused past an installed RECORD's rows (its bytes are bounded by the
    read, MAX_RECORD): a RECORD from a wheel or an index is read as one from a dist-info."""
    refuse_rows(data, where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{where}: RECORD is not UTF-8 ({exc.reason})", path=where) from None


# -- 1. a local file --------------------------------------------------------------------------


def _from_file(wheel: Wheel) -> str:
    import zipfile

    assert wheel.path is not None
    try:
        with zipfile.ZipFile(wheel.path) as zf:
            member = _record_member(wheel.name)(zf.namelist())
            if member is None:
                raise UnreadableFile(f"{wheel.path}: no RECORD for {wheel.name}", path=wheel.path)
            info = zf.getinfo(member)
            if info.file_size > MAX_RECORD:
                raise UnreadableFile(f"{wheel.path}: RECORD too large", path=wheel.path)
            data = zf.read(info)
    except (OSError, zipfile.BadZipFile, ValueError, NotImplementedError, EOFError) as exc:
        message = f"{wheel.path}: not a readable wheel ({exc})"
        raise UnreadableFile(message, path=wheel.path) from None
    return _decode(data, wheel.path)


# -- 2. uv's cache ----------------------------------------------------------------------------


class UvWheelFolders:
    """Where uv's wheel cache keeps each name's pointers (`wheels-vN/<index>/<name>/`, and
    `wheels-vN/<index>/<hash>/<name>/` for an index or URL of its own), listed once for all
    the wheels of a check: globbing `*/*/<name>` per wheel listed every index folder again
    (0.6 s of a warm hook over 29 wheels, a cache of 880 index folders)."""

    def __init__(self, cache: str) -> None:
        self.cache = cache
        self._listed: list[tuple[dict[str, list[str]], dict[str, list[str]]]] | None = None

    def pointers(self, name: str) -> Iterator[Path]:
        """The pointer files for `name`, newest bucket first, in the order uv's layouts are
        tried: `.http` one level down, `.http` two, `.rev` two, `.rev` one."""
        for one, two in self._buckets():
            for folders, suffix in ((one, ".http"), (two, ".http"), (two, ".rev"), (one, ".rev")):
                for folder in folders.get(name, ()):
                    yield from sorted(Path(folder).glob(f"*{suffix}"))

    def _buckets(self) -> list[tuple[dict[str, list[str]], dict[str, list[str]]]]:
        if self._listed is None:
            root = Path(self.cache)
            buckets = sorted(root.glob("wheels-v*"), key=lambda p: p.name, reverse=True)
            self._listed = [_listing(bucket) for bucket in buckets]
        return self._listed


def _listing(bucket: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(name -> its folders one level under the bucket's index folders, and two levels)."""
    one: dict[str, list[str]] = {}
    two: dict[str, list[str]] = {}
    for index in _folders(str(bucket)):
        for child in _folders(index):
            one.setdefault(os.path.basename(child), []).append(child)
            for grandchild in _folders(child):
                two.setdefault(os.path.basename(grandchild), []).append(grandchild)
    return one, two


def _folders(path: str) -> list[str]:
    try:
        with os.scandir(path) as entries:
            return sorted(e.path for e in entries if e.is_dir())
    except OSError:
        return []


def from_uv_cache(cache: str, wheel: Wheel, folders: UvWheelFolders | None = None) -> str | None:
    """The RECORD text of `wheel` as uv's cache holds it unpacked, or None. `folders`: the
    cache as listed for this check (else listed now)."""
    needles = [n.encode() for n in (wheel.sha256, wheel.url) if n]
    if not cache or not needles:
        return None
    for pointer in (folders or UvWheelFolders(cache)).pointers(wheel.name):
        try:
            said = read_bounded(pointer, _POINTER_LIMIT)
        except OSError:
            continue
        # The sha256 where the index gave one (uv keeps what it checked), else the URL.
        if needles[0] not in said:
            continue
        archive = os.path.realpath(pointer.with_suffix(""))
        if not os.path.isdir(archive) or os.path.basename(archive).encode() not in said:
            continue
        text = _archive_record(archive, wheel.name)
        if text is not None:
            return text
    return None


def _archive_record(archive: str, name: str) -> str | None:
    try:
        folders = [e for e in os.listdir(archive) if e.endswith(".dist-info")]
    except OSError:
        return None
    member = _record_member(name)([f"{f}/RECORD" for f in folders])
    if member is None:
        return None
    where = os.path.join(archive, member)
    try:
        return _decode(read_bounded(where, MAX_RECORD), where)
    except (OSError, UnreadableFile):
        return None


# -- 4. the index -----------------------------------------------------------------------------


class _Remote(NamedTuple):
    text: str | None
    transferred: int
    ranged: bool
    why: str | None  # why it could not be read this way
    verified: bool = False  # the whole wheel was read and hashed to its sha256


def _from_index(wheel: Wheel, deadlines: Deadlines, until: float) -> _Remote:
    """`until`: the check's deadline (time.monotonic()). A RECORD past the rows cudatx reads
    is refused (UnreadableFile), not handed to uv: the wheel's own RECORD is too long."""
    assert wheel.url is not None
    try:
        got = read_member(
            wheel.url,
            _record_member(wheel.name),
            limit=MAX_RECORD,
            size=wheel.size,
            sha256=wheel.sha256,
            request_s=deadlines.request_s,
            deadline=until,
        )
    except RemoteError as exc:
        return _Remote(None, exc.transferred, True, exc.reason)
    try:
        text = got.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _Remote(None, got.transferred, got.ranged, f"RECORD is not UTF-8 ({exc.reason})")
    refuse_rows(got.data, f"{wheel.filename} from {host_of(wheel.url)}")
    return _Remote(text, got.transferred, got.ranged, None, got.verified)


def host_of(url: str) -> str:
    """The index's host (and port), as a user reads it: never the credentials of a URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError for one out of range or not a number
    except ValueError:
        return "an index whose URL does not parse"
    return parts.hostname + (f":{port}" if port else "") if parts.hostname else url


def _url_key(url: str) -> str:
    """The URL a range read is cached under: its origin and path, without credentials or
    fragment (a cache file must not keep a password)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def _cached(cache: ScanCache, wheel: Wheel) -> str | None:
    """The RECORD an earlier check read of `wheel`: verified by its sha256, or read from
    this very URL with this very sha256 claimed (see the module docstring)."""
    if wheel.sha256 and (text := cache.get(_BY_HASH, wheel.sha256, "1")) is not None:
        return text
    if wheel.url:
        return cache.get(_BY_URL, _url_key(wheel.url), wheel.sha256 or "")
    return None


def _cache(cache: ScanCache, wheel: Wheel, got: _Remote) -> None:
    assert got.text is not None and wheel.url is not None
    if got.verified and wheel.sha256:
        cache.put(_BY_HASH, wheel.sha256, "1", got.text)
    else:
        cache.put(_BY_URL, _url_key(wheel.url), wheel.sha256 or "", got.text)


# -- all of them ------------------------------------------------------------------------------


def read_records(
    wheels: Sequence[Wheel],
    layout: Layout,
    *,
    uv: Callable[[], str],
    uv_cache: str,
    options: Sequence[str],
    cache: ScanCache | None,
    workers: int = WORKERS,
    deadlines: Deadlines | None = None,
    until: float | None = None,
) -> tuple[WheelRecord, ...]:
    """Every wheel's RECORD rows, as installed (see the module docstring for the order).
    `options`: uv's words for where wheels come from, for a wheel only uv can fetch.
    `deadlines`: each request's, and all of this call's requests' together (by default
    lazyzip's REQUEST_S and CHECK_S); `until`: the check's own deadline (time.monotonic()),
    where its uv steps before this one count against it too."""
    deadlines = deadlines or Deadlines()
    until = time.monotonic() + deadlines.check_s if until is None else until
    texts: dict[str, tuple[str, WheelRead]] = {}

    def done(
        wheel: Wheel, text: str, source: str, transferred: int = 0, why: str | None = None
    ) -> None:
        read = WheelRead(
            name=wheel.name,
            version=wheel.version,
            filename=wheel.filename,
            source=source,
            transferred=transferred,
            size=wheel.size,
            why=why,
        )
        texts[wheel.name] = (text, read)

    remote: list[Wheel] = []
    listed = UvWheelFolders(uv_cache)
    for wheel in wheels:
        if wheel.path is not None:
            done(wheel, _from_file(wheel), Source.FILE)
        elif (text := from_uv_cache(uv_cache, wheel, listed)) is not None:
            done(wheel, text, Source.UV_CACHE)
        elif cache is not None and (text := _cached(cache, wheel)) is not None:
            done(wheel, text, Source.CUDATX_CACHE)
        else:
            remote.append(wheel)
    fetched: list[tuple[Wheel, _Remote]] = []
    over_http = [w for w in remote if w.url and w.url.startswith(("http://", "https://"))]
    if over_http:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(over_http)))) as pool:
            answers = pool.map(lambda w: _from_index(w, deadlines, until), over_http)
            fetched = list(zip(over_http, answers, strict=True))
    failed: list[tuple[Wheel, str, int]] = [
        (w, "not an http or https URL", 0) for w in remote if w not in over_http
    ]
    for wheel, answer in fetched:
        if answer.text is None:
            assert wheel.url is not None
            failure = f"from {host_of(wheel.url)}: {answer.why or 'unreadable'}"
            failed.append((wheel, failure, answer.transferred))
            continue
        source = Source.RANGE if answer.ranged else Source.DOWNLOAD
        why = None if answer.ranged else "the server does not answer range requests"
        done(wheel, answer.text, source, answer.transferred, why)
        if cache is not None:
            _cache(cache, wheel, answer)
    staged = _through_uv(failed, layout, uv=uv, uv_cache=uv_cache, options=options, until=until)
    out = []
    for wheel in wheels:
        if wheel.name in staged:
            out.append(staged[wheel.name])
            continue
        text, read = texts[wheel.name]
        entries = installed_entries(_parse(text, wheel.filename), wheel, layout)
        out.append(WheelRecord(wheel, entries, read))
    return tuple(out)


def _through_uv(
    failed: Sequence[tuple[Wheel, str, int]],
    layout: Layout,
    *,
    uv: Callable[[], str],
    uv_cache: str,
    options: Sequence[str],
    until: float,
) -> dict[str, WheelRecord]:
    """5.: the wheels cudatx could not read itself, staged with uv (which downloads them),
    once, in what is left of the check's time (`until`, time.monotonic())."""
    if not failed:
        return {}
    arrivals = [
        Arrival(
            w.name, f"{w.name} @ {w.url}" if w.url and not w.sha256 else f"{w.name}=={w.version}"
        )
        for w, _, _ in failed
    ]
    with tempfile.TemporaryDirectory(prefix="cudatx-fetch-") as folder:
        try:
            left = max(1.0, until - time.monotonic())
            staged = stage(
                uv(), layout.prefix, layout.site, arrivals, folder, options, timeout=left
            )
        except UvFailed as exc:
            reasons = "; ".join(f"{w.filename}: {why}" for w, why, _ in failed)
            message = f"cannot read the RECORD of every wheel ({reasons}); {exc.message}"
            raise UvFailed(message) from None
        by_name = {d.name: d for d in staged}
        out: dict[str, WheelRecord] = {}
        for wheel, why, transferred in failed:
            text = from_uv_cache(uv_cache, wheel)
            read = WheelRead(
                name=wheel.name,
                version=wheel.version,
                filename=wheel.filename,
                source=Source.UV,
                transferred=transferred,
                size=wheel.size,
                why=why,
            )
            if text is not None:
                entries = installed_entries(_parse(text, wheel.filename), wheel, layout)
                out[wheel.name] = WheelRecord(wheel, entries, read)
                continue
            dist = by_name.get(wheel.name)
            if dist is None:
                raise UvFailed(f"uv staged no {wheel.name}: cannot read its RECORD ({why})")
            # The staged copy's RECORD is already as installed, relative to its site folder.
            entries = tuple(e._replace(path=normal(e.path)) for e in dist.records)
            out[wheel.name] = WheelRecord(wheel, entries, read)
    return out
