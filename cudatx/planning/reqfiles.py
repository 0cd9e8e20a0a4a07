"""Every requirements format cudatx checks, read into one shape: the pins that apply to a target.

Four formats, chosen by file name (`kind_of`):

- pip/uv requirements files (`*.txt`, `*.in`, and any name cudatx cannot place);
- `pyproject.toml`: `[project] dependencies` and the optional groups asked for;
- `uv.lock`: what `uv sync` would install for the target, walked from the project;
- `pylock.toml` / `pylock.<name>.toml` (PEP 751): the packages whose markers hold.

Markers are evaluated for the target interpreter; an entry whose marker is false is not
returned. Malformed input is one UsageError line naming the file (and the line where there is
one); a file that cannot be read is UnreadableFile. Nothing else escapes.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidName,
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion

from cudatx.errors import UnreadableFile, UsageError
from cudatx.models import Frozen


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


_PYLOCK = re.compile(r"^pylock\.([^.]+\.)?toml$")  # the spec's own pattern for any lock name


def kind_of(path: str) -> str | None:
    """The format of a file, by its name; None when cudatx does not read that kind of file."""
    name = os.path.basename(path)
    if name == "pyproject.toml":
        return "pyproject"
    if name == "uv.lock":
        return "uv.lock"
    if _PYLOCK.match(name):
        return "pylock"
    if name.lower().endswith((".txt", ".in")):
        return "requirements"
    return None


def read_requirements(
    path: str,
    *,
    markers: Mapping[str, str],
    extras: tuple[str, ...] = (),
    text: str | None = None,
) -> RequirementsFile:
    """Read `path` (or `text` as if it were that file: `-r` includes are still read from disk,
    relative to path's folder). A name `kind_of` cannot place is read as a requirements file,
    as pip and uv do with `-r`. `extras` choose optional dependencies (pyproject, uv.lock,
    pylock); a requirements file has none."""
    kind = kind_of(path) or "requirements"
    if text is None:
        text = _read(path)
    if kind == "requirements":
        reader = _RequirementsReader(markers)
        reader.read(path, text, ())
        return RequirementsFile(
            path=path,
            kind=kind,
            entries=tuple(reader.entries),
            lock=False,
            options=tuple(reader.options),
        )
    doc = _toml(path, text)
    if kind == "pyproject":
        entries = _pyproject(path, text, doc, markers, extras)
    elif kind == "uv.lock":
        entries = _UvLock(path, text, doc, markers).installed(extras)
    else:
        entries = _pylock(path, text, doc, markers, extras)
    return RequirementsFile(
        path=path, kind=kind, entries=tuple(entries), lock=kind != "pyproject", options=()
    )


# --- shared -----------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{path}: not UTF-8 text ({exc.reason})", path=path) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UnreadableFile(f"{path}: {reason}", path=path) from None


def _toml(path: str, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"{path}: not valid TOML: nested too deeply") from None


def _first_line(exc: Exception) -> str:
    lines = str(exc).splitlines()  # packaging repeats the text with a caret below
    return lines[0] if lines else type(exc).__name__


# What packaging raises on hostile text besides its own errors: SyntaxError for a NUL in a
# quoted string (it reads those with ast.literal_eval), RecursionError for deep parentheses.
_PARSE_ERRORS = (InvalidRequirement, InvalidMarker, ValueError, SyntaxError, RecursionError)


def _requirement(text: str, where: str) -> Requirement:
    try:
        return Requirement(text)
    except _PARSE_ERRORS as exc:
        raise UsageError(f"{where}: not a requirement: {_first_line(exc)}") from None


def _marker(text: str, where: str) -> Marker:
    try:
        return Marker(text)
    except _PARSE_ERRORS as exc:
        raise UsageError(f"{where}: not a marker: {_first_line(exc)}") from None


def _url_path(url: str, where: str) -> str:
    """The path part of a URL, %-decoded."""
    try:
        return unquote(urlsplit(url).path)
    except ValueError as exc:  # e.g. an unbalanced '[' in the host
        raise UsageError(f"{where}: not a URL: {url} ({exc})") from None


_EVAL_ERRORS = (UndefinedComparison, UndefinedEnvironmentName, InvalidVersion, KeyError)


def _holds(marker: Marker | None, environment: Mapping[str, Any], where: str) -> bool:
    """Whether a marker holds for the target; `extras`/`dependency_groups` in the environment
    select PEP 751's lock-file evaluation (packaging >= 25), `extra` the metadata one."""
    if marker is None:
        return True
    try:
        if "extras" in environment:
            return marker.evaluate(dict(environment), "lock_file")
        return marker.evaluate(dict(environment))
    except _EVAL_ERRORS as exc:
        raise UsageError(f"{where}: cannot evaluate marker '{marker}': {exc}") from None


def _python_ok(spec: str, markers: Mapping[str, str], where: str) -> bool:
    try:
        specifier = SpecifierSet(spec)
    except InvalidSpecifier:
        raise UsageError(f"{where}: requires-python {spec!r} is not a version specifier") from None
    version = markers.get("python_full_version", "")
    try:
        return specifier.contains(version, prereleases=True)
    except InvalidVersion:  # a target that reports no usable version: cannot say it fails
        return True


def _pinned(requirement: Requirement) -> str | None:
    for spec in requirement.specifier:
        if spec.operator == "===" or (spec.operator == "==" and not spec.version.endswith("*")):
            return spec.version
    return None


def _pin(
    requirement: Requirement,
    *,
    source: str,
    line: int,
    text: str,
    url: str | None = None,
    version: str | None = None,
    editable: bool = False,
) -> Pin:
    bare = Requirement(str(requirement))
    bare.marker = None
    return Pin(
        name=canonicalize_name(requirement.name),
        requirement=str(bare),
        version=version if version is not None else _pinned(requirement),
        url=url if url is not None else requirement.url,
        line=line,
        text=text,
        source=source,
        editable=editable,
    )


def _name(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{where}: a package has no name")
    try:
        return canonicalize_name(value, validate=True)
    except InvalidName:
        raise UsageError(f"{where}: {value!r} is not a package name") from None


def _table(value: object, what: str, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: {what} is not a table")
    return value


def _list(value: object, what: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{where}: {what} is not a list")
    return value


def _strings(value: object, what: str, where: str) -> list[str]:
    items = _list(value, what, where)
    if not all(isinstance(item, str) for item in items):
        raise UsageError(f"{where}: {what} is not a list of strings")
    return items


def _string(value: object, what: str, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{where}: {what} is not a string")
    return value


def _project_name(folder: Path) -> str | None:
    """The [project] name of the pyproject.toml in `folder`, if there is a readable one."""
    try:
        doc = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
        name = doc.get("project", {}).get("name")
        return canonicalize_name(name, validate=True) if isinstance(name, str) else None
    except (OSError, ValueError, AttributeError, InvalidName):  # TOMLDecodeError is a ValueError
        return None


def _unknown_extras(path: str, chosen: tuple[str, ...], known: Set[str], where: str) -> None:
    missing = [e for e in chosen if canonicalize_name(e) not in known]
    if missing:
        has = ", ".join(sorted(known)) or "none"
        raise UsageError(f"{where}: no extra {missing[0]!r} in {path} (it has: {has})")


def _check_python(doc: dict[str, Any], markers: Mapping[str, str], path: str) -> None:
    """A lock's top-level requires-python must hold for the target (uv and PEP 751 agree)."""
    requires = _string(doc.get("requires-python"), "requires-python", path)
    if requires and not _python_ok(requires, markers, path):
        raise UsageError(
            f"{path}: requires-python {requires}; the target runs Python "
            f"{markers.get('python_full_version')}"
        )


def _packages(
    doc: dict[str, Any], text: str, key: str, path: str
) -> Iterator[tuple[int, dict[str, Any], str]]:
    """A lock's `[[key]]` tables: (the line of its name, the table, its canonical name)."""
    lines = _Lines(text).table_names(key)
    for n, table in enumerate(_list(doc.get(key), key, path)):
        line = lines[n] if n < len(lines) else 1
        if not isinstance(table, dict):
            raise UsageError(f"{path}:{line}: a [[{key}]] is not a table")
        yield line, table, _name(table.get("name"), f"{path}:{line}")


class _Lines:
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


# --- requirements files (pip / uv) ------------------------------------------------------------

_COMMENT = re.compile(r"(^|\s+)#.*$")  # pip's rule: '#' at the start or after whitespace
_OPTION = re.compile(r"\s+--?[A-Za-z]")  # a requirement's own options: `pkg==1 --hash=...`
_FLAG = re.compile(r"(--?[A-Za-z0-9][A-Za-z0-9-]*)(?:\s*=\s*|\s+|$)(.*)$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^file:")
_EXTRAS_SUFFIX = re.compile(r"\[[^\]]*\]$")
# Global options uv reads from a requirements file and takes on its command line too
# (uv's crates/uv-requirements-txt parse_entry: -i, --extra-index-url, -f, --no-index,
# --no-binary, --only-binary; --require-hashes is accepted there as well).
_VALUED = {
    "-i": "--index-url",
    "--index-url": "--index-url",
    "--extra-index-url": "--extra-index-url",
    "-f": "--find-links",
    "--find-links": "--find-links",
    "--no-binary": "--no-binary",
    "--only-binary": "--only-binary",
}
_FLAGS = {"--no-index", "--require-hashes"}
# pip options uv ignores in a file (with a warning): no meaning for what gets installed here.
_IGNORED = {"--trusted-host", "--pre", "--prefer-binary", "--use-feature"}
_INCLUDES = {"-r", "--requirement"}
_CONSTRAINTS = {"-c", "--constraint"}
_EDITABLE = {"-e", "--editable"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """pip's reading of a requirements file: comments stripped, `\\` continuations joined,
    and per-requirement options (`--hash=...`, as pip-compile writes) cut off."""
    out: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.sub("", raw)
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = _OPTION.split((pending + line).strip(), maxsplit=1)[0].strip()
        pending = ""
        if line:
            out.append((start, line))
    if pending.strip():
        out.append((start, _OPTION.split(pending.strip(), maxsplit=1)[0].strip()))
    return out


@dataclass
class _RequirementsReader:
    markers: Mapping[str, str]
    entries: list[Pin] = field(default_factory=list)
    options: list[str] = field(default_factory=list)

    def read(self, path: str, text: str, including: tuple[str, ...]) -> None:
        chain = (*including, os.path.abspath(path))
        for number, line in _logical_lines(text):
            where = f"{path}:{number}"
            pin: Pin | None = None
            if line.startswith("-"):
                pin = self._option(path, number, line, chain)
            elif _URL.match(line) or line.startswith((".", "/")):
                pin = self._unnamed(path, number, line, editable=False)
            else:
                requirement = _requirement(line, where)
                if _holds(requirement.marker, {**self.markers, "extra": ""}, where):
                    pin = _pin(requirement, source=path, line=number, text=line)
            if pin is not None:
                self.entries.append(pin)

    def _option(self, path: str, number: int, line: str, chain: tuple[str, ...]) -> Pin | None:
        where = f"{path}:{number}"
        match = _FLAG.match(line)
        flag, value = (match.group(1), match.group(2).strip()) if match else (line, "")
        if flag in _FLAGS:
            self.options.append(flag)
            return None
        if flag in _IGNORED:
            return None
        if flag not in {*_VALUED, *_INCLUDES, *_CONSTRAINTS, *_EDITABLE}:
            raise UsageError(f"{where}: {flag}: not an option uv reads in a requirements file")
        if not value:
            raise UsageError(f"{where}: {flag} needs a value")
        folder = os.path.dirname(path)
        if flag in _INCLUDES:
            target = os.path.join(folder, value)
            if os.path.abspath(target) in chain:
                raise UsageError(f"{where}: {flag} {value}: includes itself (a cycle)")
            self.read(target, _read(target), chain)
        elif flag in _EDITABLE:
            return self._unnamed(path, number, value, editable=True)
        elif flag in _VALUED:
            long = _VALUED[flag]
            if long == "--find-links" and not _URL.match(value):
                local = os.path.join(folder, value)  # as pip: relative to the file, when there
                value = os.path.abspath(local) if os.path.exists(local) else value
            self.options += [long, value]
        return None  # -c/--constraint: constraints add no entries

    def _unnamed(self, path: str, number: int, line: str, *, editable: bool) -> Pin | None:
        """A path or URL without `name @` (`-e ./pkg`, `./dist/x.whl`, `git+https://...`):
        the name comes from `#egg=`, a wheel or sdist file name, or a folder's pyproject."""
        where = f"{path}:{number}"
        parts = re.split(r"\s;\s*|;\s+", line, maxsplit=1)
        target = parts[0].strip()
        marker = _marker(parts[1], where) if len(parts) > 1 else None
        if not _holds(marker, {**self.markers, "extra": ""}, where):
            return None
        base, _, fragment = target.partition("#")
        egg = dict(p.partition("=")[::2] for p in fragment.split("&")).get("egg", "")
        rest = "&".join(p for p in fragment.split("&") if p and not p.startswith("egg="))
        extras, local = "", None
        if _URL.match(base) and not base.startswith("file:"):
            url = base + (f"#{rest}" if rest else "")  # `#egg=` is pip's, not the reference's
            filename = _url_path(base, where).rsplit("/", 1)[-1]
        else:
            raw = _url_path(base, where) if base.startswith("file:") else base
            if found := _EXTRAS_SUFFIX.search(raw):
                extras, raw = found.group(0), raw[: found.start()]
            local = Path(os.path.abspath(os.path.join(os.path.dirname(path), raw)))
            url, filename = str(local), local.name
        name = _egg_name(egg, where) or _file_name(filename)
        if name is None and local is not None and local.is_dir():
            name = _project_name(local)
        if name is None:
            raise UsageError(
                f"{where}: cannot tell which project {target} is (no #egg=NAME, no wheel or "
                "sdist file name, no pyproject.toml with a [project] name there)"
            )
        reference = local.as_uri() if local is not None else url
        requirement = _requirement(f"{name}{extras} @ {reference}", where)
        return _pin(requirement, source=path, line=number, text=line, url=url, editable=editable)


def _egg_name(egg: str, where: str) -> str | None:
    if not egg:
        return None
    return _name(_EXTRAS_SUFFIX.sub("", egg), where)


def _file_name(filename: str) -> str | None:
    try:
        if filename.endswith(".whl"):
            return canonicalize_name(parse_wheel_filename(filename)[0])
        if filename.endswith((".tar.gz", ".zip")):
            return canonicalize_name(parse_sdist_filename(filename)[0])
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return None


# --- pyproject.toml ---------------------------------------------------------------------------


def _pyproject(
    path: str, text: str, doc: dict[str, Any], markers: Mapping[str, str], extras: tuple[str, ...]
) -> list[Pin]:
    project = _table(doc.get("project"), "[project]", path)
    if "dependencies" in _strings(project.get("dynamic"), "project.dynamic", path):
        raise UsageError(
            f"{path}: project.dependencies is dynamic (the build backend computes it); "
            "cudatx cannot read it from the file"
        )
    groups = {
        canonicalize_name(group): _strings(deps, f"project.optional-dependencies.{group}", path)
        for group, deps in _table(
            project.get("optional-dependencies"), "[project.optional-dependencies]", path
        ).items()
    }
    _unknown_extras("[project.optional-dependencies]", extras, set(groups), path)
    base = _strings(project.get("dependencies"), "project.dependencies", path)
    wanted: list[tuple[str, str]] = [(dep, "") for dep in base]
    for chosen in dict.fromkeys(canonicalize_name(e) for e in extras):
        wanted += [(dep, chosen) for dep in groups[chosen]]
    lines = _Lines(text)
    out = []
    for dep, extra in wanted:
        number = lines.quoted(dep)
        where = f"{path}:{number}"
        requirement = _requirement(dep, where)
        if _holds(requirement.marker, {**markers, "extra": extra}, where):
            out.append(_pin(requirement, source=path, line=number, text=dep.strip()))
    return out


# --- uv.lock ----------------------------------------------------------------------------------
#
# Read as uv 0.13 writes it (astral-sh/uv crates/uv-resolver/src/lock/mod.rs and
# installable.rs; https://docs.astral.sh/uv/concepts/projects/layout/): `version = 1`;
# `[[package]]` with `name`, `version` (absent for a dynamic version), `source` (one of
# registry, editable, virtual, directory, path, git, url), `dependencies` (edges: `name`,
# and `version`/`source` only where several packages share the name, `marker`, `extra`),
# `optional-dependencies` and `dev-dependencies` (dependency groups) tables of such edges;
# `[manifest]` `members`, `requirements`, `dependency-groups` for non-project workspaces.
# `uv sync` installs from the workspace root package(s): its dependencies, the extras asked
# for and the default groups (`[tool.uv] default-groups`, else "dev"), following edges whose
# markers hold; a virtual package is never installed itself, an editable one is.

_SOURCES = ("registry", "editable", "virtual", "directory", "path", "git", "url")


@dataclass
class _Locked:
    name: str
    version: str | None
    kind: str
    source: dict[str, Any]
    table: dict[str, Any]
    line: int


class _UvLock:
    def __init__(
        self, path: str, text: str, doc: dict[str, Any], markers: Mapping[str, str]
    ) -> None:
        self.path = path
        self.folder = Path(os.path.abspath(path)).parent
        self.environment = {**markers, "extra": ""}
        version = doc.get("version")
        if version is None:
            raise UsageError(f"{path}: no `version` (not a uv.lock?)")
        if version != 1:
            raise UsageError(f"{path}: uv.lock version {version!r} is not one cudatx reads (1)")
        _check_python(doc, markers, path)
        self.packages: list[_Locked] = []
        self.by_name: dict[str, list[_Locked]] = {}
        for line, table, name in _packages(doc, text, "package", path):
            where = f"{path}:{line}"
            source = _table(table.get("source"), "source", where)
            kinds = [k for k in _SOURCES if k in source]
            if len(kinds) != 1:
                raise UsageError(f"{where}: {name} has no source uv.lock knows")
            locked = _Locked(
                name=name,
                version=_string(table.get("version"), "version", where),
                kind=kinds[0],
                source=source,
                table=table,
                line=line,
            )
            if locked.version is None and locked.kind in ("registry", "url", "git"):
                raise UsageError(f"{where}: {name} has no version")
            self.packages.append(locked)
            self.by_name.setdefault(name, []).append(locked)
        self.manifest = _table(doc.get("manifest"), "[manifest]", path)

    def installed(self, extras: tuple[str, ...]) -> list[Pin]:
        project, groups = self._beside()
        local = [p for p in self.packages if p.kind in ("editable", "virtual")]
        roots = [p for p in local if p.name == project] or local
        queue: list[tuple[_Locked, str | None]] = []
        chosen: dict[int, _Locked] = {}
        known: set[str] = set()
        for root in roots:
            optional = self._edges_table(root, "optional-dependencies")
            known |= {canonicalize_name(e) for e in optional}
        if extras:
            _unknown_extras("its project's optional-dependencies", extras, known, self.path)
        for root in roots:
            if root.kind != "virtual":  # uv installs a virtual project's dependencies only
                chosen[id(root)] = root
            queue.append((root, None))
            queue += [(root, canonicalize_name(e)) for e in extras]
            for group, edges in self._edges_table(root, "dev-dependencies").items():
                if groups is None or canonicalize_name(group) in groups:
                    queue += self._follow(root, edges, chosen)
        requirements = _list(self.manifest.get("requirements"), "requirements", self.path)
        queue += self._manifest_edges(requirements, chosen)
        for group, edges in _table(
            self.manifest.get("dependency-groups"), "manifest.dependency-groups", self.path
        ).items():
            if groups is None or canonicalize_name(group) in groups:
                queue += self._manifest_edges(_list(edges, group, self.path), chosen)
        if self.packages and not roots and not queue:
            raise UsageError(
                f"{self.path}: no project package (source editable or virtual) and no "
                "[manifest] requirements: nothing to start from"
            )
        seen: set[tuple[int, str | None]] = set()
        while queue:
            package, extra = queue.pop(0)
            if (id(package), extra) in seen:
                continue
            seen.add((id(package), extra))
            if extra is None:
                edges = _list(package.table.get("dependencies"), "dependencies", self._at(package))
            else:
                edges = self._edges_table(package, "optional-dependencies").get(extra, [])
            queue += self._follow(package, edges, chosen)
        return self._pins(chosen.values())

    def _beside(self) -> tuple[str | None, Set[str] | None]:
        """The project's name and its default groups (None: all), from the pyproject.toml
        beside the lock when there is one."""
        pyproject = self.folder / "pyproject.toml"
        if not pyproject.is_file():
            return None, {"dev"}
        where = str(pyproject)
        doc = _toml(where, _read(where))
        project = _table(doc.get("project"), "[project]", where)
        name = project.get("name")
        uv = _table(_table(doc.get("tool"), "[tool]", where).get("uv"), "[tool.uv]", where)
        default = uv.get("default-groups", ["dev"])
        groups = (
            None
            if default == "all"
            else {canonicalize_name(g) for g in _strings(default, "default-groups", where)}
        )
        return (canonicalize_name(name) if isinstance(name, str) else None), groups

    def _at(self, package: _Locked) -> str:
        return f"{self.path}:{package.line}"

    def _edges_table(self, package: _Locked, key: str) -> dict[str, list[Any]]:
        where = self._at(package)
        table = _table(package.table.get(key), key, where)
        return {canonicalize_name(k): _list(v, f"{key}.{k}", where) for k, v in table.items()}

    def _follow(
        self, parent: _Locked, edges: list[Any], chosen: dict[int, _Locked]
    ) -> list[tuple[_Locked, str | None]]:
        where = self._at(parent)
        out: list[tuple[_Locked, str | None]] = []
        for edge in edges:
            if not isinstance(edge, dict):
                raise UsageError(f"{where}: a dependency of {parent.name} is not a table")
            marker_text = _string(edge.get("marker"), "marker", where)
            marker = _marker(marker_text, where) if marker_text else None
            if not _holds(marker, self.environment, where):
                continue
            package = self._pick(edge, parent.name, where)
            if package.kind != "virtual":
                chosen.setdefault(id(package), package)
            out.append((package, None))
            for extra in _strings(edge.get("extra"), "extra", where):
                out.append((package, canonicalize_name(extra)))
        return out

    def _manifest_edges(
        self, edges: list[Any], chosen: dict[int, _Locked]
    ) -> list[tuple[_Locked, str | None]]:
        out: list[tuple[_Locked, str | None]] = []
        root = _Locked("the manifest", None, "virtual", {}, {}, 1)
        for edge in edges:
            if isinstance(edge, dict):  # a requirement: only its name and marker matter here
                edge = {k: v for k, v in edge.items() if k in ("name", "marker", "extra")}
            out += self._follow(root, [edge], chosen)
        return out

    def _pick(self, edge: dict[str, Any], parent: str, where: str) -> _Locked:
        name = _name(edge.get("name"), where)
        candidates = self.by_name.get(name, [])
        if "version" in edge:
            candidates = [c for c in candidates if c.version == edge["version"]]
        if "source" in edge:
            candidates = [c for c in candidates if c.source == edge["source"]]
        if len(candidates) > 1:  # a fork the edge does not name: the one whose markers hold
            candidates = [c for c in candidates if self._forked_for_target(c, where)]
        if len(candidates) != 1:
            problem = "does not list" if not candidates else "lists several packages for"
            raise UsageError(f"{where}: {parent} depends on {name}, and the lock {problem} it")
        return candidates[0]

    def _forked_for_target(self, package: _Locked, where: str) -> bool:
        forks = _strings(package.table.get("resolution-markers"), "resolution-markers", where)
        return not forks or any(_holds(_marker(m, where), self.environment, where) for m in forks)

    def _pins(self, packages: Iterable[_Locked]) -> list[Pin]:
        out: list[Pin] = []
        seen: dict[str, _Locked] = {}
        for package in sorted(packages, key=lambda p: p.line):
            where = self._at(package)
            if package.name in seen:
                raise UsageError(
                    f"{where}: the lock installs {package.name} twice for this target "
                    f"({seen[package.name].version} and {package.version})"
                )
            seen[package.name] = package
            reference, url = self._reference(package, where)
            version = package.version
            pinned = f"{package.name}=={version}"
            written = pinned if reference is None else f"{package.name} @ {reference}"
            out.append(
                _pin(
                    _requirement(written, where),
                    source=self.path,
                    line=package.line,
                    text=pinned if version is not None else written,
                    url=url,
                    version=version,
                    editable=package.kind == "editable",
                )
            )
        return out

    def _reference(self, package: _Locked, where: str) -> tuple[str | None, str | None]:
        """(the PEP 508 reference for uv, the Pin's url); (None, None) for a registry."""
        value = _string(package.source[package.kind], f"source.{package.kind}", where) or ""
        if package.kind == "registry":
            return None, None
        if package.kind in ("editable", "directory", "path"):
            local = Path(os.path.abspath(self.folder / value))
            return local.as_uri(), str(local)
        subdirectory = _string(package.source.get("subdirectory"), "subdirectory", where)
        if package.kind == "git":  # https://host/repo?rev=...&subdirectory=...#<commit>
            _url_path(value, where)  # a URL urlsplit can take
            parts = urlsplit(value)
            query = dict(p.partition("=")[::2] for p in parts.query.split("&") if p)
            subdirectory = subdirectory or query.get("subdirectory")
            value = f"git+{parts.scheme}://{parts.netloc}{parts.path}"
            value += f"@{parts.fragment}" if parts.fragment else ""
        if subdirectory:
            value += f"#subdirectory={subdirectory}"
        return value, value


# --- pylock.toml (PEP 751) --------------------------------------------------------------------
#
# Read by the installation steps of the spec (packaging.python.org/specifications/pylock-toml):
# lock-version major 1; requires-python and environments must hold for the target; a package
# is installed when its marker holds with `extras` = the extras asked for and
# `dependency_groups` = default-groups; its requires-python must then hold; no two packages of
# one name; exactly one kind of source (vcs, directory, archive, or wheels/sdist).

_PYLOCK_SOURCES = ("vcs", "directory", "archive")


def _pylock(
    path: str, text: str, doc: dict[str, Any], markers: Mapping[str, str], extras: tuple[str, ...]
) -> list[Pin]:
    version = doc.get("lock-version")
    if version is None:
        raise UsageError(f"{path}: no `lock-version` (not a PEP 751 lock file?)")
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise UsageError(f"{path}: lock-version {version!r} is not one cudatx reads (1.x)")
    _check_python(doc, markers, path)
    known = {canonicalize_name(e) for e in _strings(doc.get("extras"), "extras", path)}
    _unknown_extras("its extras", extras, known, path)
    groups = _strings(doc.get("default-groups"), "default-groups", path)
    environment: dict[str, Any] = {
        **markers,
        "extras": frozenset(canonicalize_name(e) for e in extras),
        "dependency_groups": frozenset(canonicalize_name(g) for g in groups),
    }
    environments = _strings(doc.get("environments"), "environments", path)
    if environments and not any(_holds(_marker(m, path), environment, path) for m in environments):
        raise UsageError(f"{path}: none of its environments matches the target")
    out: list[Pin] = []
    seen: set[str] = set()
    folder = Path(os.path.abspath(path)).parent
    for line, table, name in _packages(doc, text, "packages", path):
        where = f"{path}:{line}"
        marker_text = _string(table.get("marker"), "marker", where)
        if marker_text and not _holds(_marker(marker_text, where), environment, where):
            continue
        needs = _string(table.get("requires-python"), "requires-python", where)
        if needs and not _python_ok(needs, markers, where):
            raise UsageError(f"{where}: {name} requires Python {needs}")
        if name in seen:
            raise UsageError(f"{where}: {name} is listed twice for this target")
        seen.add(name)
        out.append(_pylock_pin(table, name, folder, path, line))
    return out


def _pylock_pin(table: dict[str, Any], name: str, folder: Path, path: str, line: int) -> Pin:
    where = f"{path}:{line}"
    version = _string(table.get("version"), "version", where)
    kinds = [k for k in _PYLOCK_SOURCES if k in table]
    files = "wheels" in table or "sdist" in table
    if len(kinds) > 1 or (kinds and files):
        both = [*kinds, *(k for k in ("wheels", "sdist") if k in table)]
        raise UsageError(f"{where}: {name} has conflicting sources ({', '.join(both)})")
    if not kinds:
        if not files:
            raise UsageError(f"{where}: {name} has no source (wheels, sdist, vcs, ...)")
        if version is None:
            raise UsageError(f"{where}: {name} has wheels or an sdist but no version")
        text = f"{name}=={version}"
        return _pin(_requirement(text, where), source=path, line=line, text=text)
    kind = kinds[0]
    spec = _table(table[kind], kind, where)
    url = _string(spec.get("url"), f"{kind}.url", where)
    local = _string(spec.get("path"), f"{kind}.path", where)
    if url is None and local is None:
        raise UsageError(f"{where}: {name}'s {kind} has neither url nor path")
    absolute = str(Path(os.path.abspath(folder / local))) if local is not None else None
    reference = url if url is not None else Path(absolute or "").as_uri()
    if kind == "vcs":
        vcs = _string(spec.get("type"), "vcs.type", where) or "git"
        commit = _string(spec.get("commit-id"), "vcs.commit-id", where)
        reference = f"{vcs}+{reference}" + (f"@{commit}" if commit else "")
    subdirectory = _string(spec.get("subdirectory"), f"{kind}.subdirectory", where)
    if subdirectory:
        reference += f"#subdirectory={subdirectory}"
    requirement = _requirement(f"{name} @ {reference}", where)
    return _pin(
        requirement,
        source=path,
        line=line,
        text=f"{name}=={version}" if version else f"{name} @ {reference}",
        url=absolute if kind == "directory" and absolute else reference,
        version=version,
        editable=kind == "directory" and spec.get("editable") is True,
    )
