"""pip/uv requirements files (`*.txt`, `*.in`): includes, options, markers, hashes, editables."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from cudatx.errors import UsageError
from cudatx.planning.reqfiles.common import (
    Pin,
    make_pin,
    marker_holds,
    package_name,
    parse_marker_at,
    parse_requirement_at,
    project_name,
    read_text,
    url_path,
)

_COMMENT = re.compile(r"(^|\s+)#.*$")  # pip's rule: '#' at the start or after whitespace
_OPTION = re.compile(r"\s+--?[A-Za-z]")  # a requirement's own options: `pkg==1 --hash=...`
_FLAG = re.compile(r"(--?[A-Za-z0-9][A-Za-z0-9-]*)(?:\s*=\s*|\s+|$)(.*)$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^file:")
_EXTRAS_SUFFIX = re.compile(r"\[[^\]]*\]$")
# pip's and uv's variables in a requirements file: `${NAME}` only, NAME of uppercase letters,
# digits and `_` (POSIX names; pip's req_file.ENV_VAR_RE, pypa/pip#3514); one that is unset
# or empty stays as written.
_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)\}")
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


def _logical_lines(text: str, environ: Mapping[str, str] | None = None) -> list[tuple[int, str]]:
    """pip's reading of a requirements file: comments stripped, `\\` continuations joined,
    `${NAME}` expanded from `environ` (the process's), and per-requirement options
    (`--hash=...`, as pip-compile writes) cut off.

    pip expands variables in the whole line (req_file.expand_env_variables); uv in paths and
    URLs only (astral-sh/uv#2143): where they differ (`pkg==${VERSION}`) uv refuses the file,
    and the plan, which runs uv, says so."""
    variables = os.environ if environ is None else environ
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
        line = _OPTION.split(_expand(pending + line, variables).strip(), maxsplit=1)[0].strip()
        pending = ""
        if line:
            out.append((start, line))
    if pending.strip():
        line = _expand(pending, variables).strip()
        out.append((start, _OPTION.split(line, maxsplit=1)[0].strip()))
    return out


def _expand(line: str, environ: Mapping[str, str]) -> str:
    return _VARIABLE.sub(lambda m: environ.get(m.group(1)) or m.group(0), line)


@dataclass
class RequirementsReader:
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
                requirement = parse_requirement_at(line, where)
                if marker_holds(requirement.marker, {**self.markers, "extra": ""}, where):
                    pin = make_pin(requirement, source=path, line=number, text=line)
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
            self.read(target, read_text(target), chain)
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
        marker = parse_marker_at(parts[1], where) if len(parts) > 1 else None
        if not marker_holds(marker, {**self.markers, "extra": ""}, where):
            return None
        base, _, fragment = target.partition("#")
        egg = dict(p.partition("=")[::2] for p in fragment.split("&")).get("egg", "")
        rest = "&".join(p for p in fragment.split("&") if p and not p.startswith("egg="))
        extras, local = "", None
        if _URL.match(base) and not base.startswith("file:"):
            url = base + (f"#{rest}" if rest else "")  # `#egg=` is pip's, not the reference's
            filename = url_path(base, where).rsplit("/", 1)[-1]
        else:
            raw = url_path(base, where) if base.startswith("file:") else base
            if found := _EXTRAS_SUFFIX.search(raw):
                extras, raw = found.group(0), raw[: found.start()]
            local = Path(os.path.abspath(os.path.join(os.path.dirname(path), raw)))
            url, filename = str(local), local.name
        name = _egg_name(egg, where) or _file_name(filename)
        if name is None and local is not None and local.is_dir():
            name = project_name(local)
        if name is None:
            raise UsageError(
                f"{where}: cannot tell which project {target} is (no #egg=NAME, no wheel or "
                "sdist file name, no pyproject.toml with a [project] name there)"
            )
        reference = local.as_uri() if local is not None else url
        requirement = parse_requirement_at(f"{name}{extras} @ {reference}", where)
        return make_pin(
            requirement, source=path, line=number, text=line, url=url, editable=editable
        )


def _egg_name(egg: str, where: str) -> str | None:
    if not egg:
        return None
    return package_name(_EXTRAS_SUFFIX.sub("", egg), where)


def _file_name(filename: str) -> str | None:
    try:
        if filename.endswith(".whl"):
            return canonicalize_name(parse_wheel_filename(filename)[0])
        if filename.endswith((".tar.gz", ".zip")):
            return canonicalize_name(parse_sdist_filename(filename)[0])
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return None
