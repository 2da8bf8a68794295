"""Pure readiness logic for one scope of a canvas (no I/O, no asyncio). Fixes §7 items 1-4.

Every edge carries exactly one token: "taken" or "not taken". A node becomes READY once every
incoming edge has a token and at least one of them is "taken"; it is SKIPPED when all of them are
"not taken", and then passes "not taken" on along all its own outgoing edges (dead-path elimination).
This gives all-of joins after parallel branches and any-of joins after exclusive routers, without
depth barriers: a node is ready the moment its own inputs are, whatever its siblings do.

Completing a node sends "taken" on the edges to its chosen targets (all normal edges by default; a
router's `next`; the exception edges for an exception "goto") and "not taken" on the rest.
`release` sends "taken" early on some edges (a streaming producer feeding its Message).

Determinism: every list returned is in canvas (component) order, so for a given order of
completions the sequence of ready/skipped nodes — and therefore the event order — is fixed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from services.orchestrator.core.dsl.model import NORMAL, Edge


class NodeState(str, Enum):
    WAITING = "waiting"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    SKIPPED = "skipped"


class ScheduleError(RuntimeError):
    """A transition that would schedule a node twice or finish a node that is not running."""


@dataclass
class Step:
    """Result of one transition: nodes that became ready and nodes skipped (with the cause)."""

    ready: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


class Frontier:
    def __init__(self, order: Sequence[str], edges: Iterable[Edge], entries: Iterable[str]):
        self._rank = {node: i for i, node in enumerate(order)}
        self._state = {node: NodeState.WAITING for node in order}
        self._incoming: dict[str, list[Edge]] = {node: [] for node in order}
        self._outgoing: dict[str, list[Edge]] = {node: [] for node in order}
        for edge in edges:
            if edge.source in self._state and edge.target in self._state:
                self._incoming[edge.target].append(edge)
                self._outgoing[edge.source].append(edge)
        self._token: dict[tuple[str, str], bool] = {}
        self._pending_ready: list[str] = []
        for node in entries:
            if node in self._state:
                self._state[node] = NodeState.READY
                self._pending_ready.append(node)
        self._pending_ready.sort(key=self._rank.__getitem__)

    # -- queries -------------------------------------------------------------------------------
    def state(self, node: str) -> NodeState:
        return self._state[node]

    def running(self) -> list[str]:
        return [n for n, s in self._state.items() if s is NodeState.RUNNING]

    @property
    def idle(self) -> bool:
        """Nothing running and nothing ready: the scope is finished (or blocked on a pause)."""
        return not self._pending_ready and not self.running()

    # -- transitions ---------------------------------------------------------------------------
    def take_ready(self) -> list[str]:
        """Ready nodes, in canvas order; each is returned exactly once and becomes RUNNING."""
        ready, self._pending_ready = self._pending_ready, []
        for node in ready:
            if self._state[node] is not NodeState.READY:
                raise ScheduleError(f"{node} scheduled twice")
            self._state[node] = NodeState.RUNNING
        return ready

    def release(self, node: str, targets: Iterable[str]) -> Step:
        """Send "taken" early on the edges from a running node to `targets`."""
        if self._state[node] is not NodeState.RUNNING:
            raise ScheduleError(f"{node} is not running")
        wanted = set(targets)
        step = Step()
        for edge in self._outgoing[node]:
            if edge.target in wanted and (edge.source, edge.target) not in self._token:
                self._send(edge, True, step)
        return self._finish(step)

    def complete(self, node: str, taken: Iterable[str] | None = None, *, exception: bool = False) -> Step:
        """The node finished. `taken`: explicit targets (routers, goto); default all normal edges
        (or, with exception=True, all exception edges)."""
        if self._state[node] is not NodeState.RUNNING:
            raise ScheduleError(f"{node} completed while {self._state[node].value}")
        self._state[node] = NodeState.DONE
        chosen = set(taken) if taken is not None else None
        step = Step()
        for edge in self._outgoing[node]:
            if (edge.source, edge.target) in self._token:
                continue
            if chosen is not None:
                is_taken = edge.target in chosen
            else:
                is_taken = (edge.kind == NORMAL) != exception
            self._send(edge, is_taken, step)
        return self._finish(step)

    def skip(self, nodes: Iterable[str]) -> Step:
        """Rule out waiting nodes before anything ran (another entry of the scope takes this pass):
        they pass "not taken" on, so joins that wait on them are not left waiting."""
        step = Step()
        for node in nodes:
            if self._state.get(node) is NodeState.WAITING:
                self._state[node] = NodeState.SKIPPED
                for out in self._outgoing[node]:
                    if (out.source, out.target) not in self._token:
                        self._send(out, False, step)
        return self._finish(step)

    def _send(self, edge: Edge, taken: bool, step: Step) -> None:
        self._token[(edge.source, edge.target)] = taken
        work = [edge.target]
        while work:
            target = work.pop()
            if self._state[target] is not NodeState.WAITING:
                continue
            tokens = [self._token.get((e.source, e.target)) for e in self._incoming[target]]
            if any(t is None for t in tokens):
                continue
            if any(tokens):
                self._state[target] = NodeState.READY
                step.ready.append(target)
                continue
            self._state[target] = NodeState.SKIPPED
            cause = edge.source if target == edge.target else ""
            step.skipped.append((target, cause or self._incoming[target][-1].source))
            for out in self._outgoing[target]:
                if (out.source, out.target) not in self._token:
                    self._token[(out.source, out.target)] = False
                    work.append(out.target)

    def _finish(self, step: Step) -> Step:
        step.ready.sort(key=self._rank.__getitem__)
        step.skipped.sort(key=lambda s: self._rank[s[0]])
        self._pending_ready.extend(step.ready)
        self._pending_ready.sort(key=self._rank.__getitem__)
        return step
