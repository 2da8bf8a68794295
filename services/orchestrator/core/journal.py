"""Persist-then-publish: the run's ordered write queue to the store, with group commit.

Everything a run emits goes through one ordered queue. Live events (NodeStarted, deltas) are
buffered and flushed within `flush_interval_s`; a node completion (journal step + its events) is
committed together with everything queued before it, in one CommitRunStep, and the caller waits for
it. The store assigns `seq` inside that transaction and clients only ever read persisted events, so
a seq is never seen with two different contents.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.common.errors import AbortedError, AgentCanvasError, InvalidArgumentError
from services.orchestrator.core.events import Event
from services.orchestrator.core.ports import RunError, RunStatus, RunStore, Step, Usage

logger = logging.getLogger(__name__)


@dataclass
class _Commit:
    steps: list[Step]
    events: list[Event]
    future: asyncio.Future
    terminal: dict[str, Any] = field(default_factory=dict)


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


class JournalFailed(Exception):
    """The store refused a commit (lease lost, store down); the run must stop writing."""

    def __init__(self, cause: AgentCanvasError):
        super().__init__(str(cause))
        self.cause = cause
        self.lease_lost = isinstance(cause, AbortedError)
        self.refused = isinstance(cause, InvalidArgumentError)
        """The store refused what was written (e.g. an event over its size limit), not the writer: the
        same commit fails on every replica that takes the run over, so the run must end here."""


class Journal:
    def __init__(
        self,
        store: RunStore,
        run_id: str,
        lease_token: int,
        *,
        flush_interval_s: float = 0.02,
        on_cancel_requested: Callable[[], None] | None = None,
        on_persisted: Callable[[list[Event]], None] | None = None,
    ):
        self._store = store
        self._run_id = run_id
        self.lease_token = lease_token
        self._interval = flush_interval_s
        self._on_cancel = on_cancel_requested
        self._on_persisted = on_persisted  # the run's local feed: events with their seqs, once stored
        self._queue: list[Event | _Commit] = []
        self._flusher: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.failure: JournalFailed | None = None
        self.last_seq = 0
        self._leading = False

    def publish(self, event: Event) -> None:
        """Queue a live event; it is persisted within flush_interval_s (or with the next commit)."""
        if self.failure:
            return
        self._queue.append(event)
        if self._timer is None and self._flusher is None and not self._leading:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._on_timer)

    async def commit(self, steps: list[Step], events: list[Event], **terminal: Any) -> None:
        """Persist steps and events (after everything queued before them) and wait for it."""
        if self.failure:
            raise self.failure
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Commit(steps, events, future, terminal))
        if self._flusher is None and not self._leading:
            # Nobody is writing: this caller leads and writes the queue itself (no extra task). A
            # pending flush timer is left alone; it finds the queue empty (cheaper than cancelling).
            self._leading = True
            try:
                await self._drain()
            finally:
                self._leading = False
            if self._queue and self._flusher is None:
                self._kick()
        else:
            self._kick()
        await future

    def stage(self, steps: list[Step], events: list[Event], **terminal: Any) -> None:
        """Queue steps and events without waiting: they are written in order with the next commit (or
        within flush_interval_s). For a step that nothing waits on, e.g. the run's last one, which the
        terminal commit right after carries in the same store transaction. `terminal` (e.g.
        `status=RunStatus.RUNNING` with the started marker) goes with the commit that writes them; a
        later item of the same store commit overrides it (a final status wins over RUNNING)."""
        if self.failure:
            return
        future = asyncio.get_running_loop().create_future()
        future.add_done_callback(_consume)  # a refusal is raised by the next commit instead
        self._queue.append(_Commit(steps, events, future, terminal))
        if self._timer is None and self._flusher is None and not self._leading:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._on_timer)

    def abandon(self) -> None:
        """Stop writing: drop queued events and cancel timers (the run is being abandoned)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flusher is not None:
            self._flusher.cancel()
        self._queue = []

    async def flush(self) -> None:
        await self.commit([], [])

    def reopen(self) -> None:
        """After a refused commit (JournalFailed.refused) the lease still holds: accept writes again so
        the run's end can be written. What the store refused stays dropped."""
        if self.failure is not None and self.failure.refused:
            self.failure = None

    def _on_timer(self) -> None:
        self._timer = None
        if self._queue:
            self._kick()

    def _kick(self) -> None:
        if self._flusher is None and not self._leading:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_all())

    async def _flush_all(self) -> None:
        try:
            await self._drain()
        except Exception:  # nobody awaits this task: say it here, not at garbage collection
            logger.exception("run %s: background journal flush failed", self._run_id)
        finally:
            self._flusher = None
            if self._queue and not self.failure:
                self._kick()

    async def _drain(self) -> None:
        """Write everything queued, in order, batch by batch; fail pending commits on a refusal."""
        batch: list[Event | _Commit] = []
        try:
            while self._queue and not self.failure:
                batch, self._queue = self._queue, []
                await self._write(batch)
                if self.failure:
                    break
                for item in batch:
                    if isinstance(item, _Commit) and not item.future.done():
                        item.future.set_result(None)
                batch = []
        finally:
            if self.failure or batch:
                pending = [i for i in (*batch, *self._queue) if isinstance(i, _Commit) and not i.future.done()]
                error = self.failure or JournalFailed(AbortedError("journal flush was interrupted"))
                for item in pending:
                    item.future.set_exception(error)
                    # A cancelled leader never awaits its own future; mark the error as seen.
                    item.future.add_done_callback(_consume)
                self._queue = []

    async def _write(self, batch: list[Event | _Commit]) -> None:
        steps: list[Step] = []
        events: list[Event] = []
        terminal: dict[str, Any] = {}
        for item in batch:
            if isinstance(item, Event):
                events.append(item)
            else:
                steps.extend(item.steps)
                events.extend(item.events)
                terminal.update(item.terminal)
        if not steps and not events and not terminal:
            return
        try:
            result = await self._store.commit(
                self._run_id,
                self.lease_token,
                steps,
                events,
                status=terminal.get("status", RunStatus.UNSPECIFIED),
                outputs=terminal.get("outputs"),
                error=terminal.get("error"),
                usage=terminal.get("usage"),
            )
        except AgentCanvasError as exc:
            logger.warning("run %s: commit refused: %s", self._run_id, exc.message)
            self.failure = JournalFailed(exc)
            return
        self.last_seq = result.last_seq
        if events and self._on_persisted is not None:
            self._on_persisted(events)
        if result.cancel_requested and self._on_cancel:
            self._on_cancel()


__all__ = ["Journal", "JournalFailed", "RunError", "Usage"]
