"""Run events as plain values. The adapters turn them into agentcanvas.v1.RunEvent and back.

`kind` is the RunEvent oneof field name (e.g. "node_started"); `data` holds that payload's fields as
JSON-shaped values. `seq` is 0 until the store assigns it at commit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

WORKFLOW_STARTED = "workflow_started"
NODE_STARTED = "node_started"
NODE_FINISHED = "node_finished"
NODE_SKIPPED = "node_skipped"
MESSAGE_DELTA = "message_delta"
THINK_START = "think_start"
THINK_DELTA = "think_delta"
THINK_END = "think_end"
MESSAGE_END = "message_end"
USER_INPUTS_REQUIRED = "user_inputs_required"
WORKFLOW_FINISHED = "workflow_finished"
MESSAGE_RESET = "message_reset"
EVENT_UNREADABLE = "event_unreadable"
TEXT_KINDS = frozenset({"message_delta", "think_start", "think_delta", "think_end"})
"""Events that carry (or frame) a Message's streamed text: what MessageReset voids."""
WARNING = "warning"

# Events that are published live and persisted in small batches rather than with a journal step.
STREAMING_KINDS = frozenset({MESSAGE_DELTA, THINK_START, THINK_DELTA, THINK_END})


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Event:
    """One run event. Immutable once it has a seq."""

    kind: str
    data: dict[str, Any]
    created_at_ms: int = field(default_factory=now_ms)
    seq: int = 0
    wire: Any = field(default=None, compare=False, repr=False)
    """The adapters' encoding of this event, made once and reused (store payload, client stream)."""

    @property
    def terminal(self) -> bool:
        return self.kind == WORKFLOW_FINISHED
