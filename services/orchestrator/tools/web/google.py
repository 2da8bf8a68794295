"""Google web search through SerpApi.

GET {base_url}/search.json?engine=google&q=<query>&api_key=<key>&num=<n>&start=<offset>&gl=<country>&hl=<language>
answers `{search_metadata: {status}, organic_results: [{position, title, link, snippet}]}`; failures
answer `{error: "<text>"}` (401 for a bad key; 200 with an error text when nothing was found).
"""

from __future__ import annotations

from typing import Any

from services.orchestrator.tools import http
from services.orchestrator.tools.base import Tool, ToolResult
from services.orchestrator.tools.errors import ToolInputError, ToolUpstreamError
from services.orchestrator.tools.runtime import ToolContext
from services.orchestrator.tools.web.common import empty_result, search_result, text_arg, top_n

_NO_RESULTS = "hasn't returned any results"


class Google(Tool):
    component_name = "Google"
    function_name = "google_search"
    description = "Search the web with Google (through SerpApi) and return the organic results."
    arguments_schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string", "description": "The search keywords to execute with Google."},
            "start": {"type": "integer", "description": "Result offset for pagination (0 for the first page)."},
            "num": {"type": "integer", "description": "Number of results to return (1-100)."},
        },
        "required": ["q"],
    }
    params_schema = {
        "type": "object",
        "properties": {
            "api_key": {"type": "string", "default": ""},
            "q": {"type": "string", "default": "{sys.query}"},
            "country": {"type": "string", "default": "us"},
            "language": {"type": "string", "default": "en"},
            "top_n": {"type": "integer", "minimum": 1, "default": 10},
            "start": {"type": "integer", "minimum": 0, "default": 0},
        },
    }
    argument_defaults = {"q": "{sys.query}"}

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        query = text_arg(self.component_name, args, "q") or text_arg(self.component_name, args, "query")
        if not query:
            return empty_result()
        api = context.settings.web_api("google")
        key = http.require_key(self.component_name, api, params)
        num = top_n(self.component_name, {"num": args.get("num") or params.get("top_n") or 10}, "num", 10, 100)
        try:
            start = max(0, int(args.get("start") or params.get("start") or 0))
        except (TypeError, ValueError):
            raise ToolInputError(self.component_name, "start", "'start' must be an integer") from None
        data = await http.send_json(
            context.http,
            self.component_name,
            api,
            "GET",
            f"{http.require_base_url(self.component_name, api)}/search.json",
            params={
                "engine": "google",
                "q": query,
                "api_key": key,
                "num": str(num),
                "start": str(start),
                "gl": str(params.get("country") or "us"),
                "hl": str(params.get("language") or "en"),
            },
        )
        if not isinstance(data, dict):
            raise ToolUpstreamError(self.component_name, "unexpected answer from SerpApi")
        if data.get("error") and _NO_RESULTS not in str(data["error"]):
            raise ToolUpstreamError(self.component_name, f"SerpApi error: {str(data['error'])[:300]}")
        results = [
            {"title": r.get("title") or "", "url": r.get("link") or "", "content": r.get("snippet") or r.get("title") or ""}
            for r in data.get("organic_results") or []
            if isinstance(r, dict)
        ][:num]
        return search_result(context, results, source="google")
