"""Installed distributions: *.dist-info (PEP 376/627) and *.egg-info folders on sys.path."""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from itertools import repeat
from pathlib import Path
from types import NoneType
from typing import TYPE_CHECKING

from cudatx.cache import file_key, memo
from cudatx.cache import settled as is_settled
from cudatx.codec import decode, encode
from cudatx.errors import UnreadableFile
from cudatx.models import Distribution, Finding, Frozen, RecordEntry
from cudatx.names import canonical_name
from cudatx.reading import MAX_METADATA, MAX_RECORD, MAX_RECORD_ROWS, read_bounded

if TYPE_CHECKING:
    from email.message import Message  # 7 ms to import; only a cache miss parses headers

    from packaging.requirements import Requirement

    from cudatx.cache import ScanCache


def _read_text(path: Path, findings: list[Finding]) -> str | None:
    """A metadata file's text: a regular file only, opened without blocking (a FIFO there
    would hang every command) and at most its limit (cudatx.reading); else a finding."""
    listing = path.name in ("RECORD", "installed-files.txt")
    try:
        data = read_bounded(path, MAX_RECORD if listing else MAX_METADATA)
    except FileNotFoundError:
        return None
    except OSError as exc:
        findings.append(
            Finding(kind="unreadable", path=str(path), message=exc.strerror or str(exc))
        )
        return None
    if listing:
        refuse_rows(data, path)
    return data.decode("utf-8", errors="replace")


def refuse_rows(data: bytes, path: str | os.PathLike[str]) -> None:
    """Refuse a RECORD of more rows than cudatx reads (cudatx.reading.MAX_RECORD_ROWS): what
    every plan and doctor would read of it costs memory and time in proportion. Counted on
    the bytes (a fraction of a second for 64 MiB), before anything is parsed."""
    rows = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    if rows > MAX_RECORD_ROWS:
        raise UnreadableFile(
            f"{os.fspath(path)}: {rows:,} rows, more than the {MAX_RECORD_ROWS:,} cudatx reads "
            "in one RECORD (docs/reliability.md, Limits)",
            path=os.fspath(path),
        )


_MAX_SIZE_DIGITS = 20  # 2**64 has 20 digits
# RFC 5322 section 2.2.3: a folded header is unfolded by removing each line break that is
# followed by whitespace. The email parser (compat32) keeps the breaks in the value.
_FOLD = re.compile(r"\r?\n(?=[ \t])|\r(?=[ \t])")


def installed_state(sites: tuple[str, ...]) -> tuple[str, ...]:
    """What a change since a scan would alter: each site folder's identity and mtime (an
    install or uninstall adds or removes an entry there), and each metadata folder's RECORD
    (inode, size, mtime; not ctime: a hard link made to it elsewhere, as uv's cache makes
    when a repair stages the same wheel, changes only that). Compared under the
    transaction's lock with the value the scan took first (cudatx.discover.owners)."""
    state = []
    for site in sites:
        try:
            st = os.stat(site)
            names = sorted(os.listdir(site))
        except OSError:
            state.append(f"{site}: -")
            continue
        state.append(f"{site}: {st.st_dev}:{st.st_ino}:{st.st_mtime_ns}")
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    rst = os.lstat(os.path.join(site, name, "RECORD"))
                    key = f"{rst.st_dev}:{rst.st_ino}:{rst.st_size}:{rst.st_mtime_ns}"
                except OSError:
                    key = "-"
                state.append(f"{name}: {key}")
    return tuple(state)


def record_rows(text: str) -> Iterator[tuple[int, list[str] | csv.Error]]:
    """(line number, row) for each row of a RECORD, or (line number, the csv.Error) for a row
    csv refuses. Row by row, so that one line csv refuses (a field over its size limit) costs
    that line only; newline="" so that only real newlines count as line breaks."""
    # uv reads RECORD with Rust's csv crate, which drops a UTF-8 byte order mark at the start
    # (csv-core's reader skips it before the first field): `\ufeffpkg/x` is `pkg/x` to uv.
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    while True:
        number = reader.line_num + 1
        try:
            yield number, next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield number, exc


def parse_record(text: str, record_path: str, findings: list[Finding]) -> tuple[RecordEntry, ...]:
    """RECORD rows are `path,algorithm=digest,size`; bad rows become findings, never errors."""
    entries: list[RecordEntry] = []
    append = entries.append
    for number, row in record_rows(text):
        # The rows every installer writes, taken in one test each (torch's RECORD has
        # 13,000 of them); anything else goes through the checks below.
        if not isinstance(row, csv.Error) and len(row) == 3 and row[0]:
            path, hashed, size = row
            if not hashed and not size:  # `pkg/__pycache__/x.pyc,,`, the RECORD itself
                append(RecordEntry(path))
                continue
            algorithm, sep, digest = hashed.partition("=")
            if (
                sep
                and algorithm
                and digest
                and size.isascii()
                and size.isdigit()
                and len(size) <= _MAX_SIZE_DIGITS
            ):
                append(RecordEntry(path, algorithm, digest, int(size)))
                continue
        entry = _record_entry(row, f"{record_path}:{number}", findings)
        if entry is not None:
            append(entry)
    return tuple(entries)


def _record_entry(
    row: list[str] | csv.Error, where: str, findings: list[Finding]
) -> RecordEntry | None:
    """One RECORD row the fast path of parse_record did not take: an entry, or None (a blank
    row, or a finding)."""
    if isinstance(row, csv.Error):
        findings.append(Finding(kind="malformed RECORD", path=where, message=str(row)))
        return None
    if not row or (len(row) == 1 and not row[0].strip()):
        return None
    if len(row) != 3 or not row[0]:
        findings.append(
            Finding(kind="malformed RECORD", path=where, message=f"expected 3 fields: {row!r}")
        )
        return None
    path, hashed, size = row
    algorithm = digest = None
    if hashed:
        algorithm, sep, digest = hashed.partition("=")
        if not sep or not algorithm or not digest:
            findings.append(
                Finding(kind="malformed RECORD", path=where, message=f"bad hash {hashed!r}")
            )
            return None
    size_value: int | None = None
    if size:
        # int() refuses strings of more than 4300 digits (CPython's limit against
        # quadratic conversion, sys.get_int_max_str_digits): no real size has 20.
        if not (size.isascii() and size.isdigit()) or len(size) > _MAX_SIZE_DIGITS:
            findings.append(
                Finding(kind="malformed RECORD", path=where, message=f"bad size {size!r}")
            )
            return None
        size_value = int(size)
    return RecordEntry(path=path, hash_algorithm=algorithm, hash_digest=digest, size=size_value)


def _egg_requires(text: str) -> tuple[str, ...]:
    """requires.txt sections `[extra:marker]` become PEP 508 markers, as importlib.metadata does."""
    out: list[str] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        extra, _, marker = section.partition(":")
        conditions = [f"({marker})"] if marker else []
        if extra:
            conditions.append(f'extra == "{extra}"')
        out.append(f"{line}; {' and '.join(conditions)}" if conditions else line)
    return tuple(out)


def _header(headers: Message, key: str, meta_dir: Path, findings: list[Finding]) -> str | None:
    """A header's value on one line (unfolded, stripped), or None.

    Names and versions end up in one-line messages and in uv's command line, so a value that
    still holds a character the email parser does not split lines on (\\v, \\x1c, U+2028, ...)
    or any other unprintable one is damage, reported, and never used."""
    value = headers.get(key)
    if value is None:
        return None
    value = _FOLD.sub("", str(value)).strip()
    if not value.isprintable():
        findings.append(
            Finding(
                kind="malformed metadata",
                path=str(meta_dir),
                message=f"{key} {value!r} holds unprintable characters; ignored",
            )
        )
        return None
    return value or None


def _read_distribution(meta_dir: Path, site: str, findings: list[Finding]) -> Distribution | None:
    from email.parser import HeaderParser  # 10 ms to import, and only a cache miss needs it

    egg = meta_dir.name.endswith(".egg-info")  # not .suffix: ".egg-info" alone has none
    metadata_text = _read_text(meta_dir / ("PKG-INFO" if egg else "METADATA"), findings)
    headers = HeaderParser().parsestr(metadata_text or "")
    stem_name, _, stem_version = meta_dir.stem.partition("-")
    display = _header(headers, "Name", meta_dir, findings) or stem_name
    version = _header(headers, "Version", meta_dir, findings) or stem_version.partition("-")[0]
    if not display:
        findings.append(Finding(kind="malformed metadata", path=str(meta_dir), message="no name"))
        return None
    if metadata_text is None:
        findings.append(
            Finding(kind="malformed metadata", path=str(meta_dir), message="no metadata file")
        )
    if egg:
        listing = _read_text(meta_dir / "installed-files.txt", findings) or ""
        # Entries are relative to the .egg-info folder; RECORD paths are relative to the site.
        records = tuple(
            RecordEntry(path=os.path.normpath(os.path.join(meta_dir.name, line.strip())))
            for line in listing.splitlines()
            if line.strip()
        )
        requires = _egg_requires(_read_text(meta_dir / "requires.txt", findings) or "")
    else:
        record_text = _read_text(meta_dir / "RECORD", findings)
        if record_text is None:
            findings.append(Finding(kind="no RECORD", path=str(meta_dir), message="files unknown"))
        records = parse_record(record_text or "", str(meta_dir / "RECORD"), findings)
        requires = tuple(headers.get_all("Requires-Dist") or ())
    installer = _read_text(meta_dir / "INSTALLER", findings)
    return Distribution(
        name=canonical_name(display),
        display_name=display,
        version=version,
        metadata_dir=str(meta_dir),
        site=site,
        owner="egg-info" if egg else "dist-info",
        records=records,
        requires=requires,
        installer=installer.strip() if installer else None,
        direct_url=_read_text(meta_dir / "direct_url.json", findings),
    )


# What _read_distribution reads of a metadata folder: a cached result stands while these keep
# their state (a file that appears or goes away changes it too).
_READS = {
    "dist-info": ("METADATA", "RECORD", "INSTALLER", "direct_url.json"),
    "egg-info": ("PKG-INFO", "installed-files.txt", "requires.txt", "INSTALLER", "direct_url.json"),
}


def scan_distributions(
    sys_path: tuple[str, ...], cache: ScanCache | None = None
) -> tuple[tuple[Distribution, ...], list[Finding]]:
    """Every distribution on sys.path; the first of a name wins, as importlib.metadata does."""
    findings: list[Finding] = []
    found: dict[str, Distribution] = {}
    for site in sys_path:
        try:
            names = sorted(os.listdir(site))
        except OSError:
            continue  # zip files, missing folders: nothing installed there for us
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            meta_dir = Path(site, name)
            if not meta_dir.is_dir():
                continue
            if cache is None:
                dist = _read_distribution(meta_dir, site, findings)
            else:
                dist = _cached_distribution(cache, meta_dir, site, findings)
            if dist is not None and dist.name not in found:
                found[dist.name] = dist
    return tuple(found.values()), findings


@functools.lru_cache(maxsize=4096)
def parse_requirement(text: str) -> Requirement:
    """packaging's Requirement, every way it fails on hostile text as InvalidRequirement.

    packaging 26.2's parser (_parser.py) reads a quoted marker value with ast.literal_eval,
    which raises SyntaxError on a NUL, and descends recursively into nested parentheses, so
    two thousand of them raise RecursionError. packaging 26.4 refuses both itself; any
    packaging >= 25 may be installed beside cudatx.

    Each line is parsed once per run: doctor asks of the same Requires-Dist lines for the
    installed extras twice and for each distribution's requirements (851 asks of 290
    lines on torch 2.14.1). The Requirement is shared: never changed by its callers."""
    from packaging.requirements import InvalidRequirement, Requirement  # cudatx.names

    try:
        return Requirement(text)
    except SyntaxError:
        raise InvalidRequirement("a quoted value holds a NUL character") from None
    except RecursionError:
        raise InvalidRequirement("markers nested too deeply") from None


def _cached_distribution(
    cache: ScanCache, meta_dir: Path, site: str, findings: list[Finding]
) -> Distribution | None:
    states: list[str] = []
    settled = True
    for name in _READS["egg-info" if meta_dir.name.endswith(".egg-info") else "dist-info"]:
        try:
            st = os.stat(meta_dir / name)
        except FileNotFoundError:
            states.append("-")
            continue
        except OSError:
            return _read_distribution(meta_dir, site, findings)  # reported as it is read
        states.append(":".join(file_key(st)))
        settled = settled and is_settled(st)
    where = ("dist", f"{site}\0{meta_dir.name}", "|".join(states))
    return cached(
        cache, where, settled, lambda own: _read_distribution(meta_dir, site, own), findings
    )


def cached(
    cache: ScanCache,
    where: tuple[str, str, str],
    settled: bool,
    read: Callable[[list[Finding]], Distribution | None],
    findings: list[Finding],
) -> Distribution | None:
    """What `read` gives (a distribution, and findings added to `findings`), from the scan
    cache at `where` (kind, key, state) when it holds it; else read, and kept there when the
    files read are `settled` and none was unreadable (a later run may read it)."""

    def compute() -> tuple[Distribution | None, tuple[Finding, ...]]:
        own: list[Finding] = []
        return read(own), tuple(own)

    def dump(answer: tuple[Distribution | None, tuple[Finding, ...]]) -> str | None:
        dist, own = answer
        if settled and not any(f.kind == "unreadable" for f in own):
            return _store(dist, list(own))
        return None  # a later run may read it

    dist, said = memo(cache, *where, compute, load=_unstore, dump=dump)
    findings.extend(said)
    return dist


def _store(dist: Distribution | None, findings: list[Finding]) -> str:
    """A distribution read, and what reading it found, as the scan cache keeps them: the
    distribution without its RECORD rows, a newline, the rows as columns (see _rows)."""
    bare = None if dist is None else replace(dist, records=())
    head = encode(_Stored(dist=bare, findings=tuple(findings)))
    return f"{head}\n{_columns(dist.records if dist else ())}"


def _unstore(text: str) -> tuple[Distribution | None, tuple[Finding, ...]]:
    """What _store() kept; TypeError or ValueError when the text is not that."""
    head, _, rows = text.partition("\n")
    stored = decode(_Stored, head)
    dist = stored.dist
    if dist is not None:
        dist = replace(dist, records=_rows(rows))
    return dist, stored.findings


def _rows(text: str) -> tuple[RecordEntry, ...]:
    """RECORD rows as stored: four columns, each checked in one pass at C speed (a check per
    row took 2 us, as long as the rest of a warm run's reading for torch's 13,000)."""
    columns = json.loads(text)
    if not isinstance(columns, list) or len(columns) != len(RecordEntry._fields):
        raise TypeError("not RECORD columns")
    paths = columns[0]
    kinds: tuple[type | tuple[type, ...], ...] = (
        str,
        (str, NoneType),
        (str, NoneType),
        (int, NoneType),
    )
    for column, kind in zip(columns, kinds, strict=True):
        if not isinstance(column, list) or len(column) != len(paths):
            raise TypeError("RECORD columns of another length")
        if not all(map(isinstance, column, repeat(kind))):
            raise TypeError("a RECORD field of the wrong type")
    # tuple.__new__ over zip: the rows built in C (RecordEntry's own __new__ is Python).
    return tuple(map(tuple.__new__, repeat(RecordEntry), zip(*columns, strict=True)))


def _columns(records: tuple[RecordEntry, ...]) -> str:
    columns = [list(column) for column in zip(*records, strict=True)] or [[], [], [], []]
    return json.dumps(columns, separators=(",", ":"))


class _Stored(Frozen):
    """What the scan cache keeps of one metadata folder, but its RECORD rows."""

    dist: Distribution | None
    findings: tuple[Finding, ...]


def applicable_requirements(
    dist: Distribution, markers: Mapping[str, str], extras: tuple[str, ...] = ()
) -> Iterator[Requirement]:
    """The Requires-Dist of `dist` that apply to the target interpreter (markers evaluated with
    extra="" and with each of `extras`, the extras taken as installed: requirements behind
    extras nobody asked for do not apply). Unreadable lines and markers naming unknown
    variables are skipped: hostile metadata is no reason to crash."""
    if not dist.requires:
        return  # nothing to parse: packaging is not imported (cudatx.names)
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement

    environments = [{**markers, "extra": e} for e in ("", *extras)]
    for text in dist.requires:
        try:
            requirement = parse_requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate(e) for e in environments):
                yield requirement
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue


_EXTRA = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")


def installed_extras(
    distributions: tuple[Distribution, ...], markers: Mapping[str, str], names: frozenset[str]
) -> dict[str, tuple[str, ...]]:
    """name -> the extras of it taken as installed: those whose every requirement is met here,
    for the distributions `names` only (the frameworks that load by hand: what their extras
    bring is what they load; elsewhere an extra nobody asked for does not apply).

    No installer records which extras were asked for (`onnxruntime-gpu[cuda,cudnn]` leaves
    the same dist-info as `onnxruntime-gpu`); an extra whose requirements are all installed
    at versions they allow is taken as asked for, so that a change unmeeting one of them
    counts (README, "Requirements"). An extra with one requirement unmet is not counted.
    """
    versions = {d.name: d.version for d in distributions}
    out: dict[str, tuple[str, ...]] = {}
    for dist in distributions:
        if dist.name not in names:
            continue
        named = sorted({m for t in dist.requires if "extra" in t for m in _EXTRA.findall(t)})
        if not named:
            continue
        behind = _behind_extras(dist, markers, named)
        had = tuple(e for e in named if behind[e] and all(_met(r, versions) for r in behind[e]))
        if had:
            out[dist.name] = had
    return out


def _behind_extras(
    dist: Distribution, markers: Mapping[str, str], named: list[str]
) -> dict[str, list[Requirement]]:
    """extra -> the requirements that apply with it and not without it. Each line is parsed
    once, and only a marker that names `extra` is evaluated once per extra (a line without
    the word applies with every extra as it does without: behind none). A torch environment
    has hundreds of Requires-Dist lines and dozens of extras: parsing each line again per
    extra was most of a warm doctor (issue 36)."""
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement

    out: dict[str, list[Requirement]] = {e: [] for e in named}
    plain = {**markers, "extra": ""}
    by_name: dict[str, list[str]] = {}
    for extra in named:
        by_name.setdefault(canonical_name(extra), []).append(extra)
    for text in dist.requires:
        if "extra" not in text:
            continue
        try:
            requirement = parse_requirement(text)
            marker = requirement.marker
            if marker is None or marker.evaluate(plain):
                continue
            for extra in _candidates(str(marker), named, by_name):
                if marker.evaluate({**markers, "extra": extra}):
                    out[extra].append(requirement)
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue
    return out


_EXTRA_WORD = re.compile(r"\bextra\b")


def _candidates(marker: str, named: list[str], by_name: Mapping[str, list[str]]) -> list[str]:
    """The extras a marker false without one can be true with: where `extra` appears in it
    only as `extra == "<name>"`, any other extra compares as "" does (packaging compares
    extras by their normalized names, PEP 685), so only those named are evaluated; a marker
    that uses `extra` otherwise (`!=`, `in`) is evaluated with every extra."""
    literals = _EXTRA.findall(marker)
    if len(literals) != len(_EXTRA_WORD.findall(marker)):
        return named
    return [
        e
        for lit in dict.fromkeys(canonical_name(x) for x in literals)
        for e in by_name.get(lit, ())
    ]


def _met(requirement: Requirement, versions: Mapping[str, str]) -> bool:
    from packaging.version import InvalidVersion, Version

    version = versions.get(canonical_name(requirement.name))
    if version is None:
        return False
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True


def reinstall_spec(dist: Distribution) -> str:
    """What reinstalls this very distribution: its direct URL when it came from one (a
    local wheel, a VCS checkout), else name==version."""
    if dist.direct_url:
        try:
            url = json.loads(dist.direct_url).get("url")
        except (ValueError, AttributeError, RecursionError):  # json nests recursively too
            url = None
        # An unprintable URL (a line break in hand-edited JSON) would split the one-line
        # messages and fix commands it appears in: name==version serves instead.
        if isinstance(url, str) and url and url.isprintable():
            return f"{dist.name} @ {url}"
    return f"{dist.name}=={dist.version}"
