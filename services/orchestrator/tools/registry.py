"""The tool registry, keyed by RAGFlow component class name, and the binding of an Agent's tools.

    registry = default_registry()
    tool = registry.get("TavilySearch")             # UnknownToolError for an unknown class
    problems = registry.validate("ExeSQL", params, context)
    planned = registry.plan_agent_tools(agent_params["tools"], mcp_tools)   # stable function names
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.orchestrator.tools.base import ParamProblem, Tool
from services.orchestrator.tools.errors import UnknownToolError
from services.orchestrator.tools.naming import NamedEntry, assign_function_names, slug
from services.orchestrator.tools.runtime import ToolContext

AGENT_CLASS = "Agent"


@dataclass(frozen=True)
class PlannedTool:
    """One callable offered to an Agent's model.

    kind: "tool" (a registered tool class), "agent" (a sub-agent; `tool` is None and the core runs
    it), or "mcp" (an MCP tool; `tool` is its McpTool).
    """

    function_name: str
    kind: str
    component_name: str
    display_name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    tool: Tool | None = None

    def function_spec(self) -> dict[str, Any] | None:
        """OpenAI-style spec for tools and MCP tools; None for sub-agents (the core builds theirs)."""
        return self.tool.function_spec(self.params, name=self.function_name) if self.tool is not None else None


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.component_name in self._tools:
            raise ValueError(f"tool class {tool.component_name} is registered twice")
        self._tools[tool.component_name] = tool

    def __contains__(self, component_name: object) -> bool:
        return component_name in self._tools

    def component_names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, component_name: str) -> Tool:
        try:
            return self._tools[component_name]
        except KeyError:
            raise UnknownToolError(component_name) from None

    def base_function_name(self, component_name: str, params: Mapping[str, Any] | None = None) -> str:
        """The tool's own function name, or an explicit `function_name` param (Retrieval has one)."""
        explicit = str((params or {}).get("function_name") or "").strip()
        return explicit or self.get(component_name).function_name

    def validate(self, component_name: str, params: Mapping[str, Any] | None, context: ToolContext) -> list[ParamProblem]:
        """Load-time problems of one tool node or tool entry; an unknown class is one problem."""
        if component_name not in self._tools:
            return [ParamProblem("component_name", f"unknown tool class '{component_name}'")]
        return self._tools[component_name].validate(params, context)

    def unsupported(self, component_name: str, params: Mapping[str, Any] | None,
                    context: ToolContext | None = None) -> list[ParamProblem]:
        """Params of a tool node or tool entry set to something the tool cannot do (empty for unknown classes)."""
        tool = self._tools.get(component_name)
        return tool.unsupported(params, context) if tool is not None else []

    def plan_agent_tools(self, entries: Sequence[Mapping[str, Any]], mcp_tools: Sequence[Tool] = ()) -> list[PlannedTool]:
        """Bind an Agent's `params.tools` entries (and its resolved MCP tools) to stable function names.

        Names never depend on list order (spec §7 item 24): see naming.assign_function_names.
        Raises UnknownToolError for an unknown component_name (validate first to collect them all).
        """
        drafts: list[tuple[NamedEntry, str, str, str, Mapping[str, Any], Tool | None]] = []
        for entry in entries:
            component = str(entry.get("component_name") or "")
            display = str(entry.get("name") or component)
            params = entry.get("params") or {}
            if component == AGENT_CLASS:
                drafts.append((NamedEntry(slug(display), display, params), "agent", component, display, params, None))
            else:
                tool = self.get(component)
                base = self.base_function_name(component, params)
                drafts.append((NamedEntry(base, display, params), "tool", component, display, params, tool))
        for tool in mcp_tools:
            server = getattr(getattr(tool, "spec", None), "server_id", "")
            drafts.append((NamedEntry(tool.function_name, f"{server} {tool.function_name}", {}), "mcp", tool.component_name, tool.function_name, {}, tool))
        names = assign_function_names([d[0] for d in drafts])
        return [
            PlannedTool(function_name=name, kind=kind, component_name=component, display_name=display, params=params, tool=tool)
            for name, (_, kind, component, display, params, tool) in zip(names, drafts)
        ]


def builtin_tools() -> list[Tool]:
    from services.orchestrator.tools.code_exec import CodeExec
    from services.orchestrator.tools.exesql import ExeSQL
    from services.orchestrator.tools.retrieval import Retrieval
    from services.orchestrator.tools.web.bing import Bing
    from services.orchestrator.tools.web.duckduckgo import DuckDuckGo
    from services.orchestrator.tools.web.google import Google
    from services.orchestrator.tools.web.tavily import TavilyExtract, TavilySearch
    from services.orchestrator.tools.web.wikipedia import Wikipedia
    from services.orchestrator.tools.web.yahoo_finance import YahooFinance

    return [
        Retrieval(), CodeExec(), ExeSQL(), TavilySearch(), TavilyExtract(), Wikipedia(), DuckDuckGo(), Google(), Bing(), YahooFinance(),
    ]


_DEFAULT: ToolRegistry | None = None


def default_registry() -> ToolRegistry:
    """The registry of every built-in tool (tools are stateless, so one instance serves all runs)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = ToolRegistry(builtin_tools())
    return _DEFAULT
