"""litellm's results and exceptions as core types, shared by both litellm adapters.

`LitellmProvider` (litellm.acompletion) hands over litellm's objects, `LitellmDirectProvider` the
provider's parsed JSON (dicts) of the same OpenAI shapes: every reader here takes either. Exceptions
become classified ProviderErrors by exception type and HTTP status code, never by words in the message,
so retries are classified the same on both paths.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import httpx

from services.common.logging import redact
from services.llm_gateway.core.types import (
    ErrorKind, ProviderCall, ProviderChunk, ProviderError, ThinkingBlockDelta, ToolCallDelta, Usage,
)


def _field(raw: Any, key: str) -> Any:
    """raw[key] of a dict (the direct path's JSON), raw.key of an object (litellm's); None when absent."""
    if isinstance(raw, dict):
        return raw.get(key)
    return getattr(raw, key, None)


MAX_TOKENS_FIELD = 2**31 - 1
"""Largest token count taken from one provider usage record (a provider's garbage must not overflow int64
sums or the metrics)."""


def _count(value: Any) -> int:
    """A provider's token count as an int in [0, MAX_TOKENS_FIELD]; anything not a finite number is 0."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return min(max(int(value), 0), MAX_TOKENS_FIELD)


def to_usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    details = _field(raw, "completion_tokens_details")
    prompt_details = _field(raw, "prompt_tokens_details")
    return Usage(prompt_tokens=_count(_field(raw, "prompt_tokens")),
                 completion_tokens=_count(_field(raw, "completion_tokens")),
                 reasoning_tokens=_count(_field(details, "reasoning_tokens")) if details else 0,
                 # OpenAI's prompt_tokens_details; Moonshot puts cached_tokens at the top level
                 cached_tokens=_count(_field(prompt_details, "cached_tokens") if prompt_details else _field(raw, "cached_tokens")))


def _text(value: Any) -> str | None:
    """A string field of a tool call delta: None when empty or absent; a number becomes its text."""
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def _arguments(value: Any) -> str | None:
    """An arguments fragment; a provider that sends the arguments as a JSON object gets them re-encoded."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def to_tool_deltas(raw_calls: Any) -> list[ToolCallDelta]:
    """The streamed `tool_calls` of one delta; empty names, ids and argument fragments become None. Deltas
    that are not objects are skipped; non-string names and ids become strings, a non-integer index None."""
    out = []
    if not isinstance(raw_calls, (list, tuple)):
        return out
    for raw in raw_calls:
        if raw is None or isinstance(raw, (str, int, float, list)):
            continue
        function = _field(raw, "function")
        if function is not None and isinstance(function, (str, int, float, list)):
            function = None
        index = _field(raw, "index")
        out.append(ToolCallDelta(index=index if isinstance(index, int) and not isinstance(index, bool) else None,
                                 id=_text(_field(raw, "id")), name=_text(_field(function, "name")),
                                 arguments=_arguments(_field(function, "arguments"))))
    return out


def to_thinking_blocks(raw_blocks: Any) -> list[ThinkingBlockDelta]:
    """litellm's `thinking_blocks` (type thinking/redacted_thinking, thinking, signature, data, index)."""
    out = []
    for raw in raw_blocks or ():
        kind = _field(raw, "type")
        if kind == "redacted_thinking":
            out.append(ThinkingBlockDelta(index=_field(raw, "index"), redacted_data=str(_field(raw, "data") or "")))
        elif kind == "thinking":
            out.append(ThinkingBlockDelta(index=_field(raw, "index"), thinking=str(_field(raw, "thinking") or ""),
                                          signature=str(_field(raw, "signature") or "")))
    return out


LONE_SURROGATE = "a lone surrogate escape (\\ud800-\\udfff), not UTF-8"
"""Why a provider event or answer holding one is malformed (see not_utf8)."""


def not_utf8(chunk: ProviderChunk) -> bool:
    """Whether a text of the chunk holds a lone surrogate (a JSON escape such as "\\ud800" without its pair): no
    UTF-8 string, so gRPC cannot send it. Such an event is malformed, like one with invalid UTF-8 bytes."""
    texts = [chunk.content, chunk.reasoning]
    for call in chunk.tool_calls:
        texts += (call.id or "", call.name or "", call.arguments or "")
    for block in chunk.thinking_blocks:
        texts += (block.thinking, block.signature, block.redacted_data)
    try:
        "".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


PROGRAMMING_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, ImportError)
"""Python errors raised inside litellm's own code (a keyword it does not take, a field it cannot read, a provider
module it cannot import). litellm wraps unknown exceptions in APIConnectionError, but no retry can fix them: they
are INTERNAL."""
_PROVIDER_BYTES = (json.JSONDecodeError, UnicodeError)
"""ValueErrors that describe what the provider sent (not JSON, not UTF-8), not a bug: left to the other rules."""


def _programming_error(chain: list[BaseException]) -> BaseException | None:
    """The root cause when it is a Python programming error inside litellm and the provider's HTTP status plays no
    part (litellm reports a provider's unreadable answer with one, and that stays the provider's fault)."""
    if _http_status(chain):
        return None
    for item in reversed(chain):  # innermost first
        if isinstance(item, _PROVIDER_BYTES) or isinstance(item, (httpx.HTTPError, ConnectionError, asyncio.TimeoutError)):
            return None
        if isinstance(item, PROGRAMMING_ERRORS) and type(item).__module__ == "builtins":
            return item
    return None


def to_provider_error(exc: BaseException, call: ProviderCall, litellm: Any) -> ProviderError:
    """A litellm exception (or one it wraps) as a classified ProviderError with a redacted message."""
    root = _programming_error(_chain(exc))
    if root is not None:
        # the real cause, not litellm's "APIConnectionError" wrapper (whose text may be cut at its traceback)
        return ProviderError(ErrorKind.INTERNAL, "litellm failed: " + safe_message(_Named(root), call))
    kind, status = _classify(exc, litellm)
    return ProviderError(kind, safe_message(exc, call), status=status, retry_after_s=_retry_after(exc))


class _Named(Exception):
    """An exception's text prefixed with its type name (for safe_message)."""

    def __init__(self, exc: BaseException):
        super().__init__(f"{type(exc).__name__}: {exc}")


def safe_message(exc: BaseException, call: ProviderCall) -> str:
    """The exception's text without the call's API key or other secrets, on one line, at most 400 chars."""
    text = str(getattr(exc, "message", None) or exc)
    cut = text.find("Traceback (most recent call last)")  # litellm puts whole tracebacks into some messages
    if cut >= 0:
        text = text[:cut].rstrip() or type(exc).__name__
    if call.api_key and call.api_key != "none":
        text = text.replace(call.api_key, "***")
    text = redact(text).replace("\n", " ")
    return text[:400].encode("utf-8", "replace").decode("utf-8")  # a lone surrogate from a provider's JSON: '?'


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
