"""Invoke: an HTTP request through httpx (spec §5.9).

Timeout comes from `timeout` (default 60 s) and is the real per-request timeout; the node timeout is
derived from it. HTTP failures (connection errors, 5xx, 429) are retryable under max_retries with the
node's backoff policy; 4xx fail at once. Redirects are not followed.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.refs import UnknownReferenceError
from services.orchestrator.core.values import parse_json

_TAGS = re.compile(r"<(script|style)[^>]*>.*?</\1>|<[^>]+>", re.DOTALL | re.IGNORECASE)


def clean_html(text: str) -> str:
    return re.sub(r"\s+", " ", _TAGS.sub(" ", text)).strip()


@register
class Invoke(Component):
    type_name = "Invoke"
    durable_start = True
    static_outputs = ("result", "status_code")
    unsupported_params = {"proxy": "requests through a proxy are not supported; Invoke calls the URL directly"}

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        problems: list[Problem] = []
        if not params.get("url"):
            problems.append(("url", "Invoke needs a url"))
        # null is absent: the defaults invoke() uses (Component.param)
        if str(params.get("method") or "get").lower() not in ("get", "post", "put"):
            problems.append(("method", "method must be get, post or put"))
        timeout = 60 if params.get("timeout") is None else params["timeout"]
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            problems.append(("timeout", "timeout must be a positive number of seconds"))
        if str(params.get("datatype") or "json").lower() not in ("json", "formdata"):
            problems.append(("datatype", "datatype must be json or formdata"))
        variables = params.get("variables")
        if variables is not None and not isinstance(variables, list):
            problems.append(("variables", "variables must be a list of {key, ref | value}"))
        for i, var in enumerate(variables if isinstance(variables, list) else []):
            if not isinstance(var, dict):
                problems.append((f"variables[{i}]", "each variable must be an object {key, ref | value}, got "
                                 + ("null" if var is None else type(var).__name__)))
        return problems

    def _arguments(self, ctx) -> dict[str, Any]:
        args: dict[str, Any] = {}
        for var in self.param("variables", []) or []:
            if not isinstance(var, dict):
                continue
            key = var.get("key")
            if not key:
                continue
            value: Any = None
            if var.get("ref"):
                try:
                    value = ctx.resolve(var["ref"])
                except UnknownReferenceError:
                    value = None
            if value is None:
                value = ctx.render(str(var.get("value", ""))) if var.get("value") is not None else ""
            if isinstance(value, str) and self.param("datatype", "json") == "json" and value.strip()[:1] in "[{":
                try:
                    value = parse_json(value)
                except ValueError:
                    pass
            args[key] = value
        return args

    def _headers(self, ctx) -> dict[str, str]:
        raw = self.param("headers", "") or ""
        headers = raw
        if isinstance(raw, str):
            try:
                headers = parse_json(raw) if raw.strip() else {}
            except ValueError:
                raise NodeError("headers must be a JSON object", reason="BAD_HEADERS") from None
        if not isinstance(headers, dict):
            raise NodeError("headers must be a JSON object", reason="BAD_HEADERS")
        return {str(k): ctx.render(str(v)) for k, v in headers.items()}

    async def invoke(self, ctx) -> Outcome:
        url = ctx.render(str(self.param("url"))).strip()
        if "://" not in url:
            url = "http://" + url
        method = str(self.param("method", "get")).lower()
        args = self._arguments(ctx)
        headers = self._headers(ctx)
        timeout = float(self.param("timeout", 60))
        request: dict[str, Any] = {"headers": headers, "timeout": timeout, "follow_redirects": False}
        if method == "get":
            request["params"] = {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in args.items()}
        elif str(self.param("datatype", "json")).lower() == "formdata":
            request["data"] = args
        else:
            request["json"] = args
        client = ctx.services.http
        if client is None:
            raise NodeError("no HTTP client configured", reason="NO_HTTP")
        try:
            response = await client.request(method.upper(), url, **request)
        except httpx.HTTPError as exc:
            raise NodeError(f"request to {url} failed: {type(exc).__name__}", reason="HTTP_ERROR", retryable=True) from None
        if response.status_code >= 400:
            retryable = response.status_code >= 500 or response.status_code == 429
            raise NodeError(f"{method.upper()} {url} returned {response.status_code}", reason="HTTP_STATUS", retryable=retryable)
        text = response.text
        if self.param("clean_html", False):
            text = clean_html(text)
        return Outcome(outputs={"result": text, "status_code": response.status_code}, inputs={"url": url, "arguments": args})
