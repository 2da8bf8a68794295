"""Per-request context carried in contextvars: identity, bearer token, request id, trace id, deadline.

Server interceptors set these for each RPC; client helpers read them to forward identity, trace and
the remaining deadline to downstream calls.
"""

from __future__ import annotations

import contextvars
import random
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    """Who is calling: a user of a tenant. `role` is "user" or "service"."""

    tenant_id: str
    user_id: str
    role: str = "user"

    @property
    def is_service(self) -> bool:
        return self.role == "service"


identity_var: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("identity", default=None)
token_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("bearer_token", default=None)
request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
trace_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("trace_id", default="")
deadline_var: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)


def current_identity() -> Identity | None:
    return identity_var.get()


def current_ids() -> dict[str, str]:
    return {"request_id": request_id_var.get(), "trace_id": trace_id_var.get()}


# Trace, span and request ids must be unique, not secret: the random module's generator gives them without
# the getrandom syscall per id that secrets costs (twice per RPC), as OpenTelemetry's RandomIdGenerator does.
# W3C Trace Context forbids the all-zero ids.
def new_trace_id() -> str:
    return f"{random.getrandbits(128) or 1:032x}"


def new_span_id() -> str:
    return f"{random.getrandbits(64) or 1:016x}"


def remaining_time() -> float | None:
    """Seconds left before the current RPC's deadline, or None when it has none."""
    deadline = deadline_var.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def parse_traceparent(value: str) -> str:
    """Trace id from a W3C traceparent header ("00-<trace>-<span>-<flags>"), or "" when malformed."""
    parts = value.split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and all(c in "0123456789abcdef" for c in parts[1]):
        return parts[1]
    return ""


def traceparent(trace_id: str) -> str:
    return f"00-{trace_id}-{new_span_id()}-01"
