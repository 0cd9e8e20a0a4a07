"""Graphviz's DOT: the graph, which `--format svg|png` draws through `dot`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx


def graph(report: nx.MultiDiGraph) -> str:
    from cudatx.render.graph import to_dot

    return to_dot(report)
