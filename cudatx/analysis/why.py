"""`cudatx why`: who needs a library, where the loader looked for it, and what it found."""

from __future__ import annotations

import os

from cudatx.analysis import observed
from cudatx.analysis.cuda import cuda_major_of_file
from cudatx.analysis.frameworks import role
from cudatx.analysis.ownership import byte_owners, system_package
from cudatx.environment import Environment
from cudatx.errors import NotInEnvironment, UnreadableFile
from cudatx.loader import binding
from cudatx.models import (
    Attempt,
    Distribution,
    Evidence,
    Frozen,
    How,
    Resolution,
    Status,
    SystemPackage,
)

SCHEMA_VERSION = 1


class Owner(Frozen):
    name: str
    version: str
    # the key of its owner (cudatx.discover.owners): "dist-info", "egg-info" or "conda" (a
    # conda-meta record)
    kind: str = "dist-info"


class Needer(Frozen):
    object: str  # as the loader named it (`$ORIGIN/..` not folded)
    file: str | None = None  # the same, its folders resolved through symlinks
    distributions: tuple[Owner, ...]
    evidence: str
    roots: tuple[str, ...]
    attempts: tuple[Attempt, ...]
    # for a framework's loads: "loaded by jax_plugins/xla_cuda13 (preload)", "needed by
    # onnxruntime's CUDA provider (run-time root)" (cudatx.analysis.frameworks.role)
    role: str | None = None


class Earlier(Frozen):
    """For a reused object: the need that mapped it first, in the same process."""

    needed_by: str
    how: How | None
    source: str | None
    evidence: Evidence


class Wanted(Frozen):
    """What one needer wants of the file by versions and versioned symbols (glibc's checks
    after the file is found), and whether the file chosen has it."""

    object: str
    versions: tuple[str, ...]  # DT_VERNEED names for this file
    symbols: int  # how many of its undefined symbols carry one of those versions
    missing: tuple[str, ...]  # "`V'", "S@V": what the chosen file lacks
    # None where the symbols cannot be read (the chosen file's or the needer's)
    has_all: bool | None
    elsewhere: tuple[str, ...]  # files of the same name here that have all of it


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
    wanted: tuple[Wanted, ...] = ()
    # Whose bytes are at `file`: its one owner, or for a path several RECORDs list the owner
    # whose RECORD hash matches them (None when none does, or nothing lists it).
    effective_owner: Owner | None = None
    cuda_major: int | None = None  # the CUDA major `file` was built for (analysis.cuda)
    cuda_reason: str | None = None  # which rule decided it
    # The system package (dpkg, rpm) that installed `file`, where it lies outside the
    # environment and nothing here lists it.
    system_package: SystemPackage | None = None


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
    # The route the answer's first line is about: the first failure, else the file mapped
    # for the most needers (an index into `routes`; None when nothing needs the name).
    answer: int | None = None


def _owners(env: Environment, path: str | None) -> tuple[Owner, ...]:
    if path is None:
        return ()
    return tuple(_owner(d) for d in env.owners_of(path))


def _owner(dist: Distribution) -> Owner:
    return Owner(name=dist.name, version=dist.version, kind=dist.owner)


def _first_mapping(env: Environment, reused: Resolution) -> Resolution | None:
    """The resolution that mapped a reused object first, in the same process."""
    loads = [env.base] + [ld for ld in (*env.loads, *env.observed) if ld.root == reused.root]
    for load in loads:
        for r in load.resolutions:
            if r.path == reused.reused and r.how not in (None, How.ALREADY_LOADED):
                return r
    return None


def _effective_owner(env: Environment, path: str | None) -> Owner | None:
    if path is None or not env.owners.get(env.keys(path)):
        return None
    names = byte_owners(env, path)
    if len(names) != 1:
        return None  # a co-owned path whose bytes match no RECORD (or every RECORD alike)
    found = next(d for d in env.distributions if d.name == names[0])
    return _owner(found)


def _answer(routes: list[Route]) -> int | None:
    """Failures are listed first and answer first; else the file most needers got, counting
    those that found it already loaded."""
    if not routes:
        return None
    if routes[0].status is not Status.RESOLVED:
        return 0
    needers: dict[str | None, int] = {}
    for route in routes:
        needers[route.file] = needers.get(route.file, 0) + len(route.needed_by)
    best = max(needers, key=lambda file: needers[file])
    # The route that mapped it (not one that reused it), so that "found by" says how.
    chosen = [i for i, r in enumerate(routes) if r.file == best]
    first = [i for i in chosen if routes[i].how is not How.ALREADY_LOADED]
    return (first or chosen)[0]


def _earlier(env: Environment, r: Resolution) -> Earlier | None:
    if r.how is not How.ALREADY_LOADED:
        return None
    first = _first_mapping(env, r)
    if first is None:  # loaded with the interpreter itself (ld.so) or by path
        return None
    return Earlier(
        needed_by=first.needed_by, how=first.how, source=first.source, evidence=first.evidence
    )


def _wanted(env: Environment, name: str, path: str | None, needers: list[str]) -> list[Wanted]:
    """For each needer that asks versions of `name`, what it wants and whether `path` (the
    file chosen) has it; other files of that name here that do, where it does not."""
    if path is None:
        return []
    probe = env.view.probe(path)
    if probe.info is None:
        return []
    soname = os.path.basename(name)
    out: list[Wanted] = []
    for needer in needers:
        info = env.view.probe(needer).info
        if info is None:
            continue
        versions = tuple(v for n in info.version_needs if n.file == soname for v in n.versions)
        if not versions:
            continue
        symbols = env.view.symbols(needer)
        refs = [
            f"{n}@{v}"
            for n, v, f in (symbols.references() if symbols is not None else ())
            if v and f == soname
        ]
        wanted = [f"`{v}'" for v in versions] + refs
        missing = [
            w for w in wanted if binding.provides(probe.info, env.view.exports(path), [w]) is False
        ]
        has = binding.provides(probe.info, env.view.exports(path), wanted)
        elsewhere: list[str] = []
        if has is not True:
            for other in env.libraries.get(soname, ()):
                if env.keys(other) == env.keys(path):
                    continue
                found = env.view.probe(other).info
                if found and binding.provides(found, env.view.exports(other), wanted):
                    elsewhere.append(other)
        out.append(
            Wanted(
                object=needer,
                versions=versions,
                symbols=len(refs),
                missing=tuple(missing),
                has_all=has if symbols is not None else None,
                elsewhere=tuple(elsewhere),
            )
        )
    return out


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
    groups: dict[tuple[object, ...], tuple[Earlier | None, list[Resolution]]] = {}
    earlier: dict[tuple[object, ...] | None, Earlier | None] = {}
    for r in matches:
        path = env.keys(r.path) if r.path else None
        source = env.keys(r.source) if r.source else None
        # A copy already loaded: by whom, in the process of this need's root. One route per
        # answer, or a framework's root (the XLA plugin, after JAX's own preloads) would be
        # told it reuses what torch/__init__.py preloaded in torch's process.
        first = (r.root, path) if r.how is How.ALREADY_LOADED else None
        if first not in earlier:
            earlier[first] = _earlier(env, r)
        mapped = earlier[first]
        key = (r.name, r.status, path, r.how, source, r.detail, mapped)
        groups.setdefault(key, (mapped, []))[1].append(r)
    routes = []
    for mapped, members in groups.values():
        head = members[0]
        needers: dict[str, list[Resolution]] = {}
        for r in members:
            needers.setdefault(env.keys(r.needed_by), []).append(r)
        file = env.keys(head.path) if head.path else None
        major = None
        if file is not None and head.status is Status.RESOLVED:
            major = cuda_major_of_file(env, head.path or file, env.view.probe(file).info)
        routes.append(
            Route(
                name=head.name,
                status=head.status,
                path=head.path,
                file=file,
                effective_owner=_effective_owner(env, head.path),
                system_package=system_package(env, head.path),
                cuda_major=major.major if major is not None else None,
                cuda_reason=major.reason if major is not None else None,
                how=head.how,
                source=head.source,
                earlier=mapped,
                source_distributions=_owners(env, head.source),
                owners=_owners(env, head.path),
                detail=head.detail,
                needed_by=tuple(
                    Needer(
                        object=rs[0].needed_by,
                        file=env.keys(rs[0].needed_by),
                        distributions=_owners(env, rs[0].needed_by),
                        evidence=rs[0].evidence.value,
                        roots=tuple(dict.fromkeys(r.root for r in rs if r.root)),
                        attempts=rs[0].attempts,
                        role=next(
                            (x for r in rs if (x := role(env, r) or observed.role(env, r.root))),
                            None,
                        ),
                    )
                    for rs in needers.values()
                ),
                wanted=tuple(
                    _wanted(env, head.name, head.path, [rs[0].needed_by for rs in needers.values()])
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
        answer=_answer(routes),
    )
