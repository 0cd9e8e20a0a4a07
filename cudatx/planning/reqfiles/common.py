"""What every requirements reader shares: the models, TOML, PEP 508 parsing, markers."""

from __future__ import annotations

import codecs
import os
import re
import tomllib
from collections.abc import Iterator, Mapping, Set
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidName,
    canonicalize_name,
)
from packaging.version import InvalidVersion, Version

from cudatx.errors import UnreadableFile, UsageError
from cudatx.models import Frozen
from cudatx.planning.reqfiles.markers import UndefinedKey, evaluate
from cudatx.reading import MAX_REQUIREMENTS, read_bounded


class Pin(Frozen):
    """One package a requirements file asks for, as it applies to the target."""

    name: str  # canonical (PEP 503)
    requirement: str  # PEP 508 text for uv, the marker dropped once evaluated
    version: str | None  # the exact version when pinned (== without wildcard, ===; locks: locked)
    url: str | None  # a direct reference; a local path made absolute; else None
    line: int  # 1-based line where the entry is written (locks: its `name = "..."`)
    text: str  # that entry as written, stripped, for messages (locks: name==version)
    source: str  # the file the entry came from (an included file for `-r`)
    editable: bool = False  # `-e PATH`, or a lock's editable source: uv installs it editable


class RequirementsFile(Frozen):
    path: str
    kind: str  # "requirements" | "pyproject" | "uv.lock" | "pylock"
    entries: tuple[Pin, ...]  # only those that apply to the target
    lock: bool  # uv.lock and pylock: a complete environment by construction
    options: tuple[str, ...]  # uv command-line words from a requirements file's global options
    # What the file's own settings have uv build from source (`--no-binary NAME` with its
    # line; a pyproject.toml's `[tool.uv] no-binary-package`): cudatx.planning.building
    builds: tuple[str, ...] = ()


def read_text(path: str) -> str:
    """A requirements file's text (a -r include, pyproject.toml, a lock): a regular file only,
    opened without blocking, at most MAX_REQUIREMENTS bytes (cudatx.reading), UTF-8."""
    return decode_text(path, read_bytes(path))


def read_bytes(path: str) -> bytes:
    try:
        return read_bounded(path, MAX_REQUIREMENTS)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UnreadableFile(f"{path}: {reason}", path=path) from None


# The byte-order marks uv sniffs before decoding a requirements file (uv-fs
# read_to_string_transcode, encoding_rs_io's DecodeReaderBytes): the mark goes, the rest is
# decoded as it says.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode_text(path: str, data: bytes, *, transcode: bool = False) -> str:
    encoding = "utf-8"
    if transcode:
        for bom, name in _BOMS:
            if data.startswith(bom):
                data, encoding = data[len(bom) :], name
                break
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UnreadableFile(
            f"{path}: not {encoding.upper()} text ({exc.reason})", path=path
        ) from None


def parse_toml(path: str, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"{path}: not valid TOML: nested too deeply") from None


def first_line(exc: Exception) -> str:
    lines = str(exc).splitlines()  # packaging repeats the text with a caret below
    return lines[0] if lines else type(exc).__name__


# What packaging raises on hostile text besides its own errors: SyntaxError for a NUL in a
# quoted string (it reads those with ast.literal_eval), RecursionError for deep parentheses.
PARSE_ERRORS = (InvalidRequirement, InvalidMarker, ValueError, SyntaxError, RecursionError)


def parse_requirement_at(text: str, where: str) -> Requirement:
    """PEP 508, held to what uv reads (uv-pep508): a name that ends in a letter or digit
    (packaging takes `Beta_`), and a PEP 440 version after `===` (packaging takes any
    string there, `===1.0#x` included; uv refuses `===1.0-custom`)."""
    try:
        requirement = Requirement(text)
    except PARSE_ERRORS as exc:
        raise UsageError(f"{where}: not a requirement: {first_line(exc)}") from None
    package_name(requirement.name, where)
    for spec in requirement.specifier:
        if spec.operator == "===":
            try:
                Version(spec.version)
            except InvalidVersion:
                raise UsageError(
                    f"{where}: ==={spec.version}: not a PEP 440 version (uv reads === as one)"
                ) from None
    return requirement


def parse_marker_at(text: str, where: str) -> Marker:
    try:
        return Marker(text)
    except PARSE_ERRORS as exc:
        raise UsageError(f"{where}: not a marker: {first_line(exc)}") from None


def url_path(url: str, where: str, shown: str | None = None) -> str:
    """The path part of a URL, %-decoded. `shown`: the URL as the file writes it, for the
    message (its `${VAR}`s not expanded: a variable may hold a token)."""
    try:
        return unquote(urlsplit(url).path)
    except ValueError:  # e.g. an unbalanced '[' in the host
        said = url if shown is None else shown
        raise UsageError(f"{where}: not a URL: {said}") from None


def marker_holds(marker: Marker | None, environment: Mapping[str, Any], where: str) -> bool:
    """Whether a marker holds for the target, as uv evaluates it (reqfiles/markers.py);
    `extras`/`dependency_groups` in the environment are PEP 751's lock-file fields, `extra`
    the metadata one."""
    if marker is None:
        return True
    try:
        return evaluate(marker, environment)
    except UndefinedKey as exc:
        raise UsageError(f"{where}: cannot evaluate marker '{marker}': no {exc}") from None


def python_ok(spec: str, markers: Mapping[str, str], where: str) -> bool:
    try:
        specifier = SpecifierSet(spec)
    except InvalidSpecifier:
        raise UsageError(f"{where}: requires-python {spec!r} is not a version specifier") from None
    try:
        version = Version(markers.get("python_full_version", ""))
    except InvalidVersion:  # a target that reports no usable version: cannot say it fails
        return True
    # A Version, not a string: packaging 26 answers False for a string it cannot parse, 25
    # raised (pypa/packaging#932).
    return specifier.contains(version, prereleases=True)


def pinned_version(requirement: Requirement) -> str | None:
    for spec in requirement.specifier:
        if spec.operator == "===" or (spec.operator == "==" and not spec.version.endswith("*")):
            return spec.version
    return None


def requirement_text(requirement: Requirement) -> str:
    """PEP 508 text for uv, the marker left out, written here rather than by
    `str(Requirement)`, whose spacing changed between packaging releases (25: `name@ URL`,
    26: `name @ URL`): the same file must hand uv the same text whichever is installed."""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    if requirement.url is not None:
        return f"{requirement.name}{extras} @ {requirement.url}"
    return requirement.name + extras + ",".join(sorted(str(s) for s in requirement.specifier))


def make_pin(
    requirement: Requirement,
    *,
    source: str,
    line: int,
    text: str,
    url: str | None = None,
    version: str | None = None,
    editable: bool = False,
) -> Pin:
    return Pin(
        name=canonicalize_name(requirement.name),
        requirement=requirement_text(requirement),
        version=version if version is not None else pinned_version(requirement),
        url=url if url is not None else requirement.url,
        line=line,
        text=text,
        source=source,
        editable=editable,
    )


def package_name(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{where}: a package has no name")
    try:
        return canonicalize_name(value, validate=True)
    except InvalidName:
        raise UsageError(f"{where}: {value!r} is not a package name") from None


def toml_table(value: object, what: str, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: {what} is not a table")
    return value


def toml_list(value: object, what: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{where}: {what} is not a list")
    return value


def toml_strings(value: object, what: str, where: str) -> list[str]:
    items = toml_list(value, what, where)
    if not all(isinstance(item, str) for item in items):
        raise UsageError(f"{where}: {what} is not a list of strings")
    return items


def toml_string(value: object, what: str, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{where}: {what} is not a string")
    return value


def project_name(folder: Path) -> str | None:
    """The [project] name of the pyproject.toml in `folder`, if there is a readable one."""
    try:
        doc = tomllib.loads(read_text(os.fspath(folder / "pyproject.toml")))
        name = doc.get("project", {}).get("name")
        return canonicalize_name(name, validate=True) if isinstance(name, str) else None
    except (UnreadableFile, ValueError, AttributeError, InvalidName):  # TOMLDecodeError: ValueError
        return None


def check_extras(path: str, chosen: tuple[str, ...], known: Set[str], where: str) -> None:
    missing = [e for e in chosen if canonicalize_name(e) not in known]
    if missing:
        has = ", ".join(sorted(known)) or "none"
        raise UsageError(f"{where}: no extra {missing[0]!r} in {path} (it has: {has})")


def check_python(doc: dict[str, Any], markers: Mapping[str, str], path: str) -> None:
    """A lock's top-level requires-python must hold for the target (uv and PEP 751 agree)."""
    requires = toml_string(doc.get("requires-python"), "requires-python", path)
    if requires and not python_ok(requires, markers, path):
        raise UsageError(
            f"{path}: requires-python {requires}; the target runs Python "
            f"{markers.get('python_full_version')}"
        )


def lock_packages(
    doc: dict[str, Any], text: str, key: str, path: str
) -> Iterator[tuple[int, dict[str, Any], str]]:
    """A lock's `[[key]]` tables: (the line of its name, the table, its canonical name)."""
    lines = TomlLines(text).table_names(key)
    for n, table in enumerate(toml_list(doc.get(key), key, path)):
        line = lines[n] if n < len(lines) else 1
        if not isinstance(table, dict):
            raise UsageError(f"{path}:{line}: a [[{key}]] is not a table")
        yield line, table, package_name(table.get("name"), f"{path}:{line}")


class TomlLines:
    """Line numbers of things in a TOML text, which tomllib does not give."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.cursor = 0

    def line_at(self, index: int) -> int:
        return self.text.count("\n", 0, index) + 1

    def quoted(self, value: str) -> int:
        """The line of the next occurrence of `value` as a TOML string, in file order."""
        for start in (self.cursor, 0):
            hits = [i for q in ('"', "'") if (i := self.text.find(q + value + q, start)) >= 0]
            if hits:
                self.cursor = min(hits) + len(value) + 2
                return self.line_at(min(hits))
        return 1

    def table_names(self, header: str) -> list[int]:
        """For each `[[header]]` table in order, the line of its `name = ...` key."""
        out = []
        heads = list(re.finditer(rf"^[ \t]*\[\[[ \t]*{header}[ \t]*\]\]", self.text, re.M))
        for n, head in enumerate(heads):
            end = heads[n + 1].start() if n + 1 < len(heads) else len(self.text)
            key = re.compile(r"^[ \t]*name[ \t]*=", re.M).search(self.text, head.end(), end)
            out.append(self.line_at(key.start() if key else head.start()))
        return out
