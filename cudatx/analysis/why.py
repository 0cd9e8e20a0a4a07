"""`cudatx why`: who needs a library, where the loader looked for it, and what it found."""

from __future__ import annotations

import os

from cudatx.environment import Environment
from cudatx.errors import NotInEnvironment, UnreadableFile
from cudatx.models import Attempt, Evidence, Frozen, How, Resolution, Status

SCHEMA_VERSION = 1


class Owner(Frozen):
    name: str
    version: str


class Needer(Frozen):
    object: str
    distributions: tuple[Owner, ...]
    evidence: str
    roots: tuple[str, ...]
    attempts: tuple[Attempt, ...]


class Earlier(Frozen):
    """For a reused object: the need that mapped it first, in the same process."""

    needed_by: str
    how: How | None
    source: str | None
    evidence: Evidence


class Route(Frozen):
    """One outcome for the name, shared by every needer that got it."""

    name: str  # the needed name, as written in DT_NEEDED (or the module's path)
    status: Status
    path: str | None  # as the loader opened it (`$ORIGIN/..` not folded)
    file: str | None  # the same file with its folders resolved through symlinks
    how: How | None
    source: str | None  # the object whose RPATH/RUNPATH named the folder
    earlier: Earlier | None
    source_distributions: tuple[Owner, ...]
    owners: tuple[Owner, ...]  # distributions whose RECORD lists `path`
    detail: str | None
    needed_by: tuple[Needer, ...]


class FileFact(Frozen):
    path: str
    owners: tuple[Owner, ...]


class WhyReport(Frozen):
    schema_version: int = SCHEMA_VERSION
    query: str
    kind: str  # "soname" or "path"
    prefix: str
    routes: tuple[Route, ...]
    files: tuple[FileFact, ...]  # files in the environment by that name (or the path asked)


def _owners(env: Environment, path: str | None) -> tuple[Owner, ...]:
    if path is None:
        return ()
    return tuple(Owner(name=d.name, version=d.version) for d in env.owners_of(path))


def _first_mapping(env: Environment, reused: Resolution) -> Resolution | None:
    """The resolution that mapped a reused object first, in the same process."""
    loads = [env.base] + [ld for ld in env.loads if ld.root == reused.root]
    for load in loads:
        for r in load.resolutions:
            if r.path == reused.reused and r.how not in (None, How.ALREADY_LOADED):
                return r
    return None


def _earlier(env: Environment, r: Resolution) -> Earlier | None:
    if r.how is not How.ALREADY_LOADED:
        return None
    first = _first_mapping(env, r)
    if first is None:  # loaded with the interpreter itself (ld.so) or by path
        return None
    return Earlier(
        needed_by=first.needed_by, how=first.how, source=first.source, evidence=first.evidence
    )


def _locate(env: Environment, query: str) -> str:
    """A relative path is taken from the working folder, else from a site folder: `why`
    prints paths relative to the site folder, and users paste them back."""
    if os.path.isabs(query) or os.path.lexists(query):
        return query
    for site in env.target.site_packages:
        candidate = os.path.join(site, query)
        if os.path.lexists(candidate):
            return candidate
    return query


def explain(env: Environment, query: str) -> WhyReport:
    by_path = "/" in query
    files: tuple[FileFact, ...]
    if by_path:
        located = _locate(env, query)
        if not os.path.lexists(located):
            raise NotInEnvironment(f"{query}: no such file", path=query)
        if not os.access(located, os.R_OK):
            raise UnreadableFile(f"{query}: permission denied", path=query)
        wanted = env.keys(located)
        matches = [
            r for r in env.resolutions() if r.path is not None and env.keys(r.path) == wanted
        ]
        files = (FileFact(path=wanted, owners=_owners(env, located)),)
    else:
        # A library opened by path (a preload, a dlopen with '/') answers to its file name.
        matches = [
            r
            for r in env.resolutions()
            if r.name == query or ("/" in r.name and os.path.basename(r.name) == query)
        ]
        files = tuple(
            FileFact(path=env.keys(p), owners=_owners(env, p)) for p in env.libraries.get(query, ())
        )
    if not matches and not (by_path and files[0].owners) and not (not by_path and files):
        raise NotInEnvironment(
            f"nothing in the environment at {env.target.prefix} needs or provides {query}",
            path=query,
        )
    groups: dict[tuple[object, ...], list[Resolution]] = {}
    for r in matches:
        path = env.keys(r.path) if r.path else None
        source = env.keys(r.source) if r.source else None
        groups.setdefault((r.name, r.status, path, r.how, source, r.detail), []).append(r)
    routes = []
    for members in groups.values():
        head = members[0]
        needers: dict[str, list[Resolution]] = {}
        for r in members:
            needers.setdefault(env.keys(r.needed_by), []).append(r)
        routes.append(
            Route(
                name=head.name,
                status=head.status,
                path=head.path,
                file=env.keys(head.path) if head.path else None,
                how=head.how,
                source=head.source,
                earlier=_earlier(env, head),
                source_distributions=_owners(env, head.source),
                owners=_owners(env, head.path),
                detail=head.detail,
                needed_by=tuple(
                    Needer(
                        object=rs[0].needed_by,
                        distributions=_owners(env, rs[0].needed_by),
                        evidence=rs[0].evidence.value,
                        roots=tuple(dict.fromkeys(r.root for r in rs if r.root)),
                        attempts=rs[0].attempts,
                    )
                    for rs in needers.values()
                ),
            )
        )
    # Failures first: they are why people ask.
    routes.sort(key=lambda route: route.status is Status.RESOLVED)
    return WhyReport(
        query=query,
        kind="path" if by_path else "soname",
        prefix=env.target.prefix,
        routes=tuple(routes),
        files=files,
    )
