"""TavilySearch and TavilyExtract against Tavily's REST API.

- POST {base_url}/search  with `Authorization: Bearer <key>` and a JSON body
  `{query, search_depth, topic, max_results, days?, include_answer, include_raw_content,
  include_images, include_image_descriptions, include_domains, exclude_domains}`;
  answer `{query, answer?, results: [{title, url, content, raw_content?, score}], response_time}`.
- POST {base_url}/extract with `{urls: [...], extract_depth, format}`;
  answer `{results: [{url, raw_content, images?}], failed_results: [{url, error}]}`.
"""

from __future__ import annotations

import re
from typing import Any

from services.orchestrator.tools import http
from services.orchestrator.tools.base import Tool, ToolResult
from services.orchestrator.tools.errors import ToolInputError
from services.orchestrator.tools.runtime import ToolContext
from services.orchestrator.tools.web.common import empty_result, search_result, text_arg, top_n


def _domains(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [v for v in re.split(r"[\s,;]+", value) if v]
    if not isinstance(value, list):
        return []
    return [str(v).strip() for v in value if str(v).strip()]


class TavilySearch(Tool):
    component_name = "TavilySearch"
    function_name = "tavily_search"
    output_names = ("formalized_content", "json", "answer", "images")
    description = (
        "Search the web with Tavily, a search engine optimised for LLMs, and return the most relevant "
        "pages with their content."
    )
    arguments_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The search keywords to execute with Tavily."},
            "topic": {
                "type": "string",
                "description": "The search category: 'news' for current events, else 'general'.",
                "enum": ["general", "news"],
            },
            "include_domains": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only return results from these domains.",
            },
            "exclude_domains": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Never return results from these domains.",
            },
        },
        "required": ["query"],
    }
    params_schema = {
        "type": "object",
        "properties": {
            "api_key": {"type": "string", "default": ""},
            "query": {"type": "string", "default": "{sys.query}"},
            "search_depth": {"type": "string", "enum": ["basic", "advanced"], "default": "basic"},
            "topic": {"type": "string", "enum": ["general", "news"], "default": "general"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 6},
            "days": {"type": "integer", "minimum": 1, "default": 14},
            "include_answer": {"type": "boolean", "default": False},
            "include_raw_content": {"type": "boolean", "default": True},
            "include_images": {"type": "boolean", "default": False},
            "include_image_descriptions": {"type": "boolean", "default": False},
            "include_domains": {"type": "array", "items": {"type": "string"}, "default": []},
            "exclude_domains": {"type": "array", "items": {"type": "string"}, "default": []},
        },
    }
    argument_defaults = {"query": "{sys.query}"}

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        query = text_arg(self.component_name, args, "query")
        if not query:
            return empty_result()
        api = context.settings.web_api("tavily")
        key = http.require_key(self.component_name, api, params)
        topic = args.get("topic") or params.get("topic") or "general"
        if topic not in ("general", "news"):
            raise ToolInputError(self.component_name, "topic", "topic must be 'general' or 'news'")
        body: dict[str, Any] = {
            "query": query,
            "search_depth": params.get("search_depth") or "basic",
            "topic": topic,
            "max_results": top_n(self.component_name, params, "max_results", 6, 20),
            "include_answer": bool(params.get("include_answer")),
            "include_raw_content": bool(params.get("include_raw_content")),
            "include_images": bool(params.get("include_images")),
            "include_image_descriptions": bool(params.get("include_image_descriptions")),
            "include_domains": _domains(args.get("include_domains") or params.get("include_domains")),
            "exclude_domains": _domains(args.get("exclude_domains") or params.get("exclude_domains")),
        }
        if topic == "news":
            body["days"] = top_n(self.component_name, params, "days", 14, 3650)
        data = await http.send_json(
            context.http,
            self.component_name,
            api,
            "POST",
            f"{http.require_base_url(self.component_name, api)}/search",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
        )
        results = [
            {
                "title": r.get("title") or "",
                "url": r.get("url") or "",
                "content": r.get("raw_content") or r.get("content") or "",
                "score": r.get("score"),
            }
            for r in (data.get("results") or [] if isinstance(data, dict) else [])
            if isinstance(r, dict)
        ]
        result = search_result(context, results, source="tavily")
        if isinstance(data, dict) and data.get("answer"):
            result.outputs["answer"] = data["answer"]
        images = _images(data) if params.get("include_images") else []
        if images:  # asked for: the node's `images` output and the model's text list them
            result.outputs["images"] = images
            result.content += "\n\nImages:\n" + "\n".join(
                f"- {i['url']}" + (f" ({i['description']})" if i.get("description") else "") for i in images)
        return result


def _images(data: Any) -> list[dict[str, str]]:
    """Tavily's `images`: URLs, or {url, description} with include_image_descriptions."""
    found = []
    for item in data.get("images") or [] if isinstance(data, dict) else []:
        if isinstance(item, str):
            found.append({"url": item})
        elif isinstance(item, dict) and item.get("url"):
            found.append({"url": str(item["url"]), "description": str(item.get("description") or "")})
    return found


def _urls(value: Any) -> list[str]:
    if isinstance(value, str):
        value = re.split(r"[\s,;]+", value)
    if not isinstance(value, list):
        return []
    return [str(u).strip() for u in value if str(u).strip()]


class TavilyExtract(Tool):
    component_name = "TavilyExtract"
    function_name = "tavily_extract"
    output_names = ("formalized_content", "json", "failed_results", "images")
    description = "Extract the main content of web pages, given their URLs, with Tavily."
    arguments_schema = {
        "type": "object",
        "properties": {
            "urls": {
                "type": "string",
                "description": "The URLs to extract content from, separated by ';'.",
            }
        },
        "required": ["urls"],
    }
    params_schema = {
        "type": "object",
        "properties": {
            "api_key": {"type": "string", "default": ""},
            "urls": {"type": "string", "default": ""},
            "extract_depth": {"type": "string", "enum": ["basic", "advanced"], "default": "basic"},
            "format": {"type": "string", "enum": ["markdown", "text"], "default": "markdown"},
            "include_images": {"type": "boolean", "default": False},
        },
    }

    async def run(self, args: dict[str, Any], params: dict[str, Any], context: ToolContext) -> ToolResult:
        urls = _urls(args.get("urls"))
        if not urls:
            return empty_result()
        api = context.settings.web_api("tavily")
        key = http.require_key(self.component_name, api, params)
        data = await http.send_json(
            context.http,
            self.component_name,
            api,
            "POST",
            f"{http.require_base_url(self.component_name, api)}/extract",
            json={"urls": urls, "extract_depth": params.get("extract_depth") or "basic", "format": params.get("format") or "markdown",
                  "include_images": bool(params.get("include_images"))},
            headers={"Authorization": f"Bearer {key}"},
        )
        data = data if isinstance(data, dict) else {}
        results = [
            {"title": r.get("url") or "", "url": r.get("url") or "", "content": r.get("raw_content") or ""}
            for r in data.get("results") or []
            if isinstance(r, dict)
        ]
        result = search_result(context, results, source="tavily_extract")
        images = [{"url": str(u), "source": str(r.get("url") or "")} for r in data.get("results") or [] if isinstance(r, dict)
                  for u in r.get("images") or [] if isinstance(u, str)] if params.get("include_images") else []
        if images:
            result.outputs["images"] = images
        failed = [f for f in data.get("failed_results") or [] if isinstance(f, dict)]
        if failed:
            result.outputs["failed_results"] = failed
            note = "\n".join(f"Could not extract {f.get('url')}: {f.get('error')}" for f in failed)
            result.content = f"{result.content}\n\n{note}" if results else note
        return result
