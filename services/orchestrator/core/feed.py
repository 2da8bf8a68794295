"""The live event feed of a run executing on this replica: persisted events, without a store round trip.

The journal hands every batch to the feed right after the store accepted it (so the feed holds only
persisted events, with the store's seqs: persist-then-publish is unchanged). A client of this
replica follows the feed instead of a WatchRunEvents stream on the store, which saves the store a
read per commit and this process a decode and re-encode of every event.

The feed covers the seqs this replica committed under its lease (`base` is the seq before the first
of them). A follower that wants earlier events, or that is still reading when the feed is abandoned
(lease lost, shutdown, store refusal), gets nothing more from it and continues from the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from services.orchestrator.core.events import Event


class RunFeed:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.base: int | None = None
        """Seq just before events[0]; None until the first commit of this holder returns."""
        self.finished = False
        """The terminal event is in `events`."""
        self.abandoned = False
        self._changed = asyncio.Event()

    def publish(self, events: Sequence[Event]) -> None:
        """Events just persisted, in seq order (one commit's batch)."""
        if not events or self.abandoned or self.finished:
            return
        if self.base is None:
            self.base = events[0].seq - 1
        self.events.extend(events)
        self.finished = any(e.terminal for e in events)
        self._wake()

    def close(self) -> None:
        """No more events from this replica (the run ended here, or was abandoned)."""
        if not self.finished:
            self.abandoned = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()  # each waiter holds the Event it waited on; the next one is fresh

    def covers(self, after_seq: int) -> bool:
        return self.base is not None and after_seq >= self.base

    async def follow(self, after_seq: int) -> AsyncIterator[list[Event]]:
        """Batches of events with seq > after_seq, up to the terminal one. Ends early (without the
        terminal event) when the feed cannot serve `after_seq` or is abandoned: the caller continues
        from the store after the last seq it got."""
        while self.base is None and not self.abandoned and not self.finished:
            await self._changed.wait()
        if not self.covers(after_seq):
            return
        index = after_seq - self.base  # events[index] has seq after_seq + 1
        while True:
            if index < len(self.events):
                batch = self.events[index:]
                index = len(self.events)
                yield batch
                if batch[-1].terminal:
                    return
                continue
            if self.finished or self.abandoned:
                return
            await self._changed.wait()
