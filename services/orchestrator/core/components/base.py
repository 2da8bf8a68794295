"""Component contract: one class per RAGFlow component, registered by its class name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from services.orchestrator.core.dsl.model import NodeSpec

if TYPE_CHECKING:
    from services.orchestrator.core.context import NodeContext

Problem = tuple[str, str]  # (params field, message)

# Parameters every component accepts (spec §2.11). Unknown params are tolerated as well.
COMMON_PARAMS = {
    "max_retries": 0,
    "delay_after_error": 2.0,
    "exception_method": None,
    "exception_default_value": None,
    "exception_goto": None,
    "message_history_window_size": 13,
    "description": "",
    "inputs": {},
    "outputs": {},
}


@dataclass
class Outcome:
    """What one invocation produced."""

    outputs: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    next: list[str] | None = None
    """Routers only: the downstream ids taken (the others get "branch not taken")."""
    branch: str = ""
    pause: dict[str, Any] | None = None
    """UserFillUp: {"inputs": unsatisfied fields, "tips": text} — the run pauses at this node."""
    error: str = ""
    """A failure the component reports without raising (RAGFlow's _ERROR); the error policy applies."""
    references: list[dict[str, Any]] = field(default_factory=list)
    """Citation chunks this node added to the run's reference bucket (journaled for takeovers)."""


class Component:
    type_name: ClassVar[str] = ""
    default_timeout_s: ClassVar[float | None] = 60.0
    """Per-invocation timeout; None for components that wait on others (containers, forms)."""
    retry_node_errors: ClassVar[bool] = True
    """Whether max_retries applies to this component's retryable errors."""
    streams_to_message: ClassVar[bool] = False

    def __init__(self, node: NodeSpec):
        self.node = node
        self.id = node.id
        self.params = node.params

    def param(self, name: str, default: Any = None) -> Any:
        value = self.params.get(name, default)
        return default if value is None else value

    @classmethod
    def check(cls, params: dict[str, Any]) -> list[Problem]:
        """Static parameter problems (ValidateCanvas). Empty when fine."""
        return []

    @classmethod
    def unsupported(cls, params: dict[str, Any]) -> list[Problem]:
        """Known features this orchestrator cannot run yet (reported as UNSUPPORTED)."""
        return []

    def thoughts(self, ctx: "NodeContext") -> str:
        return ""

    async def invoke(self, ctx: "NodeContext") -> Outcome:
        raise NotImplementedError


class NotImplementedComponent(Component):
    """A RAGFlow component this orchestrator recognises but cannot run yet."""

    async def invoke(self, ctx: "NodeContext") -> Outcome:  # pragma: no cover - guarded at run start
        from services.orchestrator.core.errors import NodeError

        raise NodeError(f"component {self.node.type} is not supported yet", reason="UNSUPPORTED_COMPONENT")


def declared_outputs(params: dict[str, Any]) -> list[str]:
    outputs = params.get("outputs")
    return [k for k in outputs if not k.startswith("_")] if isinstance(outputs, dict) else []
