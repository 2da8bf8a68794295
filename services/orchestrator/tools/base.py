"""The tool protocol: what every tool declares, what it receives, and what it returns.

A tool is used two ways by the orchestrator core, through the same `invoke`:
- as an Agent tool: the model calls `function_spec(...)["function"]["name"]` with JSON arguments;
- as a canvas node: the core resolves `node_arguments(params)` (references such as `{sys.query}`)
  and passes the result as `args`.

`invoke` never raises a ToolError: failures come back as `ToolResult.error` (RAGFlow records
`_ERROR` and hands the error text to the model so the agent carries on). Programming errors still
raise, so they are not hidden.
"""

from __future__ import annotations

import copy
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from services.orchestrator.tools.errors import ToolError

if TYPE_CHECKING:
    from services.orchestrator.tools.runtime import ToolContext

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Download:
    """A file a tool produced (CodeExec artifacts), passed through to MessageEnd downloads."""

    doc_id: str
    filename: str
    mime_type: str
    size: int
    base64: str = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "filename": self.filename,
            "mime_type": self.mime_type,
            "size": self.size,
            "base64": self.base64,
        }


@dataclass
class ToolResult:
    """What one call produced.

    Attributes:
        content: the text handed back to the model as the tool message.
        outputs: the node's outputs (RAGFlow names: `formalized_content`, `json`, `report`, `result`...).
        chunks: reference chunks in RAGFlow's normalised shape, each with its `citation_id` when a
            reference bucket was in the context.
        doc_aggs: `{doc_id, doc_name, count}` per document among `chunks`.
        downloads: files to surface in MessageEnd.
        error: the typed failure, or None.
    """

    content: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    doc_aggs: list[dict[str, Any]] = field(default_factory=list)
    downloads: list[Download] = field(default_factory=list)
    error: ToolError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def failure(cls, error: ToolError) -> "ToolResult":
        return cls(content=f"ERROR: {error.message}", outputs={"_ERROR": error.message}, error=error)

    def raise_for_error(self) -> "ToolResult":
        if self.error is not None:
            raise self.error
        return self


@dataclass(frozen=True)
class ParamProblem:
    """A load-time problem with one node's params (becomes a per-node violation)."""

    field: str
    description: str


def is_set(value: Any, default: Any = None) -> bool:
    """Whether a param asks for something: not null, empty, false, "false" or its default."""
    if value is None or value == default or value in ("", [], {}) or value is False:
        return False
    return not (isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"))


class Tool(ABC):
    """Base class of every tool. Subclasses set the class attributes and implement `run`.

    Class attributes:
        component_name: RAGFlow class name used in the DSL (`TavilySearch`, `Retrieval`, ...).
        function_name: the stable model-facing base name (RAGFlow §5.21 mapping, no index suffix).
        description: default model-facing description (a DSL `description` param overrides it).
        arguments_schema: JSON Schema (type object) of the function-calling arguments.
        params_schema: JSON Schema of the params the DSL carries, with defaults.
        argument_defaults: node-mode defaults of the arguments (e.g. `{"query": "{sys.query}"}`),
            which the core resolves as references when the tool runs as a node.
        output_names: the node outputs this tool writes.
    """

    component_name: ClassVar[str]
    function_name: ClassVar[str]
    description: ClassVar[str]
    arguments_schema: ClassVar[dict[str, Any]]
    params_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    argument_defaults: ClassVar[dict[str, Any]] = {}
    output_names: ClassVar[tuple[str, ...]] = ("formalized_content", "json")
    unsupported_params: ClassVar[dict[str, str]] = {}
    """Params of RAGFlow's class that this tool cannot honour, with why. One set to a value that would change
    what the tool does (anything but null, empty, false or its default) is reported by `unsupported`,
    never dropped silently."""

    def default_params(self) -> dict[str, Any]:
        props = self.params_schema.get("properties", {})
        return {name: copy.deepcopy(spec["default"]) for name, spec in props.items() if "default" in spec}

    def merged_params(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        merged = self.default_params()
        merged.update({k: v for k, v in (params or {}).items() if v is not None})  # null = absent: the default
        return merged

    def node_arguments(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Arguments for node mode: each argument's DSL param if present, else its default.

        Values may hold references (`{sys.query}`); the core resolves them before `invoke`.
        """
        params = params or {}
        names = list(self.arguments_schema.get("properties", {}))
        args: dict[str, Any] = {}
        for name in names:
            if name in params and params[name] not in (None, ""):
                args[name] = copy.deepcopy(params[name])
            elif name in self.argument_defaults:
                args[name] = copy.deepcopy(self.argument_defaults[name])
        return args

    def function_spec(self, params: Mapping[str, Any] | None = None, *, name: str | None = None) -> dict[str, Any]:
        """OpenAI-style tool spec. `name` is the stable name chosen by `naming.assign_function_names`."""
        params = params or {}
        description = params.get("description") or self.description
        return {
            "type": "function",
            "function": {
                "name": name or self.function_name,
                "description": str(description),
                "parameters": copy.deepcopy(self.arguments_schema),
            },
        }

    def validate(self, params: Mapping[str, Any] | None, context: "ToolContext") -> list[ParamProblem]:
        """Load-time checks of one node's params. Default: none. Never performs slow I/O."""
        return []

    def unsupported(self, params: Mapping[str, Any] | None, context: "ToolContext | None" = None) -> list[ParamProblem]:
        """Params set to something this tool would not do (ValidateCanvas: UNSUPPORTED, by name)."""
        params = params or {}
        defaults = self.default_params()
        return [ParamProblem(name, why) for name, why in self.unsupported_params.items()
                if is_set(params.get(name), defaults.get(name))]

    async def invoke(
        self, args: Mapping[str, Any] | None, *, params: Mapping[str, Any] | None, context: "ToolContext"
    ) -> ToolResult:
        """Run the tool. Tool failures are returned as `ToolResult.error`, never raised."""
        merged = self.merged_params(params)
        try:
            result = await self.run(dict(args or {}), merged, context)
        except ToolError as exc:
            logger.info("tool %s failed: %s (%s)", self.component_name, exc.message, exc.reason)
            return ToolResult.failure(exc)
        return result

    @abstractmethod
    async def run(self, args: dict[str, Any], params: dict[str, Any], context: "ToolContext") -> ToolResult:
        """Do the work; raise a ToolError subclass on failure."""
