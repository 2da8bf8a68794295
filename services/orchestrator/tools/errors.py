"""Typed tool errors. Each one is also an agent-canvas domain error, so it maps to a gRPC status.

    ToolError                                   (root; carries the tool's RAGFlow class name)
    ├── ToolConfigError       FAILED_PRECONDITION  a key, URL or other setting is missing or wrong
    ├── ToolInputError        INVALID_ARGUMENT     the model's or node's arguments are unusable
    ├── UnknownToolError      INVALID_ARGUMENT     no tool class with that component_name
    ├── ToolUpstreamError     UNAVAILABLE          the remote API answered with an error status
    ├── ToolTimeoutError      DEADLINE_EXCEEDED    the remote API did not answer in time
    ├── ToolPermissionError   PERMISSION_DENIED    e.g. a write statement on a read-only database
    └── ToolExecutionError    FAILED_PRECONDITION  the tool ran but its work failed (code raised, SQL error)

Messages never contain keys or passwords. Those written here name only tools, settings and HTTP
statuses; the upstream text some of them quote (an API's error body, an MCP server's error) is redacted
by AgentCanvasError with every configured secret (ToolRuntime registers the tools' keys and headers).
"""

from __future__ import annotations

from services.common.logging import redact_text

from services.common.errors import (
    AgentCanvasError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    PermissionDeniedError,
    UnavailableError,
)


class ToolError(AgentCanvasError):
    """Root of tool errors. `tool` is the RAGFlow class name (e.g. "TavilySearch")."""

    default_reason = "TOOL_ERROR"

    def __init__(self, tool: str, message: str, **kwargs):
        metadata = dict(kwargs.pop("metadata", None) or {})
        metadata.setdefault("tool", tool)
        super().__init__(f"{tool}: {message}", metadata=metadata, **kwargs)
        self.tool = tool
        self.detail = redact_text(message)


class ToolConfigError(ToolError, FailedPreconditionError):
    """A setting the tool needs is missing or invalid. `setting` names the config key."""

    default_reason = "TOOL_NOT_CONFIGURED"

    def __init__(self, tool: str, setting: str, message: str):
        super().__init__(tool, message, metadata={"setting": setting})
        self.setting = setting


class ToolInputError(ToolError, InvalidArgumentError):
    """The arguments are unusable (empty query, unknown dataset, wrong type). `field` names the argument."""

    default_reason = "TOOL_BAD_INPUT"

    def __init__(self, tool: str, field: str, message: str):
        super().__init__(tool, message, metadata={"field": field})
        self.field = field


class UnknownToolError(ToolError, InvalidArgumentError):
    """No tool is registered under this component_name."""

    default_reason = "UNKNOWN_TOOL"

    def __init__(self, tool: str):
        super().__init__(tool, "is not a known tool class")


class ToolUpstreamError(ToolError, UnavailableError):
    """The remote API failed: an HTTP error status, an error body, or a connection failure."""

    default_reason = "TOOL_UPSTREAM_ERROR"

    def __init__(self, tool: str, message: str, *, status: int | None = None):
        metadata = {"status": str(status)} if status is not None else {}
        super().__init__(tool, message, metadata=metadata)
        self.status = status


class ToolTimeoutError(ToolError, DeadlineExceededError):
    """The remote API or the sandbox did not answer within the configured timeout."""

    default_reason = "TOOL_TIMEOUT"


class ToolPermissionError(ToolError, PermissionDeniedError):
    """The call is not allowed by configuration (e.g. writing SQL on a read-only connection)."""

    default_reason = "TOOL_NOT_ALLOWED"


class ToolExecutionError(ToolError, FailedPreconditionError):
    """The tool ran and its work failed: user code raised, SQL was rejected by the database, ..."""

    default_reason = "TOOL_EXECUTION_FAILED"
