"""The only door to model providers: litellm, offline, imported once per process.

`load_litellm()` sets the offline switches before the import (local cost map, bundled tiktoken files,
no Hugging Face downloads, no telemetry) and is called from the service's start() in a worker thread,
so health reports NOT_SERVING while it loads. `LitellmProvider.stream` normalises litellm's objects into
core ProviderChunks and translates litellm's exceptions into classified ProviderErrors: by exception
type and HTTP status code, never by words in the message.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx

from services.common.logging import redact
from services.llm_gateway.core.context import configure_offline_tokenizers
from services.llm_gateway.core.types import (
    ErrorKind, ProviderCall, ProviderChunk, ProviderError, ThinkingBlockDelta, ToolCallDelta, Usage,
)

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
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
            logging.getLogger(name).setLevel(logging.WARNING)
        _litellm = litellm
        return litellm


def _chain(exc: BaseException) -> list[BaseException]:
    """exc and everything it wraps (cause, context, litellm's original_exception), outermost first."""
    seen: set[int] = set()
    out: list[BaseException] = []
    queue: list[BaseException | None] = [exc]
    while queue:
        item = queue.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        out.append(item)
        queue += [getattr(item, "original_exception", None), item.__cause__, item.__context__]
    return out


def _http_status(chain: list[BaseException]) -> int:
    """The provider's real HTTP status, taken from the innermost HTTP error.

    litellm's own class and `status_code` can come from matching words in the message (a 400 whose
    text says "rate limit" becomes a RateLimitError with 429), so they are not trusted."""
    for item in reversed(chain):
        if isinstance(item, httpx.HTTPStatusError):
            return item.response.status_code
    if any(isinstance(item, (httpx.TransportError, ConnectionError)) for item in chain):
        return 0  # never reached the provider: litellm's 500 on top is synthetic
    for item in reversed(chain):
        response = getattr(item, "response", None)
        if isinstance(response, httpx.Response) and not isinstance(item, httpx.HTTPError):
            status = getattr(item, "status_code", None)
            if isinstance(status, int) and status == response.status_code and response.request is not None:
                return status
    return 0


def _classify(exc: BaseException, litellm: Any) -> tuple[ErrorKind, int]:
    """By exception types (along the wrapped chain) and the HTTP status; never by message text."""
    errors = litellm.exceptions
    chain = _chain(exc)
    if isinstance(exc, errors.MidStreamFallbackError):
        # litellm raises a clean end-of-stream without finish_reason from inside its
        # `except StopAsyncIteration` block: the chain then holds that StopAsyncIteration.
        if any(isinstance(item, (StopAsyncIteration, StopIteration)) for item in chain):
            return ErrorKind.INCOMPLETE_STREAM, 0
    status = _http_status(chain)
    if not status:
        if any(isinstance(item, (httpx.TimeoutException, asyncio.TimeoutError, errors.Timeout)) for item in chain):
            return ErrorKind.TIMEOUT, 0
        if any(isinstance(item, (httpx.TransportError, ConnectionError, errors.APIConnectionError)) for item in chain):
            return ErrorKind.CONNECTION, 0
        if isinstance(exc, errors.MidStreamFallbackError):
            return ErrorKind.CONNECTION, 0
        return ErrorKind.INTERNAL, 0
    if status == 429:
        return ErrorKind.RATE_LIMITED, status
    if status in (408, 504):
        return ErrorKind.TIMEOUT, status
    if status >= 500:
        return ErrorKind.SERVER, status
    if status in (401, 403):
        return ErrorKind.AUTH, status
    if status == 404:
        return ErrorKind.MODEL_NOT_FOUND, status
    if status == 400 and isinstance(exc, errors.ContextWindowExceededError):  # litellm's refinements of a 400
        return ErrorKind.CONTEXT_WINDOW, status
    if status == 400 and isinstance(exc, errors.ContentPolicyViolationError):
        return ErrorKind.CONTENT_POLICY, status
    return ErrorKind.BAD_REQUEST, status


def _retry_after(exc: BaseException) -> float | None:
    for headers in (getattr(exc, "litellm_response_headers", None), getattr(getattr(exc, "response", None), "headers", None)):
        if not headers:
            continue
        value = headers.get("retry-after") if hasattr(headers, "get") else None
        if value:
            try:
                return max(float(value), 0.0)
            except ValueError:
                return None  # an HTTP date: fall back to our own backoff
    return None


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    get = raw.get if isinstance(raw, dict) else lambda k, d=None: getattr(raw, k, d)
    details = get("completion_tokens_details")
    prompt_details = get("prompt_tokens_details")
    dget = (lambda o, k: (o.get(k) if isinstance(o, dict) else getattr(o, k, None)) or 0)
    return Usage(prompt_tokens=int(get("prompt_tokens") or 0), completion_tokens=int(get("completion_tokens") or 0),
                 reasoning_tokens=int(dget(details, "reasoning_tokens")) if details else 0,
                 cached_tokens=int(dget(prompt_details, "cached_tokens")) if prompt_details else 0)


def _tool_deltas(raw_calls: Any) -> list[ToolCallDelta]:
    out = []
    for raw in raw_calls or ():
        function = getattr(raw, "function", None)
        out.append(ToolCallDelta(index=getattr(raw, "index", None), id=getattr(raw, "id", None) or None,
                                 name=getattr(function, "name", None) or None,
                                 arguments=getattr(function, "arguments", None) or None))
    return out


def _thinking_blocks(raw_blocks: Any) -> list[ThinkingBlockDelta]:
    """litellm's `thinking_blocks` (dicts: type thinking/redacted_thinking, thinking, signature, data, index)."""
    out = []
    for raw in raw_blocks or ():
        get = raw.get if isinstance(raw, dict) else lambda k, d=None, r=raw: getattr(r, k, d)
        kind = get("type")
        if kind == "redacted_thinking":
            out.append(ThinkingBlockDelta(index=get("index"), redacted_data=str(get("data") or "")))
        elif kind == "thinking":
            out.append(ThinkingBlockDelta(index=get("index"), thinking=str(get("thinking") or ""),
                                          signature=str(get("signature") or "")))
    return out


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

    async def aclose(self) -> None:
        """Nothing to release: litellm.acompletion manages its own clients."""

    async def stream(self, call: ProviderCall) -> AsyncIterator[ProviderChunk]:
        if self._litellm is None:  # a request that arrives while start() is still importing
            self._litellm = await asyncio.to_thread(load_litellm)
        litellm = self._litellm
        kwargs: dict[str, Any] = dict(call.params)
        kwargs.update(model=call.model, messages=call.messages, stream=call.stream, timeout=call.timeout_s,
                      num_retries=0, max_retries=0, drop_params=True)
        if call.api_base:
            kwargs["api_base"] = call.api_base
        kwargs["api_key"] = call.api_key or "none"
        try:
            response = await litellm.acompletion(**kwargs)
            if not call.stream:
                yield self._from_response(response)
                return
            async for chunk in response:
                choices = chunk.choices
                usage = getattr(chunk, "usage", None)
                if not choices:
                    if usage is not None:
                        yield ProviderChunk(usage=_usage(usage))
                    continue
                choice = choices[0]
                delta = choice.delta
                blocks = getattr(delta, "thinking_blocks", None)
                yield ProviderChunk(content=delta.content or "", reasoning=getattr(delta, "reasoning_content", None) or "",
                                    tool_calls=_tool_deltas(delta.tool_calls) if delta.tool_calls else [],
                                    finish_reason=choice.finish_reason, usage=_usage(usage),
                                    thinking_blocks=_thinking_blocks(blocks) if blocks else [])
        except tuple(litellm.exceptions.LITELLM_EXCEPTION_TYPES) as exc:  # every exception litellm maps to
            raise self._translate(exc, call) from None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # litellm validation of our params
            raise ProviderError(ErrorKind.BAD_REQUEST, _safe_message(exc, call)) from None

    def _from_response(self, response: Any) -> ProviderChunk:
        choice = response.choices[0]
        message = choice.message
        return ProviderChunk(content=message.content or "", reasoning=getattr(message, "reasoning_content", None) or "",
                             tool_calls=[ToolCallDelta(index=i, id=c.id, name=c.function.name, arguments=c.function.arguments)
                                         for i, c in enumerate(message.tool_calls or [])],
                             finish_reason=choice.finish_reason or "stop", usage=_usage(getattr(response, "usage", None)),
                             # whole blocks, one each: position is the index
                             thinking_blocks=[replace(b, index=i) for i, b in
                                              enumerate(_thinking_blocks(getattr(message, "thinking_blocks", None)))])

    def _translate(self, exc: BaseException, call: ProviderCall) -> ProviderError:
        kind, status = _classify(exc, self.litellm)
        return ProviderError(kind, _safe_message(exc, call), status=status, retry_after_s=_retry_after(exc))

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


def _safe_message(exc: BaseException, call: ProviderCall) -> str:
    text = str(getattr(exc, "message", None) or exc)
    if call.api_key and call.api_key != "none":
        text = text.replace(call.api_key, "***")
    text = redact(text).replace("\n", " ")
    return text[:400]
