"""`pyproject.toml`: `[project] dependencies` and the optional groups asked for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.utils import (
    canonicalize_name,
)

from cudatx.errors import UsageError
from cudatx.planning.reqfiles.common import (
    Pin,
    TomlLines,
    check_extras,
    make_pin,
    marker_holds,
    parse_requirement_at,
    toml_strings,
    toml_table,
)


def read_pyproject(
    path: str, text: str, doc: dict[str, Any], markers: Mapping[str, str], extras: tuple[str, ...]
) -> list[Pin]:
    project = toml_table(doc.get("project"), "[project]", path)
    if "dependencies" in toml_strings(project.get("dynamic"), "project.dynamic", path):
        raise UsageError(
            f"{path}: project.dependencies is dynamic (the build backend computes it); "
            "cudatx cannot read it from the file"
        )
    groups = {
        canonicalize_name(group): toml_strings(deps, f"project.optional-dependencies.{group}", path)
        for group, deps in toml_table(
            project.get("optional-dependencies"), "[project.optional-dependencies]", path
        ).items()
    }
    check_extras("[project.optional-dependencies]", extras, set(groups), path)
    base = toml_strings(project.get("dependencies"), "project.dependencies", path)
    wanted: list[tuple[str, str]] = [(dep, "") for dep in base]
    for chosen in dict.fromkeys(canonicalize_name(e) for e in extras):
        wanted += [(dep, chosen) for dep in groups[chosen]]
    lines = TomlLines(text)
    out = []
    for dep, extra in wanted:
        number = lines.quoted(dep)
        where = f"{path}:{number}"
        requirement = parse_requirement_at(dep, where)
        if marker_holds(requirement.marker, {**markers, "extra": extra}, where):
            out.append(make_pin(requirement, source=path, line=number, text=dep.strip()))
    return out
