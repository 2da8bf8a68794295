"""Coalesce a stream of events into batches of what is ready, without ever waiting to fill a batch.

grpc-python pays ~50-60 us per streamed message (serialisation call, C-core batch op, completion
through the event loop) - more than the gateway's whole per-event pipeline. ChatStreamBatched sends
one message per batch instead: a pump task drains the event source into a list while the sender is
busy writing the previous batch; the sender then takes everything that arrived meanwhile.

Latency rule: when the sender is idle and an event arrives, the pump hands the sender control at
once (one loop turn), so the first event of a batch - in particular the first token - goes out
alone and immediately instead of waiting behind later events of the same network read. Batches
therefore only grow while a write is in flight, i.e. exactly when events would otherwise queue
behind grpc. `max_batch` bounds a batch: a full batch makes the pump wait until the sender took it
(backpressure, so a slow client pins at most one batch besides the one being written).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")


async def coalesce(source: AsyncIterator[T], max_batch: int = 512) -> AsyncIterator[list[T]]:
    loop = asyncio.get_running_loop()
    pending: list[T] = []
    waiter: asyncio.Future[None] | None = None
    drained: asyncio.Future[None] | None = None
    done = False
    error: BaseException | None = None

    def wake() -> bool:
        nonlocal waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
            waiter = None
            return True
        return False

    async def pump() -> None:
        nonlocal done, error, drained
        try:
            async for item in source:
                pending.append(item)
                if wake():  # the sender was idle: let it send this event now
                    await asyncio.sleep(0)
                elif len(pending) >= max_batch:  # backpressure: wait until the sender took this batch
                    drained = loop.create_future()
                    await drained
        except Exception as exc:  # re-raised in the sender, where grpc maps it
            error = exc
        finally:
            done = True
            wake()
            # `async for` does not close its iterator when cut short (cancelled between items): close
            # it here, so the provider's HTTP stream is abandoned now and not at garbage collection.
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()

    task = loop.create_task(pump())
    try:
        while True:
            if not pending and not done:
                waiter = loop.create_future()
                await waiter
            if pending:
                batch = pending[:]
                del pending[:]
                if drained is not None and not drained.done():
                    drained.set_result(None)
                yield batch
                continue
            if done:
                if error is not None:
                    raise error
                return
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
