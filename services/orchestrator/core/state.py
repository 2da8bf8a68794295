"""A run's in-memory working state while a replica holds its lease."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.orchestrator.core.dsl.model import CanvasSpec
from services.orchestrator.core.ports import Usage
from services.orchestrator.core.refs import Resolver, parse_expr
from services.orchestrator.core.streams import TextStream
from services.orchestrator.core.values import plain_copy


@dataclass
class RunState:
    canvas: CanvasSpec
    spec: dict[str, Any]
    globals: dict[str, Any]
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    streams: dict[str, TextStream] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    answers: list[str] = field(default_factory=list)
    routes: dict[str, list[str] | None] = field(default_factory=dict)
    """Per node finished (or replayed) in its current pass: the targets it took (None: all its normal
    edges). A Conversation reads it to find which waiting node its next turn starts at."""
    """Content of every Message of the run, in completion order: the turn's answer (§7 item 8)."""

    _references: Any = None
    _references_sent: int = 0

    def reference_bucket(self) -> Any:
        """The run's citation bucket (services.orchestrator.tools.ReferenceBucket), made on first use."""
        if self._references is None:
            from services.orchestrator.tools.citations import ReferenceBucket

            self._references = ReferenceBucket()
        return self._references

    def reference_snapshot(self) -> dict[str, Any] | None:
        if self._references is None or not len(self._references):
            return None
        return self._references.snapshot()

    def new_references(self) -> dict[str, Any] | None:
        """Chunks added since the previous call (each MessageEnd carries only what is new, §7 item 21;
        ids are unique per run, so a client keeps what it already received). In a new run (resume,
        takeover) the first call returns the whole bucket."""
        if self._references is None or len(self._references) <= self._references_sent:
            return None
        snapshot = self._references.snapshot(since=self._references_sent)
        self._references_sent = len(self._references)
        return snapshot

    def __post_init__(self) -> None:
        for node_id in self.canvas.nodes:
            self.outputs.setdefault(node_id, {})

    def output_of(self, node_id: str) -> dict[str, Any] | None:
        if node_id in self.outputs:
            return self.outputs[node_id]
        lowered = {k.lower(): k for k in self.outputs}
        key = lowered.get(node_id.lower())  # references are matched case-insensitively (§7 item 19)
        return self.outputs[key] if key else None

    def resolver(self) -> Resolver:
        return Resolver(self.output_of, self.globals)

    def write(self, expr: str, value: Any) -> None:
        """Set a global (`sys.x`, `env.x`) or a component output (`cid@field.sub`)."""
        ref = parse_expr(expr.strip().strip("{}").strip())
        if ref.is_global:
            key = ".".join((ref.root, *ref.path))
            self.globals[key] = plain_copy(value)
            return
        target = self.outputs.setdefault(ref.root, {})
        if not ref.path:
            raise ValueError(f"cannot assign to a whole component: {expr}")
        *parents, last = ref.path
        for segment in parents:
            child = target.get(segment)
            if not isinstance(child, dict):
                child = {}
                target[segment] = child
            target = child
        target[last] = plain_copy(value)
