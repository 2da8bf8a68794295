"""RAGFlow's OpenAI-compatible agent mode: chunks and completions in OpenAI's chat shapes.

RAGFlow maps only answer text and the message_end reference. Here reasoning travels as
`delta.reasoning_content` (the field OpenAI-compatible reasoning models use), which clients that do
not know it ignore, and the stream ends with a chunk whose `finish_reason` is "stop" (RAGFlow sends
none, and clients that wait for one hang).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import from_struct
from services.http_api.core.errors import argument, data_error
from services.http_api.core.events import error_text, ragflow_reference


def question_of(body: Mapping[str, Any]) -> str:
    """The last user message's text: the session, not `messages`, holds the history."""
    messages = body.get("messages")
    if not messages:
        raise data_error("You must provide at least one message.")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise argument("`messages` must be a list of {\"role\", \"content\"} objects.")
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts: the text ones
                return "".join(part.get("text", "") for part in content
                               if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str))
            if content is None:
                return ""
            raise argument("`messages[].content` must be text or a list of content parts.")
    return ""


def session_of(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata")
    value = body.get("session_id") or body.get("id") or (metadata.get("id") if isinstance(metadata, dict) else None) or ""
    if not isinstance(value, str):
        raise argument("`session_id` must be a string.")
    return value


def usage_of(usage: common_pb2.TokenUsage) -> dict[str, Any]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens, "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


class ChunkMapper:
    """RunEvents as `chat.completion.chunk` objects for one stream."""

    def __init__(self, agent_id: str, session_id: str):
        self.agent_id = agent_id
        self.session_id = session_id

    def chunk(self, created: int, delta: dict[str, Any], finish_reason: str | None = None,
              usage: dict[str, Any] | None = None) -> dict[str, Any]:
        full = {"role": "assistant", "content": None, "function_call": None, "tool_calls": None}
        full.update(delta)
        return {"id": self.session_id, "object": "chat.completion.chunk", "created": created, "model": self.agent_id,
                "system_fingerprint": "", "usage": usage,
                "choices": [{"delta": full, "finish_reason": finish_reason, "index": 0, "logprobs": None}]}

    def map(self, event: orchestrator_pb2.RunEvent) -> dict[str, Any] | None:
        kind = event.WhichOneof("event")
        created = event.created_at_ms // 1000
        if kind == "message_delta":
            return self.chunk(created, {"content": event.message_delta.content})
        if kind == "think_delta":
            return self.chunk(created, {"content": "", "reasoning_content": event.think_delta.content})
        if kind == "message_end":
            reference = from_struct(event.message_end.reference) if event.message_end.HasField("reference") else {}
            if reference.get("chunks") or reference.get("doc_aggs"):
                return self.chunk(created, {"content": "", "reference": ragflow_reference(reference)})
            return None
        if kind == "user_inputs_required":  # a paused run: its form tips are the answer of this turn
            return self.chunk(created, {"content": event.user_inputs_required.tips}) if event.user_inputs_required.tips else None
        if kind == "workflow_finished":
            done = event.workflow_finished
            delta: dict[str, Any] = {"content": ""}
            if done.HasField("error") and done.status != common_pb2.RUN_STATUS_SUCCEEDED:
                delta["content"] = f"**ERROR**: {error_text(done.error)}"
            return self.chunk(created, delta, finish_reason="stop", usage=usage_of(done.usage))
        return None


def completion(agent_id: str, session_id: str, content: str, reasoning: str, reference: dict[str, Any],
               usage: common_pb2.TokenUsage, error: str = "") -> dict[str, Any]:
    """The non-streamed `chat.completion` (bare, without RAGFlow's code envelope)."""
    message: dict[str, Any] = {"role": "assistant", "content": f"**ERROR**: {error}" if error else content}
    if reasoning:
        message["reasoning_content"] = reasoning
    if reference:
        message["reference"] = reference
    return {"id": session_id, "object": "chat.completion", "created": int(time.time()), "model": agent_id, "param": None,
            "usage": usage_of(usage),
            "choices": [{"message": message, "logprobs": None, "finish_reason": "stop", "index": 0}]}
