"""Component contract: one class per RAGFlow component, registered by its class name."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from services.orchestrator.core.dsl.model import NodeSpec
from services.orchestrator.tools.base import is_set

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


MAX_RETRIES = 20
"""The most extra attempts a node may ask for (backoff is capped, so about ten minutes of retrying)."""


def number_problem(params: dict[str, Any], name: str, kind: type[int] | type[float], *, low: float | None = None,
                   high: float | None = None, blank_is_default: bool = False) -> Problem | None:
    """A problem when params[name] is set but is not what the component's `kind(value)` conversion at run time
    accepts (numeric text such as "0.1" is fine, as RAGFlow's files hold some), or is out of [low, high]. Null is
    absent; so is blank text where the component reads it as `value or default`."""
    value = params.get(name)
    if value is None or (blank_is_default and value == ""):
        return None
    try:
        number = kind(value)
        usable = not isinstance(value, bool) and math.isfinite(number)
    except (TypeError, ValueError, OverflowError):
        usable = False
    what = "a whole number" if kind is int else "a number"
    if not usable:
        return name, f"{name} must be {what}, got {value!r}"
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"at least {low:g}" if high is None else f"from {low:g} to {high:g}" if low is not None else f"at most {high:g}"
        return name, f"{name} must be {what} {bounds}, got {value!r}"
    return None


def common_problems(params: dict[str, Any]) -> list[Problem]:
    """The numeric common params (COMMON_PARAMS) every component's error policy and history window read."""
    found = (number_problem(params, "max_retries", int, low=0, high=MAX_RETRIES, blank_is_default=True),
             number_problem(params, "delay_after_error", float, low=0),
             number_problem(params, "message_history_window_size", int, low=0, blank_is_default=True))
    return [problem for problem in found if problem is not None]


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
    durable_start: ClassVar[bool] = False
    """Whether the node's NodeStarted is made durable before it is invoked: set on components that call out
    (models, tools, the sandbox), so that each of their attempts is counted across a takeover."""
    unsupported_params: ClassVar[dict[str, str]] = {}
    """RAGFlow params of this component that this runtime cannot honour, with why: one set to a value that
    would change behaviour (not null, empty, false or "false") is UNSUPPORTED in ValidateCanvas, by name."""
    static_outputs: ClassVar[tuple[str, ...] | None] = ()
    """Output names the component writes whatever its params; None: any name (references are not checked)."""

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
        return [(name, why) for name, why in cls.unsupported_params.items() if is_set(params.get(name))]

    @classmethod
    def output_names(cls, params: dict[str, Any]) -> set[str] | None:
        """Every output a reference may read (ValidateCanvas): the static ones, those the DSL declares
        (`params.outputs`) and the dynamic ones the params define. None: any name. Names starting with
        `_` (`_ERROR`, ...) are always accepted by the checker."""
        if cls.static_outputs is None:
            return None
        outputs = params.get("outputs")
        return {*cls.static_outputs, *(outputs if isinstance(outputs, dict) else ()), *cls.dynamic_outputs(params)}

    @classmethod
    def dynamic_outputs(cls, params: dict[str, Any]) -> list[str]:
        """Output names the params define (form fields, group names, loop variables, ...)."""
        return []

    @classmethod
    def output_fields(cls, params: dict[str, Any], name: str) -> set[str] | None:
        """The fields a reference may read below output `name` (`{id@name.field}`), None when unchecked."""
        return None

    def thoughts(self, ctx: "NodeContext") -> str:
        return ""

    async def invoke(self, ctx: "NodeContext") -> Outcome:
        raise NotImplementedError


class NotImplementedComponent(Component):
    """A RAGFlow component this orchestrator recognises but cannot run yet."""

    static_outputs = None

    async def invoke(self, ctx: "NodeContext") -> Outcome:  # pragma: no cover - guarded at run start
        from services.orchestrator.core.errors import NodeError

        raise NodeError(f"component {self.node.type} is not supported yet", reason="UNSUPPORTED_COMPONENT")


def declared_outputs(params: dict[str, Any]) -> list[str]:
    outputs = params.get("outputs")
    return [k for k in outputs if not k.startswith("_")] if isinstance(outputs, dict) else []
