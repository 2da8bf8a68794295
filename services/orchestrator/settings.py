"""Typed settings of the orchestrator (config section `orchestrator`)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from services.common.errors import InvalidArgumentError
from services.orchestrator.core.context import DEFAULT_CONVERSATION_TURNS


@dataclass(frozen=True)
class OrchestratorSettings:
    max_concurrency: int = 16
    """Nodes of one run executing at once (containers do not count)."""
    thread_pool_size: int = 8
    """Worker threads for blocking work (file parsing, Jinja rendering)."""
    lease_ttl_ms: int = 15_000
    """Run lease duration; renewed every third of it. A dead replica's runs are taken over after it."""
    takeover_interval_s: float = 2.0
    """How often a replica looks for runs whose lease expired."""
    flush_interval_ms: int = 20
    """Upper bound on how long a live event (delta, NodeStarted) waits before it is persisted."""
    history_window: int = 50
    """Messages of a session kept for sys.history and LLM history."""
    node_timeout_s: float | None = None
    """Overrides every component's default timeout when set."""
    max_backoff_s: float = 30.0
    """Cap of one retry delay."""
    conversation_max_turns: int = DEFAULT_CONVERSATION_TURNS
    """User messages one conversation loop (a cycle through a node that waits for the user, e.g. a G0
    Answer) takes; after that many turns the loop ends and the run goes on past it."""
    heartbeat_interval_s: float = 15.0
    """A Heartbeat event is sent on an event stream idle for this long (keeps proxies from closing it)."""
    store: str = "grpc"
    """"grpc" (the canvas_store service) or "memory" (single process, nothing survives a restart)."""
    holder: str = ""
    """Replica identity for leases; default host:pid."""
    service_token: str = ""
    """Token for calls made outside an RPC (takeovers); default: the client token (AGENT_CANVAS_TOKEN,
    auth.client_token, or the embedded token file)."""
    max_runs_per_tenant: int = 32
    """Concurrent runs (PENDING/RUNNING, not PAUSED) per tenant; the next RunCanvas gets RESOURCE_EXHAUSTED.
    0 = unlimited. Shared by every replica through Redis when `redis_url` is set, else per replica."""
    redis_url: str = ""
    """Redis for the admission slots (e.g. redis://127.0.0.1:6379/0); empty = in-memory, per replica."""
    admission_slot_ttl_ms: int = 30_000
    """A slot lapses this long after its last renewal (renewed every third of it by the executing replica)."""

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> "OrchestratorSettings":
        known = {k: v for k, v in section.items() if k in cls.__dataclass_fields__}
        try:
            settings = cls(**known)
        except TypeError as exc:
            raise InvalidArgumentError.for_field("orchestrator", str(exc)) from None
        if settings.max_concurrency < 1:
            raise InvalidArgumentError.for_field("orchestrator.max_concurrency", "must be at least 1")
        if settings.conversation_max_turns < 1:
            raise InvalidArgumentError.for_field("orchestrator.conversation_max_turns", "must be at least 1")
        if settings.max_runs_per_tenant < 0:
            raise InvalidArgumentError.for_field("orchestrator.max_runs_per_tenant", "must be >= 0 (0 = unlimited)")
        if settings.admission_slot_ttl_ms < 300:
            raise InvalidArgumentError.for_field("orchestrator.admission_slot_ttl_ms", "must be at least 300")
        if settings.store not in ("grpc", "memory"):
            raise InvalidArgumentError.for_field("orchestrator.store", "must be 'grpc' or 'memory'")
        return settings

    @property
    def replica(self) -> str:
        return self.holder or f"{socket.gethostname()}:{os.getpid()}"
