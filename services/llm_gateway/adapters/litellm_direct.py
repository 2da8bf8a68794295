"""The fast path to OpenAI-compatible providers: litellm's provider layer over one pooled HTTP client.

`litellm.acompletion` costs ~5-6 ms per call before the first byte leaves (logging objects, callback
and cost hooks, the openai SDK client) and ~0.3 ms per streamed chunk (SDK objects, litellm's chunk
wrapper). For providers whose wire format *is* the OpenAI chat format (openai and OpenAI-compatible
endpoints, hosted_vllm, deepseek, dashscope, moonshot) this adapter keeps litellm for everything
provider-specific and drops only that per-call machinery:

* litellm resolves the provider (`get_llm_provider`) and its chat config class
  (`ProviderConfigManager.get_provider_chat_config`);
* litellm maps the OpenAI-style params (`get_optional_params`, drop_params on) and the config builds
  headers (`validate_environment`), URL (`get_complete_url`) and body (`transform_request` +
  `transform_extra_body`), in the order litellm's own HTTP handler does;
* the request goes over ONE long-lived `httpx.AsyncClient` (connection pool kept across calls);
* the SSE stream is split on the raw bytes and each event is checked with litellm's streaming
  handler (error payloads and `finish_reason: abort` go through its `chunk_parser`, which raises
  litellm's typed error; `reasoning` is renamed by its dict-level mapper) - plain deltas are read as
  dicts instead of building a pydantic ModelResponseStream per chunk (~12 us each);
* HTTP errors become litellm exceptions via the config's `get_error_class` and litellm's
  `exception_type`, so retry classification (`litellm_mapping.to_provider_error`) is the same on both paths;
* the pooled client belongs to the event loop that opened its connections: calls from another loop get
  a new client and the old one is closed (on its own loop while that loop still runs).

Everything else (other providers, non-streamed calls, configs that fake streaming) goes through
`LitellmProvider` (full `litellm.acompletion`). Config: `gateway.litellm_direct` (default true).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from services.llm_gateway.adapters.litellm_mapping import (
    LONE_SURROGATE, not_utf8, safe_message, to_provider_error, to_tool_deltas, to_usage,
)
from services.llm_gateway.adapters.litellm_provider import LitellmProvider
from services.llm_gateway.core.structured import MAX_JSON_DEPTH, json_depth
from services.llm_gateway.core.types import ErrorKind, ProviderCall, ProviderChunk, ProviderError, Usage

logger = logging.getLogger(__name__)

DIRECT_PROVIDERS = frozenset({"openai", "hosted_vllm", "deepseek", "dashscope", "moonshot"})
_DATA = b"data:"
_DONE = b"[DONE]"


@dataclass
class _Route:
    """What litellm resolved for one (model, api_base): computed once, reused by every call."""

    model: str
    provider: str
    api_base: str
    config: Any
    handler: Any
    """litellm's streaming handler of this config (its chunk_parser and dict-level mappers)."""


class _StreamEnded(Exception):
    """[DONE] (or the end of the body) arrived without any finish_reason."""


class _Malformed(Exception):
    """A stream event that is not an OpenAI chat chunk (not JSON, not an object, wrong shapes)."""


class LitellmDirectProvider:
    """core.ports.Provider: direct path where litellm's provider layer allows it, else `fallback`."""

    def __init__(self, fallback: LitellmProvider | None = None, *, max_connections: int = 256) -> None:
        self.fallback = fallback or LitellmProvider()
        self._max_connections = max_connections
        self._routes: dict[tuple[str, str | None], _Route | None] = {}
        self._pool: tuple[httpx.AsyncClient, asyncio.AbstractEventLoop] | None = None
        """The pooled client and the event loop its connections belong to."""
        self._litellm: Any = None
        self._optional_cache: dict[tuple[str, str, str | None, str], str] = {}
        self.direct_calls = 0
        """Calls served by the direct path (tests and the benchmark check which path ran)."""

    def cost_usd(self, model: str, usage: Usage) -> float:
        return self.fallback.cost_usd(model, usage)

    @property
    def pooled_client(self) -> httpx.AsyncClient | None:
        """The client of the loop that made the last direct call; None before the first and after aclose()
        (tests check that a client left behind by another loop is closed)."""
        return self._pool[0] if self._pool else None

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await _close(*pool)

    # -- routing ---------------------------------------------------------------------------------
    def _route(self, call: ProviderCall) -> _Route | None:
        key = (call.model, call.api_base)
        if key in self._routes:
            return self._routes[key]
        route = None
        try:
            route = self._resolve(call)
        except Exception as exc:  # anything litellm cannot resolve here is left to acompletion's own errors
            logger.debug("direct path unavailable for %s: %s", call.model, type(exc).__name__)
        self._routes[key] = route
        return route

    def _resolve(self, call: ProviderCall) -> _Route | None:
        litellm = self._litellm
        from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager

        model, provider, _, api_base = litellm.get_llm_provider(model=call.model, api_base=call.api_base)
        if provider not in DIRECT_PROVIDERS:
            return None
        config = ProviderConfigManager.get_provider_chat_config(model=model, provider=LlmProviders(provider))
        if not isinstance(config, OpenAIGPTConfig) or config.should_fake_stream(model=model, stream=True,
                                                                                 custom_llm_provider=provider):
            return None
        api_base = api_base or call.api_base or (OpenAIGPTConfig.get_api_base() if provider == "openai" else None)
        if not api_base:
            return None
        handler = config.get_model_response_iterator(streaming_response=iter(()), sync_stream=False, json_mode=False)
        if not hasattr(handler, "chunk_parser"):
            return None
        return _Route(model=model, provider=provider, api_base=api_base, config=config, handler=handler)

    async def _http(self) -> httpx.AsyncClient:
        # One client per event loop: pooled connections belong to the loop that opened them.
        loop = asyncio.get_running_loop()
        pool = self._pool
        if pool is not None and pool[1] is loop:
            return pool[0]
        limits = httpx.Limits(max_connections=self._max_connections, max_keepalive_connections=self._max_connections)
        client = httpx.AsyncClient(limits=limits, timeout=None)
        self._pool = (client, loop)  # before the await below: concurrent calls on this loop share this client
        if pool is not None:
            await _close(*pool)
        return client

    # -- the call --------------------------------------------------------------------------------
    async def stream(self, call: ProviderCall) -> AsyncIterator[ProviderChunk]:
        if self._litellm is None:
            self._litellm = await self.fallback.load()
        route = self._route(call) if call.stream else None
        request = None
        if route is not None:
            try:
                request = self._request(call, route)
            except tuple(self._litellm.exceptions.LITELLM_EXCEPTION_TYPES) as exc:
                raise to_provider_error(exc, call, self._litellm) from None
            except (ValueError, TypeError, KeyError, AttributeError) as exc:  # litellm's validation of our params
                raise ProviderError(ErrorKind.BAD_REQUEST, safe_message(exc, call)) from None
        if request is None:  # not an OpenAI-format stream, or litellm would bridge it to the Responses API
            async for chunk in self.fallback.stream(call):
                yield chunk
            return
        self.direct_calls += 1
        try:
            async for chunk in self._direct(call, route, request):
                yield chunk
        except ProviderError:
            raise
        except _StreamEnded:
            raise ProviderError(ErrorKind.INCOMPLETE_STREAM, "the stream ended without a finish reason") from None
        except _Malformed as exc:  # the provider's fault, as litellm's own stream reader classifies it (5xx)
            raise ProviderError(ErrorKind.SERVER, f"the provider sent a malformed stream event: {exc}") from None
        except Exception as exc:
            mapped = self._litellm_exception(exc, route)
            raise to_provider_error(mapped, call, self._litellm) from None

    def _litellm_exception(self, exc: Exception, route: _Route) -> BaseException:
        """litellm's own mapping (exception_type) from a provider/httpx error to its exception classes."""
        from litellm.litellm_core_utils.exception_mapping_utils import exception_type

        if isinstance(exc, tuple(self._litellm.exceptions.LITELLM_EXCEPTION_TYPES)):
            return exc
        try:
            exception_type(model=route.model, original_exception=exc, custom_llm_provider=route.provider)
        except Exception as mapped:  # exception_type raises the mapped exception
            if mapped.__context__ is None and mapped is not exc:
                mapped.__context__ = exc
            return mapped
        return exc

    def _request(self, call: ProviderCall, route: _Route) -> tuple[str, dict[str, str], bytes] | None:
        """URL, headers and body, built by litellm's provider config the way its HTTP handler does; None
        when litellm would serve this call through its Responses-API bridge (o1-pro, gpt-5-pro, ...)."""
        optional = self._optional_params(call, route)
        if optional is None:
            return None
        optional.pop("json_mode", None)
        extra_body = optional.pop("extra_body", None)
        litellm_params = {"api_base": route.api_base, "custom_llm_provider": route.provider}
        api_key = call.api_key or "none"
        config = route.config
        # completion()'s first step: jsonify tool calls, drop None fields, validate user content. It
        # mutates the dicts, and a retry reuses this call: work on copies.
        from litellm.utils import validate_and_fix_openai_messages

        messages = validate_and_fix_openai_messages(messages=[dict(m) for m in call.messages])
        headers = config.validate_environment(headers={}, model=route.model, messages=messages,
                                              optional_params=optional, litellm_params=litellm_params,
                                              api_key=api_key, api_base=route.api_base)
        url = config.get_complete_url(api_base=route.api_base, api_key=api_key, model=route.model,
                                      optional_params=optional, litellm_params=litellm_params, stream=True)
        data = config.transform_request(route.model, messages, optional, litellm_params, headers)
        if extra_body:
            data = {**data, **config.transform_extra_body(extra_body=extra_body, request=data, model=route.model,
                                                          litellm_params=litellm_params)}
        return url, {str(k): str(v) for k, v in headers.items()}, json.dumps(data).encode()

    def _optional_params(self, call: ProviderCall, route: _Route) -> dict[str, Any] | None:
        """litellm.get_optional_params (None when litellm's Responses-API bridge check says "responses"),
        memoised: ~170 us per call together, and a pure function of (model, provider, api_base, params) - chat
        `messages` are excluded from the mapping (pre_process_non_default_params) and the litellm globals
        both read are fixed at load. Stored as JSON so every call gets its own copy (transform_request
        mutates it)."""
        try:
            key: tuple[str, str, str | None, str] | None = (route.model, route.provider, call.api_base,
                                                            json.dumps(call.params, sort_keys=True))
        except (TypeError, ValueError):  # not JSON (never from the core, but then no memo)
            key = None
        cached = self._optional_cache.get(key) if key is not None else None
        if cached is not None:
            return json.loads(cached) if cached else None
        optional = None if self._bridged(call, route) else self._litellm.get_optional_params(
            model=route.model, custom_llm_provider=route.provider, stream=True, drop_params=True, messages=call.messages,
            **_validated(call.params, route.model))
        if key is not None:
            try:
                frozen = json.dumps(optional) if optional is not None else ""
            except (TypeError, ValueError):
                return optional
            if len(self._optional_cache) >= 1024:
                self._optional_cache.clear()
            self._optional_cache[key] = frozen
        return optional

    def _bridged(self, call: ProviderCall, route: _Route) -> bool:
        """litellm's own check (both passes, as completion() runs them) for chat calls it sends to the Responses API."""
        from litellm.responses.bridge_check import bridge_reasoning_effort, responses_api_bridge_check

        info, _ = responses_api_bridge_check(model=route.model, custom_llm_provider=route.provider, api_base=call.api_base)
        if info.get("mode") == "responses":
            return True
        params = call.params
        info, _ = responses_api_bridge_check(
            model=route.model, custom_llm_provider=route.provider, tools=params.get("tools"), api_base=call.api_base,
            reasoning_effort=bridge_reasoning_effort(params.get("reasoning_effort"), params.get("extra_body")))
        return info.get("mode") == "responses"

    async def _direct(self, call: ProviderCall, route: _Route, request: tuple[str, dict[str, str], bytes]
                      ) -> AsyncIterator[ProviderChunk]:
        url, headers, body = request
        handler = route.handler
        loads = json.loads
        finished = False
        client = await self._http()
        async with client.stream("POST", url, content=body, headers=headers, timeout=call.timeout_s) as response:
            if response.status_code >= 400:
                await response.aread()
                try:
                    response.raise_for_status()
                except httpx.HTTPStatusError:  # becomes the mapped error's context: the real status for _classify
                    raise route.config.get_error_class(response.text, response.status_code, response.headers)
            pending = b""
            done = False
            async for raw in response.aiter_bytes():
                if done:
                    continue  # read to the end of the body: only a fully read response returns to the pool
                # SSE framing on the raw bytes: split once per network read, not per line through a decoder.
                lines = (pending + raw).split(b"\n") if pending else raw.split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if not line.startswith(_DATA):
                        continue  # blank separators, "event:", ": keep-alive" comments
                    payload = line[5:].strip()
                    if payload == _DONE:
                        done = True
                        break
                    chunk = _parse(_decode(payload, loads), handler)
                    if chunk is None:
                        continue
                    if (b"\\ud" in payload or b"\\uD" in payload) and not_utf8(chunk):
                        raise _Malformed(LONE_SURROGATE)
                    if chunk.finish_reason:
                        finished = True
                    yield chunk
            if not finished:
                raise _StreamEnded()


async def _close(client: httpx.AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
    """Close `client`, whose pooled connections are transports of `loop`, without waiting on another loop."""
    if loop is not asyncio.get_running_loop() and loop.is_running():
        # its loop runs in another thread: the close is handed over, not awaited (that loop may stop first)
        asyncio.run_coroutine_threadsafe(client.aclose(), loop)
    elif loop.is_closed():
        # nothing runs there again: closing from here marks the client closed and empties its pool, but its
        # transports cannot finish closing (asyncio raises "Event loop is closed"); their sockets go with them
        with contextlib.suppress(RuntimeError):
            await client.aclose()
    else:
        # this loop, or a stopped one (its transports then finish closing when it runs again)
        await client.aclose()


def _validated(params: dict[str, Any], model: str) -> dict[str, Any]:
    """completion()'s validation of tools, tool_choice and stop, before its parameter mapping."""
    from litellm.utils import (
        validate_and_fix_openai_tools, validate_chat_completion_tool_choice, validate_openai_optional_params,
    )

    out = dict(params)
    if "tools" in out:
        out["tools"] = validate_and_fix_openai_tools(tools=out["tools"])
    if "tool_choice" in out:
        out["tool_choice"] = validate_chat_completion_tool_choice(tool_choice=out["tool_choice"], model=model)
    if "stop" in out:
        out["stop"] = validate_openai_optional_params(stop=out["stop"])
    return out


def _decode(payload: bytes, loads: Any) -> dict[str, Any]:
    """One SSE data payload as a JSON object; _Malformed otherwise (bad JSON or UTF-8, nesting too deep for the
    recursive decoder, not an object)."""
    if (payload.count(b"[") + payload.count(b"{") > MAX_JSON_DEPTH) and json_depth(payload) > MAX_JSON_DEPTH:
        raise _Malformed(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        raw = loads(payload)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise _Malformed(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(raw, dict):
        raise _Malformed(f"a JSON {type(raw).__name__}, not an object")
    return raw


def _parse(raw: dict[str, Any], handler: Any) -> ProviderChunk | None:
    """One SSE event as a ProviderChunk, with litellm's checks of that event."""
    choices = raw.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        if "error" not in raw:
            raise _Malformed("`choices` is not a list of objects")
        choices = ()
    if "error" in raw or any(c.get("finish_reason") == "abort" for c in choices):
        handler.chunk_parser(raw)  # litellm raises its typed error for these events
    usage = raw.get("usage")
    if not choices:
        return ProviderChunk(usage=to_usage(usage)) if usage else None
    for item in choices:
        delta = item.get("delta")
        if not delta:  # "delta": null or absent is an empty delta (litellm's mapper below needs an object)
            item["delta"] = {}
        elif not isinstance(delta, dict):
            raise _Malformed("`delta` is not an object")
    handler._map_reasoning_to_reasoning_content(choices)  # vLLM/GLM `reasoning` -> reasoning_content
    choice = choices[0]
    if not usage and isinstance(choice.get("usage"), dict):
        usage = choice["usage"]  # Moonshot streams its usage inside the last choice
    delta = choice.get("delta") or {}
    finish = choice.get("finish_reason")
    if finish:
        from litellm.litellm_core_utils.core_helpers import map_finish_reason

        finish = map_finish_reason(str(finish))
    calls = delta.get("tool_calls")
    content, reasoning = delta.get("content"), delta.get("reasoning_content")
    # Text fields that are not strings are dropped, as litellm's own stream reader drops them.
    return ProviderChunk(content=content if isinstance(content, str) else "",
                         reasoning=reasoning if isinstance(reasoning, str) else "",
                         tool_calls=to_tool_deltas(calls) if calls else [], finish_reason=finish,
                         usage=to_usage(usage) if usage else None)

