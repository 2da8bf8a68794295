"""Proto <-> core conversions for server.py. Unknown enum numbers become INVALID_ARGUMENT naming the field."""

from __future__ import annotations

from typing import Any, TypeVar

from agentcanvas.v1 import canvas_store_pb2 as pb
from agentcanvas.v1 import common_pb2
from google.protobuf import json_format, timestamp_pb2

from services.canvas_store.core.canvases import CanvasInput
from services.canvas_store.core.types import (
    Canvas, Category, Permission, Revision, RunLease, RunRecord, RunStatus, RunStep, Session, StoredEvent, Template,
    TenantMember,
)
from services.common.errors import InvalidArgumentError
from services.common.json_text import dump_object, parse_object, sorted_keys
from services.common.structs import StoredJson, StructCache, from_struct, to_struct

E = TypeVar("E")

_PERMISSION = {pb.CANVAS_PERMISSION_ME: Permission.ME, pb.CANVAS_PERMISSION_TEAM: Permission.TEAM}
_CATEGORY = {pb.CANVAS_CATEGORY_AGENT: Category.AGENT, pb.CANVAS_CATEGORY_DATAFLOW: Category.DATAFLOW}
_STATUS = {
    common_pb2.RUN_STATUS_PENDING: RunStatus.PENDING, common_pb2.RUN_STATUS_RUNNING: RunStatus.RUNNING,
    common_pb2.RUN_STATUS_PAUSED: RunStatus.PAUSED, common_pb2.RUN_STATUS_SUCCEEDED: RunStatus.SUCCEEDED,
    common_pb2.RUN_STATUS_FAILED: RunStatus.FAILED, common_pb2.RUN_STATUS_CANCELLED: RunStatus.CANCELLED,
}
_PERMISSION_PB = {v: k for k, v in _PERMISSION.items()}
_CATEGORY_PB = {v: k for k, v in _CATEGORY.items()}
_STATUS_PB = {v: k for k, v in _STATUS.items()}
_DSL_STRUCTS = StructCache()
"""Canvas, revision and template DSLs are returned far more often than they change."""


def _enum(value: int, table: dict[int, E], field: str) -> E | None:
    if value == 0:
        return None
    try:
        return table[value]
    except KeyError:
        raise InvalidArgumentError.for_field(field, f"unknown enum value {value}") from None


def permission_in(value: int, field: str = "canvas.permission") -> Permission | None:
    return _enum(value, _PERMISSION, field)


def category_in(value: int, field: str = "canvas.category") -> Category | None:
    return _enum(value, _CATEGORY, field)


def status_in(value: int, field: str) -> RunStatus | None:
    return _enum(value, _STATUS, field)


def timestamp(ms: int) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def dsl_in(message: pb.Canvas, field: str = "canvas") -> dict[str, Any] | None:
    """The DSL a request carries: its JSON text when set (key order kept), else its Struct (older clients),
    whose order is arbitrary: its keys are sorted, so the same Struct is always stored (and hashed) alike."""
    if message.dsl_json:
        return parse_object(message.dsl_json, f"{field}.dsl_json")
    return sorted_keys(from_struct(message.dsl, f"{field}.dsl")) if message.HasField("dsl") else None


def dsl_text(dsl: dict[str, Any] | StoredJson) -> str:
    """The DSL as JSON text, in stored key order (a stored text as it is)."""
    return dsl.text if isinstance(dsl, StoredJson) else dump_object(dsl)


def canvas_input(message: pb.Canvas) -> CanvasInput:
    return CanvasInput(
        title=message.title, description=message.description, avatar=message.avatar,
        permission=permission_in(message.permission), release=message.release, category=category_in(message.category),
        tags=list(message.tags), dsl=dsl_in(message), etag=message.etag,
    )


def canvas_out(canvas: Canvas) -> pb.Canvas:
    message = pb.Canvas(
        name=f"tenants/{canvas.tenant_id}/canvases/{canvas.id}" if canvas.id else "", id=canvas.id,
        tenant_id=canvas.tenant_id, owner_id=canvas.owner_id, title=canvas.title, description=canvas.description,
        avatar=canvas.avatar, permission=_PERMISSION_PB[canvas.permission], release=canvas.release,
        category=_CATEGORY_PB[canvas.category], tags=canvas.tags, etag=canvas.etag,
        head_revision_id=canvas.head_revision_id, published_revision_id=canvas.published_revision_id,
    )
    if canvas.dsl is not None:
        _DSL_STRUCTS.fill(message.dsl, canvas.dsl)
        message.dsl_json = dsl_text(canvas.dsl)
    if canvas.create_time_ms:
        message.create_time.FromMilliseconds(canvas.create_time_ms)
        message.update_time.FromMilliseconds(canvas.update_time_ms)
    if canvas.delete_time_ms:
        message.delete_time.FromMilliseconds(canvas.delete_time_ms)
        message.expire_time.FromMilliseconds(canvas.expire_time_ms)
    return message


def revision_out(revision: Revision) -> pb.CanvasRevision:
    message = pb.CanvasRevision(
        name=f"tenants/{revision.tenant_id}/canvases/{revision.canvas_id}/revisions/{revision.id}", id=revision.id,
        canvas_id=revision.canvas_id, content_hash=revision.content_hash, create_time=timestamp(revision.create_time_ms),
        alternate_ids=revision.alternate_ids, released=revision.released, author_id=revision.author_id,
        description=revision.description,
    )
    if revision.dsl is not None:
        _DSL_STRUCTS.fill(message.dsl, revision.dsl)
        message.dsl_json = dsl_text(revision.dsl)
    return message


def template_out(template: Template) -> pb.CanvasTemplate:
    message = pb.CanvasTemplate(
        name=f"canvasTemplates/{template.id}", id=template.id, title=template.title, description=template.description,
        canvas_type=template.canvas_type, category=_CATEGORY_PB[template.category], avatar=template.avatar,
    )
    if template.dsl is not None:
        _DSL_STRUCTS.fill(message.dsl, template.dsl)
        message.dsl_json = dsl_text(template.dsl)
    return message


def session_out(session: Session) -> pb.Session:
    message = pb.Session(
        name=f"tenants/{session.tenant_id}/canvases/{session.canvas_id}/sessions/{session.id}", id=session.id,
        canvas_id=session.canvas_id, revision_id=session.revision_id, user_id=session.user_id,
        conversation_turns=session.conversation_turns, create_time=timestamp(session.create_time_ms),
        update_time=timestamp(session.update_time_ms), etag=session.etag,
    )
    for item in session.history or []:
        message.history.append(to_struct(item))
    if session.state is not None:
        message.state.CopyFrom(to_struct(session.state))
    return message


def member_out(member: TenantMember) -> pb.TenantMember:
    return pb.TenantMember(tenant_id=member.tenant_id, user_id=member.user_id, role=member.role.value)


def lease_out(lease: RunLease) -> pb.RunLease:
    return pb.RunLease(run_id=lease.run_id, holder=lease.holder, token=lease.token,
                       expire_time=timestamp(lease.expire_time_ms), cancel_requested=lease.cancel_requested)


def usage_in(message: common_pb2.TokenUsage) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def error_in(message: common_pb2.ErrorDetail) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def run_in(message: pb.RunRecord) -> RunRecord:
    return RunRecord(id="", tenant_id="", creator_id="", canvas_id=message.canvas_id, revision_id=message.revision_id,
                     session_id=message.session_id,
                     spec=from_struct(message.spec, "run.spec") if message.HasField("spec") else {})


def run_out(run: RunRecord) -> pb.RunRecord:
    message = pb.RunRecord(
        name=f"tenants/{run.tenant_id}/runs/{run.id}", id=run.id, canvas_id=run.canvas_id, revision_id=run.revision_id,
        session_id=run.session_id, status=_STATUS_PB[run.status], last_seq=run.last_seq,
        cancel_requested=run.cancel_requested, create_time=timestamp(run.create_time_ms),
        update_time=timestamp(run.update_time_ms), tenant_id=run.tenant_id, creator_id=run.creator_id,
    )
    if run.spec is not None:
        message.spec.CopyFrom(to_struct(run.spec))
    if run.outputs is not None:
        message.outputs.CopyFrom(to_struct(run.outputs))
    if run.error is not None:
        json_format.ParseDict(run.error, message.error, ignore_unknown_fields=True)
    if run.usage is not None:
        json_format.ParseDict(run.usage, message.usage, ignore_unknown_fields=True)
    if run.lease is not None:
        message.lease.CopyFrom(lease_out(run.lease))
    return message


def step_in(message: pb.RunStep, field: str = "step") -> RunStep:
    return RunStep(node_id=message.node_id, attempt=message.attempt, state=from_struct(message.state, f"{field}.state"))


def step_out(step: RunStep) -> pb.RunStep:
    return pb.RunStep(step_index=step.step_index, node_id=step.node_id, attempt=step.attempt,
                      state=to_struct(step.state), create_time=timestamp(step.create_time_ms))


def event_in(message: pb.StoredRunEvent) -> StoredEvent:
    return StoredEvent(event_type=message.event_type, payload=message.payload, terminal=message.terminal)


def event_out(event: StoredEvent) -> pb.StoredRunEvent:
    return pb.StoredRunEvent(run_id=event.run_id, seq=event.seq, event_type=event.event_type, payload=event.payload,
                             terminal=event.terminal)
