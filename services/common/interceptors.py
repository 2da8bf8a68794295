"""The server interceptor: request context, authentication and error mapping, one concern per class.

bootstrap.serve() installs one `ServerInterceptor`, which wraps each handler once (per method, not per
call) with the three concerns in this order:

1. RequestContext: a server span (continuing W3C traceparent), request id, trace id and deadline into
   contextvars; one access-log line and the RPC metrics per call (a background poll, POLL_HEADER: no span,
   a DEBUG line).
2. Authentication: bearer token -> Identity (UNAUTHENTICATED otherwise). Health and reflection are
   exempt so probes work without credentials.
3. Error mapping: domain errors -> gRPC status with google.rpc details. The only broad catch in the
   code base; unexpected exceptions become INTERNAL with a generic message and one logged traceback.

A request that cannot be decoded (garbage bytes, invalid UTF-8 in a string, nesting past protobuf's
recursion limit) is INVALID_ARGUMENT on the field `request`, after authentication: the handler's request
deserializer is wrapped (`tolerant_deserializer`) so that a failure becomes an `UndecodableRequest`
instead of grpc's own INTERNAL "Exception deserializing request!".

Why one interceptor and not three: grpc.aio runs every interceptor's `intercept_service` coroutine on
every call and each wrapper adds a coroutine layer; composing the concerns in one wrapper keeps that
per-call cost to one layer. Handlers never set status codes or log requests themselves.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from services.common import context, errors, status, telemetry
from services.common.auth import TokenAuthenticator
from services.common.clients import POLL_HEADER

logger = logging.getLogger(__name__)

EXEMPT_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

# A call marked POLL_HEADER (clients.py) that succeeds gets no span and a DEBUG access line instead of INFO:
# the orchestrator's takeover scan (ListRunRecords every 2 s on every replica) would otherwise fill the store's
# log and the trace backend. Honoured only for these read-only methods, so no write can hide from the log.
POLL_METHODS = frozenset({"/agentcanvas.v1.CanvasStore/ListRunRecords"})

UnaryBehavior = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
StreamBehavior = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


class UndecodableRequest:
    """Stands in for a request whose bytes did not decode; the wrapped handler refuses it."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def tolerant_deserializer(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """`deserialize`, returning an UndecodableRequest instead of raising (None stays None: raw bytes)."""
    if deserialize is None:
        return None

    def tolerant(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:  # DecodeError, or anything a custom deserializer raises
            return UndecodableRequest(exc)

    return tolerant


def _undecodable(method: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError.for_field(
        "request", f"could not be decoded as the request message of {method.rsplit('/', 1)[-1]} (malformed bytes, "
                   "invalid UTF-8 in a string, or nested deeper than protobuf's recursion limit)",
        reason="UNDECODABLE_REQUEST")


@dataclass
class _RpcState:
    started: float
    span: Any
    token: Any
    poll: bool = False


class RequestContext:
    """Per RPC: a server span continuing the caller's traceparent, request id, trace id and deadline in
    contextvars; on completion one access-log line and the RPC count/latency metrics.

    When no span exporter is configured (`telemetry.exporting()` is false) no span is created: nobody would
    see it, and the trace id still continues from the caller's traceparent through `context.trace_id_var`
    (which `clients.outbound_metadata` forwards). The access log line is only built when INFO is enabled.
    """

    def __init__(self) -> None:
        self._requests, self._latency = telemetry.rpc_metrics()
        self._latency_children: dict[str, Any] = {}
        self._request_children: dict[tuple[str, str], Any] = {}

    def before(self, method: str, metadata: dict[str, Any], ctx: grpc.aio.ServicerContext) -> _RpcState:
        span = token = None
        trace_id = ""
        poll = method in POLL_METHODS and metadata.get(POLL_HEADER) == "1"
        if telemetry.exporting() and not poll:
            parent = telemetry.extract_context(metadata)
            span = telemetry.tracer().start_span(method, context=parent, kind=SpanKind.SERVER)
            token = otel_context.attach(trace.set_span_in_context(span, parent))
            trace_id = telemetry.current_trace_id()
        trace_id = trace_id or context.parse_traceparent(str(metadata.get("traceparent", "")))
        context.trace_id_var.set(trace_id or context.new_trace_id())
        context.request_id_var.set(str(metadata.get("x-request-id") or context.new_span_id()))
        remaining = ctx.time_remaining()
        context.deadline_var.set(time.monotonic() + remaining if remaining is not None else None)
        return _RpcState(time.perf_counter(), span, token, poll)

    def after(self, method: str, state: _RpcState, outcome: str, ctx: grpc.aio.ServicerContext) -> None:
        code = ctx.code()
        code_name = code.name if isinstance(code, grpc.StatusCode) else ("OK" if outcome == "OK" else "UNKNOWN")
        elapsed = time.perf_counter() - state.started
        requests = self._request_children.get((method, code_name))
        if requests is None:  # labels() takes a lock and builds a key on every call; the child never changes
            requests = self._request_children[(method, code_name)] = self._requests.labels(method, code_name)
        latency = self._latency_children.get(method)
        if latency is None:
            latency = self._latency_children[method] = self._latency.labels(method)
        requests.inc()
        latency.observe(elapsed)
        if state.span is not None:
            state.span.set_attribute("rpc.grpc.status_code", code_name)
            if code_name != "OK":
                state.span.set_status(Status(StatusCode.ERROR, code_name))
            state.span.end()
            with contextlib.suppress(ValueError):  # detaching from another context is harmless here
                otel_context.detach(state.token)
        level = logging.DEBUG if state.poll and code_name == "OK" else logging.INFO
        if logger.isEnabledFor(level):
            logger.log(level, "rpc %s %s", method, code_name,
                       extra={"rpc_method": method, "code": code_name, "elapsed_ms": round(elapsed * 1000, 2)})


class Authentication:
    """Authenticates every non-exempt RPC and exposes the Identity through services.common.context."""

    def __init__(self, authenticator: TokenAuthenticator):
        self._authenticator = authenticator

    async def check(self, metadata: tuple[Any, ...], ctx: grpc.aio.ServicerContext) -> None:
        try:
            identity, token = self._authenticator.authenticate(metadata)
        except errors.UnauthenticatedError as exc:
            await ctx.abort_with_status(status.to_rpc_status(exc))
        context.identity_var.set(identity)
        context.token_var.set(token)


class ErrorMapping:
    """Maps exceptions raised by a handler to statuses (it runs innermost, around the handler alone)."""

    @staticmethod
    async def fail(method: str, ctx: grpc.aio.ServicerContext, exc: BaseException) -> None:
        if isinstance(exc, errors.AgentCanvasError):
            if isinstance(exc, errors.InternalError):
                logger.error("internal error in %s: %s", method, exc.message, exc_info=exc)
            await ctx.abort_with_status(status.to_rpc_status(exc))
        logger.error("unhandled exception in %s", method, exc_info=exc)
        await ctx.abort_with_status(status.internal_status())


class ServerInterceptor(grpc.aio.ServerInterceptor):
    """Request context, then authentication, then error mapping around every non-exempt handler."""

    def __init__(self, authenticator: TokenAuthenticator):
        self._context = RequestContext()
        self._auth = Authentication(authenticator)
        self._errors = ErrorMapping()
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(EXEMPT_PREFIXES):
            return handler
        # The registered handlers are fixed objects: wrap each once. A different inner handler rebuilds.
        entry = self._wrapped.get(method)
        if entry is None or entry[0] is not handler:
            entry = self._wrapped[method] = (handler, self._wrap(method, handler))
        return entry[1]

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        request_context, auth, error_mapping = self._context, self._auth, self._errors

        def unary_wrap(behavior: UnaryBehavior) -> UnaryBehavior:
            async def wrapped(request, ctx):
                metadata = tuple(ctx.invocation_metadata() or ())
                state = request_context.before(method, dict(metadata), ctx)
                outcome = "OK"
                try:
                    await auth.check(metadata, ctx)
                    try:
                        if type(request) is UndecodableRequest:
                            raise _undecodable(method)
                        return await behavior(request, ctx)
                    except grpc.aio.AbortError:
                        raise
                    except Exception as exc:  # the single error-to-status boundary
                        await error_mapping.fail(method, ctx, exc)
                except BaseException as exc:
                    outcome = type(exc).__name__
                    raise
                finally:
                    request_context.after(method, state, outcome, ctx)

            return wrapped

        def stream_wrap(behavior: StreamBehavior) -> StreamBehavior:
            async def wrapped(request, ctx):
                metadata = tuple(ctx.invocation_metadata() or ())
                state = request_context.before(method, dict(metadata), ctx)
                outcome = "OK"
                try:
                    await auth.check(metadata, ctx)
                    try:
                        if type(request) is UndecodableRequest:
                            raise _undecodable(method)
                        async for item in behavior(request, ctx):
                            yield item
                    except grpc.aio.AbortError:
                        raise
                    except Exception as exc:  # the single error-to-status boundary
                        await error_mapping.fail(method, ctx, exc)
                except BaseException as exc:
                    outcome = type(exc).__name__
                    raise
                finally:
                    request_context.after(method, state, outcome, ctx)

            return wrapped

        deserializer = tolerant_deserializer(handler.request_deserializer)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                unary_wrap(handler.unary_unary), deserializer, handler.response_serializer)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                stream_wrap(handler.unary_stream), deserializer, handler.response_serializer)
        return handler  # only unary-unary and unary-stream RPCs exist here
