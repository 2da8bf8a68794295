"""Store resources as RAGFlow's rows: agents (user_canvas) and agent sessions (api_4_conversation)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from agentcanvas.v1 import canvas_store_pb2
from google.protobuf import timestamp_pb2

from services.common.json_text import text_or_struct
from services.common.structs import from_struct

CATEGORY_NAMES = {canvas_store_pb2.CANVAS_CATEGORY_AGENT: "agent_canvas",
                  canvas_store_pb2.CANVAS_CATEGORY_DATAFLOW: "dataflow_canvas"}
CATEGORY_BY_NAME = {name: value for value, name in CATEGORY_NAMES.items()}
PERMISSION_NAMES = {canvas_store_pb2.CANVAS_PERMISSION_ME: "me", canvas_store_pb2.CANVAS_PERMISSION_TEAM: "team"}
PERMISSION_BY_NAME = {name: value for value, name in PERMISSION_NAMES.items()}


def millis(stamp: timestamp_pb2.Timestamp) -> int | None:
    """RAGFlow's `*_time` columns: milliseconds since the epoch."""
    if not stamp.seconds and not stamp.nanos:
        return None
    return stamp.seconds * 1000 + stamp.nanos // 1_000_000


def date_text(stamp: timestamp_pb2.Timestamp) -> str | None:
    """RAGFlow's `*_date` columns: `YYYY-MM-DD HH:MM:SS` (UTC here)."""
    if not stamp.seconds and not stamp.nanos:
        return None
    return datetime.fromtimestamp(stamp.seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def agent_summary(canvas: canvas_store_pb2.Canvas) -> dict[str, Any]:
    """An item of GET /agents: no dsl."""
    return {
        "id": canvas.id,
        "avatar": canvas.avatar or None,
        "title": canvas.title,
        "description": canvas.description or None,
        "permission": PERMISSION_NAMES.get(canvas.permission, "me"),
        "tenant_id": canvas.tenant_id,
        "user_id": canvas.owner_id,
        "nickname": canvas.owner_id,
        "tenant_avatar": None,
        "create_time": millis(canvas.create_time),
        "update_time": millis(canvas.update_time),
        "canvas_type": None,
        "canvas_category": CATEGORY_NAMES.get(canvas.category, "agent_canvas"),
        "tags": list(canvas.tags),
        "release": canvas.release,
        "release_time": None,
        "type": "agent",
    }


def agent_detail(canvas: canvas_store_pb2.Canvas) -> dict[str, Any]:
    """GET /agents/{id}: the row with its dsl."""
    detail = agent_summary(canvas)
    detail.pop("type")
    detail.update({
        "dsl": text_or_struct(canvas.dsl_json, canvas.dsl),
        "create_date": date_text(canvas.create_time),
        "update_date": date_text(canvas.update_time),
        "last_publish_time": None,
        "published_revision_id": canvas.published_revision_id or None,
    })
    return detail


def prologue(dsl: dict[str, Any]) -> str:
    """The Begin component's greeting, RAGFlow's first assistant message of a session."""
    components = dsl.get("components") if isinstance(dsl, dict) else None
    begin = components.get("begin") if isinstance(components, dict) else None
    params = ((begin or {}).get("obj") or {}).get("params") if isinstance(begin, dict) else None
    value = (params or {}).get("prologue") if isinstance(params, dict) else None
    return value if isinstance(value, str) else ""


def history_messages(session: canvas_store_pb2.Session) -> list[dict[str, Any]]:
    messages = []
    for turn in session.history:
        item = from_struct(turn)
        message = {"role": item.get("role", "user"), "content": item.get("content", "")}
        if isinstance(item.get("reference"), (list, dict)) and item["reference"]:
            message["reference"] = item["reference"]
        messages.append(message)
    return messages


def session_row(session: canvas_store_pb2.Session, dsl: dict[str, Any] | None, *, name: str = "",
                include_dsl: bool = True) -> dict[str, Any]:
    """An agent session as RAGFlow returns it; `agent_id` is what makes the SDK treat it as an agent session."""
    greeting = prologue(dsl or {})
    messages = ([{"role": "assistant", "content": greeting}] if greeting else []) + history_messages(session)
    row: dict[str, Any] = {
        "id": session.id,
        "name": name,
        "agent_id": session.canvas_id,
        "user_id": session.user_id,
        "exp_user_id": session.user_id,
        "message": messages,
        "source": "agent",
        "round": session.conversation_turns,
        "version_title": session.revision_id,
        "create_time": millis(session.create_time),
        "create_date": date_text(session.create_time),
        "update_time": millis(session.update_time),
        "update_date": date_text(session.update_time),
    }
    if include_dsl:
        row["dsl"] = dsl or {}
    return row
