"""`cudatx graph` as a text tree (for people at a terminal), JSON (node-link), Graphviz DOT,
GraphML or a Mermaid flowchart. The owner whose bytes are on disk of a file several RECORDs
list is marked in each: `*` in the tree, a bold blue `owns (bytes on disk)` edge in DOT, a
thick `owns (bytes on disk)` arrow in Mermaid, `effective: true` in JSON and GraphML.

Pure functions of the graph: nodes sorted by id and edges by (source, target, attributes),
so the same environment always renders to the same text.
"""

from __future__ import annotations

import json
import re
from typing import Any

import networkx as nx

from cudatx.errors import one_line
from cudatx.render.formats import Rendered
from cudatx.render.formats import render as written

SCHEMA_VERSION = 1
EFFECTIVE = "owns (bytes on disk)"

_DOT_SHAPES = {
    "distribution": "box",
    "file": "note",
    "soname": "ellipse",
    "missing": "octagon",
}
_MERMAID_SHAPES = {  # (open, close) around the quoted label
    "distribution": ("[", "]"),
    "file": ("[[", "]]"),
    "soname": ("(", ")"),
    "missing": ("{{", "}}"),
}

Edge = tuple[str, str, dict[str, Any]]


def _edge_order(edge: Edge) -> tuple[str, str, str]:
    source, target, data = edge
    return source, target, json.dumps(data, sort_keys=True, default=str)


def _sorted(graph: nx.MultiDiGraph) -> tuple[list[tuple[str, dict[str, Any]]], list[Edge]]:
    nodes = sorted(((str(n), dict(d)) for n, d in graph.nodes(data=True)), key=lambda x: x[0])
    edges = sorted(
        ((str(u), str(v), dict(d)) for u, v, d in graph.edges(data=True)), key=_edge_order
    )
    return nodes, edges


def _sorted_copy(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """The same graph, built in sorted order (edge keys renumbered from 0 per node pair)."""
    nodes, edges = _sorted(graph)
    copy = nx.MultiDiGraph()
    copy.graph.update(graph.graph)
    copy.add_nodes_from(nodes)
    for source, target, data in edges:
        copy.add_edge(source, target, **data)
    return copy


def _node_label(node: str, data: dict[str, Any]) -> str:
    return str(data.get("label") or node)


def _edge_label(data: dict[str, Any]) -> str:
    kind = str(data.get("kind", ""))
    detail = ""
    if kind == "owns" and data.get("effective"):
        return EFFECTIVE
    if kind == "needs":
        detail = str(data.get("evidence", ""))
    elif kind == "resolves":
        detail = str(data.get("how") or data.get("status") or "")
    elif kind == "requires":
        detail = str(data.get("specifier", ""))
        if data.get("satisfied") is False:
            detail = (detail + " unmet").strip()
    return f"{kind} {detail}" if detail else kind


# -- json -----------------------------------------------------------------------------------


def to_json(graph: nx.MultiDiGraph) -> str:
    data = nx.node_link_data(_sorted_copy(graph), edges="edges")
    return json.dumps({"schema_version": SCHEMA_VERSION, **data}, indent=2)


# -- dot ------------------------------------------------------------------------------------


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'


def to_dot(graph: nx.MultiDiGraph) -> str:
    nodes, edges = _sorted(graph)
    lines = [
        "digraph cudatx {",
        "  rankdir=LR;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]
    for node, data in nodes:
        kind = str(data.get("kind", ""))
        attrs = [
            f"label={_dot_quote(_node_label(node, data))}",
            f"shape={_DOT_SHAPES.get(kind, 'box')}",
        ]
        if kind == "file":
            attrs.append(f"tooltip={_dot_quote(str(data.get('path', node)))}")
        if kind == "missing":
            attrs.append("color=red, fontcolor=red")
        lines.append(f"  {_dot_quote(node)} [{', '.join(attrs)}];")
    for source, target, data in edges:
        attrs = [f"label={_dot_quote(_edge_label(data))}"]
        if data.get("kind") == "resolves" and data.get("status", "resolved") != "resolved":
            attrs.append("color=red, style=dashed")
        if data.get("kind") == "requires" and data.get("satisfied") is False:
            attrs.append("color=red")
        if data.get("kind") == "owns" and data.get("effective"):
            attrs.append("color=blue, penwidth=2, fontcolor=blue")
        lines.append(f"  {_dot_quote(source)} -> {_dot_quote(target)} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- graphml --------------------------------------------------------------------------------


def to_graphml(graph: nx.MultiDiGraph) -> str:
    return "\n".join(nx.generate_graphml(_sorted_copy(graph))) + "\n"


# -- mermaid --------------------------------------------------------------------------------

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_]")
_MERMAID_ENTITIES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;"}


def _mermaid_text(text: str) -> str:
    escaped = "".join(_MERMAID_ENTITIES.get(c, c) for c in text)
    return '"' + " ".join(escaped.split("\n")) + '"'


def _mermaid_ids(nodes: list[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """Each node id made of [A-Za-z0-9_] only; clashes numbered in sorted order."""
    ids: dict[str, str] = {}
    used: set[str] = set()
    for node, _ in nodes:
        base = _UNSAFE_ID.sub("_", node)
        candidate, number = base, 1
        while candidate in used:
            number += 1
            candidate = f"{base}_{number}"
        used.add(candidate)
        ids[node] = candidate
    return ids


def to_mermaid(graph: nx.MultiDiGraph) -> str:
    nodes, edges = _sorted(graph)
    ids = _mermaid_ids(nodes)
    lines = ["flowchart LR"]
    for node, data in nodes:
        kind = str(data.get("kind", ""))
        opening, closing = _MERMAID_SHAPES.get(kind, ("[", "]"))
        style = ":::missing" if kind == "missing" else ""
        label = _mermaid_text(_node_label(node, data))
        lines.append(f"  {ids[node]}{opening}{label}{closing}{style}")
    for source, target, data in edges:
        arrow = "-.->" if data.get("status", "resolved") != "resolved" else "-->"
        if data.get("kind") == "owns" and data.get("effective"):
            arrow = "==>"
        label = _mermaid_text(_edge_label(data))
        lines.append(f"  {ids[source]} {arrow}|{label}| {ids[target]}")
    lines.append("  classDef missing stroke:#c00,color:#c00")
    return "\n".join(lines) + "\n"


# -- text -----------------------------------------------------------------------------------


def _owners_text(graph: nx.MultiDiGraph, node: str) -> str:
    owners = []
    for source, _, data in sorted(graph.in_edges(node, data=True), key=lambda e: e[0]):
        if data.get("kind") == "owns":
            name = _node_label(source, graph.nodes[source])
            owners.append(name + ("*" if data.get("effective") else ""))
    return f" [{', '.join(owners)}]" if owners else ""


def to_text(graph: nx.MultiDiGraph) -> str:
    """A tree, as pipdeptree prints one: each distribution, its files, and under each file
    what it needs and the file that provides it, with that file's owners (`*`: whose bytes
    are on disk, where several RECORDs list it); requires edges last under their
    distribution; then the files no distribution in the graph lists."""
    nodes, edges = _sorted(graph)
    kinds = {node: str(data.get("kind", "")) for node, data in nodes}
    out: dict[str, list[Edge]] = {}
    for edge in edges:
        out.setdefault(edge[0], []).append(edge)
    lines: list[str] = []

    def file_lines(node: str, indent: str) -> None:
        lines.append(f"{indent}{_node_label(node, graph.nodes[node])}{_owners_text(graph, node)}")
        # One entry per name: a name needed on two counts (libcublas.so.12 names
        # libcublasLt.so.12 in DT_NEEDED and is known to dlopen it) is one need, each count
        # said beside it where it is not DT_NEEDED alone.
        evidence: dict[str, list[str]] = {}
        for _, soname, need in out.get(node, []):
            if need.get("kind") == "needs":
                evidence.setdefault(soname, []).append(str(need.get("evidence", "")))
        for soname, counts in evidence.items():
            providers = [e for e in out.get(soname, []) if e[2].get("kind") == "resolves"]
            label = _node_label(soname, graph.nodes[soname])
            if counts != ["DT_NEEDED"]:
                label += f" ({', '.join(c for c in counts if c)})"
            if not providers:
                lines.append(f"{indent}  needs {label}")
            # One line per provider, with every way it was found (one per load root).
            hows: dict[str, list[str]] = {}
            for _, target, resolved in providers:
                how = str(resolved.get("how") or resolved.get("status") or "")
                hows.setdefault(target, [])
                if how and how not in hows[target]:
                    hows[target].append(how)
            for target, found in hows.items():
                data = graph.nodes[target]
                if data.get("kind") == "missing":  # its status is the whole answer
                    lines.append(f"{indent}  needs {label}: {data.get('status', 'not found')}")
                    continue
                lines.append(
                    f"{indent}  needs {label} -> {_node_label(target, data)}"
                    f"{_owners_text(graph, target)}" + (f" ({', '.join(found)})" if found else "")
                )

    owned: set[str] = set()
    for node, data in nodes:
        if kinds[node] != "distribution":
            continue
        lines.append(_node_label(node, data))
        for _, target, attrs in out.get(node, []):
            if attrs.get("kind") == "owns":
                owned.add(target)
                file_lines(target, "  ")
        for _, target, attrs in out.get(node, []):
            if attrs.get("kind") == "requires":
                spec = str(attrs.get("specifier") or "any version")
                unmet = ", unmet" if attrs.get("satisfied") is False else ""
                lines.append(
                    f"  requires {_node_label(target, graph.nodes[target])} ({spec}{unmet})"
                )

    loose = [n for n, _ in nodes if kinds[n] == "file" and n not in owned]
    if loose:
        lines.append("(files no distribution here lists)")
        for node in loose:
            file_lines(node, "  ")
    if any(data.get("effective") for _, _, data in edges):
        lines.append("* whose bytes are on disk, of a file several RECORDs list")
    # Each line escaped as one (cudatx.render.as_text): names and paths are data.
    return "\n".join(map(one_line, lines)) + "\n"


def render(graph: nx.MultiDiGraph, fmt: str) -> Rendered:
    """The graph in format `fmt` (cudatx.render.formats: text, JSON, DOT, GraphML, Mermaid)."""
    return written("graph", graph, fmt)
