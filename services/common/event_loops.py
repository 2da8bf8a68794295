"""Which asyncio event loop a service process runs on: `<section>.event_loop`, one of

- `auto`: uvloop where it is installed (the pinned dependency on Linux and macOS), else asyncio's;
- `uvloop`: uvloop, and an error naming the key when it is not installed;
- `asyncio`: the standard library's loop.

Each service names its default (`ServiceDefinition.event_loop`). The canvas store's is `auto`: a unary
call through grpc.aio wakes the loop several times (each completion grpc's poller thread hands over is a
socket read and a callback), the store's handlers are short, so the loop's own machinery is a large share
of a call. In interleaved A/B runs (2026-12-03, services/canvas_store/BENCHMARK.md) uvloop cut the store's
loop-thread CPU per UpdateCanvas by ~10% on SQLite and ~14% on PostgreSQL, and per GetCanvas by ~7%.

The other services default to `asyncio` because they start child processes, and libuv starts them
differently from CPython's subprocess: it closes no inherited descriptors (CPython's `close_fds` closes
every one but stdio), so a child receives each descriptor of the service that lacks close-on-exec. In the
sandbox's attack tests on uvloop, a job saw the service's sockets; so the sandbox refuses uvloop
(`uvloop_allowed=False`). The orchestrator and the gateway accept it when asked; the orchestrator's MCP
stdio servers would then inherit such descriptors too. libuv also forks where CPython vforks, which runs
gRPC's atfork handlers: services/__init__.py turns gRPC's fork support off for that reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from services.common.errors import InvalidArgumentError

CHOICES = ("auto", "uvloop", "asyncio")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def _uvloop() -> Any | None:
    try:
        import uvloop  # noqa: PLC0415 - optional where the platform has no wheel
    except ImportError:
        return None
    return uvloop


def loop_factory(choice: Any, field: str, *, uvloop_allowed: bool = True) -> LoopFactory | None:
    """The factory for `asyncio.Runner` (None = asyncio's own loop); `field` names the key in errors."""
    if choice not in CHOICES:
        raise InvalidArgumentError.for_field(field, f"must be one of {', '.join(CHOICES)} (got {choice!r})")
    if choice == "uvloop" and not uvloop_allowed:
        raise InvalidArgumentError.for_field(
            field, "cannot be uvloop here: children started on uvloop inherit the service's open descriptors")
    uvloop = _uvloop() if choice != "asyncio" and uvloop_allowed else None
    if uvloop is None and choice == "uvloop":
        raise InvalidArgumentError.for_field(field, "is uvloop, but uvloop is not installed (pip install uvloop)")
    return uvloop.new_event_loop if uvloop is not None else None


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """"uvloop" or "asyncio", for the start-up log line."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
