"""Local HTTP servers that speak the web APIs the tools call, for tests (no internet needed).

One Starlette app on an ephemeral loopback port serves every API under its own prefix:

    /tavily/search, /tavily/extract             Tavily (Authorization: Bearer <key>)
    /wikipedia/<lang>/w/api.php                 MediaWiki Action API (generator=search)
    /duckduckgo/html/                           DuckDuckGo HTML endpoint (POST form q=)
    /serpapi/search.json                        SerpApi Google engine (api_key query param)
    /bing/v7.0/search, /bing/v7.0/news/search   Bing Web Search v7 (Ocp-Apim-Subscription-Key)
    /yahoo/v8/finance/chart/<symbol>            Yahoo Finance chart endpoint
    /yahoo/v10/finance/quoteSummary/<symbol>    Yahoo Finance quoteSummary (?modules=, statements, calendar)
    /yahoo/v1/finance/search                    Yahoo Finance search (?q=&newsCount=: news)
    /ragflow/api/v1/retrieval                   RAGFlow retrieval API (Authorization: Bearer <key>)

Every request is recorded (`WebApis.requests`). Answers are deterministic functions of the request.
Special inputs make failures happen on purpose:
- a query (or URL, or symbol) containing `trigger-500` answers HTTP 500;
- one containing `trigger-hang` never answers until the server stops (for client timeouts);
- Yahoo symbol `INVALID` answers 404 as Yahoo does; a URL containing `fail` is a failed extract.

Usage:
    with start_web_apis() as apis:
        tools_section = apis.tools_config()      # the `tools:` config section pointing here
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import html
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

KEYS = {
    "tavily": "tvly-local-test-key",
    "google": "serpapi-local-test-key",
    "bing": "bing-local-test-key",
    "ragflow": "ragflow-local-test-key",
}


@dataclass
class RecordedRequest:
    api: str
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


def _words(text: str) -> str:
    return " ".join(text.split())


def _n(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass
class WebApis:
    """A running set of fake APIs. `base_url` is `http://127.0.0.1:<port>`."""

    base_url: str = ""
    requests: list[RecordedRequest] = field(default_factory=list)
    ragflow_chunks: list[dict[str, Any]] = field(default_factory=list)
    _release: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    def tools_config(self, *, with_keys: bool = True, timeout_s: float = 5.0, max_retries: int = 0) -> dict[str, Any]:
        """The `tools:` config section pointing every web tool (and RAGFlow retrieval) here."""

        def api(prefix: str, key_name: str | None = None) -> dict[str, Any]:
            entry: dict[str, Any] = {"base_url": f"{self.base_url}/{prefix}", "api_key_env": ""}
            if key_name and with_keys:
                entry["api_key"] = KEYS[key_name]
            return entry

        return {
            "http": {"timeout_s": timeout_s, "max_retries": max_retries, "backoff_s": 0},
            "tavily": api("tavily", "tavily"),
            "wikipedia": {"base_url": f"{self.base_url}/wikipedia/{{language}}/w/api.php"},
            "duckduckgo": api("duckduckgo"),
            "google": api("serpapi", "google"),
            "bing": api("bing", "bing"),
            "yahoo_finance": api("yahoo"),
            "retrieval": {"ragflow": api("ragflow", "ragflow")},
        }

    def of(self, api: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.api == api]

    # ---- helpers used by the handlers -------------------------------------------------------

    async def _record(self, api: str, request: Request) -> RecordedRequest:
        raw = await request.body()
        body: Any = raw.decode("utf-8", "replace")
        if request.headers.get("content-type", "").startswith("application/json") and raw:
            body = json.loads(raw)
        elif request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            body = dict((await request.form()).items())
        rec = RecordedRequest(api, request.method, request.url.path, dict(request.query_params), dict(request.headers), body)
        self.requests.append(rec)
        return rec

    async def _trouble(self, text: str) -> Response | None:
        if "trigger-500" in text:
            return JSONResponse({"error": "internal failure (triggered)"}, status_code=500)
        if "trigger-hang" in text:
            assert self._release is not None
            await self._release.wait()
            return JSONResponse({"error": "released"}, status_code=503)
        return None

    # ---- APIs -----------------------------------------------------------------------------

    async def tavily_search(self, request: Request) -> Response:
        rec = await self._record("tavily", request)
        if request.headers.get("authorization") != f"Bearer {KEYS['tavily']}":
            return JSONResponse({"detail": {"error": "Unauthorized: missing or invalid API key."}}, status_code=401)
        body = rec.body if isinstance(rec.body, dict) else {}
        query = str(body.get("query", ""))
        if (trouble := await self._trouble(query)) is not None:
            return trouble
        if not query:
            return JSONResponse({"detail": {"error": "Query is missing."}}, status_code=400)
        count = _n(body.get("max_results"), 5)
        results = [
            {
                "title": f"{query} - result {i}",
                "url": f"https://example.com/{quote(query.replace(' ', '-'))}/{i}",
                "content": f"Snippet {i} about {query}.",
                "raw_content": f"Full page {i} about {query}." if body.get("include_raw_content") else None,
                "score": round(0.9 - i * 0.1, 2),
            }
            for i in range(count)
        ]
        answer = f"An answer about {query}." if body.get("include_answer") else None
        images: list = []
        if body.get("include_images"):
            urls = [f"https://images.example.com/{i}.png" for i in range(2)]
            images = [{"url": u, "description": f"Picture {i} of {query}."} for i, u in enumerate(urls)] \
                if body.get("include_image_descriptions") else urls
        return JSONResponse({"query": query, "answer": answer, "images": images, "results": results, "response_time": 0.01})

    async def tavily_extract(self, request: Request) -> Response:
        rec = await self._record("tavily", request)
        if request.headers.get("authorization") != f"Bearer {KEYS['tavily']}":
            return JSONResponse({"detail": {"error": "Unauthorized: missing or invalid API key."}}, status_code=401)
        urls = (rec.body if isinstance(rec.body, dict) else {}).get("urls") or []
        if isinstance(urls, str):
            urls = [urls]
        if (trouble := await self._trouble(" ".join(urls))) is not None:
            return trouble
        pictures = (rec.body if isinstance(rec.body, dict) else {}).get("include_images")
        results = [{"url": u, "raw_content": f"# Page {u}\n\nExtracted text of {u}.",
                    "images": [f"{u.rstrip('/')}/figure.png"] if pictures else []} for u in urls if "fail" not in u]
        failed = [{"url": u, "error": "Failed to fetch url"} for u in urls if "fail" in u]
        return JSONResponse({"results": results, "failed_results": failed, "response_time": 0.01})

    async def wikipedia(self, request: Request) -> Response:
        rec = await self._record("wikipedia", request)
        q = rec.query
        if q.get("action") != "query" or q.get("generator") != "search":
            return JSONResponse({"error": {"code": "badvalue", "info": "Unrecognized value for parameter \"action\"."}})
        term = q.get("gsrsearch", "")
        if (trouble := await self._trouble(term)) is not None:
            return trouble
        if "nothing" in term:
            return JSONResponse({"batchcomplete": True})
        lang = request.path_params["lang"]
        limit = _n(q.get("gsrlimit"), 10)
        # Pages come back in an arbitrary order; `index` is the search rank.
        pages = [
            {
                "pageid": 1000 + i,
                "ns": 0,
                "title": f"{term.title()} ({i})",
                "index": i + 1,
                "extract": f"{term} is described in article {i} ({lang}).",
                "fullurl": f"https://{lang}.wikipedia.org/wiki/{quote(term.replace(' ', '_'))}_{i}",
            }
            for i in reversed(range(min(limit, 3)))
        ]
        return JSONResponse({"batchcomplete": True, "query": {"pages": pages}})

    async def duckduckgo(self, request: Request) -> Response:
        rec = await self._record("duckduckgo", request)
        query = str((rec.body if isinstance(rec.body, dict) else {}).get("q", ""))
        if (trouble := await self._trouble(query)) is not None:
            return trouble
        ad = (
            '<div class="result result--ad"><h2 class="result__title"><a class="result__a" '
            'href="https://duckduckgo.com/y.js?ad_domain=ads.example&amp;u3=x">Sponsored</a></h2>'
            '<a class="result__snippet" href="https://duckduckgo.com/y.js?x=1">Buy now</a></div>'
        )
        items = [ad]
        for i in range(12):
            target = f"https://site{i}.example.org/{quote(query.replace(' ', '-'))}?a=1&b={i}"
            href = f"//duckduckgo.com/l/?uddg={quote(target, safe='')}&rut=abc{i}"
            items.append(
                f'<div class="result results_links web-result"><div class="links_main result__body">'
                f'<h2 class="result__title"><a rel="nofollow" class="result__a" href="{html.escape(href)}">'
                f"{html.escape(query)} &amp; <b>result</b> {i}</a></h2>"
                f'<a class="result__snippet" href="{html.escape(href)}">Snippet about <b>{html.escape(query)}</b> number {i}.</a>'
                f"</div></div>"
            )
        return HTMLResponse(f"<html><body><div id=\"links\">{''.join(items)}</div></body></html>")

    async def serpapi(self, request: Request) -> Response:
        rec = await self._record("google", request)
        q = rec.query
        if q.get("api_key") != KEYS["google"]:
            return JSONResponse({"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"}, status_code=401)
        term = q.get("q", "")
        if (trouble := await self._trouble(term)) is not None:
            return trouble
        if "nothing" in term:
            return JSONResponse({"search_metadata": {"status": "Success"}, "error": "Google hasn't returned any results for this query."})
        num, start = _n(q.get("num"), 10), _n(q.get("start"), 0)
        organic = [
            {"position": start + i + 1, "title": f"{term} on Google {start + i}", "link": f"https://g.example.com/{start + i}", "snippet": f"Google snippet {start + i} for {term}."}
            for i in range(min(num, 4))
        ]
        return JSONResponse({"search_metadata": {"status": "Success"}, "search_parameters": {"engine": q.get("engine"), "q": term}, "organic_results": organic})

    async def bing(self, request: Request) -> Response:
        rec = await self._record("bing", request)
        if request.headers.get("ocp-apim-subscription-key") != KEYS["bing"]:
            return JSONResponse({"error": {"code": "401", "message": "Access denied due to invalid subscription key or wrong API endpoint."}}, status_code=401)
        term = rec.query.get("q", "")
        if (trouble := await self._trouble(term)) is not None:
            return trouble
        count = _n(rec.query.get("count"), 10)
        if request.url.path.endswith("/news/search"):
            value = [{"name": f"News {i}: {term}", "url": f"https://news.example.com/{i}", "description": f"News text {i} on {term}."} for i in range(min(count, 3))]
            return JSONResponse({"_type": "News", "value": value})
        value = [{"id": f"https://api.bing.microsoft.com/api/v7/#WebPages.{i}", "name": f"Bing page {i}: {term}", "url": f"https://bing.example.com/{i}", "snippet": f"Bing snippet {i} on {term}."} for i in range(min(count, 5))]
        return JSONResponse({"_type": "SearchResponse", "queryContext": {"originalQuery": term}, "webPages": {"totalEstimatedMatches": 1000, "value": value}})

    async def yahoo(self, request: Request) -> Response:
        await self._record("yahoo_finance", request)
        symbol = request.path_params["symbol"]
        if (trouble := await self._trouble(symbol.lower())) is not None:
            return trouble
        if symbol == "INVALID":
            return JSONResponse({"chart": {"result": None, "error": {"code": "Not Found", "description": "No data found, symbol may be delisted"}}}, status_code=404)
        seed = int(hashlib.sha256(symbol.encode()).hexdigest()[:6], 16) % 500 + 50
        days = 5
        start = 1_735_776_000  # 2025-01-02 00:00 UTC
        closes = [float(seed + d) for d in range(days)]
        result = {
            "meta": {
                "currency": "USD", "symbol": symbol, "exchangeName": "NMS", "longName": f"{symbol} Corporation",
                "regularMarketPrice": closes[-1], "chartPreviousClose": closes[0] - 1,
                "regularMarketDayHigh": closes[-1] + 1.5, "regularMarketDayLow": closes[-1] - 1.5,
                "regularMarketVolume": 123456, "fiftyTwoWeekHigh": closes[-1] + 40, "fiftyTwoWeekLow": closes[0] - 40,
            },
            "timestamp": [start + d * 86_400 for d in range(days)],
            "indicators": {"quote": [{"open": [c - 0.5 for c in closes], "high": [c + 1 for c in closes], "low": [c - 1 for c in closes], "close": closes, "volume": [1000 + d for d in range(days)]}]},
        }
        return JSONResponse({"chart": {"result": [result], "error": None}})

    async def yahoo_summary(self, request: Request) -> Response:
        rec = await self._record("yahoo_finance", request)
        symbol = request.path_params["symbol"]
        if symbol == "INVALID":
            return JSONResponse({"quoteSummary": {"result": None, "error": {"code": "Not Found", "description": "Quote not found"}}},
                                status_code=404)
        seed = int(hashlib.sha256(symbol.encode()).hexdigest()[:6], 16) % 500 + 50
        years = [("2024-09-30", 1727654400), ("2023-09-30", 1696032000)]
        quarters = [("2025-06-30", 1751241600), ("2025-03-31", 1743379200)]

        def money(value: int) -> dict:
            return {"raw": value, "fmt": f"{value / 1e9:.2f}B", "longFmt": f"{value:,}"}

        def rows(periods, fields):
            return [{"maxAge": 1, "endDate": {"raw": raw, "fmt": fmt},
                     **{name: money((seed + i) * factor * 1_000_000) for name, factor in fields}}
                    for i, (fmt, raw) in enumerate(periods)]

        income = [("totalRevenue", 300), ("netIncome", 90)]
        balance = [("totalAssets", 350), ("totalLiab", 290), ("totalStockholderEquity", 60)]
        cash = [("totalCashFromOperatingActivities", 110), ("capitalExpenditures", -10)]
        modules = {
            "incomeStatementHistory": {"incomeStatementHistory": rows(years, income), "maxAge": 86400},
            "incomeStatementHistoryQuarterly": {"incomeStatementHistory": rows(quarters, income), "maxAge": 86400},
            "balanceSheetHistory": {"balanceSheetStatements": rows(years, balance), "maxAge": 86400},
            "balanceSheetHistoryQuarterly": {"balanceSheetStatements": rows(quarters, balance), "maxAge": 86400},
            "cashflowStatementHistory": {"cashflowStatements": rows(years, cash), "maxAge": 86400},
            "cashflowStatementHistoryQuarterly": {"cashflowStatements": rows(quarters, cash), "maxAge": 86400},
            "calendarEvents": {"maxAge": 1, "earnings": {"earningsDate": [{"raw": 1753920000, "fmt": "2025-07-31"}],
                                                         "earningsAverage": {"raw": 1.43, "fmt": "1.43"}},
                               "exDividendDate": {"raw": 1754870400, "fmt": "2025-08-11"}},
        }
        wanted = [m for m in str(rec.query.get("modules") or "").split(",") if m]
        return JSONResponse({"quoteSummary": {"result": [{m: modules[m] for m in wanted if m in modules}], "error": None}})

    async def yahoo_search(self, request: Request) -> Response:
        rec = await self._record("yahoo_finance", request)
        symbol = str(rec.query.get("q") or "")
        count = _n(rec.query.get("newsCount"), 8)
        news = [{"uuid": f"n{i}", "title": f"{symbol} news {i}", "publisher": "Example Wire",
                 "link": f"https://finance.example.com/{symbol}/{i}", "providerPublishTime": 1735776000 + i * 3600,
                 "type": "STORY"} for i in range(min(count, 3))]
        return JSONResponse({"count": len(news), "quotes": [], "news": news})

    async def ragflow_retrieval(self, request: Request) -> Response:
        rec = await self._record("ragflow", request)
        if request.headers.get("authorization") != f"Bearer {KEYS['ragflow']}":
            return JSONResponse({"code": 109, "data": False, "message": "Authentication error: API key is invalid!"})
        body = rec.body if isinstance(rec.body, dict) else {}
        question = str(body.get("question", ""))
        if (trouble := await self._trouble(question)) is not None:
            return trouble
        dataset_ids = body.get("dataset_ids") or []
        if not dataset_ids:
            return JSONResponse({"code": 102, "message": "`dataset_ids` is required."})
        unknown = [d for d in dataset_ids if d.startswith("unknown")]
        if unknown:
            return JSONResponse({"code": 102, "message": f"You don't own the dataset {unknown[0]}."})
        threshold = float(body.get("similarity_threshold", 0.2))
        chunks = [c for c in self.ragflow_chunks or self._default_ragflow_chunks(question, dataset_ids) if c["similarity"] >= threshold]
        chunks = chunks[: _n(body.get("page_size"), 30)]
        aggs: dict[str, dict[str, Any]] = {}
        for c in chunks:
            agg = aggs.setdefault(c["document_id"], {"doc_id": c["document_id"], "doc_name": c["document_keyword"], "count": 0})
            agg["count"] += 1
        return JSONResponse({"code": 0, "data": {"chunks": chunks, "doc_aggs": list(aggs.values()), "total": len(chunks)}})

    @staticmethod
    def _default_ragflow_chunks(question: str, dataset_ids: list[str]) -> list[dict[str, Any]]:
        return [
            {
                "id": f"chunk{i}",
                "content": f"Passage {i} answering: {question}",
                "content_ltks": question.lower(),
                "document_id": f"doc{i % 2}",
                "document_keyword": f"manual-{i % 2}.pdf",
                "highlight": f"<em>{question}</em>",
                "image_id": "",
                "important_keywords": [],
                "kb_id": dataset_ids[0],
                "positions": [[1, 10, 200, 30, 60]],
                "similarity": round(0.95 - i * 0.3, 2),
                "term_similarity": 0.9,
                "vector_similarity": 0.8,
            }
            for i in range(4)
        ]

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/tavily/search", self.tavily_search, methods=["POST"]),
                Route("/tavily/extract", self.tavily_extract, methods=["POST"]),
                Route("/wikipedia/{lang}/w/api.php", self.wikipedia, methods=["GET"]),
                Route("/duckduckgo/html/", self.duckduckgo, methods=["POST"]),
                Route("/serpapi/search.json", self.serpapi, methods=["GET"]),
                Route("/bing/v7.0/search", self.bing, methods=["GET"]),
                Route("/bing/v7.0/news/search", self.bing, methods=["GET"]),
                Route("/yahoo/v8/finance/chart/{symbol}", self.yahoo, methods=["GET"]),
                Route("/yahoo/v10/finance/quoteSummary/{symbol}", self.yahoo_summary, methods=["GET"]),
                Route("/yahoo/v1/finance/search", self.yahoo_search, methods=["GET"]),
                Route("/ragflow/api/v1/retrieval", self.ragflow_retrieval, methods=["POST"]),
            ]
        )


@contextlib.contextmanager
def start_web_apis() -> Iterator[WebApis]:
    """Start every fake API on one ephemeral loopback port (in a thread); stop on exit."""
    apis = WebApis()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    apis.base_url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(uvicorn.Config(apis.app(), log_level="warning", lifespan="off"))
    ready = threading.Event()

    def serve() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        apis._loop = loop
        apis._release = asyncio.Event()

        async def main() -> None:
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not serving.done():
                await asyncio.sleep(0.005)
            ready.set()
            await serving

        try:
            loop.run_until_complete(main())
        finally:
            ready.set()
            loop.close()

    thread = threading.Thread(target=serve, name="fake-web-apis", daemon=True)
    thread.start()
    if not ready.wait(10) or not server.started:
        raise RuntimeError("fake web APIs did not start")
    try:
        yield apis
    finally:
        assert apis._loop is not None and apis._release is not None
        apis._loop.call_soon_threadsafe(apis._release.set)
        server.should_exit = True
        thread.join(10)
        sock.close()
