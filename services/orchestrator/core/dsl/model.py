"""The typed, normalised canvas: nodes, edges and containers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CONTAINERS = {"Iteration": "IterationItem", "Loop": "LoopItem", "Conversation": ""}
"""Container type -> the type of its start child ("" for a Conversation: its start is `params.entry`)."""
ROUTERS = frozenset({"Switch", "Categorize"})
NORMAL = "normal"
EXCEPTION = "exception"


@dataclass
class NodeSpec:
    id: str
    type: str
    params: dict[str, Any]
    downstream: list[str]
    upstream: list[str]
    parent_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str = NORMAL


@dataclass
class CanvasSpec:
    """A loaded canvas. `dsl` is the normalised JSON (what a run spec stores)."""

    nodes: dict[str, NodeSpec]
    edges: list[Edge]
    globals: dict[str, Any]
    variables: dict[str, Any]
    dsl: dict[str, Any]
    begin_id: str = ""
    notes: list[str] = field(default_factory=list)

    def children(self, container_id: str) -> list[str]:
        return [n.id for n in self.nodes.values() if n.parent_id == container_id]

    def start_child(self, container_id: str) -> str:
        """The IterationItem/LoopItem of a container, a Conversation's entry ("" when missing)."""
        container = self.nodes[container_id]
        if container.type == "Conversation":  # dsl/conversation.py: the node that waits for the user
            entry = str(container.params.get("entry") or "")
            return entry if entry in self.nodes else ""
        item_type = CONTAINERS.get(container.type, "")
        for node in self.nodes.values():
            if node.parent_id == container_id and node.type == item_type:
                return node.id
        return ""

    def scope_edges(self, parent_id: str) -> list[Edge]:
        """Edges between nodes of one scope (top level: parent ""; or a container's body)."""
        return [
            e
            for e in self.edges
            if self.nodes[e.source].parent_id == parent_id and self.nodes[e.target].parent_id == parent_id
        ]

    def scope_nodes(self, parent_id: str) -> list[str]:
        return [n.id for n in self.nodes.values() if n.parent_id == parent_id]

    def outgoing(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.source == node_id]
