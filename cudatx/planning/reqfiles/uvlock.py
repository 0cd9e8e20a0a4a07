"""`uv.lock`: what `uv sync` would install for the target, walked from the project."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
    package_name,
    parse_marker_at,
    parse_requirement_at,
    parse_toml,
    read_text,
    toml_list,
    toml_string,
    toml_strings,
    toml_table,
    url_path,
)

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


class UvLock:
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
        check_python(doc, markers, path)
        self.packages: list[_Locked] = []
        self.by_name: dict[str, list[_Locked]] = {}
        for line, table, name in lock_packages(doc, text, "package", path):
            where = f"{path}:{line}"
            source = toml_table(table.get("source"), "source", where)
            kinds = [k for k in _SOURCES if k in source]
            if len(kinds) != 1:
                raise UsageError(f"{where}: {name} has no source uv.lock knows")
            locked = _Locked(
                name=name,
                version=toml_string(table.get("version"), "version", where),
                kind=kinds[0],
                source=source,
                table=table,
                line=line,
            )
            if locked.version is None and locked.kind in ("registry", "url", "git"):
                raise UsageError(f"{where}: {name} has no version")
            self.packages.append(locked)
            self.by_name.setdefault(name, []).append(locked)
        self.manifest = toml_table(doc.get("manifest"), "[manifest]", path)

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
            check_extras("its project's optional-dependencies", extras, known, self.path)
        for root in roots:
            if root.kind != "virtual":  # uv installs a virtual project's dependencies only
                chosen[id(root)] = root
            queue.append((root, None))
            queue += [(root, canonicalize_name(e)) for e in extras]
            for group, edges in self._edges_table(root, "dev-dependencies").items():
                if groups is None or canonicalize_name(group) in groups:
                    queue += self._follow(root, edges, chosen)
        requirements = toml_list(self.manifest.get("requirements"), "requirements", self.path)
        queue += self._manifest_edges(requirements, chosen)
        for group, edges in toml_table(
            self.manifest.get("dependency-groups"), "manifest.dependency-groups", self.path
        ).items():
            if groups is None or canonicalize_name(group) in groups:
                queue += self._manifest_edges(toml_list(edges, group, self.path), chosen)
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
                edges = toml_list(
                    package.table.get("dependencies"), "dependencies", self._at(package)
                )
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
        doc = parse_toml(where, read_text(where))
        project = toml_table(doc.get("project"), "[project]", where)
        name = project.get("name")
        uv = toml_table(toml_table(doc.get("tool"), "[tool]", where).get("uv"), "[tool.uv]", where)
        default = uv.get("default-groups", ["dev"])
        groups = (
            None
            if default == "all"
            else {canonicalize_name(g) for g in toml_strings(default, "default-groups", where)}
        )
        return (canonicalize_name(name) if isinstance(name, str) else None), groups

    def _at(self, package: _Locked) -> str:
        return f"{self.path}:{package.line}"

    def _edges_table(self, package: _Locked, key: str) -> dict[str, list[Any]]:
        where = self._at(package)
        table = toml_table(package.table.get(key), key, where)
        return {canonicalize_name(k): toml_list(v, f"{key}.{k}", where) for k, v in table.items()}

    def _follow(
        self, parent: _Locked, edges: list[Any], chosen: dict[int, _Locked]
    ) -> list[tuple[_Locked, str | None]]:
        where = self._at(parent)
        out: list[tuple[_Locked, str | None]] = []
        for edge in edges:
            if not isinstance(edge, dict):
                raise UsageError(f"{where}: a dependency of {parent.name} is not a table")
            marker_text = toml_string(edge.get("marker"), "marker", where)
            marker = parse_marker_at(marker_text, where) if marker_text else None
            if not marker_holds(marker, self.environment, where):
                continue
            package = self._pick(edge, parent.name, where)
            if package.kind != "virtual":
                chosen.setdefault(id(package), package)
            out.append((package, None))
            for extra in toml_strings(edge.get("extra"), "extra", where):
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
        name = package_name(edge.get("name"), where)
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
        forks = toml_strings(package.table.get("resolution-markers"), "resolution-markers", where)
        return not forks or any(
            marker_holds(parse_marker_at(m, where), self.environment, where) for m in forks
        )

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
                make_pin(
                    parse_requirement_at(written, where),
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
        value = toml_string(package.source[package.kind], f"source.{package.kind}", where) or ""
        if package.kind == "registry":
            return None, None
        if package.kind in ("editable", "directory", "path"):
            local = Path(os.path.abspath(self.folder / value))
            return local.as_uri(), str(local)
        subdirectory = toml_string(package.source.get("subdirectory"), "subdirectory", where)
        if package.kind == "git":  # https://host/repo?rev=...&subdirectory=...#<commit>
            url_path(value, where)  # a URL urlsplit can take
            parts = urlsplit(value)
            query = dict(p.partition("=")[::2] for p in parts.query.split("&") if p)
            subdirectory = subdirectory or query.get("subdirectory")
            value = f"git+{parts.scheme}://{parts.netloc}{parts.path}"
            value += f"@{parts.fragment}" if parts.fragment else ""
        if subdirectory:
            value += f"#subdirectory={subdirectory}"
        return value, value
