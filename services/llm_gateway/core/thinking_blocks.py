"""Signed reasoning blocks: assembled from streamed pieces, and echoed back where the provider requires it.

Anthropic signs each `thinking` block (and sends `redacted_thinking` blocks encrypted). With extended
thinking and tools, the assistant turn that made the tool calls must come back with its blocks
unchanged, or the API rejects the request; everywhere else they are only cost (and other providers
do not accept them), so history hygiene strips them. litellm streams a block as text pieces and a
final signature piece sharing one `index`; a redacted block arrives whole.
"""

from __future__ import annotations

from typing import Any

from services.llm_gateway.core.types import ThinkingBlock, ThinkingBlockDelta


class ThinkingBlockAssembler:
    def __init__(self) -> None:
        self._order: list[int] = []
        self._parts: dict[int, dict[str, Any]] = {}
        self._next_anonymous = -1

    def feed(self, delta: ThinkingBlockDelta) -> None:
        index = delta.index
        if index is None:  # no index: a piece continues the last block unless that one is closed (signed)
            last = self._parts.get(self._order[-1]) if self._order else None
            if last is not None and not last["signature"] and not last["redacted"]:
                index = self._order[-1]
            else:
                index = self._next_anonymous
                self._next_anonymous -= 1
        part = self._parts.get(index)
        if part is None:
            part = self._parts[index] = {"text": [], "signature": "", "redacted": ""}
            self._order.append(index)
        if delta.thinking:
            part["text"].append(delta.thinking)
        if delta.signature:
            part["signature"] = delta.signature
        if delta.redacted_data:
            part["redacted"] = delta.redacted_data

    def blocks(self) -> list[ThinkingBlock]:
        """Blocks the provider can verify: signed thinking and redacted blocks, in stream order."""
        out = []
        for index in self._order:
            part = self._parts[index]
            if part["redacted"]:
                out.append(ThinkingBlock(redacted_data=part["redacted"]))
            elif part["signature"]:
                out.append(ThinkingBlock(thinking="".join(part["text"]), signature=part["signature"]))
        return out


def to_provider(blocks: list[ThinkingBlock]) -> list[dict[str, str]]:
    """litellm's `thinking_blocks` message field (it renders them as Anthropic content blocks)."""
    return [{"type": "redacted_thinking", "data": b.redacted_data} if b.redacted
            else {"type": "thinking", "thinking": b.thinking, "signature": b.signature} for b in blocks]
