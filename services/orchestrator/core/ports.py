"""Ports: what the core needs from the store and the model gateway. Adapters implement them.

The core never sees gRPC. Errors cross these ports as services.common.errors classes
(AbortedError for a lost lease, NotFoundError for an unknown run, ...).
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

from services.orchestrator.core.events import Event

# Identity a background task (lease takeover) acts for: "tenant/user". Store adapters that
# authenticate with a service token send it as the on-behalf-of header. Empty inside an RPC, where
# the caller's own token is forwarded.
acting_as: contextvars.ContextVar[str] = contextvars.ContextVar("acting_as", default="")


class RunStatus(IntEnum):
    """Mirrors agentcanvas.v1.RunStatus numbers."""

    UNSPECIFIED = 0
    PENDING = 1
    RUNNING = 2
    PAUSED = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6

    @property
    def terminal(self) -> bool:
        """The run's stream ends (PAUSED included: it waits for user input)."""
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.PAUSED)

    @property
    def final(self) -> bool:
        """Never written again (as the store's is_final): a PAUSED run may still be leased and written,
        e.g. to cancel it."""
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0
    cost_usd: float = 0.0

    def add(self, other: "Usage") -> None:
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens", "total_tokens", "calls"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.cost_usd += other.cost_usd

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Usage":
        data = data or {}
        return cls(**{k: data[k] for k in cls().__dict__ if k in data})


@dataclass
class RunError:
    reason: str
    message: str
    component_id: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "component_id": self.component_id}


@dataclass
class RunRecord:
    id: str
    spec: dict[str, Any]
    canvas_id: str = ""
    revision_id: str = ""
    session_id: str = ""
    status: RunStatus = RunStatus.PENDING
    outputs: dict[str, Any] = field(default_factory=dict)
    error: RunError | None = None
    usage: Usage = field(default_factory=Usage)
    last_seq: int = 0
    cancel_requested: bool = False
    tenant_id: str = ""
    creator_id: str = ""
    create_time_ms: int = 0
    update_time_ms: int = 0


@dataclass
class Lease:
    run_id: str
    holder: str
    token: int
    expire_ms: int
    cancel_requested: bool = False


@dataclass
class Step:
    """One journal entry: `state` is orchestrator-defined (see core/journal.py)."""

    node_id: str
    state: dict[str, Any]
    attempt: int = 1
    step_index: int = 0


@dataclass
class CommitResult:
    first_seq: int
    last_seq: int
    cancel_requested: bool


@dataclass
class Session:
    id: str
    canvas_id: str = ""
    revision_id: str = ""
    user_id: str = ""
    conversation_turns: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    etag: str = ""


class RunStore(Protocol):
    """Durable run state (implemented over the canvas_store service, or in memory)."""

    async def create_run(self, record: RunRecord, request_id: str = "") -> RunRecord: ...

    async def start_run(self, record: RunRecord, request_id: str, holder: str,
                        ttl_ms: int) -> tuple[RunRecord, Lease | None]:
        """create_run plus the run's first lease for `holder` (one store transaction where the store
        offers it). The lease is None when the run (of an earlier request with this request_id) has
        already started, ended, or is leased live by another holder: then it is not ours to start."""
        ...

    async def get_run(self, run_id: str) -> RunRecord: ...

    async def list_orphaned_runs(self, limit: int = 20) -> list[RunRecord]:
        """PENDING/RUNNING runs without a live lease (takeover candidates)."""
        ...

    async def acquire_lease(self, run_id: str, holder: str, ttl_ms: int) -> Lease:
        """Raises AbortedError when another holder's lease is live."""
        ...

    async def renew_lease(self, run_id: str, holder: str, token: int, ttl_ms: int) -> Lease: ...

    async def release_lease(self, run_id: str, token: int) -> None: ...

    async def commit(
        self,
        run_id: str,
        lease_token: int,
        steps: Sequence[Step],
        events: Sequence[Event],
        *,
        status: RunStatus = RunStatus.UNSPECIFIED,
        outputs: dict[str, Any] | None = None,
        error: RunError | None = None,
        usage: Usage | None = None,
    ) -> CommitResult:
        """Atomically append steps and events (assigning consecutive seqs, written into the events).
        Adapters may group commits of concurrent runs into one store call; each stays fenced on its own.

        Raises AbortedError when `lease_token` is not the current lease (fencing)."""
        ...

    async def list_steps(self, run_id: str, after_step: int = 0) -> list[Step]: ...

    async def list_events(self, run_id: str, after_seq: int = 0, limit: int = 500) -> list[Event]: ...

    def watch_events(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        """Replays persisted events after `after_seq`, then follows until the terminal event."""
        ...

    async def request_cancel(self, run_id: str) -> RunRecord: ...

    async def get_session(self, session_id: str) -> Session: ...

    async def append_session_turn(
        self, session_id: str, messages: list[dict[str, Any]], state: dict[str, Any], etag: str = ""
    ) -> Session: ...

    async def get_canvas_dsl(self, canvas_id: str, revision_id: str = "") -> tuple[dict[str, Any], str]:
        """(dsl, revision id) of a stored canvas."""
        ...


@dataclass
class ChatChunk:
    """One streamed model event. `kind`: text, think_start, think_delta, think_end, tool_call,
    thinking_block, usage, finish. A `tool_call` chunk carries one whole call as `{id, name,
    arguments}` (JSON text); a `thinking_block` one a provider-signed reasoning block as `{thinking,
    signature, redacted_data}`, opaque state to hand back on the assistant turn it came from."""

    kind: str
    text: str = ""
    tool_call: dict[str, Any] | None = None
    thinking_block: dict[str, str] | None = None
    usage: Usage | None = None
    error: str = ""
    error_kind: str = ""
    retryable: bool = False


@dataclass
class ChatRequest:
    """`messages` are dicts: role, content, and optionally `images` (URLs), `tool_calls`
    ([{id, name, arguments}]) and `thinking_blocks` (as received) on an assistant turn,
    `tool_call_id` and `name` on a tool turn."""

    model: str
    messages: list[dict[str, Any]]
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    thinking: str = ""
    json_schema: dict[str, Any] | None = None
    request_id: str = ""
    tools: list[dict[str, Any]] | None = None
    """OpenAI-style function specs (`{"type": "function", "function": {name, description, parameters}}`)."""
    tool_choice: str = ""
    max_repairs: int | None = None
    """Structured output: re-prompts the gateway makes before giving up (None = its default)."""


class LlmClient(Protocol):
    """The model gateway."""

    def chat_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Typed stream; the gateway already split reasoning from text. Ends with a `finish` chunk,
        whose `error` is set when the call failed."""
        ...
