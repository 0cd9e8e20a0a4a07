"""GraphML: the graph, for a graph tool."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx


def graph(report: nx.MultiDiGraph) -> str:
    from cudatx.render.graph import to_graphml

    return to_graphml(report)
