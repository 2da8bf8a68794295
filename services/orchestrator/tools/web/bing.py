"""Bing through the Bing Web Search API v7 (RAGFlow references `Bing` in a template but has no class).

GET {base_url}/v7.0/search?q=<query>&count=<n>&mkt=<language>-<country>&responseFilter=Webpages
with header `Ocp-Apim-Subscription-Key: <key>` answers `{webPages: {value: [{name, url, snippet}]}}`.
`channel: News` uses GET {base_url}/v7.0/news/search, answering `{value: [{name, url, description}]}`.
Errors answer `{error: {code, message}}` (401 for a bad key).
"""

from __future__ import annotations

import re
from typing import Any

from services.orchestrator.tools import http
from services.orchestrator.tools.base import Tool, ToolResult
from services.orchestrator.tools.errors import ToolUpstreamError
from services.orchestrator.tools.runtime import ToolContext
from services.orchestrator.tools.web.common import QUERY_SCHEMA, empty_result, search_result, text_arg, top_n

_CODE = re.compile(r"^[A-Za-z]{2,3}$")


class Bing(Tool):
    component_name = "Bing"
    function_name = "bing_search"
    description = "Search the web with Bing and return the top web pages (or news) with their snippets."
    arguments_schema = QUERY_SCHEMA
    params_schema = {
        "type": "object",
        "properties": {
            "api_key": {"type": "string", "default": ""},
            "query": {"type": "string", "default": "{sys.query}"},
            "channel": {"type": "string", "enum": ["Webpages", "News"], "default": "Webpages"},
            "country": {"type": "string", "default": "US"},
            "language": {"type": "string", "default": "en"},
            "top_n": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
        },
    }
    argument_defaults = {"query": "{sys.query}"}

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        query = text_arg(self.component_name, args, "query")
        if not query:
            return empty_result()
        api = context.settings.web_api("bing")
        key = http.require_key(self.component_name, api, params)
        count = top_n(self.component_name, params, "top_n", 10, 50)
        news = str(params.get("channel") or "Webpages").lower() == "news"
        language, country = str(params.get("language") or "en"), str(params.get("country") or "US")
        query_params = {"q": query, "count": str(count)}
        if _CODE.match(language) and _CODE.match(country):
            query_params["mkt"] = f"{language.lower()}-{country.upper()}"
        if not news:
            query_params["responseFilter"] = "Webpages"
        base = http.require_base_url(self.component_name, api)
        data = await http.send_json(
            context.http,
            self.component_name,
            api,
            "GET",
            f"{base}/v7.0/news/search" if news else f"{base}/v7.0/search",
            params=query_params,
            headers={"Ocp-Apim-Subscription-Key": key},
        )
        if not isinstance(data, dict):
            raise ToolUpstreamError(self.component_name, "unexpected answer from the Bing API")
        items = data.get("value") if news else (data.get("webPages") or {}).get("value")
        results = [
            {"title": r.get("name") or "", "url": r.get("url") or "", "content": r.get("description" if news else "snippet") or ""}
            for r in items or []
            if isinstance(r, dict)
        ][:count]
        return search_result(context, results, source="bing")
