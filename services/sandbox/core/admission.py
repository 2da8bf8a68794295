"""Capped concurrency with a bounded queue: RESOURCE_EXHAUSTED instead of waiting forever."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.common.errors import ResourceExhaustedError


class Admission:
    """At most `max_concurrent` jobs run; at most `max_queue` wait; the next one is refused."""

    def __init__(self, max_concurrent: int, max_queue: int) -> None:
        self._semaphore = asyncio.Semaphore(max_concurrent)
        self._max_concurrent = max_concurrent
        self._max_queue = max_queue
        self.running = 0
        self.waiting = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.running + self.waiting >= self._max_concurrent + self._max_queue:
            raise ResourceExhaustedError(
                f"sandbox is busy: {self.running} jobs running and {self.waiting} queued", retry_after_s=1.0
            )
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._semaphore.release()
