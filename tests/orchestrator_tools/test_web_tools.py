"""Web tools against local servers speaking each real API."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.orchestrator.tools.citations import ReferenceBucket
from services.orchestrator.tools.errors import (
    ToolConfigError,
    ToolInputError,
    ToolTimeoutError,
    ToolUpstreamError,
)
from services.orchestrator.tools.runtime import ToolRuntime
from services.orchestrator.tools.web.bing import Bing
from services.orchestrator.tools.web.duckduckgo import DuckDuckGo
from services.orchestrator.tools.web.google import Google
from services.orchestrator.tools.web.tavily import TavilyExtract, TavilySearch
from services.orchestrator.tools.web.wikipedia import Wikipedia
from services.orchestrator.tools.web.yahoo_finance import YahooFinance
from tests.orchestrator_tools.conftest import make_settings
from tests.support.web_apis import KEYS, WebApis


async def test_tavily_search_sends_real_request_shape_and_cites_results(runtime: ToolRuntime, web_apis: WebApis):
    bucket = ReferenceBucket()
    result = await TavilySearch().invoke(
        {"query": "solar power", "topic": "news"},
        params={"max_results": 3, "include_answer": True},
        context=runtime.context(references=bucket),
    )
    assert result.ok, result.error
    request = web_apis.of("tavily")[-1]
    assert request.path == "/tavily/search"
    assert request.headers["authorization"] == f"Bearer {KEYS['tavily']}"
    assert request.body["query"] == "solar power"
    assert request.body["topic"] == "news" and request.body["days"] == 14
    assert request.body["max_results"] == 3 and request.body["include_raw_content"] is True
    assert [c["citation_id"] for c in result.chunks] == [0, 1, 2]
    assert result.chunks[0]["content"] == "Full page 0 about solar power."
    assert result.chunks[0]["url"].startswith("https://example.com/")
    assert "ID: 0" in result.outputs["formalized_content"] and "ID: 2" in result.content
    assert result.outputs["answer"] == "An answer about solar power."
    assert len(result.outputs["json"]) == 3
    assert len(bucket) == 3


async def test_same_results_keep_their_citation_ids_in_a_run(runtime: ToolRuntime):
    bucket = ReferenceBucket()
    context = runtime.context(references=bucket)
    first = await TavilySearch().invoke({"query": "wind"}, params={"max_results": 2}, context=context)
    other = await TavilySearch().invoke({"query": "tides"}, params={"max_results": 2}, context=context)
    again = await TavilySearch().invoke({"query": "wind"}, params={"max_results": 2}, context=context)
    assert [c["citation_id"] for c in first.chunks] == [0, 1]
    assert [c["citation_id"] for c in other.chunks] == [2, 3]
    assert [c["citation_id"] for c in again.chunks] == [0, 1]
    ids = [c["id"] for c in bucket.snapshot()["chunks"]]
    assert len(ids) == len(set(ids)) == 4


async def test_empty_query_returns_empty_outputs_without_calling(runtime: ToolRuntime, web_apis: WebApis):
    before = len(web_apis.requests)
    result = await TavilySearch().invoke({"query": "  "}, params={}, context=runtime.context())
    assert result.ok and result.outputs == {"formalized_content": "", "json": []}
    assert len(web_apis.requests) == before


async def test_tavily_extract_reports_failed_urls(runtime: ToolRuntime, web_apis: WebApis):
    result = await TavilyExtract().invoke(
        {"urls": "https://a.example/x; https://b.example/fail"}, params={}, context=runtime.context()
    )
    assert result.ok
    assert web_apis.of("tavily")[-1].body["urls"] == ["https://a.example/x", "https://b.example/fail"]
    assert [c["url"] for c in result.chunks] == ["https://a.example/x"]
    assert "Extracted text of https://a.example/x" in result.content
    assert "Could not extract https://b.example/fail" in result.content
    assert result.outputs["failed_results"][0]["url"] == "https://b.example/fail"


async def test_wikipedia_uses_the_mediawiki_api_and_keeps_search_rank(runtime: ToolRuntime, web_apis: WebApis):
    result = await Wikipedia().invoke({"query": "alan turing"}, params={"language": "de", "top_n": 3}, context=runtime.context())
    assert result.ok, result.error
    request = web_apis.of("wikipedia")[-1]
    assert request.path == "/wikipedia/de/w/api.php"
    assert request.query["generator"] == "search" and request.query["gsrsearch"] == "alan turing"
    assert request.query["gsrlimit"] == "3" and request.query["explaintext"] == "1"
    assert [c["document_name"] for c in result.chunks] == ["Alan Turing (0)", "Alan Turing (1)", "Alan Turing (2)"]
    assert result.chunks[0]["url"].startswith("https://de.wikipedia.org/wiki/")
    nothing = await Wikipedia().invoke({"query": "nothing at all"}, params={}, context=runtime.context())
    assert nothing.ok and nothing.chunks == [] and nothing.content == "No results found."


async def test_wikipedia_rejects_a_language_that_is_not_a_code(runtime: ToolRuntime):
    result = await Wikipedia().invoke({"query": "x"}, params={"language": "evil.com/"}, context=runtime.context())
    assert isinstance(result.error, ToolInputError) and result.error.field == "language"


async def test_duckduckgo_parses_html_results_and_decodes_redirects(runtime: ToolRuntime, web_apis: WebApis):
    result = await DuckDuckGo().invoke({"query": "rust & go"}, params={"top_n": 4}, context=runtime.context())
    assert result.ok, result.error
    request = web_apis.of("duckduckgo")[-1]
    assert request.method == "POST" and request.body["q"] == "rust & go"
    assert len(result.chunks) == 4
    assert result.chunks[0]["url"] == "https://site0.example.org/rust-%26-go?a=1&b=0"
    assert result.chunks[0]["document_name"] == "rust & go & result 0"
    assert result.chunks[1]["content"] == "Snippet about rust & go number 1."


async def test_google_via_serpapi(runtime: ToolRuntime, web_apis: WebApis):
    result = await Google().invoke({"q": "pytest", "num": 2, "start": 10}, params={"country": "de"}, context=runtime.context())
    assert result.ok, result.error
    query = web_apis.of("google")[-1].query
    assert query["engine"] == "google" and query["api_key"] == KEYS["google"]
    assert (query["num"], query["start"], query["gl"], query["hl"]) == ("2", "10", "de", "en")
    assert [c["url"] for c in result.chunks] == ["https://g.example.com/10", "https://g.example.com/11"]
    empty = await Google().invoke({"q": "nothing here"}, params={}, context=runtime.context())
    assert empty.ok and empty.chunks == []


async def test_bing_web_and_news(runtime: ToolRuntime, web_apis: WebApis):
    result = await Bing().invoke({"query": "grpc"}, params={"top_n": 2, "country": "CH", "language": "en"}, context=runtime.context())
    assert result.ok, result.error
    request = web_apis.of("bing")[-1]
    assert request.path == "/bing/v7.0/search"
    assert request.headers["ocp-apim-subscription-key"] == KEYS["bing"]
    assert request.query["mkt"] == "en-CH" and request.query["count"] == "2"
    assert [c["document_name"] for c in result.chunks] == ["Bing page 0: grpc", "Bing page 1: grpc"]
    news = await Bing().invoke({"query": "grpc"}, params={"channel": "News"}, context=runtime.context())
    assert web_apis.of("bing")[-1].path == "/bing/v7.0/news/search"
    assert news.chunks[0]["content"] == "News text 0 on grpc."


async def test_yahoo_finance_report_and_not_found(runtime: ToolRuntime, web_apis: WebApis):
    result = await YahooFinance().invoke({"stock_code": "msft"}, params={"history": True}, context=runtime.context())
    assert result.ok, result.error
    request = next(r for r in web_apis.of("yahoo_finance") if "/chart/" in r.path)
    assert request.path == "/yahoo/v8/finance/chart/MSFT" and request.query["range"] == "1mo"
    report = result.outputs["report"]
    assert "- Name: MSFT Corporation" in report and "| 2025-01-02 |" in report and "| 2025-01-06 |" in report
    missing = await YahooFinance().invoke({"stock_code": "INVALID"}, params={}, context=runtime.context())
    assert isinstance(missing.error, ToolInputError)
    assert "Not Found" in missing.content


async def test_yahoo_finance_statement_switches_each_add_their_section_in_ragflows_order(runtime: ToolRuntime, web_apis: WebApis):
    switches = {"info": True, "history": True, "financials": True, "income_stmt": True, "balance_sheet": True,
                "cash_flow_statement": True, "news": True}
    result = await YahooFinance().invoke({"stock_code": "aapl"}, params=switches, context=runtime.context())
    assert result.ok, result.error
    report = result.outputs["report"]
    titles = [line[2:-1] for line in report.splitlines() if line.startswith("# ")]
    assert titles == ["Information", "History", "Calendar", "Income statement", "Quarterly income statement",
                      "Balance sheet", "Quarterly balance sheet", "Cash flow statement", "Quarterly cash flow statement",
                      "News"]
    assert "| totalAssets |" in report and "| 2024-09-30 | 2023-09-30 |" in report  # periods across, items down
    assert "| totalCashFromOperatingActivities |" in report and "| earningsDate | 2025-07-31 |" in report
    assert "AAPL news 0" in report and "- Name: AAPL Corporation" in report
    summary = next(r for r in web_apis.of("yahoo_finance") if "quoteSummary" in r.path)
    assert summary.query["modules"].split(",") == [
        "calendarEvents", "incomeStatementHistory", "incomeStatementHistoryQuarterly", "balanceSheetHistory",
        "balanceSheetHistoryQuarterly", "cashflowStatementHistory", "cashflowStatementHistoryQuarterly"]
    assert set(result.outputs["json"]) == {"chart", "summary", "news"}


async def test_yahoo_finance_with_info_off_prints_no_quote(runtime: ToolRuntime, web_apis: WebApis):
    result = await YahooFinance().invoke({"stock_code": "aapl"},
                                         params={"info": False, "news": False, "balance_sheet": True},
                                         context=runtime.context())
    assert result.ok, result.error
    report = result.outputs["report"]
    assert report.startswith("# Balance sheet:\n") and "Name:" not in report and "Price" not in report
    assert "News" not in report and "—" not in report
    nothing = await YahooFinance().invoke({"stock_code": "aapl"}, params={"info": "false", "news": False},
                                          context=runtime.context())
    assert nothing.outputs["report"] == ""


async def test_tavily_images_are_returned_when_asked_for(runtime: ToolRuntime, web_apis: WebApis):
    plain = await TavilySearch().invoke({"query": "solar"}, params={}, context=runtime.context())
    assert "images" not in plain.outputs
    described = await TavilySearch().invoke({"query": "solar"}, params={"include_images": True,
                                                                       "include_image_descriptions": True},
                                            context=runtime.context())
    assert [i["url"] for i in described.outputs["images"]] == ["https://images.example.com/0.png",
                                                               "https://images.example.com/1.png"]
    assert "Picture 0 of solar." in described.content
    extracted = await TavilyExtract().invoke({"urls": "https://a.example"}, params={"include_images": True},
                                             context=runtime.context())
    assert web_apis.of("tavily")[-1].body["include_images"] is True
    assert extracted.outputs["images"] == [{"url": "https://a.example/figure.png", "source": "https://a.example"}]


def test_yahoo_finance_count_is_reported_as_unsupported_by_name():
    assert [p.field for p in YahooFinance().unsupported({"count": True})] == ["count"]
    assert YahooFinance().unsupported({"count": False, "balance_sheet": True, "news": True}) == []


@pytest.mark.parametrize(
    ("tool", "args", "setting"),
    [
        (TavilySearch(), {"query": "q"}, "tools.tavily.api_key"),
        (TavilyExtract(), {"urls": "https://x.example"}, "tools.tavily.api_key"),
        (Google(), {"q": "q"}, "tools.google.api_key"),
        (Bing(), {"query": "q"}, "tools.bing.api_key"),
    ],
)
async def test_missing_key_is_a_typed_config_error(web_apis: WebApis, tmp_path: Path, tool, args, setting):
    runtime = ToolRuntime(make_settings(web_apis.tools_config(with_keys=False), tmp_path))
    before = len(web_apis.requests)
    try:
        # A placeholder key in the DSL (as the Bing template has) is not a key.
        result = await tool.invoke(args, params={"api_key": "YOUR_API_KEY (obtained from somewhere)"}, context=runtime.context())
    finally:
        await runtime.aclose()
    assert isinstance(result.error, ToolConfigError)
    assert result.error.setting == setting and result.error.tool == tool.component_name
    assert result.content.startswith("ERROR: ") and "api_key" in result.content
    assert len(web_apis.requests) == before


async def test_dsl_key_is_used_when_config_has_none(web_apis: WebApis, tmp_path: Path):
    runtime = ToolRuntime(make_settings(web_apis.tools_config(with_keys=False), tmp_path))
    try:
        result = await TavilySearch().invoke({"query": "q"}, params={"api_key": KEYS["tavily"]}, context=runtime.context())
    finally:
        await runtime.aclose()
    assert result.ok, result.error


async def test_key_from_environment_variable(web_apis: WebApis, tmp_path: Path):
    section = web_apis.tools_config(with_keys=False)
    section["bing"]["api_key_env"] = "MY_BING_KEY"
    settings = make_settings(section, tmp_path)
    assert settings.web_api("bing").api_key == ""
    from services.orchestrator.tools.config import ToolsSettings

    settings = ToolsSettings.from_mapping(section, data_dir=tmp_path, env={"MY_BING_KEY": KEYS["bing"]})
    runtime = ToolRuntime(settings)
    try:
        result = await Bing().invoke({"query": "q"}, params={}, context=runtime.context())
    finally:
        await runtime.aclose()
    assert result.ok, result.error


async def test_wrong_key_is_a_config_error_naming_the_setting(web_apis: WebApis, tmp_path: Path):
    section = web_apis.tools_config()
    section["google"]["api_key"] = "wrong"
    runtime = ToolRuntime(make_settings(section, tmp_path))
    try:
        result = await Google().invoke({"q": "x"}, params={}, context=runtime.context())
    finally:
        await runtime.aclose()
    assert isinstance(result.error, ToolConfigError) and result.error.setting == "tools.google.api_key"
    assert "HTTP 401" in result.error.message and "wrong" not in result.error.message


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (TavilySearch(), {"query": "trigger-500"}),
        (TavilyExtract(), {"urls": "https://trigger-500.example"}),
        (Wikipedia(), {"query": "trigger-500"}),
        (DuckDuckGo(), {"query": "trigger-500"}),
        (Google(), {"q": "trigger-500"}),
        (Bing(), {"query": "trigger-500"}),
        (YahooFinance(), {"stock_code": "TRIGGER-500"}),
    ],
)
async def test_http_error_is_a_typed_upstream_error_after_bounded_retries(web_apis: WebApis, tmp_path: Path, tool, args):
    runtime = ToolRuntime(make_settings(web_apis.tools_config(max_retries=2), tmp_path))
    before = len(web_apis.requests)
    try:
        result = await tool.invoke(args, params={}, context=runtime.context())
    finally:
        await runtime.aclose()
    assert isinstance(result.error, ToolUpstreamError), result.error
    assert result.error.status == 500
    assert len(web_apis.requests) - before == 3  # one try plus two retries


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (TavilySearch(), {"query": "trigger-hang"}),
        (Wikipedia(), {"query": "trigger-hang"}),
        (DuckDuckGo(), {"query": "trigger-hang"}),
        (Google(), {"q": "trigger-hang"}),
        (Bing(), {"query": "trigger-hang"}),
        (YahooFinance(), {"stock_code": "TRIGGER-HANG"}),
    ],
)
async def test_no_answer_is_a_typed_timeout(web_apis: WebApis, tmp_path: Path, tool, args):
    runtime = ToolRuntime(make_settings(web_apis.tools_config(timeout_s=0.3), tmp_path))
    try:
        result = await tool.invoke(args, params={}, context=runtime.context())
    finally:
        await runtime.aclose()
    assert isinstance(result.error, ToolTimeoutError), result.error
    assert "within 0.3s" in result.error.message


async def test_unreachable_api_is_a_typed_upstream_error(tmp_path: Path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    section = {"http": {"max_retries": 0}, "tavily": {"base_url": f"http://127.0.0.1:{port}", "api_key": "k"}}
    runtime = ToolRuntime(make_settings(section, tmp_path))
    try:
        result = await TavilySearch().invoke({"query": "x"}, params={}, context=runtime.context())
    finally:
        await runtime.aclose()
    assert isinstance(result.error, ToolUpstreamError) and "cannot reach" in result.error.message
