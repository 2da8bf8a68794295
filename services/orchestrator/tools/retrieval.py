"""Retrieval (RAGFlow class `Retrieval`, function `search_my_dateset`) with pluggable backends.

Backends (`tools.retrieval.backend`):
- `embedded` (default): the SQLite FTS5 knowledge base under the data dir (see kb/store.py);
- `ragflow`: a RAGFlow server's HTTP API, `POST {base_url}/api/v1/retrieval` with
  `Authorization: Bearer <key>` and `{question, dataset_ids, document_ids, page, page_size,
  similarity_threshold, vector_similarity_weight, top_k, rerank_id, keyword, highlight}`; it answers
  `{code: 0, data: {chunks: [...], doc_aggs: [{doc_id, doc_name, count}], total}}` or
  `{code: <non-zero>, message}` (HTTP 200 either way).

Both return chunks in RAGFlow's reference shape; chunks are added to the run's reference bucket
(which assigns citation ids), and `formalized_content` is the knowledge block the model cites from.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from services.orchestrator.tools import http
from services.orchestrator.tools.base import ParamProblem, Tool, ToolResult, is_set
from services.orchestrator.tools.citations import doc_aggs_of, format_knowledge, normalize_chunk
from services.orchestrator.tools.errors import ToolConfigError, ToolInputError, ToolUpstreamError
from services.orchestrator.tools.kb.store import SearchHits
from services.orchestrator.tools.runtime import ToolContext

logger = logging.getLogger(__name__)

_USER_PREFIX = re.compile(r"^\s*user\s*:\s*", re.IGNORECASE)
_RAGFLOW_AUTH_CODES = {109, 401}


def _number(tool: str, params: Mapping[str, Any], name: str, default: float, lo: float, hi: float | None = None) -> float:
    try:
        value = float(params.get(name, default) if params.get(name) not in (None, "") else default)
    except (TypeError, ValueError):
        raise ToolInputError(tool, name, f"'{name}' must be a number") from None
    if value < lo or (hi is not None and value > hi):
        raise ToolInputError(tool, name, f"'{name}' must be between {lo:g} and {hi:g}" if hi is not None else f"'{name}' must be >= {lo:g}")
    return value


def dataset_ids_of(params: Mapping[str, Any]) -> list[str]:
    """`dataset_ids` (or legacy `kb_ids`), without empty entries or unresolved references."""
    raw = params.get("dataset_ids") or params.get("kb_ids") or []
    if isinstance(raw, str):
        raw = [raw]
    ids = []
    for value in raw if isinstance(raw, list) else []:
        text = str(value or "").strip()
        if text and "{" not in text:
            ids.append(text)
    return ids


class Retrieval(Tool):
    component_name = "Retrieval"
    function_name = "search_my_dateset"
    description = "Search the knowledge base for passages relevant to the query; cite them by their ID."
    arguments_schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "The keywords to search the dataset for."}},
        "required": ["query"],
    }
    params_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "default": ""},
            "similarity_threshold": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.2},
            "keywords_similarity_weight": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
            "top_n": {"type": "integer", "minimum": 1, "default": 8},
            "top_k": {"type": "integer", "minimum": 1, "default": 1024},
            "dataset_ids": {"type": "array", "items": {"type": "string"}, "default": []},
            "kb_ids": {"type": "array", "items": {"type": "string"}, "default": []},
            "document_ids": {"type": "array", "items": {"type": "string"}, "default": []},
            "rerank_id": {"type": "string", "default": ""},
            "empty_response": {"type": "string", "default": ""},
            "retrieval_from": {"type": "string", "enum": ["dataset", "memory"], "default": "dataset"},
            "memory_ids": {"type": "array", "items": {"type": "string"}, "default": []},
            "use_kg": {"type": "boolean", "default": False},
            "cross_languages": {"type": "array", "items": {"type": "string"}, "default": []},
            "toc_enhance": {"type": "boolean", "default": False},
            "meta_data_filter": {"type": "object", "default": {}},
            "kb_vars": {"type": "array", "default": []},
            "function_name": {"type": "string", "default": ""},
            "description": {"type": "string", "default": ""},
        },
    }
    argument_defaults = {"query": ""}
    unsupported_params = {
        "kb_vars": "RAGFlow declares kb_vars but never reads it; name the datasets in dataset_ids",
        "meta_data_filter": "metadata filters are not supported; remove the filter (or set its method to disabled)",
    }
    # RAGFlow's retrieval features that only a RAGFlow server has: sent to it by the ragflow backend.
    _SERVER_FEATURES = {
        "use_kg": "knowledge-graph retrieval needs the ragflow backend (tools.retrieval.backend: ragflow)",
        "cross_languages": "cross-language retrieval needs the ragflow backend (tools.retrieval.backend: ragflow)",
        "toc_enhance": "table-of-contents enhancement needs the ragflow backend (tools.retrieval.backend: ragflow)",
        "rerank_id": "reranking needs the ragflow backend (tools.retrieval.backend: ragflow)",
    }

    def unsupported(self, params: Mapping[str, Any] | None, context: ToolContext | None = None) -> list[ParamProblem]:
        params = params or {}
        problems = [p for p in super().unsupported(params, context)
                    if not (p.field == "meta_data_filter" and isinstance(params.get("meta_data_filter"), dict)
                            and str(params["meta_data_filter"].get("method") or "disabled").lower() == "disabled")]
        if context is None or context.settings.retrieval.backend != "ragflow":
            problems += [ParamProblem(name, why) for name, why in self._SERVER_FEATURES.items() if is_set(params.get(name))]
        return problems

    def validate(self, params: Mapping[str, Any] | None, context: ToolContext) -> list[ParamProblem]:
        params = params or {}
        problems = []
        if params.get("retrieval_from") == "memory":
            problems.append(ParamProblem("retrieval_from", "memory retrieval is not supported; use datasets"))
        settings = context.settings.retrieval
        if settings.backend == "ragflow" and not settings.ragflow.base_url:
            problems.append(ParamProblem("tools.retrieval.ragflow.base_url", "the ragflow retrieval backend needs a base URL"))
        return problems

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        name = self.component_name
        query = _USER_PREFIX.sub("", str(args.get("query") or "")).strip()
        empty = str(params.get("empty_response") or "")
        if not query:
            return ToolResult(content=empty, outputs={"formalized_content": empty, "json": []})
        if params.get("retrieval_from") == "memory":
            raise ToolInputError(name, "retrieval_from", "memory retrieval is not supported; use datasets")
        options = {
            "top_n": int(_number(name, params, "top_n", 8, 1)),
            "top_k": int(_number(name, params, "top_k", 1024, 1)),
            "similarity_threshold": _number(name, params, "similarity_threshold", 0.2, 0, 1),
            "keywords_similarity_weight": _number(name, params, "keywords_similarity_weight", 0.5, 0, 1),
        }
        datasets = dataset_ids_of(params)
        documents = [str(d) for d in params.get("document_ids") or [] if str(d).strip()]
        if context.settings.retrieval.backend == "ragflow":
            hits = await self._ragflow(context, query, datasets, documents, params, options)
        else:
            hits = await self._embedded(context, query, datasets, documents, options)
        if not hits.chunks:
            return ToolResult(content=empty or "No relevant passages were found.", outputs={"formalized_content": empty, "json": []})
        chunks = context.cite(hits.chunks)
        formalized = format_knowledge(chunks, context.settings.retrieval.max_context_chars)
        return ToolResult(
            content=formalized,
            outputs={"formalized_content": formalized, "json": chunks},
            chunks=chunks,
            doc_aggs=hits.doc_aggs or doc_aggs_of(chunks),
        )

    async def _embedded(
        self, context: ToolContext, query: str, datasets: list[str], documents: list[str], options: dict[str, Any]
    ) -> SearchHits:
        kb = context.runtime.kb
        scope = context.settings.retrieval.embedded.dataset_scope
        known = set(await context.run_blocking(kb.datasets))
        if scope == "requested":
            if not datasets:
                raise ToolInputError(self.component_name, "dataset_ids", "No dataset is selected.")
            unknown = [d for d in datasets if d not in known]
            if unknown:
                raise ToolInputError(self.component_name, "dataset_ids", f"unknown dataset(s): {', '.join(unknown)}")
            selected = datasets
        else:
            selected = [d for d in datasets if d in known]
            if datasets and not selected:
                logger.debug("retrieval: none of %s is in the embedded KB; searching all datasets", datasets)
        return await context.run_blocking(kb.search, query, dataset_ids=selected or None, document_ids=documents or None, **options)

    async def _ragflow(
        self,
        context: ToolContext,
        query: str,
        datasets: list[str],
        documents: list[str],
        params: Mapping[str, Any],
        options: dict[str, Any],
    ) -> SearchHits:
        name = self.component_name
        api = context.settings.retrieval.ragflow
        if not api.base_url:
            raise ToolConfigError(name, "tools.retrieval.ragflow.base_url", "no RAGFlow base URL: set tools.retrieval.ragflow.base_url")
        key = http.require_key(name, api, {})
        if not datasets:
            raise ToolInputError(name, "dataset_ids", "No dataset is selected.")
        body = {
            "question": query,
            "dataset_ids": datasets,
            "document_ids": documents,
            "page": 1,
            "page_size": options["top_n"],
            "similarity_threshold": options["similarity_threshold"],
            "vector_similarity_weight": round(1 - options["keywords_similarity_weight"], 6),
            "top_k": options["top_k"],
            "keyword": False,
            "highlight": False,
        }
        if params.get("rerank_id"):
            body["rerank_id"] = params["rerank_id"]
        for name in ("use_kg", "cross_languages", "toc_enhance"):  # RAGFlow's own retrieval features
            if is_set(params.get(name)):
                body[name] = params[name]
        data = await http.send_json(
            context.http, name, api, "POST", f"{api.base_url}/api/v1/retrieval", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        if not isinstance(data, dict):
            raise ToolUpstreamError(name, "unexpected answer from the RAGFlow retrieval API")
        code = data.get("code")
        if code in _RAGFLOW_AUTH_CODES:
            raise ToolConfigError(name, "tools.retrieval.ragflow.api_key", f"RAGFlow rejected the key: {data.get('message', '')}")
        if code != 0:
            raise ToolUpstreamError(name, f"RAGFlow error {code}: {str(data.get('message', ''))[:300]}")
        payload = data.get("data") or {}
        chunks = [normalize_chunk(c) for c in payload.get("chunks") or [] if isinstance(c, dict)]
        aggs = [
            {"doc_id": a.get("doc_id", ""), "doc_name": a.get("doc_name", ""), "count": int(a.get("count", 0))}
            for a in payload.get("doc_aggs") or []
            if isinstance(a, dict)
        ]
        return SearchHits(chunks=chunks, doc_aggs=aggs, total=int(payload.get("total") or len(chunks)))
