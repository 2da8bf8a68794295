"""Synchronous store code run on the event loop, its database waits awaited there (greenlets).

Why: on PostgreSQL a GetCanvas or a description update is one statement, and handing it to a DB-pool
thread costs the store more CPU than the statement does: the hop itself, then the GIL passing back and
forth between the gRPC event loop and eight DB threads (measured in services/canvas_store/BENCHMARK.md,
"Where the time goes"). psycopg's asyncio connections let the statement run on the loop's own thread
instead, but the use cases are synchronous code shared with the CLI and the pool. `run` executes such a
function in a greenlet on the loop; when the function reaches a statement, the fast path hands the
statement's coroutine to `wait`, which switches back to `run`, which awaits it on the loop and switches
back with the result. The core does not change, and nothing blocks the loop.

Only I/O with an asyncio form may happen there (`fastpath.py` with `LoopConnections`). Anything else
that would block (a SQLAlchemy Core transaction, a thread-held DBAPI connection) raises `NeedsPool`
before it starts, and the caller runs the whole function again on the DB pool (`StoreApp.call`), which
is only correct for functions whose one write is their last I/O.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import greenlet

T = TypeVar("T")


class NeedsPool(Exception):
    """Raised on the loop by blocking database I/O before it starts: run the call on the DB pool instead."""


class _LoopGreenlet(greenlet.greenlet):
    """Marks the greenlets `run` starts, so `on_loop` and `wait` recognise them."""


def on_loop() -> bool:
    """True in code that `run` is executing (database waits must go through `wait`)."""
    return isinstance(greenlet.getcurrent(), _LoopGreenlet)


def refuse_blocking_io() -> None:
    """Called by every blocking way into the database: on the loop it raises NeedsPool instead of blocking."""
    if on_loop():
        raise NeedsPool()


async def run(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run the synchronous `function` on this event loop, awaiting every awaitable it passes to `wait`.

    The greenlet runs in a copy of the caller's context, so request ids and trace ids stay visible to logging.
    An exception raised while awaiting (a failed statement, or this task being cancelled) is thrown into
    `function` at its `wait`, so its `finally` blocks and rollbacks run as in a thread.
    """
    child = _LoopGreenlet(function, parent=greenlet.getcurrent())
    child.gr_context = contextvars.copy_context()
    handed = child.switch(*args, **kwargs)
    while not child.dead:
        try:
            result = await handed
        except BaseException as error:  # noqa: BLE001 - delivered to the function, which decides
            handed = child.throw(error)
        else:
            handed = child.switch(result)
    return handed


def wait(awaitable: Awaitable[T]) -> T:
    """From code run by `run`: await `awaitable` on the loop and return its result (or raise its error)."""
    current = greenlet.getcurrent()
    if not isinstance(current, _LoopGreenlet):
        raise RuntimeError("loop_io.wait outside loop_io.run")
    assert current.parent is not None
    return current.parent.switch(awaitable)
