"""DuckDuckGo through its HTML endpoint (no key; the instant-answer API rarely has web results).

POST {base_url}/html/ with the form `q=<query>&kl=<region>` answers an HTML page where each result
is `<a class="result__a" href="...">title</a>` followed by `<a class="result__snippet">snippet</a>`.
Result links may be DuckDuckGo redirects (`//duckduckgo.com/l/?uddg=<encoded target>`); the target
is decoded. `channel: news` adds "news" to the query (the HTML endpoint has no news vertical).
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlparse

from services.orchestrator.tools import http
from services.orchestrator.tools.base import Tool, ToolResult
from services.orchestrator.tools.runtime import ToolContext
from services.orchestrator.tools.web.common import QUERY_SCHEMA, empty_result, search_result, text_arg, top_n


def _target(href: str) -> str:
    parsed = urlparse(href if "://" in href else f"https:{href}" if href.startswith("//") else href)
    if parsed.path.startswith("/l/"):
        uddg = parse_qs(parsed.query).get("uddg")
        if uddg:
            return uddg[0]
    return href


class _ResultParser(HTMLParser):
    """Collects (title, url, snippet) from DuckDuckGo's HTML result page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.results: list[dict[str, str]] = []
        self._field: str | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._field is not None:
            self._depth += 1
            return
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "a" and "result__a" in classes:
            self.results.append({"title": "", "url": _target(dict(attrs).get("href") or ""), "content": ""})
            self._field, self._depth = "title", 0
        elif "result__snippet" in classes and self.results:
            self._field, self._depth = "content", 0

    def handle_endtag(self, tag: str) -> None:
        if self._field is None:
            return
        if self._depth == 0:
            self._field = None
        else:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._field is not None and self.results:
            self.results[-1][self._field] += data


def _is_ad(url: str) -> bool:
    """Ads link back to duckduckgo.com (`/y.js?...`) instead of to the target site."""
    host = urlparse(url if "://" in url else f"https:{url}").netloc.lower()
    return host == "duckduckgo.com" or host.endswith(".duckduckgo.com")


def parse_results(html: str) -> list[dict[str, str]]:
    parser = _ResultParser()
    parser.feed(html)
    parser.close()
    return [{k: " ".join(v.split()) for k, v in r.items()} for r in parser.results if r["url"] and not _is_ad(r["url"])]


class DuckDuckGo(Tool):
    component_name = "DuckDuckGo"
    function_name = "duckduckgo_search"
    description = "Search the web with DuckDuckGo and return the top results with their snippets."
    arguments_schema = QUERY_SCHEMA
    params_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "default": "{sys.query}"},
            "top_n": {"type": "integer", "minimum": 1, "default": 10},
            "channel": {"type": "string", "enum": ["text", "news"], "default": "text"},
            "region": {"type": "string", "default": "wt-wt"},
        },
    }
    argument_defaults = {"query": "{sys.query}"}

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        query = text_arg(self.component_name, args, "query")
        if not query:
            return empty_result()
        if params.get("channel") == "news":
            query = f"{query} news"
        api = context.settings.web_api("duckduckgo")
        response = await http.send(
            context.http,
            self.component_name,
            api,
            "POST",
            f"{http.require_base_url(self.component_name, api)}/html/",
            data={"q": query, "kl": str(params.get("region") or "wt-wt")},
        )
        results = parse_results(response.text)[: top_n(self.component_name, params)]
        return search_result(context, results, source="duckduckgo")
