"""`pylock.toml` / `pylock.<name>.toml` (PEP 751): the packages whose markers hold."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.utils import (
    canonicalize_name,
)

from cudatx.errors import UsageError
from cudatx.planning.reqfiles.common import (
    Pin,
    check_extras,
    check_python,
    lock_packages,
    make_pin,
    marker_holds,
    parse_marker_at,
    parse_requirement_at,
    python_ok,
    toml_string,
    toml_strings,
    toml_table,
)

#
# Read by the installation steps of the spec (packaging.python.org/specifications/pylock-toml):
# lock-version major 1; requires-python and environments must hold for the target; a package
# is installed when its marker holds with `extras` = the extras asked for and
# `dependency_groups` = default-groups; its requires-python must then hold; no two packages of
# one name; exactly one kind of source (vcs, directory, archive, or wheels/sdist).

_PYLOCK_SOURCES = ("vcs", "directory", "archive")


def read_pylock(
    path: str, text: str, doc: dict[str, Any], markers: Mapping[str, str], extras: tuple[str, ...]
) -> list[Pin]:
    version = doc.get("lock-version")
    if version is None:
        raise UsageError(f"{path}: no `lock-version` (not a PEP 751 lock file?)")
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise UsageError(f"{path}: lock-version {version!r} is not one cudatx reads (1.x)")
    check_python(doc, markers, path)
    known = {canonicalize_name(e) for e in toml_strings(doc.get("extras"), "extras", path)}
    check_extras("its extras", extras, known, path)
    groups = toml_strings(doc.get("default-groups"), "default-groups", path)
    environment: dict[str, Any] = {
        **markers,
        "extras": frozenset(canonicalize_name(e) for e in extras),
        "dependency_groups": frozenset(canonicalize_name(g) for g in groups),
    }
    environments = toml_strings(doc.get("environments"), "environments", path)
    if environments and not any(
        marker_holds(parse_marker_at(m, path), environment, path) for m in environments
    ):
        raise UsageError(f"{path}: none of its environments matches the target")
    out: list[Pin] = []
    seen: set[str] = set()
    folder = Path(os.path.abspath(path)).parent
    for line, table, name in lock_packages(doc, text, "packages", path):
        where = f"{path}:{line}"
        marker_text = toml_string(table.get("marker"), "marker", where)
        if marker_text and not marker_holds(
            parse_marker_at(marker_text, where), environment, where
        ):
            continue
        needs = toml_string(table.get("requires-python"), "requires-python", where)
        if needs and not python_ok(needs, markers, where):
            raise UsageError(f"{where}: {name} requires Python {needs}")
        if name in seen:
            raise UsageError(f"{where}: {name} is listed twice for this target")
        seen.add(name)
        out.append(_pylock_pin(table, name, folder, path, line))
    return out


def _pylock_pin(table: dict[str, Any], name: str, folder: Path, path: str, line: int) -> Pin:
    where = f"{path}:{line}"
    version = toml_string(table.get("version"), "version", where)
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
        return make_pin(parse_requirement_at(text, where), source=path, line=line, text=text)
    kind = kinds[0]
    spec = toml_table(table[kind], kind, where)
    url = toml_string(spec.get("url"), f"{kind}.url", where)
    local = toml_string(spec.get("path"), f"{kind}.path", where)
    if url is None and local is None:
        raise UsageError(f"{where}: {name}'s {kind} has neither url nor path")
    absolute = str(Path(os.path.abspath(folder / local))) if local is not None else None
    reference = url if url is not None else Path(absolute or "").as_uri()
    if kind == "vcs":
        vcs = toml_string(spec.get("type"), "vcs.type", where) or "git"
        commit = toml_string(spec.get("commit-id"), "vcs.commit-id", where)
        reference = f"{vcs}+{reference}" + (f"@{commit}" if commit else "")
    subdirectory = toml_string(spec.get("subdirectory"), f"{kind}.subdirectory", where)
    if subdirectory:
        reference += f"#subdirectory={subdirectory}"
    requirement = parse_requirement_at(f"{name} @ {reference}", where)
    return make_pin(
        requirement,
        source=path,
        line=line,
        text=f"{name}=={version}" if version else f"{name} @ {reference}",
        url=absolute if kind == "directory" and absolute else reference,
        version=version,
        editable=kind == "directory" and spec.get("editable") is True,
    )
