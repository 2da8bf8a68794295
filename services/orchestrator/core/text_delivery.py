"""TEXT_DELIVERY_CONFIRMED: a run's events with each answer exactly once, for clients that cannot take
text back (see TextDelivery in orchestrator.proto).

A Message attempt's text (deltas, think events) is held back until the attempt is known to stand: its
NodeFinished is durable, or the run ended. Text of an attempt that a takeover superseded (MessageReset) is
dropped with the reset. Everything after the first held event waits with it, so what is sent stays in
seq order and a client that reattaches after the last seq it got misses nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from services.orchestrator.core import events as ev
from services.orchestrator.core.events import Event


class ConfirmedText:
    """Feed events in seq order; `push` returns what may be sent now."""

    def __init__(self) -> None:
        self._held: list[Event] = []
        self._open: set[str] = set()  # components whose held text is not confirmed yet

    def push(self, event: Event) -> list[Event]:
        component = event.data.get("component_id", "") if isinstance(event.data, dict) else ""
        if event.kind == ev.MESSAGE_RESET:
            # Its previous attempt's text is void: drop it (it was never sent) and the reset itself.
            self._held = [e for e in self._held if not (e.kind in ev.TEXT_KINDS and e.data.get("component_id") == component)]
            self._open.discard(component)
        elif event.kind in ev.TEXT_KINDS:
            self._open.add(component)
            self._held.append(event)
        else:
            self._held.append(event)
            if event.kind == ev.NODE_FINISHED:
                self._open.discard(component)
            elif event.terminal:
                self._open.clear()
        if self._open:
            return []
        released, self._held = self._held, []
        return released


async def confirmed(batches: AsyncIterator[list[Event]]) -> AsyncIterator[list[Event]]:
    """The batches with text held back as ConfirmedText decides; empty batches are not yielded."""
    text = ConfirmedText()
    async for batch in batches:
        out: list[Event] = []
        for event in batch:
            out.extend(text.push(event))
        if out:
            yield out
