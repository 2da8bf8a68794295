"""Wires the HTTP facade: config -> channels to the store and the orchestrator -> Starlette routes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.common.auth import TokenAuthenticator
from services.common.health import is_serving
from services.common.settings import Config
from services.http_api import openapi, server, streams, webhook
from services.http_api.adapters.grpc_backend import Channels
from services.http_api.settings import HttpSettings

PREFIX = "/api/v1"
VERSION = "0.1.0"


def routes(context: server.Context) -> list[Route]:
    def route(path: str, handler, methods: list[str]) -> Route:
        return Route(PREFIX + path, server.endpoint(context, handler, PREFIX + path), methods=methods)

    async def openapi_json(request: Request) -> Response:
        return server.json_response(openapi.document(VERSION))

    async def healthz(request: Request) -> Response:
        """200 when the store and the orchestrator answer SERVING (readiness), else 503; no auth."""
        store, orchestrator = await is_serving(context.channels.store), await is_serving(context.channels.orchestrator)
        serving = store and orchestrator
        body = {"code": 0 if serving else int(server.RetCode.EXCEPTION_ERROR),
                "message": "success" if serving else "a backend service is not serving",
                "data": {"canvas_store": store, "orchestrator": orchestrator}}
        return server.json_response(body, status=200 if serving else 503)

    webhook_methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
    return [
        # before /agents/{agent_id}/...: "chat" is not an agent id
        route("/agents/chat/completions", streams.chat_completions, ["POST"]),
        route("/agents", server.list_agents, ["GET"]),
        route("/agents", server.create_agent, ["POST"]),
        route("/agents/{agent_id}", server.get_agent, ["GET"]),
        route("/agents/{agent_id}", server.update_agent, ["PUT"]),
        route("/agents/{agent_id}", server.delete_agent, ["DELETE"]),
        route("/agents/{agent_id}/sessions", server.create_session, ["POST"]),
        route("/agents/{agent_id}/sessions", server.list_sessions, ["GET"]),
        route("/agents/{agent_id}/sessions", server.delete_sessions, ["DELETE"]),
        route("/agents/{agent_id}/sessions/{session_id}", server.get_session, ["GET"]),
        route("/agents/{agent_id}/sessions/{session_id}", server.delete_session, ["DELETE"]),
        route("/agents/{agent_id}/completions", streams.agent_completions, ["POST"]),
        route("/agents_openai/{agent_id}/chat/completions", streams.openai_completions, ["POST"]),
        route("/agents/{agent_id}/runs/{run_id}/events", streams.run_events, ["GET"]),
        route("/agents/{agent_id}/webhook", webhook.fire, webhook_methods),
        route("/agents/{agent_id}/webhook/test", webhook.test, webhook_methods),
        Route(PREFIX + "/openapi.json", openapi_json, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]


def build_app(config: Config, *, authenticator: TokenAuthenticator | None = None) -> Starlette:
    settings = HttpSettings.from_section(config.section("http"))
    context = server.Context(None, authenticator or TokenAuthenticator.from_config(config), settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # gRPC channels belong to the loop that serves: made here, not at import or build time
        context.channels = Channels.connect(config.address("canvas_store"), config.address("orchestrator"))
        try:
            yield
        finally:
            await context.channels.close()

    middleware = []
    if settings.cors_origins:
        # Browser front ends read the stream cross-origin, as they do RAGFlow's; the key is a header, never a cookie.
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_credentials=False,
                                     allow_methods=["*"], allow_headers=["*"], max_age=86400,
                                     expose_headers=["X-Run-Id", "X-Session-Id"]))
    return Starlette(routes=routes(context), lifespan=lifespan, middleware=middleware,
                     exception_handlers={HTTPException: server.http_exception, Exception: server.server_error})
