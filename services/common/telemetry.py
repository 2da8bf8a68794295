"""OpenTelemetry traces and Prometheus metrics, shared by every service.

Traces: `configure_tracing(service, config)` installs the process's tracer provider once; spans are
exported over OTLP/gRPC when `telemetry.otlp_endpoint` (or OTEL_EXPORTER_OTLP_ENDPOINT) is set, to the
console when `telemetry.console: true`, and nowhere otherwise. The RPC interceptor opens a server span
per call, continuing the caller's W3C traceparent; domain code adds spans with `span("node", ...)`.

Metrics: `counter/histogram/gauge` create (once per process) Prometheus metrics prefixed
`agentcanvas_`; `start_metrics_server(port, host)` serves them on a side HTTP port (`<section>.metrics_port`
or METRICS_PORT; 0 disables it), on the service's listen host unless `<section>.metrics_host` names another.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import prometheus_client
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter, SimpleSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from services.common.settings import Config

logger = logging.getLogger(__name__)

_PROPAGATOR = TraceContextTextMapPropagator()
_METRICS: dict[str, Any] = {}
_LOCK = threading.Lock()
_configured = False
_exporting = False

RPC_REQUESTS = "rpc_requests_total"
RPC_LATENCY = "rpc_latency_seconds"


def configure_tracing(service: str, config: Config, exporter: SpanExporter | None = None) -> None:
    """Install the tracer provider for this process (first call wins)."""
    global _configured, _exporting
    with _LOCK:
        if _configured:
            return
        _configured = True
    settings = config.section("telemetry")
    provider = TracerProvider(resource=Resource.create({"service.name": f"agent-canvas-{service}"}))
    endpoint = settings.get("otlp_endpoint") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=str(endpoint), insecure=True)))
    elif settings.get("console"):
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    _exporting = bool(exporter is not None or endpoint or settings.get("console"))
    trace.set_tracer_provider(provider)


def exporting() -> bool:
    """True when finished spans go somewhere. Hot paths (one span per node) skip their spans otherwise."""
    return _exporting


def tracer() -> trace.Tracer:
    return trace.get_tracer("agentcanvas")


def extract_context(metadata: dict[str, Any]):
    """OTel context from incoming gRPC metadata (traceparent / tracestate)."""
    carrier = {k: v for k, v in metadata.items() if isinstance(v, str)}
    return _PROPAGATOR.extract(carrier)


def inject_traceparent() -> str | None:
    """traceparent of the current span, or None when no span is recording."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


def current_trace_id() -> str:
    """Hex trace id of the current span ("" when there is none)."""
    span_context = trace.get_current_span().get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else ""


@contextlib.contextmanager
def span(name: str, *, kind: SpanKind = SpanKind.INTERNAL, **attributes: Any) -> Iterator[trace.Span]:
    """A child span of the current one, e.g. `with span("node", component_id=...)`."""
    clean = {k: v for k, v in attributes.items() if v is not None and isinstance(v, (str, bool, int, float))}
    with tracer().start_as_current_span(name, kind=kind, attributes=clean) as current:
        yield current


def _metric(kind: type, name: str, documentation: str, labels: Sequence[str], **kwargs: Any):
    full = f"agentcanvas_{name}"
    with _LOCK:
        if full not in _METRICS:
            _METRICS[full] = kind(full, documentation, list(labels), **kwargs)
        return _METRICS[full]


def counter(name: str, documentation: str, labels: Sequence[str] = ()) -> prometheus_client.Counter:
    return _metric(prometheus_client.Counter, name, documentation, labels)


def histogram(name: str, documentation: str, labels: Sequence[str] = (), buckets: Sequence[float] | None = None) -> prometheus_client.Histogram:
    kwargs = {"buckets": tuple(buckets)} if buckets else {}
    return _metric(prometheus_client.Histogram, name, documentation, labels, **kwargs)


def gauge(name: str, documentation: str, labels: Sequence[str] = ()) -> prometheus_client.Gauge:
    return _metric(prometheus_client.Gauge, name, documentation, labels)


def rpc_metrics() -> tuple[prometheus_client.Counter, prometheus_client.Histogram]:
    return (
        counter(RPC_REQUESTS, "gRPC calls handled, by method and status code", ("method", "code")),
        histogram(RPC_LATENCY, "gRPC handler latency in seconds", ("method",),
                  buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)),
    )


def start_metrics_server(port: int, host: str = "127.0.0.1") -> int:
    """Serve /metrics on `host`:`port` in a background thread; returns the bound port (0 = disabled).
    Services pass their own listen host (bootstrap.metrics_host), so metrics are never more exposed
    than the service itself."""
    if port <= 0:
        return 0
    server, _thread = prometheus_client.start_http_server(port, addr=host)
    return server.server_port


def metrics_text() -> str:
    """The current exposition text (what /metrics serves)."""
    return prometheus_client.generate_latest().decode()
