"""What a component sees while it runs: resolution, emission, writes, the model and HTTP clients."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from services.orchestrator.core.dsl.model import NodeSpec
from services.orchestrator.core.ports import LlmClient, Usage
from services.orchestrator.core.refs import Resolver
from services.orchestrator.core.state import RunState
from services.orchestrator.core.streams import TextStream

DEFAULT_CONVERSATION_TURNS = 50
"""Turns of a conversation loop unless `orchestrator.conversation_max_turns` says otherwise."""

T = TypeVar("T")


@dataclass
class Frame:
    """One pass through a container body."""

    container_id: str
    index: int
    item: Any = None
    exit_requested: bool = False


@dataclass
class Services:
    """Process-wide collaborators shared by every run."""

    llm: LlmClient | None
    http: httpx.AsyncClient | None
    pool: ThreadPoolExecutor
    tools: Any = None
    """services.orchestrator.tools.ToolRuntime, when tools are configured."""
    conversation_max_turns: int = DEFAULT_CONVERSATION_TURNS
    """Turns of a conversation loop (orchestrator.conversation_max_turns)."""


@dataclass
class NodeContext:
    node: NodeSpec
    state: RunState
    services: Services
    scope: str
    attempt: int
    emit: Callable[[str, dict[str, Any]], None]
    run_body: Callable[[str, Frame], Awaitable[None]]
    frame: Frame | None = None
    writes: list[tuple[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    @property
    def resolver(self) -> Resolver:
        resolver = self.state.resolver()
        parent = self.state.canvas.nodes.get(self.node.parent_id) if self.node.parent_id else None
        if parent is not None and parent.type == "Iteration":
            item_node = self.state.canvas.start_child(parent.id)
            if item_node:
                resolver = resolver.with_aliases(item_node)
        return resolver

    def resolve(self, value: Any) -> Any:
        return self.resolver.resolve(value)

    def render(self, text: str, joiner: str | None = None) -> str:
        return self.resolver.render(text, joiner)

    @property
    def globals(self) -> dict[str, Any]:
        return self.state.globals

    @property
    def spec(self) -> dict[str, Any]:
        return self.state.spec

    def write(self, expr: str, value: Any) -> None:
        """Assign a global or another node's output; journaled with this node's completion."""
        self.state.write(expr, value)
        self.writes.append((expr, value))

    def rng(self) -> random.Random:
        """Seeded per run and node, so variant choices replay identically (§7 item 27)."""
        return random.Random(f"{self.state.spec.get('seed', '')}:{self.node.id}:{self.scope}")

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.services.pool, fn, *args)

    def open_stream(self) -> TextStream:
        stream = TextStream(self.node.id)
        self.state.streams[self.node.id] = stream
        return stream

    def stream_of(self, node_id: str) -> TextStream | None:
        stream = self.state.streams.get(node_id)
        return stream

    def downstream_types(self) -> list[str]:
        nodes = self.state.canvas.nodes
        return [nodes[d].type for d in self.node.downstream if d in nodes]
