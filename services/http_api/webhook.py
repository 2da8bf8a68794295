"""Begin's webhook mode: /agents/{agent_id}/webhook and /webhook/test."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from services.http_api.core.errors import data_error
from services.http_api.server import Context


async def fire(context: Context, request: Request) -> Response:
    raise data_error("webhook: not available yet")


async def test(context: Context, request: Request) -> Response:
    raise data_error("webhook: not available yet")
