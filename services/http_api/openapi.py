"""GET /api/v1/openapi.json: the whole surface, as OpenAPI 3.1."""

from __future__ import annotations

from typing import Any

ENVELOPE = {"type": "object", "required": ["code"], "properties": {
    "code": {"type": "integer", "description": "0 on success; RAGFlow's RetCode otherwise (100, 101, 102, 103, 401, ...)"},
    "message": {"type": "string"}, "data": {}}}
SSE = {"text/event-stream": {"schema": {"type": "string", "description":
       "`id:<seq>` then `data:{event json}` per event, a blank line after each, ending with `data:[DONE]`. "
       "Reconnect with `Last-Event-ID: <seq>` (and the same session_id) to get the events after it."}}}

AGENT_ID = {"name": "agent_id", "in": "path", "required": True, "schema": {"type": "string"}}
SESSION_ID = {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}}
RUN_ID = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}
PAGING = [{"name": name, "in": "query", "schema": {"type": kind}} for name, kind in
          (("page", "integer"), ("page_size", "integer"), ("orderby", "string"), ("desc", "string"))]
LAST_EVENT_ID = {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"},
                 "description": "Resume a stream after this event id (a run's seq)."}

COMPLETION_BODY = {"type": "object", "properties": {
    "agent_id": {"type": "string"}, "query": {"type": "string"}, "question": {"type": "string"},
    "stream": {"type": "boolean", "default": False}, "session_id": {"type": "string"},
    "inputs": {"type": "object", "description": "{name: {type, value}}: Begin inputs, or the answers to a paused UserFillUp"},
    "user_id": {"type": "string"}, "return_trace": {"type": "boolean"}, "release": {"type": "boolean"},
    "openai-compatible": {"type": "boolean"},
    "cancel_on_disconnect": {"type": "boolean", "description": "stop the run when the reader goes away (default: it goes on)"},
    "messages": {"type": "array", "items": {"type": "object"}, "description": "OpenAI-compatible mode only"}}}
OPENAI_BODY = {"type": "object", "required": ["messages"], "properties": {
    "model": {"type": "string"}, "messages": {"type": "array", "items": {"type": "object"}},
    "stream": {"type": "boolean", "default": False}, "session_id": {"type": "string"},
    "metadata": {"type": "object"}}}


def _op(summary: str, *, params: list | None = None, body: dict | None = None, stream: bool = False) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "RAGFlow envelope (failures too: see `code`)",
                                         "content": {"application/json": {"schema": ENVELOPE}, **(SSE if stream else {})}},
                                 "401": {"description": "missing or unknown API key",
                                         "content": {"application/json": {"schema": ENVELOPE}}}}
    operation: dict[str, Any] = {"summary": summary, "parameters": params or [], "responses": responses}
    if body is not None:
        operation["requestBody"] = {"content": {"application/json": {"schema": body}}}
    return operation


def document(version: str) -> dict[str, Any]:
    webhook = _op("Fire a canvas whose Begin is in webhook mode; the body becomes the run's webhook_payload",
                  params=[AGENT_ID], body={"type": "object"})
    return {
        "openapi": "3.1.0",
        "info": {"title": "agent-canvas: RAGFlow's agent HTTP API", "version": version},
        "components": {"securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}}},
        "security": [{"apiKey": []}],
        "paths": {
            "/api/v1/agents": {
                "get": _op("List agents: data.canvas and data.total", params=PAGING + [
                    {"name": name, "in": "query", "schema": {"type": "string"}}
                    for name in ("keywords", "canvas_category", "owner_ids", "tags")]),
                "post": _op("Create an agent", body={"type": "object", "required": ["title", "dsl"], "properties": {
                    "title": {"type": "string"}, "dsl": {"type": "object"}, "description": {"type": "string"},
                    "canvas_category": {"type": "string"}, "release": {"type": "boolean"}}})},
            "/api/v1/agents/{agent_id}": {
                "get": _op("Get an agent with its dsl", params=[AGENT_ID]),
                "put": _op("Update an agent (only the fields sent)", params=[AGENT_ID], body={"type": "object"}),
                "delete": _op("Delete an agent (owner only)", params=[AGENT_ID])},
            "/api/v1/agents/{agent_id}/sessions": {
                "post": _op("Create a session (data: the session, message holds Begin's prologue)", params=[AGENT_ID],
                            body={"type": "object", "properties": {"name": {"type": "string"}, "user_id": {"type": "string"},
                                                                   "release": {"type": "boolean"}}}),
                "get": _op("List sessions (data: a list, total)", params=[AGENT_ID, *PAGING,
                                                                         {"name": "id", "in": "query", "schema": {"type": "string"}}]),
                "delete": _op("Delete sessions by ids, or all with delete_all", params=[AGENT_ID],
                              body={"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}},
                                                                     "delete_all": {"type": "boolean"}}})},
            "/api/v1/agents/{agent_id}/sessions/{session_id}": {
                "get": _op("Get a session", params=[AGENT_ID, SESSION_ID]),
                "delete": _op("Delete a session", params=[AGENT_ID, SESSION_ID])},
            "/api/v1/agents/chat/completions": {
                "post": _op("Converse with an agent, streamed (SSE) or not", params=[LAST_EVENT_ID], body=COMPLETION_BODY,
                            stream=True)},
            "/api/v1/agents/{agent_id}/completions": {
                "post": _op("Alias of /agents/chat/completions with the agent id in the path", params=[AGENT_ID, LAST_EVENT_ID],
                            body=COMPLETION_BODY, stream=True)},
            "/api/v1/agents_openai/{agent_id}/chat/completions": {
                "post": _op("OpenAI-compatible agent completion (bare chat.completion / chunks; ends with finish_reason stop)",
                            params=[AGENT_ID, LAST_EVENT_ID], body=OPENAI_BODY, stream=True)},
            "/api/v1/agents/{agent_id}/runs/{run_id}/events": {
                "get": _op("Reattach to a run's event stream after Last-Event-ID (or ?after_seq=)",
                           params=[AGENT_ID, RUN_ID, LAST_EVENT_ID], stream=True)},
            "/api/v1/agents/{agent_id}/webhook": {method: webhook for method in ("get", "post", "put", "patch", "delete")},
            "/api/v1/agents/{agent_id}/webhook/test": {method: webhook for method in ("get", "post", "put", "patch", "delete")},
            "/api/v1/openapi.json": {"get": {"summary": "This document", "security": [],
                                             "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        },
    }
