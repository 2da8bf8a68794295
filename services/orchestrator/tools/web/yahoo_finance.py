"""YahooFinance through Yahoo's chart JSON endpoint (no key).

GET {base_url}/v8/finance/chart/<SYMBOL>?range=<range>&interval=<interval>
answers `{chart: {result: [{meta: {symbol, currency, exchangeName, longName?, regularMarketPrice,
chartPreviousClose, regularMarketDayHigh?, regularMarketDayLow?, regularMarketVolume?,
fiftyTwoWeekHigh?, fiftyTwoWeekLow?}, timestamp: [...], indicators: {quote: [{open, high, low, close,
volume}]}}], error: null}}`; an unknown symbol answers 404 with
`{chart: {result: null, error: {code: "Not Found", description}}}`.

RAGFlow's class (built on the yfinance library) also offers financial statements and news; the chart
endpoint has neither, so `info` (quote summary) and `history` (daily rows) are what this tool reports.
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


class YahooFinance(Tool):
    component_name = "YahooFinance"
    function_name = "yahoo_finance"
    description = "Get a stock's current quote and recent daily prices from Yahoo Finance, given its ticker symbol."
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
            "range": {"type": "string", "default": "1mo"},
            "interval": {"type": "string", "default": "1d"},
        },
    }
    argument_defaults = {"stock_code": "{sys.query}"}
    output_names = ("report", "json")

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
        data = await http.send_json(
            context.http,
            self.component_name,
            api,
            "GET",
            f"{http.require_base_url(self.component_name, api)}/v8/finance/chart/{symbol}",
            params={"range": span, "interval": str(params.get("interval") or "1d")},
            accept=(404,),
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
        report = self._report(results[0], info=bool(params.get("info", True)), history=bool(params.get("history")))
        return ToolResult(content=report, outputs={"report": report, "json": results[0]})

    @staticmethod
    def _report(result: dict[str, Any], *, info: bool, history: bool) -> str:
        meta = result.get("meta") or {}
        sections = []
        if info or not history:
            lines = [f"- {label}: {_fmt(meta[key])}" for key, label in _INFO_FIELDS if meta.get(key) is not None]
            sections.append(f"## {meta.get('symbol', '')} quote\n" + "\n".join(lines))
        if history:
            quote = ((result.get("indicators") or {}).get("quote") or [{}])[0]
            rows = ["| Date | Open | High | Low | Close | Volume |", "|---|---|---|---|---|---|"]
            for i, ts in enumerate(result.get("timestamp") or []):
                day = datetime.fromtimestamp(int(ts), tz=timezone.utc).strftime("%Y-%m-%d")
                cells = [_fmt((quote.get(k) or [None] * (i + 1))[i] if i < len(quote.get(k) or []) else None)
                         for k in ("open", "high", "low", "close", "volume")]
                rows.append(f"| {day} | " + " | ".join(cells) + " |")
            sections.append("## Daily prices\n" + "\n".join(rows))
        return "\n\n".join(sections)
