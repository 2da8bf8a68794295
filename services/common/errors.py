"""The one exception tree of agent-canvas.

    AgentCanvasError
    ├── InvalidArgumentError      INVALID_ARGUMENT (carries field/node violations)
    ├── NotFoundError             NOT_FOUND
    ├── AlreadyExistsError        ALREADY_EXISTS
    ├── PermissionDeniedError     PERMISSION_DENIED
    ├── UnauthenticatedError      UNAUTHENTICATED
    ├── FailedPreconditionError   FAILED_PRECONDITION
    ├── AbortedError              ABORTED (stale etag, lost lease)
    ├── ResourceExhaustedError    RESOURCE_EXHAUSTED (quotas, full queues)
    ├── DeadlineExceededError     DEADLINE_EXCEEDED
    ├── CancelledError            CANCELLED
    ├── UnavailableError          UNAVAILABLE (retryable)
    └── InternalError             INTERNAL

Domain code raises these (or subclasses with extra attributes). services.common.status is the only
place that turns them into gRPC statuses and back; it clips what it sends (`clip_utf8`, `clip_chars` and
the MAX_* limits below) so that an error echoing a huge input still fits the client's 8 KiB limit on
trailing metadata instead of turning into RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.logging import redact_text

MAX_MESSAGE_BYTES = 1000
"""Status messages are clipped to this many UTF-8 bytes (at a character boundary)."""
MAX_DESCRIPTION_CHARS = 150
"""Each detail description (field violation, metadata value, resource name) is clipped to this many characters..."""
MAX_DESCRIPTION_BYTES = 200
"""...and UTF-8 bytes."""
MAX_FIELD_BYTES = 120
"""Field paths in violations (which can echo Struct keys) are clipped to this many UTF-8 bytes."""
MAX_VIOLATIONS = 5
"""At most this many field violations are sent; the status says how many more there were."""
ELLIPSIS = "…"


def clip_utf8(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes at a character boundary, ending in an ellipsis when cut.

    Lone surrogates (not encodable) become '?'.
    """
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= max_bytes:
        return encoded.decode("utf-8")
    room = max(0, max_bytes - len(ELLIPSIS.encode()))
    return encoded[:room].decode("utf-8", "ignore") + ELLIPSIS


def clip_chars(text: str, max_chars: int, max_bytes: int | None = None) -> str:
    """`text` cut to at most `max_chars` characters (and `max_bytes` UTF-8 bytes), ending in an ellipsis when cut."""
    if len(text) > max_chars:
        text = text[: max(0, max_chars - len(ELLIPSIS))] + ELLIPSIS
    return clip_utf8(text, max_bytes if max_bytes is not None else 4 * max_chars)


def with_article(word: str) -> str:
    """`word` after its indefinite article, for messages that name a kind: "an agent", "a dataflow", "an LLM".
    By the first letter (and all-capital initialisms spelled out), which is right for the words messages name."""
    initialism = len(word) > 1 and word.isupper()
    vowel = word[:1].lower() in ("aeiou" if not initialism else "aefhilmnorsx")
    return f"{'an' if vowel else 'a'} {word}"


@dataclass(frozen=True)
class FieldViolation:
    """One bad field: `field` is a path such as "canvas.title" or "components.Agent:0.params.llm_id"."""

    field: str
    description: str


class AgentCanvasError(Exception):
    """Root of every error agent-canvas raises on purpose.

    Args:
        message: developer-facing English; never a secret or a stack trace. It is redacted here
            (services.common.logging.redact_text), because messages quote upstream text (an HTTP error
            body, an MCP or provider error) that can echo a key, and they travel on into statuses,
            RunEvents, store rows and the messages an Agent sends back to its model.
        reason: stable UPPER_SNAKE_CASE code sent as google.rpc.ErrorInfo.reason.
        metadata: extra machine-readable context for ErrorInfo.metadata (redacted too).
    """

    default_reason = "ERROR"

    def __init__(self, message: str, *, reason: str | None = None, metadata: dict[str, str] | None = None):
        message = redact_text(message)
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata = {key: redact_text(value) if isinstance(value, str) else value for key, value in (metadata or {}).items()}


class InvalidArgumentError(AgentCanvasError):
    """The request is malformed; `violations` names every bad field or node."""

    default_reason = "INVALID_ARGUMENT"

    def __init__(
        self,
        message: str,
        *,
        violations: list[FieldViolation] | None = None,
        reason: str | None = None,
        metadata: dict[str, str] | None = None,
    ):
        super().__init__(message, reason=reason, metadata=metadata)
        self.violations = [FieldViolation(v.field, redact_text(v.description)) for v in violations or []]

    @classmethod
    def for_field(cls, field_path: str, description: str, **kwargs) -> "InvalidArgumentError":
        return cls(f"{field_path}: {description}", violations=[FieldViolation(field_path, description)], **kwargs)


class NotFoundError(AgentCanvasError):
    """The resource does not exist, or the caller may not learn that it exists (AIP-211)."""

    default_reason = "NOT_FOUND"

    def __init__(self, message: str, *, resource_type: str = "", resource_name: str = "", **kwargs):
        super().__init__(message, **kwargs)
        self.resource_type = resource_type
        self.resource_name = resource_name


class AlreadyExistsError(AgentCanvasError):
    """A resource with the same unique key exists."""

    default_reason = "ALREADY_EXISTS"


class PermissionDeniedError(AgentCanvasError):
    """The caller may see the resource but not perform this action."""

    default_reason = "PERMISSION_DENIED"


class UnauthenticatedError(AgentCanvasError):
    """No bearer token, or an unknown one."""

    default_reason = "UNAUTHENTICATED"


class FailedPreconditionError(AgentCanvasError):
    """The system is not in a state that allows the action (e.g. running an ingestion pipeline)."""

    default_reason = "FAILED_PRECONDITION"


class AbortedError(AgentCanvasError):
    """A concurrency conflict: stale etag, lost lease. Re-read and retry."""

    default_reason = "ABORTED"


class ResourceExhaustedError(AgentCanvasError):
    """A quota or queue is full; `retry_after_s` hints when to retry."""

    default_reason = "RESOURCE_EXHAUSTED"

    def __init__(self, message: str, *, retry_after_s: float | None = None, **kwargs):
        super().__init__(message, **kwargs)
        self.retry_after_s = retry_after_s


class DeadlineExceededError(AgentCanvasError):
    """The caller's deadline passed before the work finished."""

    default_reason = "DEADLINE_EXCEEDED"


class CancelledError(AgentCanvasError):
    """The caller cancelled the request."""

    default_reason = "CANCELLED"


class UnavailableError(AgentCanvasError):
    """A dependency is down or not ready yet; safe to retry."""

    default_reason = "UNAVAILABLE"


class InternalError(AgentCanvasError):
    """A bug or an unexpected failure. The message is generic; details go to the log."""

    default_reason = "INTERNAL"


@dataclass
class ViolationCollector:
    """Collects every problem before failing once, so callers see all of them in one response."""

    violations: list[FieldViolation] = field(default_factory=list)

    def add(self, field_path: str, description: str) -> None:
        self.violations.append(FieldViolation(field_path, description))

    def raise_if_any(self, message: str = "invalid request") -> None:
        if self.violations:
            summary = "; ".join(f"{v.field}: {v.description}" for v in self.violations[:5])
            more = f" (+{len(self.violations) - 5} more)" if len(self.violations) > 5 else ""
            raise InvalidArgumentError(f"{message}: {summary}{more}", violations=self.violations)
