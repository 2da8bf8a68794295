"""An explicit stream channel from a producer (LLM) to its consumers (Message), §7 item 17.

The producer appends typed chunks; any number of consumers iterate from the start (replay), and the
full text is materialised once. Nothing lazy is stored in outputs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator


class TextStream:
    def __init__(self, producer_id: str):
        self.producer_id = producer_id
        self._chunks: list[tuple[str, str]] = []
        self._changed = asyncio.Event()
        self._closed = False
        self.error: str = ""
        self.downloads: list[dict] = []
        """Files the producer made (CodeExec artifacts of an Agent), set before close; the Message
        puts them in MessageEnd.downloads."""

    def push(self, kind: str, text: str = "") -> None:
        """kind: text, think_start, think_delta, think_end."""
        self._chunks.append((kind, text))
        self._changed.set()

    def close(self, error: str = "") -> None:
        self.error = error
        self._closed = True
        self._changed.set()

    @property
    def closed(self) -> bool:
        return self._closed

    async def chunks(self) -> AsyncIterator[tuple[str, str]]:
        index = 0
        while True:
            while index < len(self._chunks):
                yield self._chunks[index]
                index += 1
            if self._closed:
                return
            self._changed.clear()
            if index < len(self._chunks) or self._closed:
                continue
            await self._changed.wait()

    def text_so_far(self) -> str:
        return "".join(t for k, t in self._chunks if k == "text")

    async def text(self) -> str:
        async for _ in self.chunks():
            pass
        return self.text_so_far()
