"""The only door to model providers: litellm, offline, imported once per process.

`load_litellm()` sets the offline switches before the import (local cost map, bundled tiktoken files,
no Hugging Face downloads, no telemetry) and is called from the service's start() in a worker thread,
so health reports NOT_SERVING while it loads. `LitellmProvider.stream` normalises litellm's objects into
core ProviderChunks and translates litellm's exceptions into classified ProviderErrors (both through
`litellm_mapping`, shared with the direct path).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from services.llm_gateway.adapters.litellm_mapping import (
    LONE_SURROGATE, not_utf8, safe_message, to_provider_error, to_thinking_blocks, to_tool_deltas, to_usage,
)
from services.llm_gateway.core.context import configure_offline_tokenizers
from services.llm_gateway.core.types import ErrorKind, ProviderCall, ProviderChunk, ProviderError, ToolCallDelta, Usage

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_litellm: Any = None


def load_litellm() -> Any:
    """Import litellm once, offline. Safe to call from several threads."""
    global _litellm
    with _lock:
        if _litellm is not None:
            return _litellm
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
        os.environ.setdefault("LITELLM_TELEMETRY", "False")
        os.environ.setdefault("LITELLM_MODE", "PRODUCTION")  # no .env loading
        configure_offline_tokenizers()
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.disable_hf_tokenizer_download = True
        litellm.drop_params = True
        litellm.num_retries = 0
        litellm.disable_streaming_logging = True  # no litellm callbacks here; saves ~15% per streamed chunk
        # litellm cuts a stream after 100 identical chunks ("the model is repeating"); here repeated deltas are
        # content, on this path as on the direct one (a row of "----" in a table is not a loop)
        litellm.REPEATED_STREAMING_CHUNK_LIMIT = sys.maxsize
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
            # litellm installs handlers of its own, which print past our redacting formatter: its records go
            # through the root handler instead, like everyone else's
            litellm_logger = logging.getLogger(name)
            litellm_logger.setLevel(logging.WARNING)
            litellm_logger.handlers.clear()
            litellm_logger.propagate = True
        _litellm = litellm
        return litellm


def _provider_finished(response: Any) -> bool:
    """Whether the provider itself sent a finish reason on litellm's stream wrapper (any of the fields litellm
    keeps it in, depending on the provider); True for a wrapper that has none of them."""
    fields = ("received_finish_reason", "intermittent_finish_reason")
    if not any(hasattr(response, name) for name in fields):
        return True
    return (any(getattr(response, name, None) is not None for name in fields)
            or bool(getattr(response, "received_any_finish_reason", False)))


class LitellmProvider:
    """core.ports.Provider over litellm.acompletion."""

    def __init__(self) -> None:
        self._litellm: Any = None
        self._unpriced: set[str] = set()

    @property
    def litellm(self) -> Any:
        if self._litellm is None:
            self._litellm = load_litellm()
        return self._litellm

    async def load(self) -> Any:
        """litellm, imported off the event loop: a request that arrives while start() is still importing waits
        in a worker thread instead of blocking the loop."""
        if self._litellm is None:
            self._litellm = await asyncio.to_thread(load_litellm)
        return self._litellm

    async def aclose(self) -> None:
        """Nothing to release: litellm.acompletion manages its own clients."""

    async def stream(self, call: ProviderCall) -> AsyncIterator[ProviderChunk]:
        litellm = await self.load()
        kwargs: dict[str, Any] = dict(call.params)
        kwargs.update(model=call.model, messages=call.messages, stream=call.stream, timeout=call.timeout_s,
                      num_retries=0, max_retries=0, drop_params=True)
        if call.api_base:
            kwargs["api_base"] = call.api_base
        kwargs["api_key"] = call.api_key or "none"
        response = None
        try:
            response = await litellm.acompletion(**kwargs)
            if not call.stream:
                out = self._from_response(response)
                if not_utf8(out):
                    raise ProviderError(ErrorKind.SERVER, f"the provider sent a malformed answer: {LONE_SURROGATE}")
                yield out
                return
            async for chunk in response:
                choices = chunk.choices
                usage = getattr(chunk, "usage", None)
                if not choices:
                    if usage is not None:
                        yield ProviderChunk(usage=to_usage(usage))
                    continue
                choice = choices[0]
                delta = choice.delta
                blocks = getattr(delta, "thinking_blocks", None)
                out = ProviderChunk(content=delta.content or "", reasoning=getattr(delta, "reasoning_content", None) or "",
                                    tool_calls=to_tool_deltas(delta.tool_calls) if delta.tool_calls else [],
                                    finish_reason=choice.finish_reason, usage=to_usage(usage),
                                    thinking_blocks=to_thinking_blocks(blocks) if blocks else [])
                if not_utf8(out):
                    raise ProviderError(ErrorKind.SERVER, f"the provider sent a malformed stream event: {LONE_SURROGATE}")
                yield out
            # litellm ends a stream that sent nothing at all (an empty 200, or [DONE] alone) with a finish
            # reason of its own, so its chunks cannot tell; its wrapper's fields can. Gemini's (and other
            # non-OpenAI) finish reasons are kept in `intermittent_finish_reason`, not `received_finish_reason`.
            if not _provider_finished(response):
                raise ProviderError(ErrorKind.INCOMPLETE_STREAM, "the stream ended without a finish reason")
        except tuple(litellm.exceptions.LITELLM_EXCEPTION_TYPES) as exc:  # every exception litellm maps to
            raise to_provider_error(exc, call, litellm) from None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            if response is None:  # litellm's validation of our params
                raise ProviderError(ErrorKind.BAD_REQUEST, safe_message(exc, call)) from None
            # litellm tripped over what the provider sent (a field of the wrong type): a malformed event, as on
            # the direct path, and no Python error text for the client
            what = "stream event" if call.stream else "answer"
            raise ProviderError(ErrorKind.SERVER, f"the provider sent a malformed {what} ({type(exc).__name__})") from None

    def _from_response(self, response: Any) -> ProviderChunk:
        if not response.choices:
            raise ProviderError(ErrorKind.SERVER, "the provider's answer has no choices")
        choice = response.choices[0]
        message = choice.message
        return ProviderChunk(content=message.content or "", reasoning=getattr(message, "reasoning_content", None) or "",
                             tool_calls=[ToolCallDelta(index=i, id=c.id, name=c.function.name, arguments=c.function.arguments)
                                         for i, c in enumerate(message.tool_calls or [])],
                             finish_reason=choice.finish_reason or "stop", usage=to_usage(getattr(response, "usage", None)),
                             # whole blocks, one each: position is the index
                             thinking_blocks=[replace(b, index=i) for i, b in
                                              enumerate(to_thinking_blocks(getattr(message, "thinking_blocks", None)))])

    def cost_usd(self, model: str, usage: Usage) -> float:
        if model in self._unpriced:
            return 0.0
        try:
            prompt, completion = self.litellm.cost_per_token(model=model, prompt_tokens=usage.prompt_tokens,
                                                            completion_tokens=usage.completion_tokens)
        except self.litellm.exceptions.ModelNotMappedError:  # custom names are not in the cost map
            # litellm searches its whole map (~1 ms) before saying so; the local map never changes at runtime
            self._unpriced.add(model)
            return 0.0
        return float(prompt) + float(completion)

