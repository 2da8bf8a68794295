"""Errors and signals of the orchestrator core.

NodeError is a component failure handled by the per-node error policy. Pause (runner.RunPaused) and
cancellation (asyncio's CancelledError) are signals, not failures, and deliberately do not share a base
with NodeError.
"""

from __future__ import annotations

from services.common.logging import redact_text


class NodeError(Exception):
    """A component failed. `retryable` errors are retried under the node's max_retries."""

    def __init__(self, message: str, *, reason: str = "COMPONENT_ERROR", retryable: bool = False):
        message = redact_text(message)  # it quotes exceptions and upstream text; it ends up in events and the store
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.retryable = retryable


class ModelCallError(NodeError):
    """A model call failed after the gateway's own retries. `model` is the llm_id asked for; `kind` the typed
    reason: the gateway's ChatErrorKind without its prefix (AUTH, SERVER, RATE_LIMITED, ...) or, when the call
    itself was refused, the status reason. When the node fails with it for good, the runner logs one WARNING."""

    def __init__(self, message: str, *, model: str, kind: str, retryable: bool):
        super().__init__(message, reason="MODEL_ERROR", retryable=retryable)
        self.model = model
        self.kind = kind


class NodeTimeoutError(NodeError):
    def __init__(self, node_id: str, seconds: float):
        super().__init__(f"{node_id} timed out after {seconds:g}s", reason="COMPONENT_TIMEOUT", retryable=True)

