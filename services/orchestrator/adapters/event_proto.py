"""core Event <-> agentcanvas.v1.RunEvent (the one place that knows the payload messages)."""

from __future__ import annotations

from typing import Any

from agentcanvas.v1 import common_pb2, orchestrator_pb2
from google.protobuf import json_format

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
}


def _payload(kind: str, data: dict[str, Any]):
    message = _PAYLOAD[kind]()
    fields = {f.name for f in message.DESCRIPTOR.fields}
    plain = {}
    for key, value in data.items():
        if key not in fields:
            continue
        if key in _STRUCT_FIELDS.get(kind, ()):
            getattr(message, key).CopyFrom(to_struct(value if isinstance(value, dict) else {"value": value}))
        elif key in ("error",):
            getattr(message, key).CopyFrom(common_pb2.ErrorDetail(**{k: v for k, v in value.items() if k in ("reason", "message", "component_id")}))
        elif key == "usage":
            getattr(message, key).CopyFrom(common_pb2.TokenUsage(**{k: v for k, v in value.items() if k in common_pb2.TokenUsage.DESCRIPTOR.fields_by_name}))
        elif key == "downloads":
            for item in value:
                message.downloads.add(**{k: v for k, v in item.items() if k in orchestrator_pb2.Download.DESCRIPTOR.fields_by_name})
        else:
            plain[key] = value
    for key, value in plain.items():
        field = message.DESCRIPTOR.fields_by_name[key]
        if field.is_repeated:
            getattr(message, key).extend(value)
        else:
            setattr(message, key, value)
    return message


def to_proto(event: Event, run_id: str, session_id: str = "", trace_id: str = "") -> orchestrator_pb2.RunEvent:
    proto = orchestrator_pb2.RunEvent(run_id=run_id, session_id=session_id, seq=event.seq,
                                      created_at_ms=event.created_at_ms, trace_id=trace_id)
    getattr(proto, event.kind).CopyFrom(_payload(event.kind, event.data))
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
