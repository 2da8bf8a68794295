"""RunEvents as RAGFlow's agent events (the objects after `data:` in its SSE stream).

One RunEvent maps to at most one RAGFlow event, and the mapping depends on nothing but the event and
the request (no state carried between events), so a stream replayed from any seq maps to exactly
the events a live reader got after that seq.

RAGFlow shapes, per event: `{"event", "message_id", "created_at", "task_id", "data", "session_id"}`;
`message_id` is the run id here (RAGFlow makes one per run too), `task_id` the session id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentcanvas.v1 import common_pb2, orchestrator_pb2

from services.common.structs import from_struct

FINISHED_STATUS = {
    common_pb2.RUN_STATUS_SUCCEEDED: "succeeded",
    common_pb2.RUN_STATUS_FAILED: "failed",
    common_pb2.RUN_STATUS_CANCELLED: "cancelled",
    common_pb2.RUN_STATUS_PAUSED: "paused",
}


def error_text(error: common_pb2.ErrorDetail) -> str:
    """`REASON at NODE: message`, as the CLI prints a run's error: never bare."""
    where = f" at {error.component_id}" if error.component_id else ""
    reason = error.reason or "ERROR"
    return f"{reason}{where}: {error.message}" if error.message else f"{reason}{where}"


def ragflow_reference(reference: dict[str, Any]) -> dict[str, Any]:
    """Our `{"chunks": [...], "doc_aggs": [...]}` as RAGFlow's `{"chunks": {"<cid>": chunk}, "doc_aggs":
    {"<doc_name>": agg}}`; a chunk is keyed by its citation id (the number the answer cites)."""
    chunks: dict[str, Any] = {}
    raw_chunks = reference.get("chunks") or []
    items = raw_chunks.items() if isinstance(raw_chunks, dict) else enumerate(raw_chunks)
    for index, chunk in items:
        if not isinstance(chunk, dict):
            continue
        cid = chunk.get("citation_id", index)
        key = str(int(cid)) if isinstance(cid, (int, float)) and not isinstance(cid, bool) else str(cid)
        chunks[key] = chunk
    doc_aggs: dict[str, Any] = {}
    raw_aggs = reference.get("doc_aggs") or []
    for agg in (raw_aggs.values() if isinstance(raw_aggs, dict) else raw_aggs):
        if isinstance(agg, dict):
            doc_aggs[str(agg.get("doc_name") or agg.get("doc_id") or len(doc_aggs))] = agg
    return {"chunks": chunks, "doc_aggs": doc_aggs}


def usage_dict(usage: common_pb2.TokenUsage) -> dict[str, int]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens, "calls": usage.calls}


def _download(item: orchestrator_pb2.Download) -> dict[str, Any]:
    return {"doc_id": item.doc_id, "filename": item.filename, "mime_type": item.mime_type, "size": item.size,
            "base64": item.base64}


@dataclass(frozen=True)
class EventMapper:
    """Maps RunEvents for one request.

    `forward_all`: RAGFlow's path for runs without a session created through /sessions (every canvas
    event is forwarded); otherwise its session path (workflow_started and node_started are dropped and
    workflow_finished carries only the usage).
    """

    session_id: str
    forward_all: bool = False
    return_trace: bool = False

    def envelope(self, event: orchestrator_pb2.RunEvent, name: str, data: dict[str, Any]) -> dict[str, Any]:
        session = event.session_id or self.session_id
        return {"event": name, "message_id": event.run_id, "created_at": event.created_at_ms // 1000,
                "task_id": session, "data": data, "session_id": session}

    def map(self, event: orchestrator_pb2.RunEvent) -> dict[str, Any] | None:
        kind = event.WhichOneof("event")
        created = event.created_at_ms / 1000
        if kind == "message_delta":
            return self.envelope(event, "message", {"content": event.message_delta.content})
        if kind == "think_start":
            return self.envelope(event, "message", {"content": "", "start_to_think": True})
        if kind == "think_delta":
            return self.envelope(event, "message", {"content": event.think_delta.content})
        if kind == "think_end":
            return self.envelope(event, "message", {"content": "", "end_to_think": True})
        if kind == "message_end":
            end = event.message_end
            data: dict[str, Any] = {}
            if end.status:
                data["status"] = end.status
            if end.HasField("attachment"):
                data["attachment"] = from_struct(end.attachment)
            if end.downloads:
                data["downloads"] = [_download(item) for item in end.downloads]
            reference = from_struct(end.reference) if end.HasField("reference") else {}
            if reference.get("chunks") or reference.get("doc_aggs"):
                data["reference"] = ragflow_reference(reference)
            return self.envelope(event, "message_end", data)
        if kind == "user_inputs_required":
            paused = event.user_inputs_required
            return self.envelope(event, "user_inputs", {"inputs": from_struct(paused.inputs), "tips": paused.tips,
                                                        "component_id": paused.component_id})
        if kind == "node_finished":
            node = event.node_finished
            data = {"inputs": from_struct(node.inputs), "outputs": from_struct(node.outputs),
                    "component_id": node.component_id, "component_name": node.component_name,
                    "component_type": node.component_type,
                    "error": error_text(node.error) if node.HasField("error") else None,
                    "elapsed_time": node.elapsed_ms / 1000, "created_at": created}
            return self.envelope(event, "node_finished", data)
        if kind == "workflow_finished":
            return self._finished(event)
        # TODO(#23, MessageReset): when the orchestrator re-runs a Message's attempt after a takeover it
        # sends `message_reset` (not in our stubs yet). RAGFlow's stream cannot take text back, so a
        # reader would show the superseded attempt's text twice: once #23 lands, ask the orchestrator
        # for TEXT_DELIVERY_CONFIRMED on SSE routes (or drop `message_reset` here and document the
        # duplicate); `Answer.add` already drops the superseded text from non-streamed answers.
        if not self.forward_all:
            return None
        if kind == "workflow_started":
            return self.envelope(event, "workflow_started", {"inputs": from_struct(event.workflow_started.inputs)})
        if kind == "node_started":
            node = event.node_started
            return self.envelope(event, "node_started", {
                "inputs": None, "created_at": created, "component_id": node.component_id,
                "component_name": node.component_name, "component_type": node.component_type,
                "thoughts": node.thoughts})
        return None  # node_skipped, heartbeat: RAGFlow has no such event

    def _finished(self, event: orchestrator_pb2.RunEvent) -> dict[str, Any] | None:
        done = event.workflow_finished
        if done.status == common_pb2.RUN_STATUS_PAUSED:
            return None  # RAGFlow ends a paused run's stream after user_inputs
        usage = usage_dict(done.usage)
        if self.forward_all:
            data: dict[str, Any] = {"inputs": {}, "outputs": from_struct(done.outputs),
                                    "elapsed_time": done.elapsed_ms / 1000, "created_at": event.created_at_ms / 1000,
                                    "usage": usage}
        else:
            data = {"usage": usage}
        data["status"] = FINISHED_STATUS.get(done.status, "unknown")
        if done.HasField("error") and done.status != common_pb2.RUN_STATUS_SUCCEEDED:
            data["error"] = error_text(done.error)
        return self.envelope(event, "workflow_finished", data)


@dataclass
class Answer:
    """A whole run folded into RAGFlow's non-streamed answer: the last message_end (else user_inputs, else
    the last event) with `content` the concatenated text, `reference` and `usage`."""

    mapper: EventMapper
    last: dict[str, Any] | None = None
    final: dict[str, Any] | None = None
    paused: dict[str, Any] | None = None
    parts: list[tuple[str, str]] = field(default_factory=list)
    reasoning: str = ""
    reference: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] | None = None
    usage_raw: common_pb2.TokenUsage = field(default_factory=common_pb2.TokenUsage)
    error: str = ""
    status: int = 0
    run_id: str = ""
    session_id: str = ""
    trace: list[dict[str, Any]] = field(default_factory=list)

    def add(self, event: orchestrator_pb2.RunEvent) -> None:
        self.run_id = self.run_id or event.run_id
        self.session_id = self.session_id or event.session_id
        kind = event.WhichOneof("event")
        if kind == "message_delta":
            self.parts.append((event.message_delta.component_id, event.message_delta.content))
        elif kind == "think_delta":
            self.reasoning += event.think_delta.content
        elif kind == "message_reset":  # #23: the superseded attempt's text is void
            component = getattr(getattr(event, kind), "component_id", "")
            self.parts = [(cid, text) for cid, text in self.parts if cid != component]
        elif kind == "message_end":
            reference = from_struct(event.message_end.reference) if event.message_end.HasField("reference") else {}
            if reference.get("chunks") or reference.get("doc_aggs"):
                self.reference = ragflow_reference(reference)
        elif kind == "workflow_finished":
            done = event.workflow_finished
            self.status = done.status
            self.usage = usage_dict(done.usage)
            self.usage_raw = done.usage
            if done.HasField("error") and done.status != common_pb2.RUN_STATUS_SUCCEEDED:
                self.error = error_text(done.error)
        mapped = self.mapper.map(event)
        if mapped is None:
            return
        self.last = mapped
        if mapped["event"] == "message_end":
            self.final = mapped
        elif mapped["event"] == "user_inputs":
            self.paused = mapped
        elif mapped["event"] == "node_finished" and self.mapper.return_trace:
            self.trace.append({"component_id": mapped["data"]["component_id"], "trace": [mapped["data"]]})

    @property
    def content(self) -> str:
        return "".join(text for _, text in self.parts)

    def result(self) -> dict[str, Any] | None:
        """RAGFlow's `final_ans`, or None when the run produced no event a client would see."""
        chosen = self.final or self.paused or self.last
        if chosen is None:
            return None
        answer = dict(chosen)
        data = dict(answer.get("data") or {})
        data["content"] = self.content
        if self.reasoning:
            data["reasoning"] = self.reasoning
        data["reference"] = self.reference or {"chunks": {}, "doc_aggs": {}}
        if self.usage is not None:
            data["usage"] = self.usage
        if self.trace:
            data["trace"] = self.trace
        answer["data"] = data
        return answer
