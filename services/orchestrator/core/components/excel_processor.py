"""ExcelProcessor (spec §5.17), CSV-backed: read, merge, transform and output tabular data.

Files are CSV (inline `content`/data URL) here; xlsx needs a spreadsheet library this service does
not ship and fails with a clear error.
"""

from __future__ import annotations

import base64
import csv
import io
from typing import Any

from services.orchestrator.core.components.base import Component, Outcome, Problem
from services.orchestrator.core.components.registry import register
from services.orchestrator.core.errors import NodeError
from services.orchestrator.core.values import parse_json

OPERATIONS = ("read", "merge", "transform", "output")


def _file_text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("content") or value.get("data") or ""
    if isinstance(value, str) and value.startswith("data:"):
        header, _, payload = value.partition(",")
        return base64.b64decode(payload).decode("utf-8") if ";base64" in header else payload
    if isinstance(value, str):
        return value
    raise NodeError("input files must be CSV text, data URLs or {content} objects", reason="BAD_FILE")


def _records(text: str) -> list[dict[str, Any]]:
    return [dict(row) for row in csv.DictReader(io.StringIO(text))]


def _markdown(rows: list[dict[str, Any]], limit: int = 10) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in rows[:limit]]
    return "\n".join(lines)


@register
class ExcelProcessor(Component):
    type_name = "ExcelProcessor"
    static_outputs = ("data", "summary", "markdown", "attachment")

    @classmethod
    def unsupported(cls, params: dict[str, Any]) -> list[Problem]:
        # A CSV file is one sheet: "all" and "first" read it; sheet names need xlsx.
        selection = str(params.get("sheet_selection") or "all").strip().lower()
        return [] if selection in ("all", "first") else [
            ("sheet_selection", "sheets chosen by name need xlsx files, which are not supported yet (CSV files are "
                                "one sheet: use all or first)")]

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        op = params.get("operation", "read")
        return [] if op in OPERATIONS else [("operation", f"operation must be one of {', '.join(OPERATIONS)}")]

    async def _tables(self, ctx) -> list[list[dict[str, Any]]]:
        refs = self.param("input_files", [])
        texts = []
        for ref in refs if isinstance(refs, list) else [refs]:
            value = ctx.resolve(ref)
            texts.extend(_file_text(item) for item in (value if isinstance(value, list) else [value]))
        # Parsing may be large: it runs on the bounded thread pool, not on the event loop.
        return [await ctx.run_blocking(_records, text) for text in texts]

    async def invoke(self, ctx) -> Outcome:
        op = self.param("operation", "read")
        if op == "read":
            tables = await self._tables(ctx)
            summary = f"{len(tables)} table(s): " + ", ".join(f"{len(t)} rows" for t in tables)
            return Outcome(outputs={"data": tables, "summary": summary, "markdown": "\n\n".join(_markdown(t) for t in tables)})
        if op == "merge":
            tables = await self._tables(ctx)
            if self.param("merge_strategy", "concat") == "join":
                key = self.param("join_on")
                if not key:
                    raise NodeError("join needs join_on", reason="BAD_PARAM")
                merged: dict[Any, dict[str, Any]] = {}
                for table in tables:
                    for row in table:
                        merged.setdefault(row.get(key), {}).update(row)
                rows = list(merged.values())
            else:
                rows = [row for table in tables for row in table]
            return Outcome(outputs={"data": rows, "summary": f"{len(rows)} rows", "markdown": _markdown(rows)})
        data = ctx.resolve(self.param("transform_data"))
        if isinstance(data, str):
            try:
                data = parse_json(data)
            except ValueError as exc:
                raise NodeError(f"transform_data is not JSON: {exc}", reason="BAD_DATA") from None
        rows = data if isinstance(data, list) else [data]
        rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
        if op == "transform":
            return Outcome(outputs={"data": rows, "summary": f"{len(rows)} rows", "markdown": _markdown(rows)})
        if self.param("output_format", "xlsx") != "csv":
            raise NodeError("xlsx output is not supported yet; use csv", reason="UNSUPPORTED_FORMAT")
        buffer = io.StringIO()
        keys = list(dict.fromkeys(k for r in rows for k in r))
        writer = csv.DictWriter(buffer, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
        name = str(self.param("output_filename", "") or "output").rsplit(".", 1)[0] + ".csv"
        attachment = {"filename": name, "mime_type": "text/csv", "base64": base64.b64encode(buffer.getvalue().encode()).decode()}
        return Outcome(outputs={"data": rows, "summary": f"{len(rows)} rows", "markdown": _markdown(rows), "attachment": attachment})
