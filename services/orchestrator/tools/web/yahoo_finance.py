"""YahooFinance through Yahoo's public JSON endpoints (no key), one section per switch.

RAGFlow's class (yfinance) has eight boolean params; each one set here changes the report:
- `info` (default on): the quote summary, from the chart endpoint's `meta`
  `GET {base_url}/v8/finance/chart/<SYMBOL>?range=<range>&interval=<interval>`;
- `history`: daily rows from the same answer (`timestamp`, `indicators.quote`);
- `financials` (RAGFlow shows the earnings/dividend calendar under it), `income_stmt`, `balance_sheet`,
  `cash_flow_statement`: modules of `GET {base_url}/v10/finance/quoteSummary/<SYMBOL>?modules=...`
  (`calendarEvents`, `incomeStatementHistory[Quarterly]`, `balanceSheetHistory[Quarterly]`,
  `cashflowStatementHistory[Quarterly]`), annual and quarterly tables as RAGFlow prints both;
- `news` (default on): `GET {base_url}/v1/finance/search?q=<SYMBOL>&quotesCount=0&newsCount=<n>`.
`count` is validated but never used by RAGFlow; set true it is reported as unsupported.
An unknown symbol answers 404 with `{chart: {result: null, error: {code: "Not Found", description}}}`.
Sections come in RAGFlow's order, each `# <Title>:` followed by its markdown.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from services.orchestrator.tools import http
from services.orchestrator.tools.base import Tool, ToolResult
from services.orchestrator.tools.errors import ToolInputError, ToolUpstreamError
from services.orchestrator.tools.runtime import ToolContext
from services.orchestrator.tools.web.common import text_arg

_SYMBOL = re.compile(r"^[A-Za-z0-9^=.\-]{1,20}$")
_RANGES = {"1d", "5d", "1mo", "3mo", "6mo", "1y", "2y", "5y", "10y", "ytd", "max"}
_INFO_FIELDS = [
    ("longName", "Name"),
    ("symbol", "Symbol"),
    ("exchangeName", "Exchange"),
    ("currency", "Currency"),
    ("regularMarketPrice", "Price"),
    ("chartPreviousClose", "Previous close"),
    ("regularMarketDayHigh", "Day high"),
    ("regularMarketDayLow", "Day low"),
    ("regularMarketVolume", "Volume"),
    ("fiftyTwoWeekHigh", "52-week high"),
    ("fiftyTwoWeekLow", "52-week low"),
]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return "" if value is None else str(value)


_STATEMENTS = [  # (param, module, list key, title), in RAGFlow's order
    ("income_stmt", "incomeStatementHistory", "incomeStatementHistory", "Income statement"),
    ("income_stmt", "incomeStatementHistoryQuarterly", "incomeStatementHistory", "Quarterly income statement"),
    ("balance_sheet", "balanceSheetHistory", "balanceSheetStatements", "Balance sheet"),
    ("balance_sheet", "balanceSheetHistoryQuarterly", "balanceSheetStatements", "Quarterly balance sheet"),
    ("cash_flow_statement", "cashflowStatementHistory", "cashflowStatements", "Cash flow statement"),
    ("cash_flow_statement", "cashflowStatementHistoryQuarterly", "cashflowStatements", "Quarterly cash flow statement"),
]
NEWS_COUNT = 8


def _cell(value: Any) -> str:
    """A quoteSummary value ({raw, fmt}) or a plain one, as table text."""
    if isinstance(value, dict):
        value = value.get("fmt", value.get("raw"))
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    return _fmt(value).replace("|", "\\|").replace("\n", " ")


def _statement_table(rows: list[dict[str, Any]]) -> str:
    """Line items down, periods across (as yfinance's frames print)."""
    periods = [_cell(row.get("endDate")) or str(i) for i, row in enumerate(rows)]
    items = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in ("endDate", "maxAge")]
    lines = ["| Item | " + " | ".join(periods) + " |", "|---|" + "---|" * len(periods)]
    lines += [f"| {item} | " + " | ".join(_cell(row.get(item)) for row in rows) + " |" for item in items]
    return "\n".join(lines)


def _calendar_table(calendar: dict[str, Any]) -> str:
    earnings = calendar.get("earnings") if isinstance(calendar.get("earnings"), dict) else {}
    entries = [(k, v) for k, v in {**earnings, **{k: v for k, v in calendar.items() if k != "earnings"}}.items()
               if k != "maxAge"]
    return "\n".join(["| Item | Value |", "|---|---|"] + [f"| {k} | {_cell(v)} |" for k, v in entries])


def _news_table(items: list[dict[str, Any]]) -> str:
    lines = ["| Title | Publisher | Published | Link |", "|---|---|---|---|"]
    for item in items:
        when = item.get("providerPublishTime")
        published = datetime.fromtimestamp(int(when), tz=timezone.utc).strftime("%Y-%m-%d %H:%M") if isinstance(when, (int, float)) else ""
        lines.append(f"| {_cell(item.get('title'))} | {_cell(item.get('publisher'))} | {published} | {_cell(item.get('link'))} |")
    return "\n".join(lines)


class YahooFinance(Tool):
    component_name = "YahooFinance"
    function_name = "yahoo_finance"
    description = ("Get a stock's quote, recent prices, financial statements and news from Yahoo Finance, "
                   "given its ticker symbol.")
    arguments_schema = {
        "type": "object",
        "properties": {"stock_code": {"type": "string", "description": "The ticker symbol, e.g. AAPL or 0700.HK."}},
        "required": ["stock_code"],
    }
    params_schema = {
        "type": "object",
        "properties": {
            "stock_code": {"type": "string", "default": "{sys.query}"},
            "info": {"type": "boolean", "default": True},
            "history": {"type": "boolean", "default": False},
            "count": {"type": "boolean", "default": False},
            "financials": {"type": "boolean", "default": False},
            "income_stmt": {"type": "boolean", "default": False},
            "balance_sheet": {"type": "boolean", "default": False},
            "cash_flow_statement": {"type": "boolean", "default": False},
            "news": {"type": "boolean", "default": True},
            "range": {"type": "string", "default": "1mo"},
            "interval": {"type": "string", "default": "1d"},
        },
    }
    argument_defaults = {"stock_code": "{sys.query}"}
    output_names = ("report", "json")
    unsupported_params = {"count": "RAGFlow validates `count` but never uses it; there is nothing to report for it"}

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        symbol = text_arg(self.component_name, args, "stock_code").upper()
        if not symbol:
            return ToolResult(content="", outputs={"report": ""})
        if not _SYMBOL.match(symbol):
            raise ToolInputError(self.component_name, "stock_code", f"'{symbol[:40]}' is not a ticker symbol")
        span = str(params.get("range") or "1mo")
        if span not in _RANGES:
            raise ToolInputError(self.component_name, "range", f"range must be one of {sorted(_RANGES)}")
        api = context.settings.web_api("yahoo_finance")
        base = http.require_base_url(self.component_name, api)
        data = await http.send_json(
            context.http, self.component_name, api, "GET", f"{base}/v8/finance/chart/{symbol}",
            params={"range": span, "interval": str(params.get("interval") or "1d")}, accept=(404,),
        )
        chart = data.get("chart") if isinstance(data, dict) else None
        if not isinstance(chart, dict):
            raise ToolUpstreamError(self.component_name, "unexpected answer from Yahoo Finance")
        if chart.get("error"):
            error = chart["error"] if isinstance(chart["error"], dict) else {"description": str(chart["error"])}
            raise ToolInputError(
                self.component_name, "stock_code", f"{error.get('code') or 'Error'}: {error.get('description') or symbol}"
            )
        results = chart.get("result") or []
        if not results or not isinstance(results[0], dict):
            raise ToolInputError(self.component_name, "stock_code", f"Not Found: no data for {symbol}")
        chart_result = results[0]
        sections: list[tuple[str, str]] = []
        if _on(params, "info"):
            sections.append(("Information", self._info(chart_result)))
        if _on(params, "history"):
            sections.append(("History", self._history(chart_result)))
        modules = ([("financials", "calendarEvents", None, "Calendar")] if _on(params, "financials") else []) + \
            [entry for entry in _STATEMENTS if _on(params, entry[0])]
        summary = await self._summary(context, api, base, symbol, [m[1] for m in modules]) if modules else {}
        for _, module, key, title in modules:
            value = summary.get(module) if isinstance(summary.get(module), dict) else {}
            if key is None:
                sections.append((title, _calendar_table(value) if value else "No data"))
            else:
                rows = [r for r in value.get(key) or [] if isinstance(r, dict)]
                sections.append((title, _statement_table(rows) if rows else "No data"))
        news: list[dict[str, Any]] = []
        if _on(params, "news"):
            news = await self._news(context, api, base, symbol)
            sections.append(("News", _news_table(news) if news else "No news"))
        report = "\n\n".join(f"# {title}:\n{body}\n" for title, body in sections)
        payload: dict[str, Any] = {"chart": chart_result}
        if summary:
            payload["summary"] = summary
        if news:
            payload["news"] = news
        return ToolResult(content=report, outputs={"report": report, "json": payload})

    async def _summary(self, context: ToolContext, api: Any, base: str, symbol: str, modules: list[str]) -> dict[str, Any]:
        data = await http.send_json(context.http, self.component_name, api, "GET",
                                    f"{base}/v10/finance/quoteSummary/{symbol}", params={"modules": ",".join(modules)},
                                    accept=(404,))
        summary = data.get("quoteSummary") if isinstance(data, dict) else None
        if not isinstance(summary, dict):
            raise ToolUpstreamError(self.component_name, "unexpected quoteSummary answer from Yahoo Finance")
        if summary.get("error"):
            error = summary["error"] if isinstance(summary["error"], dict) else {"description": str(summary["error"])}
            raise ToolInputError(self.component_name, "stock_code",
                                 f"{error.get('code') or 'Error'}: {error.get('description') or symbol}")
        results = summary.get("result") or []
        return results[0] if results and isinstance(results[0], dict) else {}

    async def _news(self, context: ToolContext, api: Any, base: str, symbol: str) -> list[dict[str, Any]]:
        data = await http.send_json(context.http, self.component_name, api, "GET", f"{base}/v1/finance/search",
                                    params={"q": symbol, "quotesCount": "0", "newsCount": str(NEWS_COUNT)})
        items = data.get("news") if isinstance(data, dict) else None
        return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []

    @staticmethod
    def _info(result: dict[str, Any]) -> str:
        meta = result.get("meta") or {}
        return "\n".join(f"- {label}: {_fmt(meta[key])}" for key, label in _INFO_FIELDS if meta.get(key) is not None)

    @staticmethod
    def _history(result: dict[str, Any]) -> str:
        quote = ((result.get("indicators") or {}).get("quote") or [{}])[0]
        rows = ["| Date | Open | High | Low | Close | Volume |", "|---|---|---|---|---|---|"]
        for i, ts in enumerate(result.get("timestamp") or []):
            day = datetime.fromtimestamp(int(ts), tz=timezone.utc).strftime("%Y-%m-%d")
            cells = [_fmt((quote.get(k) or [None] * (i + 1))[i] if i < len(quote.get(k) or []) else None)
                     for k in ("open", "high", "low", "close", "volume")]
            rows.append(f"| {day} | " + " | ".join(cells) + " |")
        return "\n".join(rows)


def _on(params: dict[str, Any], name: str) -> bool:
    """A boolean switch: real booleans, and the text forms DSL files hold ("false" is off)."""
    value = params.get(name)
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
