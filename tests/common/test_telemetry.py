"""Every RPC yields a server span that continues the caller's trace, plus Prometheus metrics."""

from __future__ import annotations

import socket
import urllib.request

import grpc
from agentcanvas.v1 import sandbox_pb2, sandbox_pb2_grpc
from opentelemetry import trace

from services.common import context, telemetry
from services.common.bootstrap import ServiceDefinition, start_server
from services.common.auth import TokenAuthenticator
from services.common.settings import Config

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


class _Runtimes(sandbox_pb2_grpc.SandboxServicer):
    async def ListRuntimes(self, request, context_):
        with telemetry.span("inner-work", answer=42):
            pass
        return sandbox_pb2.ListRuntimesResponse()


async def test_rpc_span_continues_traceparent_and_metrics_count_it(tmp_path, finished_spans):
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
        {"auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]}}
    )
    definition = ServiceDefinition(
        name="sandbox",
        proto_services=["agentcanvas.v1.Sandbox"],
        register=lambda server: sandbox_pb2_grpc.add_SandboxServicer_to_server(_Runtimes(), server),
    )
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    before = telemetry.rpc_metrics()[0].labels("/agentcanvas.v1.Sandbox/ListRuntimes", "OK")._value.get()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            metadata = [("authorization", "Bearer t1"), ("traceparent", f"00-{TRACE_ID}-00f067aa0ba902b7-01")]
            await sandbox_pb2_grpc.SandboxStub(channel).ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=metadata)
            bad = [("authorization", "Bearer nope")]
            try:
                await sandbox_pb2_grpc.SandboxStub(channel).ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=bad)
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await running.stop(0)

    spans = finished_spans.get_finished_spans()
    rpc_spans = {span.attributes["rpc.grpc.status_code"]: span for span in spans if span.name.endswith("/ListRuntimes")}
    server_span = rpc_spans["OK"]
    assert format(server_span.context.trace_id, "032x") == TRACE_ID
    assert format(rpc_spans["UNAUTHENTICATED"].context.trace_id, "032x") != TRACE_ID
    inner = next(span for span in spans if span.name == "inner-work")
    assert inner.parent.span_id == server_span.context.span_id
    assert inner.attributes["answer"] == 42

    text = telemetry.metrics_text()
    assert 'agentcanvas_rpc_requests_total{code="OK",method="/agentcanvas.v1.Sandbox/ListRuntimes"}' in text
    after = telemetry.rpc_metrics()[0].labels("/agentcanvas.v1.Sandbox/ListRuntimes", "OK")._value.get()
    assert after == before + 1
    assert telemetry.rpc_metrics()[0].labels("/agentcanvas.v1.Sandbox/ListRuntimes", "UNAUTHENTICATED")._value.get() >= 1


def test_metrics_side_port_serves_exposition_text():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bound = telemetry.start_metrics_server(port, host="127.0.0.1")
    assert bound == port
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "agentcanvas_rpc_latency_seconds" in body
    assert telemetry.start_metrics_server(0) == 0


class _ContextProbe(sandbox_pb2_grpc.SandboxServicer):
    """Records the request context the interceptor set up for the call."""

    def __init__(self) -> None:
        self.seen: dict[str, object] = {}

    async def ListRuntimes(self, request, context_):
        self.seen = {"trace_id": context.trace_id_var.get(), "request_id": context.request_id_var.get(),
                     "identity": context.current_identity(), "recording": trace.get_current_span().is_recording()}
        return sandbox_pb2.ListRuntimesResponse()


async def test_without_an_exporter_no_span_is_made_but_the_trace_id_still_continues(tmp_path, finished_spans,
                                                                                    monkeypatch):
    monkeypatch.setattr(telemetry, "_exporting", False)  # as in a process with no OTLP endpoint or console
    config = Config.load(env={"AGENT_CANVAS_DATA_DIR": str(tmp_path)}).with_overrides(
        {"auth": {"embedded": False, "tokens": [{"token": "t1", "tenant": "acme", "user": "alice"}]}}
    )
    probe = _ContextProbe()
    definition = ServiceDefinition(
        name="sandbox",
        proto_services=["agentcanvas.v1.Sandbox"],
        register=lambda server: sandbox_pb2_grpc.add_SandboxServicer_to_server(probe, server),
    )
    running = await start_server(definition, config, authenticator=TokenAuthenticator.from_config(config, env={}))
    before = telemetry.rpc_metrics()[0].labels("/agentcanvas.v1.Sandbox/ListRuntimes", "OK")._value.get()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            metadata = [("authorization", "Bearer t1"), ("traceparent", f"00-{TRACE_ID}-00f067aa0ba902b7-01"),
                        ("x-request-id", "req-7")]
            await sandbox_pb2_grpc.SandboxStub(channel).ListRuntimes(sandbox_pb2.ListRuntimesRequest(), metadata=metadata)
            assert probe.seen == {"trace_id": TRACE_ID, "request_id": "req-7",
                                  "identity": context.Identity("acme", "alice"), "recording": False}
            await sandbox_pb2_grpc.SandboxStub(channel).ListRuntimes(sandbox_pb2.ListRuntimesRequest(),
                                                                     metadata=[("authorization", "Bearer t1")])
            assert len(str(probe.seen["trace_id"])) == 32 and probe.seen["trace_id"] != TRACE_ID
    finally:
        await running.stop(0)
    assert not [span for span in finished_spans.get_finished_spans() if span.name.endswith("/ListRuntimes")]
    after = telemetry.rpc_metrics()[0].labels("/agentcanvas.v1.Sandbox/ListRuntimes", "OK")._value.get()
    assert after == before + 2
