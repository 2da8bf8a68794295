"""The HTTP adapter: RAGFlow's /api/v1 agent routes on Starlette, over the core (services/http_api/core).

Every answer is JSON in RAGFlow's envelope, failures included: RAGFlow's clients read `code` from the
body and never look at the HTTP status, so nothing here may answer with an HTML page or a traceback.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.trace import SpanKind
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from services.common import errors, telemetry
from services.common.auth import TokenAuthenticator
from services.http_api.adapters.grpc_backend import Channels, GrpcBackend
from services.http_api.core.agents import Agents
from services.http_api.core.errors import ApiError, RetCode, argument, from_domain, unauthorized
from services.http_api.core.params import NotJson, json_value
from services.http_api.settings import HttpSettings

logger = logging.getLogger(__name__)
INTERNAL = "INTERNAL: unexpected error; see the service log"
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def dumps(value: Any) -> bytes:
    """RAGFlow's JSON: UTF-8 text, not \\u escapes, compact."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


def ok(data: Any = True) -> Response:
    """RAGFlow's get_json_result."""
    return json_response({"code": 0, "message": "success", "data": data})


def result(data: Any = None, **extra: Any) -> Response:
    """RAGFlow's get_result: no message, and no data when there is none."""
    body: dict[str, Any] = {"code": 0}
    if data is not None:
        body["data"] = data
    body.update(extra)
    return json_response(body)


def error_response(exc: ApiError) -> Response:
    return json_response(exc.body(), status=exc.http_status)


class Context:
    """What every route needs: the peers' channels, the authenticator and the settings."""

    def __init__(self, channels: Channels | None, authenticator: TokenAuthenticator, settings: HttpSettings):
        self.channels = channels
        self.authenticator = authenticator
        self.settings = settings

    def bearer(self, request: Request) -> str:
        """RAGFlow's `Authorization: Bearer <key>` (prefix in any case, or a bare key), checked against `auth.tokens`."""
        raw = request.headers.get("authorization", "").strip()
        if not raw:
            raise unauthorized("<Unauthorized '401: Unauthorized'> (TOKEN_MISSING: send 'Authorization: Bearer <api key>')",
                               "TOKEN_MISSING")
        scheme, _, rest = raw.partition(" ")
        token = rest.strip() if scheme.lower() == "bearer" and rest.strip() else raw
        if not (token.isascii() and token.isprintable()):
            raise unauthorized("<Unauthorized '401: Unauthorized'> (TOKEN_INVALID: invalid API key)", "TOKEN_INVALID")
        try:
            self.authenticator.authenticate([("authorization", f"Bearer {token}")])
        except errors.UnauthenticatedError as exc:
            raise unauthorized(f"<Unauthorized '401: Unauthorized'> ({exc.reason}: {exc.message})", exc.reason) from None
        return token

    def backend(self, request: Request) -> GrpcBackend:
        assert self.channels is not None, "the app's lifespan opens the channels"
        offered = request.headers.get("x-request-id", "")
        # forwarded as gRPC metadata: only a plain id passes, anything else gets a fresh one
        request_id = offered if REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex
        return GrpcBackend(self.channels, self.bearer(request), timeout_s=self.settings.call_timeout_s,
                           request_id=request_id)

    async def body(self, request: Request, *, required: bool = False) -> dict[str, Any]:
        """The JSON object of the body; an empty body is `{}` (the SDK sends none on some calls)."""
        raw = await self.raw_body(request)
        if not raw.strip():
            if required:
                raise argument("The request body must be a JSON object.")
            return {}
        try:
            value = json_value(raw.decode("utf-8"), "The request body")
        except UnicodeDecodeError as exc:
            raise argument(f"The request body is not valid JSON (UnicodeDecodeError: {exc}).") from None
        except NotJson as exc:
            raise argument(f"The request body is not valid JSON ({exc}).") from None
        if not isinstance(value, dict):
            raise argument("The request body must be a JSON object.")
        return value

    async def raw_body(self, request: Request) -> bytes:
        """The body's bytes, at most `http.max_body_bytes` (413 beyond)."""
        declared = request.headers.get("content-length")
        limit = self.settings.max_body_bytes
        if declared and declared.isdigit() and int(declared) > limit:
            raise ApiError(RetCode.ARGUMENT_ERROR, f"The request body is larger than {limit} bytes.", http_status=413)
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError(RetCode.ARGUMENT_ERROR, f"The request body is larger than {limit} bytes.", http_status=413)
                chunks.append(chunk)
        except ClientDisconnect:
            raise ApiError(RetCode.ARGUMENT_ERROR, "The client closed the connection while sending the body.") from None
        return b"".join(chunks)


Handler = Callable[[Context, Request], Awaitable[Response]]


def _metrics():
    return (telemetry.counter("http_requests_total", "HTTP requests the RAGFlow facade answered, by route, method and "
                              "RAGFlow code (0 success)", ("route", "method", "code")),
            telemetry.histogram("http_latency_seconds", "time to the response's start (streams: to their first events)",
                                ("route",), buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                                     10, 30, 60)))


def endpoint(context: Context, handler: Handler, path: str = "") -> Callable[[Request], Awaitable[Response]]:
    """A route: RAGFlow-coded failures become their JSON body; anything unexpected is code 100 with a
    generic message (the traceback goes to the log only). Each request is a server span continuing the
    caller's traceparent (the gRPC calls it makes carry it on) and is counted by route and code."""
    requests_total, latency = _metrics()
    route_name = path or handler.__name__

    async def answer(request: Request) -> tuple[Response, int]:
        try:
            return await handler(context, request), 0
        except ApiError as exc:
            return error_response(exc), int(exc.code)
        except errors.AgentCanvasError as exc:
            mapped = from_domain(exc)
            return error_response(mapped), int(mapped.code)
        except Exception:  # noqa: BLE001 - the last line of defence: no traceback reaches a client
            logger.exception("unexpected error on %s %s", request.method, request.url.path)
            return error_response(ApiError(RetCode.EXCEPTION_ERROR, INTERNAL)), int(RetCode.EXCEPTION_ERROR)

    async def route(request: Request) -> Response:
        started = time.perf_counter()
        parent = telemetry.extract_context(dict(request.headers))
        with telemetry.tracer().start_as_current_span(f"{request.method} {route_name}", context=parent,
                                                      kind=SpanKind.SERVER) as span:
            response, code = await answer(request)
            span.set_attribute("http.status_code", response.status_code)
            span.set_attribute("ragflow.code", code)
        requests_total.labels(route_name, request.method, str(code)).inc()
        latency.labels(route_name).observe(time.perf_counter() - started)
        return response

    route.__name__ = handler.__name__
    return route


# agents
async def list_agents(context: Context, request: Request) -> Response:
    return ok(await Agents(context.backend(request)).list(request.query_params))


async def create_agent(context: Context, request: Request) -> Response:
    backend = context.backend(request)
    return ok(await Agents(backend).create(await context.body(request)))


async def get_agent(context: Context, request: Request) -> Response:
    return ok(await Agents(context.backend(request)).get(request.path_params["agent_id"]))


async def update_agent(context: Context, request: Request) -> Response:
    backend = context.backend(request)
    return ok(await Agents(backend).update(request.path_params["agent_id"], await context.body(request)))


async def delete_agent(context: Context, request: Request) -> Response:
    backend = context.backend(request)
    await context.body(request)
    return ok(await Agents(backend).delete(request.path_params["agent_id"]))


# sessions
async def create_session(context: Context, request: Request) -> Response:
    backend = context.backend(request)
    body = await context.body(request)
    return result(await Agents(backend).create_session(request.path_params["agent_id"], body, request.query_params))


async def list_sessions(context: Context, request: Request) -> Response:
    rows, total = await Agents(context.backend(request)).list_sessions(request.path_params["agent_id"], request.query_params)
    return json_response({"code": 0, "message": "success", "data": rows, "total": total})


async def delete_sessions(context: Context, request: Request) -> Response:
    backend = context.backend(request)
    body = await context.body(request)
    return result(await Agents(backend).delete_sessions(request.path_params["agent_id"], body))


async def get_session(context: Context, request: Request) -> Response:
    agents = Agents(context.backend(request))
    return result(await agents.get_session(request.path_params["agent_id"], request.path_params["session_id"]))


async def delete_session(context: Context, request: Request) -> Response:
    agents = Agents(context.backend(request))
    await agents.delete_session(request.path_params["agent_id"], request.path_params["session_id"])
    return result()


# framework failures (unknown route, wrong method, anything raised outside a route)
async def http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    phrase = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, str(exc.detail))
    message = f"{phrase}: {request.url.path}" if exc.status_code in (404, 405) else str(exc.detail)
    return json_response({"code": exc.status_code, "message": message, "data": None, "error": phrase},
                         status=exc.status_code, headers=getattr(exc, "headers", None))


async def server_error(request: Request, exc: Exception) -> Response:
    logger.error("unhandled error on %s %s: %s", request.method, request.url.path, type(exc).__name__)
    return json_response({"code": int(RetCode.EXCEPTION_ERROR), "message": INTERNAL, "data": None})
