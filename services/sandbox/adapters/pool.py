"""Warm pools of pre-spawned, single-use workers. A worker is handed out once and never comes back.

Refilling happens in the background, one spawn at a time, and starts when the job that took a
worker has ended (`replenish()`), not when it takes it: a spawn (fork + bwrap + interpreter start)
costs tens of milliseconds of CPU, and on a two-core machine running it next to the job it was taken
for would add that to the job's latency. An empty pool never blocks: `take()` then spawns inline."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from services.sandbox.core import observe

logger = logging.getLogger(__name__)

W = TypeVar("W")


class WarmPool(Generic[W]):
    def __init__(
        self,
        name: str,
        size: int,
        spawn: Callable[[], Awaitable[W]],
        discard: Callable[[W], Awaitable[None]],
        alive: Callable[[W], bool],
    ) -> None:
        self.name = name
        self.size = max(0, size)
        self._spawn = spawn
        self._discard = discard
        self._alive = alive
        self._ready: deque[W] = deque()
        self._refill_task: asyncio.Task[None] | None = None
        self._closed = False
        self.changed = asyncio.Event()
        """Set whenever a worker becomes ready (benchmarks and tests wait for a full pool on it)."""
        observe.track_pool(name, lambda: len(self._ready))  # the pool depth gauge, read at scrape time

    @property
    def ready_count(self) -> int:
        return len(self._ready)

    def idle_workers(self) -> list[W]:
        return list(self._ready)

    def start(self) -> None:
        self._kick()

    async def wait_full(self) -> None:
        while len(self._ready) < self.size and not self._closed:
            self.changed.clear()
            self._kick()
            await self.changed.wait()

    async def take(self) -> W:
        """A ready worker, or a freshly spawned one when the pool is empty."""
        try:
            while self._ready:
                worker = self._ready.popleft()
                if self._alive(worker):
                    return worker
                logger.warning("pool %s: a pre-spawned worker died while idle; discarding it", self.name)
                await self._discard(worker)
            return await self._spawn()
        finally:
            if not self._ready:
                self._kick()  # drained: refill now rather than after the job

    def replenish(self) -> None:
        """Called when a job has ended: top the pool up again."""
        self._kick()

    def _kick(self) -> None:
        if self._closed or self.size == 0:
            return
        if self._refill_task is None or self._refill_task.done():
            self._refill_task = asyncio.create_task(self._refill())

    async def _refill(self) -> None:
        while not self._closed and len(self._ready) < self.size:
            try:
                worker = await self._spawn()
            except (OSError, RuntimeError) as exc:
                logger.error("pool %s: could not pre-spawn a worker: %s", self.name, exc)
                return
            if self._closed:
                await self._discard(worker)
                return
            self._ready.append(worker)
            self.changed.set()

    async def close(self) -> None:
        self._closed = True
        self.changed.set()
        if self._refill_task is not None:
            self._refill_task.cancel()
            try:
                await self._refill_task
            except asyncio.CancelledError:
                pass
        while self._ready:
            await self._discard(self._ready.popleft())
