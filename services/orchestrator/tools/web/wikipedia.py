"""Wikipedia through the MediaWiki Action API (one request, no key).

GET {base_url}?action=query&format=json&formatversion=2&generator=search&gsrsearch=<query>
    &gsrlimit=<top_n>&prop=extracts|info&exintro=1&explaintext=1&exlimit=max&inprop=url
answers `{query: {pages: [{pageid, title, index, extract, fullurl}]}}` (no `query` key when nothing
matches, `{error: {code, info}}` on failure). `base_url` may contain `{language}`, filled from the
node's `language` param (default `https://{language}.wikipedia.org/w/api.php`).
"""

from __future__ import annotations

import re
from typing import Any

from services.orchestrator.tools import http
from services.orchestrator.tools.base import Tool, ToolResult
from services.orchestrator.tools.errors import ToolInputError, ToolUpstreamError
from services.orchestrator.tools.runtime import ToolContext
from services.orchestrator.tools.web.common import QUERY_SCHEMA, empty_result, search_result, text_arg, top_n

_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})*$")


class Wikipedia(Tool):
    component_name = "Wikipedia"
    function_name = "wikipedia_search"
    description = "Search Wikipedia and return the introductions of the best matching articles."
    arguments_schema = QUERY_SCHEMA
    params_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "default": "{sys.query}"},
            "top_n": {"type": "integer", "minimum": 1, "default": 10},
            "language": {"type": "string", "default": "en"},
        },
    }
    argument_defaults = {"query": "{sys.query}"}

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        query = text_arg(self.component_name, args, "query")
        if not query:
            return empty_result()
        language = str(params.get("language") or "en").strip().lower()
        if not _LANGUAGE.match(language):
            raise ToolInputError(self.component_name, "language", f"'{language}' is not a language code")
        api = context.settings.web_api("wikipedia")
        url = http.require_base_url(self.component_name, api).replace("{language}", language)
        data = await http.send_json(
            context.http,
            self.component_name,
            api,
            "GET",
            url,
            params={
                "action": "query",
                "format": "json",
                "formatversion": "2",
                "generator": "search",
                "gsrsearch": query,
                "gsrlimit": str(top_n(self.component_name, params)),
                "prop": "extracts|info",
                "exintro": "1",
                "explaintext": "1",
                "exlimit": "max",
                "inprop": "url",
            },
        )
        if not isinstance(data, dict):
            raise ToolUpstreamError(self.component_name, "unexpected answer from the MediaWiki API")
        if isinstance(data.get("error"), dict):
            error = data["error"]
            raise ToolUpstreamError(self.component_name, f"MediaWiki error {error.get('code')}: {error.get('info')}")
        pages = (data.get("query") or {}).get("pages") or []
        if isinstance(pages, dict):  # formatversion=1 servers answer with a dict keyed by page id
            pages = list(pages.values())
        pages = sorted((p for p in pages if isinstance(p, dict)), key=lambda p: p.get("index", 0))
        results = [
            {
                "title": p.get("title") or "",
                "url": p.get("fullurl") or f"https://{language}.wikipedia.org/?curid={p.get('pageid')}",
                "content": p.get("extract") or "",
            }
            for p in pages
        ]
        return search_result(context, results, source="wikipedia")
