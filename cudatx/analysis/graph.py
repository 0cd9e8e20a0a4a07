"""The model (docs/architecture.md) as one graph: distributions, files, sonames, and the
edges between them (owns, needs, resolves, requires).

Node ids are strings with a kind prefix:

- ``dist:<canonical name>`` (kind ``distribution``: ``name``, ``version``)
- ``file:<key>`` (kind ``file``: ``path``, ``owned``) for each ELF object the scan loaded,
  resolved or started a load from. Only those: a RECORD lists tens of thousands of files
  that nothing loads. Objects no RECORD lists (the interpreter, libpython, libc) are nodes
  too, with ``owned`` false, so that every need has a needer and every resolution a file;
  so is a package's ``__init__.py`` that preloads libraries by hand (torch's).
- ``soname:<name>`` (kind ``soname``) for every needed name, as written (an extension
  module's import needs its path).
- ``missing:<name>`` (kind ``missing``: ``status``) for a name that did not resolve.

Edges carry ``kind``: ``owns`` (distribution -> file: ``effective``, true on the edge of
the owner whose bytes are on disk where several RECORDs list the file), ``needs`` (file -> soname:
``evidence``, ``roots``), ``resolves`` (soname -> file or missing: ``how``, ``source``,
``status``), ``requires`` (distribution -> distribution: ``specifier``, ``satisfied``).
Every attribute is a str, int or bool so that GraphML can hold it; lists are ';'-joined.
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Iterable

import networkx as nx
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudatx.analysis.ownership import byte_owners
from cudatx.discover.dists import applicable_requirements
from cudatx.environment import Environment, PathKeys
from cudatx.errors import NotInEnvironment
from cudatx.models import Status
from cudatx.paths import display_path

DIST = "distribution"
FILE = "file"
SONAME = "soname"
MISSING = "missing"

OWNS = "owns"
NEEDS = "needs"
RESOLVES = "resolves"
REQUIRES = "requires"


def dist_id(name: str) -> str:
    return f"dist:{canonicalize_name(name)}"


def file_id(key: str) -> str:
    return f"file:{key}"


def soname_id(name: str) -> str:
    return f"soname:{name}"


def missing_id(name: str) -> str:
    return f"missing:{name}"


def build_graph(env: Environment) -> nx.MultiDiGraph:
    """The environment as a graph; nodes and edges are added in a sorted, stable order."""
    resolutions = list(env.resolutions())
    sites = tuple(env.target.site_packages)

    def short(path: str) -> str:
        return display_path(path, sites, resolve=False)

    # -- files: every needer, every file a need resolved to, every load root ----------------
    files: set[str] = {env.keys(root) for root in env.roots}
    for r in resolutions:
        files.add(env.keys(r.needed_by))
        if r.status is Status.RESOLVED and r.path is not None:
            files.add(env.keys(r.path))

    # -- needs: one edge per (needer, name, evidence), with the roots it happened under -----
    needs: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    # -- resolves: one edge per (name, provider, how, source, status) ----------------------
    resolves: set[tuple[str, str, str, str, str]] = set()
    missing: dict[str, set[str]] = defaultdict(set)
    for r in resolutions:
        roots = needs[(env.keys(r.needed_by), r.name, r.evidence.value)]
        if r.root is not None:
            roots.add(r.root)
        how = r.how.value if r.how is not None else ""
        source = env.keys(r.source) if r.source else ""
        if r.status is Status.RESOLVED and r.path is not None:
            resolves.add((r.name, file_id(env.keys(r.path)), how, source, r.status.value))
        else:
            missing[r.name].add(r.status.value)
            resolves.add((r.name, missing_id(r.name), how, source, r.status.value))

    graph = nx.MultiDiGraph()
    versions: dict[str, str] = {}
    for dist in sorted(env.distributions, key=lambda d: d.name):
        node = dist_id(dist.name)
        if node in graph:
            continue  # the first of a name wins, as importlib.metadata has it
        versions[dist.name] = dist.version
        graph.add_node(
            node,
            kind=DIST,
            name=dist.name,
            version=dist.version,
            label=f"{dist.display_name} {dist.version}",
        )
    for key in sorted(files):
        graph.add_node(file_id(key), kind=FILE, path=key, owned=key in env.owners, label=short(key))
    for name in sorted({name for _, name, _ in needs}):
        graph.add_node(soname_id(name), kind=SONAME, name=name, label=short(name))
    for name in sorted(missing):
        status = ";".join(sorted(missing[name]))
        graph.add_node(
            missing_id(name),
            kind=MISSING,
            name=name,
            status=status,
            label=f"{short(name)} ({status})",
        )

    for key in sorted(files):
        owners = sorted(env.owners.get(key, ()))
        # For a path several RECORDs list: whose bytes are on disk (the RECORD hash that
        # matches), marked on that owner's edge in every format.
        on_disk = set(byte_owners(env, key)) if len(owners) > 1 else set()
        if len(on_disk) != 1:
            on_disk = set()  # none matches, or all do: no one owner to mark
        for owner in owners:
            if dist_id(owner) in graph:
                graph.add_edge(dist_id(owner), file_id(key), kind=OWNS, effective=owner in on_disk)
    for (needer, name, evidence), roots in sorted(needs.items()):
        graph.add_edge(
            file_id(needer),
            soname_id(name),
            kind=NEEDS,
            evidence=evidence,
            roots=";".join(sorted(roots)),
        )
    for name, provider, how, source, status in sorted(resolves):
        graph.add_edge(
            soname_id(name), provider, kind=RESOLVES, how=how, source=source, status=status
        )
    for source_name, target_name, specifier, satisfied in _requirements(env, versions):
        graph.add_edge(
            dist_id(source_name),
            dist_id(target_name),
            kind=REQUIRES,
            specifier=specifier,
            satisfied=satisfied,
        )
    return graph


def _requirements(env: Environment, versions: dict[str, str]) -> list[tuple[str, str, str, bool]]:
    """(requirer, required, specifier, satisfied) for each Requires-Dist that applies to the
    target interpreter and names an installed distribution. Extras are not asked for."""
    edges: set[tuple[str, str, str, bool]] = set()
    seen: set[str] = set()
    for dist in env.distributions:
        if dist.name in seen:
            continue
        seen.add(dist.name)
        for req in applicable_requirements(dist, env.target.markers):
            target = canonicalize_name(req.name)
            installed = versions.get(target)
            if installed is None:
                continue
            edges.add((dist.name, target, str(req.specifier), _satisfies(req, installed)))
    return sorted(edges)


def _satisfies(req: Requirement, version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return not str(req.specifier)
    return req.specifier.contains(parsed, prereleases=True)


# -- around ---------------------------------------------------------------------------------


def _matches(graph: nx.MultiDiGraph, name: str) -> list[str]:
    """Nodes a user's name can mean: a distribution, a soname, a file path or basename."""
    wanted = {dist_id(name), soname_id(name), missing_id(name)}
    key = PathKeys()(name) if "/" in name and os.path.isabs(name) else None
    tail = "/" + name.lstrip("./") if "/" in name else None
    found = [node for node in wanted if node in graph]
    for node, data in graph.nodes(data=True):
        if data.get("kind") != FILE:
            continue
        path = str(data.get("path", ""))
        if (
            path in (name, key)
            or os.path.basename(path) == name
            or (tail is not None and path.endswith(tail))
        ):
            found.append(node)
    return sorted(set(found))


def _neighbours(graph: nx.MultiDiGraph, node: str) -> Iterable[str]:
    yield from graph.succ[node]
    yield from graph.pred[node]


def _closure(graph: nx.MultiDiGraph, nodes: set[str]) -> set[str]:
    """`nodes` with what makes them readable: every owner of a file (the co-owners of a
    shared path, however far), and for every name the file it resolves to and that file's
    owners (the providers of what the part needs)."""
    kept = set(nodes)
    for node in list(nodes):
        if graph.nodes[node].get("kind") == SONAME:
            for _, target, data in graph.out_edges(node, data=True):
                if data.get("kind") == RESOLVES:
                    kept.add(target)
    for node in list(kept):
        if graph.nodes[node].get("kind") == FILE:
            for source, _, data in graph.in_edges(node, data=True):
                if data.get("kind") == OWNS:
                    kept.add(source)
    return kept


def around(
    graph: nx.MultiDiGraph, name: str, radius: int = 2, *, requires: bool = False
) -> nx.MultiDiGraph:
    """The undirected ego graph of `radius` around every node `name` matches (a distribution
    name, a soname, a file path or basename), with the co-owners of its files and the
    providers of its names, as a new graph with every edge between the nodes kept.

    Requires edges are left out unless `requires`: through them a cuDNN reaches filelock
    and jinja2 (torch's requirements), which say nothing about what loads."""
    if radius < 0:
        raise ValueError("radius must be 0 or more")
    if not requires:
        graph = graph.copy()
        graph.remove_edges_from(
            [
                (u, v, k)
                for u, v, k, d in graph.edges(keys=True, data=True)
                if d.get("kind") == REQUIRES
            ]
        )
    starts = _matches(graph, name)
    if not starts:
        raise NotInEnvironment(
            f"{name}: no distribution, library or file of that name in the graph"
        )
    distance = dict.fromkeys(starts, 0)
    queue = deque(starts)
    while queue:
        node = queue.popleft()
        if distance[node] == radius:
            continue
        for other in _neighbours(graph, node):
            if other not in distance:
                distance[other] = distance[node] + 1
                queue.append(other)
    part: nx.MultiDiGraph = graph.subgraph(_closure(graph, set(distance))).copy()
    return part
