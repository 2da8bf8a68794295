"""Plain typed values of the gateway core (no grpc, no litellm)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class ThinkingMode(enum.Enum):
    DEFAULT = "default"
    ENABLED = "enabled"
    DISABLED = "disabled"
    EFFORT = "effort"
    BUDGET = "budget"


@dataclass(frozen=True)
class Thinking:
    mode: ThinkingMode = ThinkingMode.DEFAULT
    effort: str = ""  # "low" | "medium" | "high"
    budget_tokens: int = 0


@dataclass
class ToolCall:
    id: str
    name: str
    arguments_json: str


@dataclass(frozen=True)
class ThinkingBlock:
    """A provider-signed reasoning block (Anthropic `thinking` with `signature`, or `redacted_thinking`).

    Opaque continuation state: providers that sign reasoning verify it when it comes back on the
    assistant turn of a tool-use loop, so it must be returned byte for byte."""

    thinking: str = ""
    signature: str = ""
    redacted_data: str = ""
    """Encrypted content of a `redacted_thinking` block; set only for those."""

    @property
    def redacted(self) -> bool:
        return bool(self.redacted_data)


@dataclass
class Message:
    role: str
    content: str = ""
    parts: list[dict[str, str]] = field(default_factory=list)  # {"text": ...} or {"image_url": ...}
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""
    reasoning_content: str = ""
    thinking_blocks: list[ThinkingBlock] = field(default_factory=list)
    """Signed reasoning of an earlier assistant turn; echoed only where the provider requires it."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Generation:
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass(frozen=True)
class StructuredSpec:
    schema: dict[str, Any]
    name: str = "answer"
    max_repairs: int | None = None
    """None = gateway.default_max_repairs."""


@dataclass
class ChatRequest:
    model: str
    messages: list[Message]
    thinking: Thinking = Thinking()
    with_reasoning: bool = True
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str = ""
    structured: StructuredSpec | None = None
    generation: Generation = Generation()
    fallback_models: list[str] = field(default_factory=list)
    request_id: str = ""


class FinishReason(enum.Enum):
    STOP = "stop"
    LENGTH = "length"
    TOOL_CALLS = "tool_calls"
    CONTENT_FILTER = "content_filter"
    ERROR = "error"


class ErrorKind(enum.Enum):
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    SERVER = "server"
    BAD_REQUEST = "bad_request"
    AUTH = "auth"
    CONTEXT_WINDOW = "context_window"
    CONTENT_POLICY = "content_policy"
    MODEL_NOT_FOUND = "model_not_found"
    STREAM_INTERRUPTED = "stream_interrupted"
    INCOMPLETE_STREAM = "incomplete_stream"
    INVALID_STRUCTURED_OUTPUT = "invalid_structured_output"
    INTERNAL = "internal"


RETRYABLE_KINDS = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.TIMEOUT, ErrorKind.CONNECTION, ErrorKind.SERVER})


@dataclass
class ChatError:
    kind: ErrorKind
    message: str
    retryable: bool = False
    partial_text: str = ""
    http_status: int = 0


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cached_tokens += other.cached_tokens
        self.calls += other.calls
        self.cost_usd += other.cost_usd


# -- stream events (what ChatStream yields) --------------------------------------------------------
@dataclass
class TextEvent:
    text: str


@dataclass
class ThinkStartEvent:
    pass


@dataclass
class ThinkDeltaEvent:
    text: str


@dataclass
class ThinkEndEvent:
    truncated: bool = False


@dataclass
class ToolCallEvent:
    call: ToolCall


@dataclass
class ThinkingBlockEvent:
    block: ThinkingBlock


@dataclass
class UsageEvent:
    usage: Usage


@dataclass
class FinishEvent:
    reason: FinishReason
    model: str = ""
    error: ChatError | None = None
    reasoning_as_answer: bool = False
    """Thinking was requested off and the model answered only in its reasoning channel: that was the answer."""


ChatEvent = (TextEvent | ThinkStartEvent | ThinkDeltaEvent | ThinkEndEvent | ThinkingBlockEvent | ToolCallEvent | UsageEvent
             | FinishEvent)


@dataclass
class ChatResult:
    text: str
    reasoning: str
    tool_calls: list[ToolCall]
    structured: Any
    has_structured: bool
    finish_reason: FinishReason
    usage: Usage
    model: str
    error: ChatError | None = None
    thinking_blocks: list[ThinkingBlock] = field(default_factory=list)
    reasoning_as_answer: bool = False


# -- provider port types ---------------------------------------------------------------------------
@dataclass
class ToolCallDelta:
    index: int | None
    id: str | None
    name: str | None
    arguments: str | None


@dataclass
class ThinkingBlockDelta:
    """A piece of a signed reasoning block as litellm streams it (text, then the signature, by index)."""

    index: int | None
    thinking: str = ""
    signature: str = ""
    redacted_data: str = ""


@dataclass
class ProviderChunk:
    """One normalised provider chunk (a whole non-streamed answer is a single chunk)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    thinking_blocks: list[ThinkingBlockDelta] = field(default_factory=list)


class ProviderError(Exception):
    """A classified provider failure (the adapter maps litellm exception types + status codes)."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int = 0, retry_after_s: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after_s = retry_after_s

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS


@dataclass
class ProviderCall:
    """Everything the adapter needs for one HTTP call; `params` are litellm keyword arguments."""

    model: str
    messages: list[dict[str, Any]]
    api_base: str | None
    api_key: str | None
    stream: bool
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
