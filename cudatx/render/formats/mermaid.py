"""A Mermaid flowchart: the graph, for a page that draws one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx


def graph(report: nx.MultiDiGraph) -> str:
    from cudatx.render.graph import to_mermaid

    return to_mermaid(report)
