"""A real LlmClient implementation for tests: answers come from a script, not from a model.

Script entries are matched by model id (the DSL's llm_id) in call order; each entry is a list of
ChatChunk-like tuples: ("text", "Hi"), ("think", "hmm"), ("error", "boom", retryable), ("gate", Event).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

from services.orchestrator.core.ports import ChatChunk, ChatRequest, Usage


class ScriptedLlm:
    def __init__(self, script: dict[str, list[list[tuple[Any, ...]]]] | None = None, default: str = "OK"):
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.default = default
        self.requests: list[ChatRequest] = []
        self.calls: dict[str, int] = defaultdict(int)

    async def chat_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        self.requests.append(request)
        index = self.calls[request.model]
        self.calls[request.model] += 1
        entries = self.script.get(request.model)
        turn = entries[min(index, len(entries) - 1)] if entries else [("text", self.default)]
        thinking = False
        for item in turn:
            kind = item[0]
            if kind == "gate":
                await item[1].wait()
                continue
            if kind == "think":
                if not thinking:
                    thinking = True
                    yield ChatChunk("think_start")
                yield ChatChunk("think_delta", item[1])
                continue
            if thinking:
                thinking = False
                yield ChatChunk("think_end")
            if kind == "text":
                yield ChatChunk("text", item[1])
                await asyncio.sleep(0)
            elif kind == "error":
                yield ChatChunk("finish", error=item[1], retryable=bool(item[2]) if len(item) > 2 else False)
                return
        if thinking:
            yield ChatChunk("think_end")
        yield ChatChunk("usage", usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, calls=1))
        yield ChatChunk("finish")
