"""Spans and Prometheus metrics of model calls (names listed in deploy/README.md, Operations).

One `llm.call` span per Chat/ChatStream request, child of the RPC's server span (so of the
orchestrator's node span): model, provider, provider model, token counts, finish reason, error kind.
The span is started without being made current: the event stream is an async generator that the
gRPC layer may close from another context.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry.trace import INVALID_SPAN, SpanKind, Status, StatusCode

from services.common import telemetry
from services.llm_gateway.core.types import FinishEvent, FinishReason, TextEvent, ThinkDeltaEvent, UsageEvent

CALLS = telemetry.counter("gateway_calls_total", "Model calls, by model and outcome (ok, error kind, abandoned)",
                          ("model", "outcome"))
TOKENS = telemetry.counter("gateway_tokens_total", "Tokens of model calls, by model and kind", ("model", "kind"))
LATENCY = telemetry.histogram("gateway_call_seconds", "Model call latency (request to Finish), by model", ("model",),
                              buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
FIRST_TOKEN = telemetry.histogram("gateway_first_token_seconds", "Time to the first text or reasoning event, by model",
                                  ("model",), buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))


async def observed(events: AsyncIterator[Any], *, model: str, provider: str, provider_model: str,
                   streaming: bool) -> AsyncIterator[Any]:
    started = time.perf_counter()
    # No exporter: a no-op span (every call of every run comes through here; building and ending a
    # real span that nobody receives was a few per cent of the gateway's CPU).
    span = telemetry.tracer().start_span("llm.call", kind=SpanKind.CLIENT, attributes={
        "gen_ai.request.model": model, "gen_ai.system": provider, "llm.provider_model": provider_model,
        "llm.streaming": streaming}) if telemetry.exporting() else INVALID_SPAN
    outcome = "abandoned"
    first = True
    usage = None
    try:
        async for event in events:
            if first and isinstance(event, (TextEvent, ThinkDeltaEvent)):
                first = False
                FIRST_TOKEN.labels(model).observe(time.perf_counter() - started)
            elif isinstance(event, UsageEvent):
                usage = event.usage
            elif isinstance(event, FinishEvent):
                span.set_attribute("gen_ai.response.finish_reason", event.reason.name)
                if event.model:
                    span.set_attribute("gen_ai.response.model", event.model)
                if event.reason == FinishReason.ERROR and event.error is not None:
                    outcome = event.error.kind.value
                    span.set_attribute("llm.error_kind", outcome)
                    span.set_status(Status(StatusCode.ERROR, outcome))
                else:
                    outcome = "ok"
            yield event
    finally:
        elapsed = time.perf_counter() - started
        CALLS.labels(model, outcome).inc()
        LATENCY.labels(model).observe(elapsed)
        if usage is not None:
            for kind in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
                value = getattr(usage, kind)
                span.set_attribute(f"gen_ai.usage.{kind}", value)
                if value:
                    TOKENS.labels(model, kind.removesuffix("_tokens")).inc(value)
            span.set_attribute("llm.calls", usage.calls)
        span.set_attribute("llm.outcome", outcome)
        span.end()
