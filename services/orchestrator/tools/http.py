"""One place where tools call HTTP APIs: timeouts, bounded retries, and error translation.

Retries: connection failures, timeouts, 429 and 5xx are retried `max_retries` times with
exponential back-off (`backoff_s`, doubled each attempt). Other statuses fail at once.
Translation: 401/403 -> ToolConfigError on the key setting; other statuses -> ToolUpstreamError;
timeouts -> ToolTimeoutError. The error body they quote is redacted (services.common.logging). URLs are logged without their query string (SerpApi takes its key
as a query parameter).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from typing import Any

import httpx

from services.common.logging import redact_text
from services.orchestrator.tools.config import WebApiSettings
from services.orchestrator.tools.errors import ToolConfigError, ToolTimeoutError, ToolUpstreamError

logger = logging.getLogger(__name__)

_RETRY_STATUSES = {429, 500, 502, 503, 504}


def _safe_url(url: str) -> str:
    return url.split("?", 1)[0]


def _error_text(response: httpx.Response) -> str:
    """A short error description from the body, never the whole page, with secrets masked: APIs echo
    the key they refused ("Incorrect API key provided: Bearer tvly-...")."""
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or ""
    if isinstance(body, Mapping):
        for key in ("error", "message", "detail"):
            value = body.get(key)
            if isinstance(value, Mapping):
                value = value.get("message") or value.get("description") or value.get("error") or value.get("code")
            if value:
                return redact_text(str(value))[:300]  # masked before the cut, so a cut cannot split a key
    return response.reason_phrase or ""


async def send(
    client: httpx.AsyncClient,
    tool: str,
    api: WebApiSettings,
    method: str,
    url: str,
    *,
    accept: Collection[int] = (),
    **kwargs: Any,
) -> httpx.Response:
    """Send with retries; return a 2xx response (or one whose status is in `accept`) or raise a ToolError."""
    attempts = api.max_retries + 1
    for attempt in range(attempts):
        last = attempt == attempts - 1
        try:
            response = await client.request(method, url, timeout=api.timeout_s, **kwargs)
        except httpx.TimeoutException:
            logger.info("%s: %s %s timed out (attempt %d/%d)", tool, method, _safe_url(url), attempt + 1, attempts)
            if last:
                raise ToolTimeoutError(tool, f"no answer from {_safe_url(url)} within {api.timeout_s:g}s") from None
        except httpx.TransportError as exc:
            logger.info("%s: %s %s failed: %s", tool, method, _safe_url(url), type(exc).__name__)
            if last:
                raise ToolUpstreamError(tool, f"cannot reach {_safe_url(url)} ({type(exc).__name__})") from None
        else:
            if response.is_success or response.status_code in accept:
                return response
            if response.status_code in (401, 403):
                raise ToolConfigError(
                    tool,
                    f"tools.{api.config_path}.api_key",
                    f"the API rejected the key (HTTP {response.status_code}: {_error_text(response)})",
                )
            if response.status_code not in _RETRY_STATUSES or last:
                raise ToolUpstreamError(
                    tool, f"HTTP {response.status_code} from {_safe_url(url)}: {_error_text(response)}", status=response.status_code
                )
            logger.info("%s: HTTP %d from %s, retrying", tool, response.status_code, _safe_url(url))
        await asyncio.sleep(api.backoff_s * (2**attempt))
    raise AssertionError("unreachable")  # the loop always returns or raises


async def send_json(
    client: httpx.AsyncClient, tool: str, api: WebApiSettings, method: str, url: str, *, accept: Collection[int] = (), **kwargs: Any
) -> Any:
    response = await send(client, tool, api, method, url, accept=accept, **kwargs)
    try:
        return response.json()
    except ValueError:
        raise ToolUpstreamError(tool, f"{_safe_url(url)} did not return JSON", status=response.status_code) from None


def require_key(tool: str, api: WebApiSettings, params: Mapping[str, Any]) -> str:
    """The API key, or a ToolConfigError naming the settings that would provide it."""
    key = api.key_for(params)
    if not key:
        hint = f" or the {api.api_key_env} environment variable" if api.api_key_env else ""
        raise ToolConfigError(tool, f"tools.{api.config_path}.api_key", f"no API key: set tools.{api.config_path}.api_key{hint}")
    return key


def require_base_url(tool: str, api: WebApiSettings) -> str:
    if not api.base_url:
        raise ToolConfigError(tool, f"tools.{api.config_path}.base_url", f"no base URL: set tools.{api.config_path}.base_url")
    return api.base_url
