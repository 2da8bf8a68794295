"""Conversation loops: a cycle through a node that waits for the user (spec §6.2 `exesql`).

RAGFlow's G0 canvases loop Answer -> tool -> Answer: each turn the user's message goes round the
cycle once and the Answer shows the result, then waits for the next message. A cycle with no node
that waits for the user would never stop, so it stays a CYCLE error (validate.py); a cycle through
a UserFillUp (G0 Answers are migrated to Message + UserFillUp, migrations.py) is folded here into
an implicit container of type `Conversation`:

* the cycle's nodes (one strongly connected component of the top-level graph) become the body of a
  synthetic node `<entry>~conversation` (ids never contain `~` in RAGFlow, so it cannot clash, and
  references cannot name it);
* the entry is the waiting node; edges from outside into the cycle must reach it (they are moved to
  the container), edges back to it from inside the cycle are the loop's repetition and are dropped
  (like a Loop body's edge back to its LoopItem), and edges leaving the cycle leave the container;
* a cycle may hold several waiting nodes (RAGFlow's older templates send the conversation from one
  Answer's loop into another's): every edge into a waiting node is a *turn edge* (`turn_edges`), and
  each turn starts at the waiting node the previous turn's taken turn edge led to (the first at the
  entry); the other waiting nodes sit that turn out;
* each pass of the body is one turn, with the pass index in every journal key (the runner's
  container model), so pause/resume, takeover and replay work as for Loop bodies.

Only `canvas.nodes` / `canvas.edges` change: the stored DSL keeps the user's graph, and loading it
again folds it the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from services.orchestrator.core.dsl.model import CanvasSpec, Edge, NodeSpec

if TYPE_CHECKING:
    from services.orchestrator.core.dsl.loader import CanvasProblem

CONVERSATION = "Conversation"
INTERACTIVE = frozenset({"UserFillUp"})
SUFFIX = "~conversation"


def strongly_connected(nodes: list[str], edges: list[Edge]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components with a cycle only, members in canvas order."""
    rank = {n: i for i, n in enumerate(nodes)}
    successors: dict[str, list[str]] = {n: [] for n in nodes}
    self_loops: set[str] = set()
    for edge in edges:
        if edge.source in successors and edge.target in successors:
            successors[edge.source].append(edge.target)
            if edge.source == edge.target:
                self_loops.add(edge.source)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    work: list[tuple[str, Iterator[str]]] = []

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)  # numbered in visiting order
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(successors[node])))

    for root in nodes:
        if root in index:
            continue
        enter(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    enter(child)
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1 or node in self_loops:
                    found.append(sorted(members, key=rank.__getitem__))
    return sorted(found, key=lambda c: rank[c[0]])


def fold(canvas: CanvasSpec, problems: list[CanvasProblem]) -> None:
    """Turn every top-level cycle through an interactive node into a Conversation container."""
    from services.orchestrator.core.dsl.loader import CanvasProblem

    for members in strongly_connected(canvas.scope_nodes(""), canvas.scope_edges("")):
        waiting = [m for m in members if canvas.nodes[m].type in INTERACTIVE]
        if not waiting or any(canvas.nodes[m].type == "Begin" for m in members):
            continue  # validate.py reports it as CYCLE (a run must start outside its conversation)
        inside = set(members)
        entering = [e for e in canvas.edges if e.target in inside and e.source not in inside]
        targets = {e.target for e in entering}
        candidates = [w for w in waiting if w in targets] or waiting
        entry = candidates[0]
        wrong = [e for e in entering if e.target != entry]
        if wrong or len(targets) > 1:
            for edge in wrong:
                problems.append(CanvasProblem(edge.target, "upstream", "CYCLE",
                                              f"a conversation loop is entered through its waiting node '{entry}', "
                                              f"but '{edge.source}' leads into '{edge.target}'"))
            continue
        _make_container(canvas, members, entry, waiting)


def _make_container(canvas: CanvasSpec, members: list[str], entry: str, waiting: list[str]) -> None:
    inside = set(members)
    turn_edges: list[list[str]] = []
    container_id = entry + SUFFIX
    edges: list[Edge] = []
    seen: set[tuple[str, str]] = set()

    def add(edge: Edge) -> None:
        if (edge.source, edge.target) not in seen:
            seen.add((edge.source, edge.target))
            edges.append(edge)

    upstream: list[str] = []
    downstream: list[str] = []
    for edge in canvas.edges:
        src_in, dst_in = edge.source in inside, edge.target in inside
        if src_in and dst_in:
            if edge.target in waiting:  # an edge into a waiting node: the next turn starts there
                turn_edges.append([edge.source, edge.target])
            else:
                add(edge)
        elif dst_in:
            add(Edge(edge.source, container_id, edge.kind))
            upstream.append(edge.source)
        elif src_in:
            add(Edge(container_id, edge.target, edge.kind))
            downstream.append(edge.target)
        else:
            add(edge)
    container = NodeSpec(id=container_id, type=CONVERSATION,
                         params={"entry": entry, "members": list(members), "waiting": list(waiting),
                                 "turn_edges": turn_edges},
                         downstream=list(dict.fromkeys(downstream)), upstream=list(dict.fromkeys(upstream)),
                         name="Conversation")
    nodes: dict[str, NodeSpec] = {}
    for node_id, node in canvas.nodes.items():
        if node_id == members[0]:
            nodes[container_id] = container  # the container sits where its cycle did (canvas order)
        if node_id in inside:
            node.parent_id = container_id
        nodes[node_id] = node
    canvas.nodes = nodes
    canvas.edges = edges
    others = [w for w in waiting if w != entry]
    canvas.notes.append(f"conversation loop {' -> '.join(members)}: the first turn waits at '{entry}'"
                        + (f"; later turns at whichever of {', '.join([entry, *others])} the last turn led to" if others else ""))
