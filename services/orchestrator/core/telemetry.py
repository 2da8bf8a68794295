"""The orchestrator's spans and Prometheus metrics (names are listed in deploy/README.md, Operations).

Spans, made only while spans are exported (see `tracing`): one `run` span per execution of a run
on a replica (a takeover opens a new one), in the run's own trace (`spec.trace_id`, the trace of the
RunCanvas call that created it, which is also the `trace_id` of every RunEvent), and one `node` span
per node attempt beneath it.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from services.common import telemetry

RUNS_STARTED = telemetry.counter("orchestrator_runs_started_total", "Runs created by RunCanvas, by kind (new, resume)", ("kind",))
RUNS_FINISHED = telemetry.counter("orchestrator_runs_finished_total",
                                  "Runs that ended (or paused) on this replica, by final status", ("status",))
RUNS_TAKEN_OVER = telemetry.counter("orchestrator_runs_taken_over_total", "Runs this replica took over from a dead one")
RUNS_ACTIVE = telemetry.gauge("orchestrator_runs_active", "Runs executing on this replica")
ADMISSION_REJECTED = telemetry.counter("orchestrator_admission_rejected_total",
                                       "RunCanvas calls refused by the per-tenant cap")
NODE_LATENCY = telemetry.histogram(
    "orchestrator_node_seconds", "Node attempt latency, by component type and outcome", ("component_type", "outcome"),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
TOKENS = telemetry.counter("orchestrator_tokens_total", "Model tokens used by nodes, by kind", ("kind",))

_TRACER = trace.get_tracer("agentcanvas")  # a proxy until a provider is installed, then that provider's tracer
_NO_SPAN = contextlib.nullcontext(trace.INVALID_SPAN)
_LATENCY_BY_TYPE: dict[tuple[str, str], Any] = {}
_TOKEN_KINDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")


def current_context() -> Any:
    return otel_context.get_current()


def record_tokens(usage: Any) -> None:
    for kind in _TOKEN_KINDS:
        value = getattr(usage, kind, 0)
        if value:
            TOKENS.labels(kind.removesuffix("_tokens")).inc(value)


def _run_parent(trace_id: str):
    """Context whose parent is the run's trace, when the current span belongs to another one."""
    current = trace.get_current_span().get_span_context()
    try:
        wanted = int(trace_id, 16)
    except ValueError:
        return None
    if not wanted or (current.is_valid and current.trace_id == wanted):
        return None  # already inside the run's trace (the RunCanvas call)
    remote = SpanContext(trace_id=wanted, span_id=random.getrandbits(64) or 1, is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(remote))


@contextlib.contextmanager
def run_span(record: Any) -> Iterator[trace.Span]:
    RUNS_ACTIVE.inc()
    try:
        if not tracing():  # nobody receives spans: skip making one (no node spans hang under it either)
            yield trace.INVALID_SPAN
            return
        parent = _run_parent(str(record.spec.get("trace_id") or ""))
        attributes = {"run.id": record.id, "run.tenant": record.tenant_id or "", "run.canvas_id": record.canvas_id or "",
                      "run.resumed": bool(record.spec.get("resume_from"))}
        with telemetry.tracer().start_as_current_span("run", context=parent, attributes=attributes) as current:
            yield current
    finally:
        RUNS_ACTIVE.dec()


def tracing() -> bool:
    """Node spans only when spans are exported (telemetry.otlp_endpoint, console, tests): creating and
    dropping one costs ~20 µs, a fifth of the engine's whole per-node overhead."""
    return telemetry.exporting()


def node_span(node_id: str, component_type: str, attempt: int, scope: str,
              parent: Any = None) -> contextlib.AbstractContextManager[trace.Span]:
    """Per node attempt: the hot path of the engine (bench.engine per_node_us), so kept lean."""
    if not tracing():
        return _NO_SPAN
    attributes = {"node.id": node_id, "node.type": component_type, "node.attempt": attempt}
    if scope:
        attributes["node.scope"] = scope
    return _TRACER.start_as_current_span("node", context=parent, attributes=attributes)


def node_finished(current: trace.Span, component_type: str, elapsed_s: float, error_reason: str | None) -> None:
    key = (component_type, "error" if error_reason else "ok")
    child = _LATENCY_BY_TYPE.get(key)
    if child is None:
        child = _LATENCY_BY_TYPE[key] = NODE_LATENCY.labels(*key)
    child.observe(elapsed_s)
    if error_reason and current.is_recording():
        current.set_attribute("node.error", error_reason)
        current.set_status(Status(StatusCode.ERROR, error_reason))
