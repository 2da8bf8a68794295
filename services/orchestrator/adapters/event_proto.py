"""core Event <-> agentcanvas.v1.RunEvent (the one place that knows the payload messages)."""

from __future__ import annotations

from typing import Any

from agentcanvas.v1 import common_pb2, orchestrator_pb2
from google.protobuf import json_format

from services.common.logging import redact_text
from services.common.structs import from_struct, to_struct
from services.orchestrator.core.events import Event

_STRUCT_FIELDS = {
    "workflow_started": ("inputs",),
    "node_finished": ("inputs", "outputs"),
    "message_end": ("reference", "attachment"),
    "user_inputs_required": ("inputs",),
    "workflow_finished": ("outputs",),
}
_PAYLOAD = {
    "workflow_started": orchestrator_pb2.WorkflowStarted,
    "node_started": orchestrator_pb2.NodeStarted,
    "node_finished": orchestrator_pb2.NodeFinished,
    "node_skipped": orchestrator_pb2.NodeSkipped,
    "message_delta": orchestrator_pb2.MessageDelta,
    "think_start": orchestrator_pb2.ThinkStart,
    "think_delta": orchestrator_pb2.ThinkDelta,
    "think_end": orchestrator_pb2.ThinkEnd,
    "message_end": orchestrator_pb2.MessageEnd,
    "user_inputs_required": orchestrator_pb2.UserInputsRequired,
    "workflow_finished": orchestrator_pb2.WorkflowFinished,
    "message_reset": orchestrator_pb2.MessageReset,
    "event_unreadable": orchestrator_pb2.EventUnreadable,
    "warning": orchestrator_pb2.RunWarning,
}


_FIELDS = {kind: frozenset(cls.DESCRIPTOR.fields_by_name) for kind, cls in _PAYLOAD.items()}
_ERROR_FIELDS = ("reason", "message", "component_id")
_USAGE_FIELDS = frozenset(common_pb2.TokenUsage.DESCRIPTOR.fields_by_name)
_DOWNLOAD_FIELDS = frozenset(orchestrator_pb2.Download.DESCRIPTOR.fields_by_name)


def _payload(kind: str, data: dict[str, Any]):
    """The payload message, built in one constructor call (field sets are looked up once per kind:
    every event of every run comes through here)."""
    fields = _FIELDS[kind]
    structs = _STRUCT_FIELDS.get(kind, ())
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            continue
        if key in structs:
            values[key] = to_struct(value if isinstance(value, dict) else {"value": value})
        elif key == "error":  # the message quotes upstream text: masked once more where it enters the event
            values[key] = common_pb2.ErrorDetail(**{k: redact_text(v) if k == "message" else v
                                                    for k, v in value.items() if k in _ERROR_FIELDS})
        elif key == "usage":
            values[key] = common_pb2.TokenUsage(**{k: v for k, v in value.items() if k in _USAGE_FIELDS})
        elif key == "downloads":
            values[key] = [orchestrator_pb2.Download(**{k: v for k, v in item.items() if k in _DOWNLOAD_FIELDS})
                           for item in value]
        else:
            values[key] = value
    return _PAYLOAD[kind](**values)


def to_proto(event: Event, run_id: str, session_id: str = "", trace_id: str = "") -> orchestrator_pb2.RunEvent:
    """The RunEvent of `event`. Built once per event: the store adapter makes it for the commit and
    leaves it on the event (`Event.wire`), and the RPC adapter completes that same message with the
    seq, session and trace when it streams the event to clients."""
    proto = event.wire
    if proto is None or proto.run_id != run_id:
        proto = orchestrator_pb2.RunEvent(run_id=run_id, created_at_ms=event.created_at_ms,
                                          **{event.kind: _payload(event.kind, event.data)})
        event.wire = proto
    proto.seq = event.seq
    proto.session_id = session_id
    proto.trace_id = trace_id
    return proto


def from_proto(proto: orchestrator_pb2.RunEvent) -> Event:
    kind = proto.WhichOneof("event") or ""
    payload = getattr(proto, kind)
    data = json_format.MessageToDict(payload, preserving_proto_field_name=True, use_integers_for_enums=True)
    for key in _STRUCT_FIELDS.get(kind, ()):
        if payload.HasField(key):
            data[key] = from_struct(getattr(payload, key))
    if "usage" in data:
        data["usage"] = {k: (float(v) if k == "cost_usd" else int(v)) for k, v in data["usage"].items()}
    for key in ("elapsed_ms", "attempt", "status"):
        if key in data:
            data[key] = int(data[key])
    return Event(kind, data, proto.created_at_ms, proto.seq)
