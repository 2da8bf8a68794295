"""Spans and Prometheus metrics of sandbox jobs (names listed in deploy/README.md, Operations).

One `sandbox.job` span per job (language, backend, exit reason, exit code, wall time), child of the
Execute RPC's server span. Started without being made current: the job's event stream is an async
generator the gRPC layer may close from another context.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

from opentelemetry.trace import Status, StatusCode

from services.common import telemetry
from services.sandbox.core.models import Event, Exit, ExitReason

JOBS = telemetry.counter("sandbox_jobs_total", "Finished jobs, by language and exit reason (abandoned: the caller left)",
                         ("language", "reason"))
JOB_LATENCY = telemetry.histogram("sandbox_job_seconds", "Job latency from admission to exit, by language", ("language",),
                                  buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
POOL_READY = telemetry.gauge("sandbox_pool_ready", "Pre-spawned workers ready in a warm pool, by pool", ("pool",))
JOBS_RUNNING = telemetry.gauge("sandbox_jobs_running", "Jobs executing now")
JOBS_WAITING = telemetry.gauge("sandbox_jobs_waiting", "Jobs queued for a slot")


def track_pool(name: str, ready: Callable[[], int]) -> None:
    POOL_READY.labels(name).set_function(ready)


def track_admission(running: Callable[[], int], waiting: Callable[[], int]) -> None:
    JOBS_RUNNING.set_function(running)
    JOBS_WAITING.set_function(waiting)


async def observed(events: AsyncIterator[Event], *, job_id: str, language: str, backend: str) -> AsyncIterator[Event]:
    started = time.perf_counter()
    span = telemetry.tracer().start_span("sandbox.job", attributes={
        "sandbox.job_id": job_id, "sandbox.language": language, "sandbox.backend": backend})
    reason = "abandoned"
    try:
        async for event in events:
            if isinstance(event, Exit):
                reason = event.reason.value
                span.set_attributes({"sandbox.exit_reason": reason, "sandbox.exit_code": event.code,
                                     "sandbox.wall_time_ms": event.wall_time_ms})
                if event.reason != ExitReason.OK:
                    span.set_status(Status(StatusCode.ERROR, reason))
            yield event
    finally:
        JOBS.labels(language, reason).inc()
        JOB_LATENCY.labels(language).observe(time.perf_counter() - started)
        span.set_attribute("sandbox.outcome", reason)
        span.end()
