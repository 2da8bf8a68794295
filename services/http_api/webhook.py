"""Begin's webhook mode over HTTP: /agents/{agent_id}/webhook and /webhook/test (core/webhooks.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

from services.http_api.core.params import NotJson, json_value
from services.http_api.core.webhooks import WebhookCall, Webhooks
from services.http_api.server import Context, json_response


async def _call(context: Context, request: Request) -> WebhookCall:
    """The request as the canvas sees it: the body parsed by its content type (JSON, a form, or text)."""
    raw = await context.raw_body(request)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body: Any = None
    if raw:
        text = raw.decode("utf-8", errors="replace")
        if kind == "application/x-www-form-urlencoded":
            body = {key: values[0] if len(values) == 1 else values for key, values in parse_qs(text).items()}
        else:
            try:
                body = json_value(text, "The request body")
            except NotJson:
                body = text
    query: dict[str, Any] = {}
    for key, value in request.query_params.multi_items():
        query.setdefault(key, []).append(value)
    return WebhookCall(method=request.method, query={k: v[0] if len(v) == 1 else v for k, v in query.items()},
                       headers=dict(request.headers), body=body)


async def _fire(context: Context, request: Request, *, test: bool) -> Response:
    backend = context.backend(request)
    call = await _call(context, request)
    status, body = await Webhooks(backend).fire(request.path_params["agent_id"], call, test=test)
    return json_response(body, status=status)


async def fire(context: Context, request: Request) -> Response:
    return await _fire(context, request, test=False)


async def test(context: Context, request: Request) -> Response:
    return await _fire(context, request, test=True)
