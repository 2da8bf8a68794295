"""Tool backends for the orchestrator: plain async Python, usable as Agent tools and as canvas nodes.

See README.md in this directory for the tools, the `tools:` config section and the RAGFlow mapping.
"""

from services.orchestrator.tools.base import Download, ParamProblem, Tool, ToolResult
from services.orchestrator.tools.citations import ReferenceBucket, format_knowledge, normalize_chunk
from services.orchestrator.tools.config import ToolsSettings
from services.orchestrator.tools.errors import (
    ToolConfigError,
    ToolError,
    ToolExecutionError,
    ToolInputError,
    ToolPermissionError,
    ToolTimeoutError,
    ToolUpstreamError,
    UnknownToolError,
)
from services.orchestrator.tools.naming import NamedEntry, assign_function_names
from services.orchestrator.tools.registry import PlannedTool, ToolRegistry, default_registry
from services.orchestrator.tools.runtime import ToolContext, ToolRuntime

__all__ = [
    "Download",
    "NamedEntry",
    "ParamProblem",
    "PlannedTool",
    "ReferenceBucket",
    "Tool",
    "ToolConfigError",
    "ToolContext",
    "ToolError",
    "ToolExecutionError",
    "ToolInputError",
    "ToolPermissionError",
    "ToolRegistry",
    "ToolResult",
    "ToolRuntime",
    "ToolTimeoutError",
    "ToolUpstreamError",
    "ToolsSettings",
    "UnknownToolError",
    "assign_function_names",
    "default_registry",
    "format_knowledge",
    "normalize_chunk",
]
