"""Shared shaping of web-search results into a ToolResult (spec §5.20)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.orchestrator.tools.base import ToolResult
from services.orchestrator.tools.citations import doc_aggs_of, format_knowledge, web_chunks
from services.orchestrator.tools.errors import ToolInputError
from services.orchestrator.tools.runtime import ToolContext

QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The search keywords to execute."}},
    "required": ["query"],
}


def text_arg(tool: str, args: Mapping[str, Any], name: str) -> str:
    value = args.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, (str, int, float)):
        raise ToolInputError(tool, name, f"'{name}' must be a string")
    return str(value).strip()


def top_n(tool: str, params: Mapping[str, Any], name: str = "top_n", default: int = 10, maximum: int = 50) -> int:
    value = params.get(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolInputError(tool, name, f"'{name}' must be a positive integer") from None
    if number < 1:
        raise ToolInputError(tool, name, f"'{name}' must be a positive integer")
    return min(number, maximum)


def empty_result() -> ToolResult:
    """RAGFlow's web tools answer an empty query with empty outputs, not an error."""
    return ToolResult(content="", outputs={"formalized_content": "", "json": []})


def search_result(context: ToolContext, results: Sequence[Mapping[str, Any]], *, source: str) -> ToolResult:
    """`results` are `{title, url, content, score?}`; they become cited chunks and the knowledge block."""
    chunks = context.cite(web_chunks(results, source=source))
    formalized = format_knowledge(chunks, context.settings.retrieval.max_context_chars)
    return ToolResult(
        content=formalized or "No results found.",
        outputs={"formalized_content": formalized, "json": [dict(r) for r in results]},
        chunks=chunks,
        doc_aggs=doc_aggs_of(chunks),
    )
